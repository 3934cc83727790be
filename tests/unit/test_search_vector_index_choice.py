"""When the HNSW index serves a vector stream query (search_sql.use_index); the plans
themselves are checked in tests/integration/test_search_vector_plans.py."""

from __future__ import annotations

from retrieval.search import search_sql


def test_the_index_serves_a_scope_that_holds_enough_rows() -> None:
    # 20k rows, cap 300, max_scan_tuples 20000: the scan needs the scope to hold 3% of them.
    assert search_sql.use_index(scope_rows=600, table_rows=20_000, max_scan_tuples=20_000, cap=300)
    assert not search_sql.use_index(
        scope_rows=599, table_rows=20_000, max_scan_tuples=20_000, cap=300
    )
    # A table never analysed (reltuples -1) is taken to be the scope.
    assert search_sql.use_index(scope_rows=0, table_rows=-1, max_scan_tuples=20_000, cap=300)
