"""The test session's PostgreSQL keeps its data where no other pytest run reaches: not
under pytest's base temporary directory, nor under the per-user directory that every run
re-tightens and prunes; and the directory is gone after the session."""

from __future__ import annotations

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
