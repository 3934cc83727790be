"""cograph_text.paths: the test-file class, per language, and the migration that classes
rows indexed before it was stored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cograph_text.paths import TEST_PATH_PATTERN, is_test_path

ROOT = Path(__file__).resolve().parents[2]

# (path, test code?) by each language's convention. Shared with the integration test that
# checks PostgreSQL classes every one of them alike (test_search_test_code.py).
CASES: list[tuple[str, bool]] = [
    # Python
    ("tests/test_api.py", True),
    ("src/pkg/tests/helpers.py", True),
    ("pkg/test_util.py", True),
    ("pkg/util_test.py", True),
    ("testing/fixtures.py", True),
    ("conftest.py", False),
    ("src/pkg/testing.py", False),
    ("src/contest.py", False),
    ("src/attest/main.py", False),
    ("src/pkg/latest/main.py", False),
    # Go: exactly the files `go test` builds as tests
    ("uuid/uuid_test.go", True),
    ("uuid/uuid.go", False),
    ("uuid/testdata/input.go", False),
    # JavaScript and TypeScript
    ("lib/glob.test.js", True),
    ("src/app.spec.ts", True),
    ("src/app.test.tsx", True),
    ("src/__tests__/app.js", True),
    ("test/index.js", True),
    ("src/specification.ts", False),
    ("src/app.ts", False),
    # Java: src/test/java, JUnit class names
    ("src/test/java/FooTest.java", True),
    ("src/main/java/FooTests.java", True),
    ("src/main/java/com/acme/FooTest.java", True),
    ("src/main/java/com/acme/Foo.java", False),
    ("src/main/java/com/acme/Testable.java", False),
    ("src/main/java/com/acme/LatestTest.kt", False),
    # Rust: integration tests; inline test modules are library files
    ("tests/integration.rs", True),
    ("src/lib.rs", False),
    ("benches/bench.rs", False),
    # C and C++
    ("test/test_parser.c", True),
    ("src/parser_test.cc", True),
    ("src/test_parser.cpp", True),
    ("src/parser.c", False),
    # Ruby: Minitest naming; RSpec is not classed (see the module)
    ("test/user_test.rb", True),
    ("lib/user_test.rb", True),
    ("spec/user_spec.rb", False),
    ("lib/user.rb", False),
    # edges: case, separators, extensions, other scripts, empty
    ("Tests/Foo.cs", False),
    ("TEST_NOTES.md", False),
    ("tests", False),
    ("a/tests", False),
    ("pkg/x_test.", False),
    ("pkg/x_test.tar.gz", False),
    ("pkg/x_test.中", False),
    ("pkg/x.spec.中", False),
    ("测试/tests/数据.py", True),
    ("pkg/test_数据.py", True),
    ("", False),
]


@pytest.mark.parametrize(("path", "test"), CASES)
def test_is_test_path(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def test_the_end_of_a_path_is_its_end() -> None:
    # `\Z` as in PostgreSQL, not `$` (which Python also lets match before a final newline).
    assert is_test_path("pkg/x_test.go") and not is_test_path("pkg/x_test.go\n")
    assert is_test_path("FooTest.java") and not is_test_path("FooTest.java\n")


def test_the_pattern_reads_alike_in_python_and_postgresql() -> None:
    # No class whose members depend on the engine or the locale, no Python-only syntax.
    for construct in (r"\w", r"\W", r"\d", r"\s", r"\b", "(?", "$"):
        assert construct not in TEST_PATH_PATTERN


_BACKFILL = re.compile(r"SET is_test = .*?WHERE path ~ '([^']*)'", re.S)


def _backfill_patterns() -> list[tuple[str, str]]:
    """(migration, pattern) for every retrieval migration that classes test code."""
    folder = ROOT / "services" / "retrieval" / "migrations"
    return [
        (path.name, match.group(1))
        for path in sorted(folder.glob("*.sql"))
        for match in _BACKFILL.finditer(path.read_text())
    ]


def test_the_newest_backfill_migration_classes_with_this_pattern() -> None:
    """Changing the pattern needs a migration that classes the stored rows again (a new
    file: an applied migration cannot change)."""
    backfills = _backfill_patterns()
    assert backfills, "no retrieval migration classes test code"
    name, pattern = backfills[-1]
    assert pattern == TEST_PATH_PATTERN, f"{name} classes with another pattern"
