"""Text analysis, defined once: what indexing, search, the router and the benchmarks read
out of names, words and paths.

identifiers (an identifier's words: `HTTPServer2` -> http, server, 2), names (the qualified
names the index stores: `pkg.X.f#2` -> `f`), stopwords (the words a query drops, and how
short a word may be) and paths (which files hold test code). Pure: no I/O, no service.
"""
