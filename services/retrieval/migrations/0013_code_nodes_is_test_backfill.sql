-- The nodes indexed before their test-code class was stored (0012), classed with the rule
-- the indexer applies: the pattern below is cograph_text.paths.TEST_PATH_PATTERN, which
-- PostgreSQL's regular expressions read as Python's `re` does (tests/unit/test_text_paths.py
-- checks that this is the pattern, tests/integration/test_search_test_code.py that both
-- class alike).
--
-- Only the nodes under a test path are written. Each enters every index of the table again,
-- both HNSW indexes included, which is most of the cost: 3,000 such nodes of 10,000 took
-- 21 s on two busy cores, so a large index takes minutes. Searches read on meanwhile; an
-- index run that deletes one of these nodes waits for the end.
UPDATE code_nodes SET is_test = true
WHERE path ~ '(^|/)(tests?|testing|__tests__)/|(^|/)test_[^/]*\Z|_test\.[A-Za-z0-9_]+\Z|\.(test|spec)\.[A-Za-z0-9_]+\Z|Tests?\.java\Z';
