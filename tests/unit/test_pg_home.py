"""The test session's PostgreSQL keeps its data where no other pytest run reaches: not
under pytest's base temporary directory, nor under the per-user directory that every run
re-tightens and prunes; and the directory is gone after the session. So does every server
an integration test starts of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.integration.support.pg_home import PREFIX, server_home


def test_the_server_data_is_outside_pytests_temporary_directories(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    basetemp = tmp_path_factory.getbasetemp().resolve()
    shared = basetemp.parent  # pytest-of-<user>: what another run re-tightens and prunes
    with server_home() as home:
        resolved = home.resolve()
        assert home.is_dir() and home.name.startswith(PREFIX)
        assert not resolved.is_relative_to(shared) and not resolved.is_relative_to(basetemp)
        (home / "data").mkdir()
        (home / "data" / "PG_VERSION").write_text("17\n")
        with server_home() as other:  # each xdist worker gets its own
            assert other != home
    assert not home.exists() and not other.exists()


def test_the_directory_is_removed_when_the_session_fails() -> None:
    kept: list[Path] = []
    with pytest.raises(RuntimeError), server_home() as home:
        kept.append(home)
        raise RuntimeError("the server did not start")
    assert not kept[0].exists()


# What starts a PostgreSQL of its own in an integration test, with its data directory (or
# the data directory of `cograph up`, which holds the server's) as an argument.
SERVER_STARTERS = {"EmbeddedPostgres", "_cograph_up"}


def _starts_under_tmp_path(tree: ast.AST) -> list[int]:
    """Lines where a server starter is called with anything made from tmp_path."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in SERVER_STARTERS:
            continue
        names = {n.id for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.Name)}
        if names & {"tmp_path", "tmp_path_factory"}:
            found.append(node.lineno)
    return found


def test_no_integration_test_starts_a_server_under_tmp_path() -> None:
    """Tests that start their own server take its directory from the `pg_home` fixture."""
    root = Path(__file__).resolve().parents[1] / "integration"
    offending = [
        f"{path.name}:{line}"
        for path in sorted(root.rglob("*.py"))
        for line in _starts_under_tmp_path(ast.parse(path.read_text()))
    ]
    assert not offending, offending
    bad = ast.parse("EmbeddedPostgres(tmp_path / 'pg')\n_cograph_up(tmp_path / 'a', port_base=1)")
    assert _starts_under_tmp_path(bad) == [1, 2]
    assert _starts_under_tmp_path(ast.parse("EmbeddedPostgres(pg_home / 'pg')")) == []
