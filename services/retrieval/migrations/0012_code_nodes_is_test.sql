-- Test code is classed when a node is indexed and the class is stored: search weighs test
-- code down (RETRIEVAL_TEST_CODE_WEIGHT) by this flag, and the indexer sets it from the
-- node's path with cograph_text.paths.is_test_path (tests/, test_*.py, *_test.go,
-- *.test.js, *.spec.ts, *Test.java, ...). Per node, so a rule that classes part of a file
-- (an inline test module) needs no new column.
--
-- Adding the column with a constant default rewrites nothing. Nodes indexed before are
-- classed here with the same rule: the pattern below is cograph_text.paths.TEST_PATH_PATTERN,
-- which PostgreSQL's regular expressions read as Python's `re` does
-- (tests/unit/test_text_paths.py checks that the two are the same text). Only the nodes
-- under a test path are written.
ALTER TABLE code_nodes ADD COLUMN is_test boolean NOT NULL DEFAULT false;

UPDATE code_nodes SET is_test = true
WHERE path ~ '(^|/)(tests?|testing|__tests__)/|(^|/)test_[^/]*\Z|_test\.[A-Za-z0-9_]+\Z|\.(test|spec)\.[A-Za-z0-9_]+\Z|Tests?\.java\Z';
