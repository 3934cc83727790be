"""The test-file class: which files hold test code, by each language's convention for
naming them.

Search weighs test code down (RETRIEVAL_TEST_CODE_WEIGHT, 0.5: commit-subject localisation
Recall@10 0.556 -> 0.636, bench/notes/quality-unseen.md, "What crowds the top"), and the
benchmarks count the test rows that crowd an answer. The indexer classes every code node
when it writes it and stores the class (code_nodes.is_test); search reads the stored flag,
the benchmarks call `is_test_path` on the rows they get back: both sides count the same
files.

What is test code, per language:

- directories `test/`, `tests/`, `testing/` anywhere in the path (Python, Rust's
  integration tests, Java's `src/test/java`, C and C++ projects), and `__tests__/`
  (JavaScript and TypeScript, Jest);
- Python `test_*.py` and `*_test.py`; Go `*_test.go` (exactly the files `go test`
  builds); C and C++ `*_test.c`, `*_test.cc`, `test_*.c` (GoogleTest and Unity naming);
  Ruby `*_test.rb` (Minitest): any `test_*` file name and any `*_test.<ext>`;
- JavaScript and TypeScript `*.test.js`, `*.spec.ts` (any extension);
- Java `*Test.java`, `*Tests.java` (JUnit's naming).

Not test code by path: `testing.py` or `contest.py` (a word, not the convention), Go's
`testdata/` (fixtures read by tests), Rust's inline `#[cfg(test)] mod tests` (a file of
library code; a per-node rule could class it, the flag is stored per node). Ruby's RSpec
`spec/` and `*_spec.rb` and Java's `*IT.java` are not classed either: the service has
never weighed them down and no benchmark corpus holds them to measure doing so.

TEST_PATH_PATTERN is one regular expression that Python's `re` and PostgreSQL's advanced
regular expressions read alike, so a migration classes stored rows with exactly the rule
the indexer applies (retrieval migration 0013; tests/unit/test_text_paths.py checks that
the newest such migration holds this pattern, tests/integration/test_search_test_code.py
that PostgreSQL agrees). Hence no `\\w`, whose letters depend on the engine and the
locale: an extension is ASCII letters, digits and `_` (`x_test.go`, not `x_test.中`);
and `\\Z`, the end of the text in both (Python's `$` also matches before a final
newline).
"""

from __future__ import annotations

import re

TEST_PATH_PATTERN = (
    r"(^|/)(tests?|testing|__tests__)/"
    r"|(^|/)test_[^/]*\Z"
    r"|_test\.[A-Za-z0-9_]+\Z"
    r"|\.(test|spec)\.[A-Za-z0-9_]+\Z"
    r"|Tests?\.java\Z"
)
_TEST_PATH = re.compile(TEST_PATH_PATTERN)


def is_test_path(path: str) -> bool:
    """Whether the file at `path` (repository-relative, `/`-separated) holds test code."""
    return _TEST_PATH.search(path) is not None
