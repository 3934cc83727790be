"""Search: a validated query in, fused and cited results out.

query (the validated request), query_text and lexemes (the text side of a query),
streams (which vector, lexical and symbol queries run), search_sql (their SQL, hydration
and graph SQL), fusion (Reciprocal Rank Fusion and exact-name pinning), rerank (the gate
and the providers), snippets (bounded excerpts), graph (callers, callees, parents),
engine (the orchestration), messages (protobuf <-> these types) and search_settings.
"""
