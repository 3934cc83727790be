"""The record of which model a database's vectors come from, the rule that compares it
with an embedder's, and the SQL that reads, claims, locks and resizes it (the package doc
says how the pieces fit)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import asyncpg

from cograph_api.embedder_client import Identity

log = logging.getLogger(__name__)

MISMATCH_REASON = "embedding_model_mismatch"
# The gRPC health name a service reports its verdict under: SERVING when the embedder's
# model is the one its vectors come from (or nothing is recorded yet, or the embedder has
# not been reached), NOT_SERVING while they differ or a re-embed is in progress.
HEALTH_NAME = "cograph.embedding_space"
# Session advisory lock held by a running re-embed, per service (two at once would fight).
REEMBED_LOCK_KEYS = {"retrieval": 0x636F7265, "commons": 0x636F6363}

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


class SpaceMismatch(Exception):
    """The embedder's model is not the one this database's vectors come from (or a re-embed
    is moving them). `reason` is the stable machine reason gateways show."""

    reason = MISMATCH_REASON


@dataclass(frozen=True)
class VectorColumn:
    table: str
    column: str
    index: str  # its HNSW index (vector_cosine_ops)

    def __post_init__(self) -> None:
        for name in (self.table, self.column, self.index):
            if not _IDENTIFIER.match(name):
                raise ValueError(f"not a plain SQL identifier: {name!r}")


@dataclass(frozen=True)
class SpaceSpec:
    """One service's vectors: its record table and its vector columns."""

    service: str  # retrieval | commons
    columns: tuple[VectorColumn, ...]

    @property
    def table(self) -> str:
        return f"{self.service}_embedding_space"


@dataclass(frozen=True)
class SpaceRecord:
    model: str | None
    dimension: int | None
    reembed: Identity | None = None  # the model a re-embed in progress is moving to

    @property
    def identity(self) -> Identity | None:
        if self.model is None or self.dimension is None:
            return None
        return Identity(self.model, self.dimension)


def verdict(record: SpaceRecord, embedder: Identity | None) -> str | None:
    """Why vectors from `embedder` must not be used with this database now, or None.

    Nothing recorded: the first writer records its model, so any embedder may go ahead.
    An embedder not reached yet has no verdict (its outage is reported on its own)."""
    if record.reembed is not None:
        return (
            f"a re-embed to {record.reembed.model} ({record.reembed.dimension} dimensions) is "
            "in progress (cograph reembed); vectors are off until it finishes"
        )
    stored = record.identity
    if embedder is None or stored is None or stored == embedder:
        return None
    return (
        f"the embedder serves {embedder.model} ({embedder.dimension} dimensions) but the "
        f"stored vectors come from {stored.model} ({stored.dimension} dimensions); run "
        f"`cograph reembed` to re-embed them with {embedder.model}, or point EMBEDDER_ADDR "
        f"back at {stored.model}"
    )


async def read_record(conn: asyncpg.Connection, spec: SpaceSpec, *, lock: str = "") -> SpaceRecord:
    """The record; `lock` is "", "FOR SHARE" or "FOR UPDATE"."""
    assert lock in ("", "FOR SHARE", "FOR UPDATE")
    row = await conn.fetchrow(
        f"SELECT model, dimension, reembed_model, reembed_dimension FROM {spec.table} {lock}"
    )
    if row is None:  # the migration inserts the row; a deleted one means "nothing recorded"
        await conn.execute(f"INSERT INTO {spec.table} DEFAULT VALUES ON CONFLICT DO NOTHING")
        return SpaceRecord(None, None)
    reembed = None
    if row["reembed_model"] is not None:
        reembed = Identity(row["reembed_model"], row["reembed_dimension"])
    return SpaceRecord(row["model"], row["dimension"], reembed)


async def column_dimensions(conn: asyncpg.Connection, spec: SpaceSpec) -> dict[str, int]:
    """`table.column` -> the dimension its vector type declares (pgvector keeps it in
    atttypmod; -1 when undeclared)."""
    rows = await conn.fetch(
        """
        SELECT c.relname AS table_name, a.attname AS column_name, a.atttypmod AS dimension
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relname = ANY($1::text[]) AND a.attname = ANY($2::text[])
          AND c.relnamespace = to_regnamespace(current_schema())::oid
          AND NOT a.attisdropped
        """,
        [c.table for c in spec.columns],
        [c.column for c in spec.columns],
    )
    return {f"{r['table_name']}.{r['column_name']}": int(r["dimension"]) for r in rows}


async def resize_columns(conn: asyncpg.Connection, spec: SpaceSpec, dimension: int) -> None:
    """Every vector column becomes `vector(dimension)`, all values NULL, HNSW indexes
    dropped (re-create them with `create_indexes`). The caller's transaction."""
    if not 0 < dimension <= 16_000:
        raise ValueError(f"dimension out of range: {dimension}")
    for col in spec.columns:
        await conn.execute(f"DROP INDEX IF EXISTS {col.index}")
    for col in spec.columns:
        await conn.execute(
            f"ALTER TABLE {col.table} ALTER COLUMN {col.column} "
            f"TYPE vector({int(dimension)}) USING NULL"
        )


async def create_indexes(conn: asyncpg.Connection, spec: SpaceSpec) -> None:
    for col in spec.columns:
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {col.index} ON {col.table} "
            f"USING hnsw ({col.column} vector_cosine_ops)"
        )


async def _any_vector(conn: asyncpg.Connection, spec: SpaceSpec) -> bool:
    for col in spec.columns:
        if await conn.fetchval(
            f"SELECT EXISTS (SELECT 1 FROM {col.table} WHERE {col.column} IS NOT NULL)"
        ):
            return True
    return False


async def record_model(conn: asyncpg.Connection, spec: SpaceSpec, identity: Identity) -> None:
    await conn.execute(
        f"UPDATE {spec.table} SET model = $1, dimension = $2, recorded_at = now(), "
        "reembed_model = NULL, reembed_dimension = NULL, reembed_started_at = NULL",
        identity.model,
        identity.dimension,
    )


async def claim(conn: asyncpg.Connection, spec: SpaceSpec, identity: Identity) -> SpaceRecord:
    """Records `identity` on a database without a recorded model, sizing the columns to
    its dimension when no vector is stored; returns the record as it now is. Inside the
    caller's transaction, which it holds the record row for (FOR UPDATE)."""
    record = await read_record(conn, spec, lock="FOR UPDATE")
    if record.identity is not None or record.reembed is not None:
        return record  # another writer got there first
    dimensions = await column_dimensions(conn, spec)
    if any(d != identity.dimension for d in dimensions.values()):
        if await _any_vector(conn, spec):
            # Vectors without a record (the record row was removed by hand): never guess.
            raise SpaceMismatch(
                f"vectors are stored but no model is recorded in {spec.table}; run "
                "`cograph reembed` to re-embed them with the embedder's model"
            )
        await resize_columns(conn, spec, identity.dimension)
        await create_indexes(conn, spec)
    await record_model(conn, spec, identity)
    log.info(
        "embedding model recorded",
        extra={"space": spec.table, "model": identity.model, "dimension": identity.dimension},
    )
    return SpaceRecord(identity.model, identity.dimension)


async def hold_for_write(conn: asyncpg.Connection, spec: SpaceSpec, identity: Identity) -> None:
    """Inside a transaction that is about to write vectors made by `identity`'s model:
    records the model when none is, else share-locks the record (until the transaction
    ends) and raises SpaceMismatch unless the vectors belong there."""
    record = await read_record(conn, spec)
    if record.identity is None and record.reembed is None:
        record = await claim(conn, spec, identity)
    else:
        record = await read_record(conn, spec, lock="FOR SHARE")
    reason = verdict(record, identity)
    if reason is not None:
        raise SpaceMismatch(f"refusing to write vectors: {reason}")
