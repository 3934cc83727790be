"""The schema every migration makes, checked against Citus's rules for the layout in
deploy/citus/distribution.sql (Citus itself cannot be installed here).

The layout names each table reference, distributed (by a column, in a co-location group)
or local (on the coordinator). From the catalog of a database migrated by every service:

- every table has exactly one kind;
- a distributed table's primary key and every unique index hold its distribution column;
- a foreign key from a distributed table points at a reference table, or at a distributed
  table of its co-location group with the distribution columns paired in the key;
- a reference table's foreign keys point at reference tables only; a local table's never
  at a distributed table;
- no trigger on a distributed table (Citus does not run them on shards). Triggers on
  reference tables are allowed only where ROUTER_VERSION_TRIGGERS lists them
  (deploy/citus/README.md says why they block distribution and what replaces them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from cograph_cli.migrate_cmd import migrate_all
from cograph_cli.services import SERVICES
from svckit.db import ensure_extensions

pytestmark = pytest.mark.asyncio(loop_scope="session")

LAYOUT = Path(__file__).resolve().parents[2] / "deploy" / "citus" / "distribution.sql"
# The router's version counters are bumped by statement triggers on these reference tables
# (router migration 0002); on a Citus cluster they would not fire where the rows change.
# Listed here so that the check passes for them only, and fails for any new trigger.
ROUTER_VERSION_TRIGGERS = {"repositories", "grants", "collections"}


@dataclass
class Layout:
    reference: set[str] = field(default_factory=set)
    distributed: dict[str, str] = field(default_factory=dict)  # table -> column
    group: dict[str, str] = field(default_factory=dict)  # table -> co-location anchor
    local: set[str] = field(default_factory=set)


def read_layout(text: str) -> Layout:
    layout = Layout()
    for name in re.findall(r"create_reference_table\('(\w+)'\)", text):
        layout.reference.add(name)
    for name, column, anchor in re.findall(
        r"create_distributed_table\('(\w+)', '(\w+)'(?:, colocate_with => '(\w+)')?\)", text
    ):
        layout.distributed[name] = column
        layout.group[name] = anchor or name
    # `-- local: a, b,` lines and their `--        c, d` continuations.
    block = re.findall(r"^-- local:(.*(?:\n--\s{6,}.*)*)", text, flags=re.M)
    for names in block:
        layout.local |= {n for n in re.split(r"[\s,\-]+", names) if n}
    return layout


@dataclass(frozen=True)
class ForeignKey:
    table: str
    columns: tuple[str, ...]
    target: str
    target_columns: tuple[str, ...]


async def catalog(
    url: str,
) -> tuple[set[str], dict[str, list[tuple[str, ...]]], list[ForeignKey], dict[str, list[str]]]:
    conn = await asyncpg.connect(url)
    try:
        tables = {
            r["relname"]
            for r in await conn.fetch(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
            )
        }
        unique: dict[str, list[tuple[str, ...]]] = {}
        for r in await conn.fetch(
            "SELECT t.relname AS tbl, array_agg(a.attname ORDER BY k.ord) AS cols"
            " FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
            " JOIN pg_namespace n ON n.oid = t.relnamespace"
            " CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)"
            " LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum"
            " WHERE n.nspname = 'public' AND i.indisunique"
            " GROUP BY t.relname, i.indexrelid"
        ):
            unique.setdefault(r["tbl"], []).append(tuple(c or "<expression>" for c in r["cols"]))
        keys = [
            ForeignKey(r["tbl"], tuple(r["cols"]), r["target"], tuple(r["target_cols"]))
            for r in await conn.fetch(
                "SELECT c.conrelid::regclass::text AS tbl, c.confrelid::regclass::text AS target,"
                " (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.conkey)"
                "   WITH ORDINALITY k(n, ord) JOIN pg_attribute a"
                "   ON a.attrelid = c.conrelid AND a.attnum = k.n) AS cols,"
                " (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.confkey)"
                "   WITH ORDINALITY k(n, ord) JOIN pg_attribute a"
                "   ON a.attrelid = c.confrelid AND a.attnum = k.n) AS target_cols"
                " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
                " WHERE n.nspname = 'public' AND c.contype = 'f'"
            )
        ]
        triggers: dict[str, list[str]] = {}
        for r in await conn.fetch(
            "SELECT c.relname AS tbl, t.tgname FROM pg_trigger t JOIN pg_class c"
            " ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND NOT t.tgisinternal"
        ):
            triggers.setdefault(r["tbl"], []).append(r["tgname"])
        return tables, unique, keys, triggers
    finally:
        await conn.close()


def violations(
    layout: Layout,
    tables: set[str],
    unique: dict[str, list[tuple[str, ...]]],
    keys: list[ForeignKey],
    triggers: dict[str, list[str]],
) -> list[str]:
    found: list[str] = []
    kinds: dict[str, list[str]] = {}
    for name in layout.reference:
        kinds.setdefault(name, []).append("reference")
    for name in layout.distributed:
        kinds.setdefault(name, []).append("distributed")
    for name in layout.local:
        kinds.setdefault(name, []).append("local")
    for name in sorted(tables | set(kinds)):
        if name not in tables:
            found.append(f"{name}: in the layout but not in the schema")
        elif len(kinds.get(name, [])) != 1:
            found.append(f"{name}: kinds {kinds.get(name, [])}, expected exactly one")
    for name, column in layout.distributed.items():
        for index in unique.get(name, []):
            if column not in index:
                found.append(f"{name}: unique key {index} lacks the distribution column {column}")
    for key in keys:
        if key.table in layout.distributed:
            column = layout.distributed[key.table]
            if key.target in layout.reference:
                continue
            if key.target not in layout.distributed:
                found.append(
                    f"{key.table} -> {key.target}: a distributed table refers to a local one"
                )
                continue
            if layout.group[key.table] != layout.group[key.target]:
                found.append(f"{key.table} -> {key.target}: not co-located")
            pairs = dict(zip(key.columns, key.target_columns, strict=True))
            if pairs.get(column) != layout.distributed[key.target]:
                found.append(
                    f"{key.table} -> {key.target}: the key {key.columns} does not pair the "
                    "distribution columns"
                )
        elif key.table in layout.reference and key.target not in layout.reference:
            found.append(
                f"{key.table} -> {key.target}: a reference table refers to a non-reference one"
            )
        elif key.table in layout.local and key.target in layout.distributed:
            found.append(f"{key.table} -> {key.target}: a local table refers to a distributed one")
    for name, names in triggers.items():
        if name in layout.distributed:
            found.append(f"{name}: triggers on a distributed table: {sorted(names)}")
        elif name in layout.reference and name not in ROUTER_VERSION_TRIGGERS:
            found.append(f"{name}: triggers on a reference table: {sorted(names)}")
    return found


async def test_the_migrated_schema_follows_citus_rules_for_the_layout(fresh_db_url: str) -> None:
    await ensure_extensions(fresh_db_url)
    await migrate_all(fresh_db_url, [s for s in SERVICES if s.available()])
    layout = read_layout(LAYOUT.read_text())
    assert {"code_nodes", "code_edges", "repo_docs", "files"} <= set(layout.distributed)
    tables, unique, keys, triggers = await catalog(fresh_db_url)
    assert violations(layout, tables, unique, keys, triggers) == []
    # The exception is still needed (else it should go): those tables do carry triggers.
    assert set(triggers) >= ROUTER_VERSION_TRIGGERS


async def test_the_check_finds_what_citus_refuses(fresh_db_url: str) -> None:
    """A schema with each kind of mistake: the check names every one."""
    conn = await asyncpg.connect(fresh_db_url)
    try:
        await conn.execute(
            """
            CREATE TABLE ref (id bigint PRIMARY KEY);
            CREATE TABLE other (id bigint PRIMARY KEY);
            CREATE TABLE dist (repo bigint NOT NULL REFERENCES ref (id), id bigint,
                               other_id bigint REFERENCES other (id),
                               PRIMARY KEY (id));
            CREATE TABLE child (repo bigint NOT NULL, id bigint, parent bigint,
                                PRIMARY KEY (repo, id),
                                FOREIGN KEY (parent) REFERENCES dist (id));
            CREATE TABLE bad_ref (id bigint PRIMARY KEY, d bigint REFERENCES dist (id));
            CREATE TABLE loose (id bigint);
            CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN RETURN NULL; END $$;
            CREATE TRIGGER dist_noop AFTER INSERT ON dist
                FOR EACH STATEMENT EXECUTE FUNCTION noop();
            CREATE TRIGGER ref_noop AFTER INSERT ON ref
                FOR EACH STATEMENT EXECUTE FUNCTION noop();
            """
        )
    finally:
        await conn.close()
    layout = read_layout(
        "SELECT create_reference_table('ref');\n"
        "SELECT create_reference_table('bad_ref');\n"
        "SELECT create_distributed_table('dist', 'repo');\n"
        "SELECT create_distributed_table('child', 'repo', colocate_with => 'dist');\n"
        "SELECT create_distributed_table('missing', 'repo');\n"
        "-- local: other\n"
    )
    tables, unique, keys, triggers = await catalog(fresh_db_url)
    found = violations(layout, tables, unique, keys, triggers)
    expected = [
        "missing: in the layout but not in the schema",
        "loose: kinds [], expected exactly one",
        "dist: unique key ('id',) lacks the distribution column repo",
        "dist -> other: a distributed table refers to a local one",
        "child -> dist: the key ('parent',) does not pair the distribution columns",
        "bad_ref -> dist: a reference table refers to a non-reference one",
        "dist: triggers on a distributed table: ['dist_noop']",
        "ref: triggers on a reference table: ['ref_noop']",
    ]
    assert sorted(found) == sorted(expected)


def test_the_layout_file_parses_local_continuation_lines() -> None:
    layout = read_layout("-- local: a, b,\n--        c, d\n-- local: e\nSELECT 1;\n")
    assert layout.local == {"a", "b", "c", "d", "e"}
