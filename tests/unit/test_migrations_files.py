"""svckit.migrations: reading a migrations folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from svckit.migrations import MigrationError, load_migrations


def test_loads_in_version_order(tmp_path: Path) -> None:
    (tmp_path / "0002_second.sql").write_text("SELECT 2;")
    (tmp_path / "0001_first.sql").write_text("SELECT 1;")
    (tmp_path / "0010_tenth.sql").write_text("SELECT 10;")
    loaded = load_migrations(tmp_path)
    assert [(m.version, m.name) for m in loaded] == [(1, "first"), (2, "second"), (10, "tenth")]
    assert loaded[0].checksum != loaded[1].checksum


def test_rejects_misnamed_files(tmp_path: Path) -> None:
    (tmp_path / "1_first.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        load_migrations(tmp_path)


def test_rejects_duplicate_versions(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0001_b.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="duplicate migration version 0001"):
        load_migrations(tmp_path)


# The services that own tables; each must ship its migrations.
SERVICES_WITH_TABLES = ("commons", "gateway", "retrieval", "router")


def test_every_service_folder_is_well_formed() -> None:
    root = Path(__file__).resolve().parents[2] / "services"
    found = sorted(folder.parent.name for folder in root.glob("*/migrations"))
    assert found == sorted(SERVICES_WITH_TABLES)
    for name in SERVICES_WITH_TABLES:
        folder = root / name / "migrations"
        assert load_migrations(folder), f"{folder} has no migrations"
