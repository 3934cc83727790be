"""Which embedding model a database's vectors come from, and the rule that two models'
vectors are never mixed.

Retrieval and the commons each keep a one-row record (`<service>_embedding_space`: model,
dimension, and the model a re-embed is moving to). `EmbeddingSpace` is the service side:

- a monitor asks the embedder for its model (`Info`) at first contact and then every
  `check_s`, compares it with the record, logs one ERROR line saying what to run when they
  differ, and reports the verdict (gRPC health name `HEALTH_NAME`, read by the gateway's
  `/readyz`);
- `checked(client)` wraps an embedder client: a call while the spaces differ, or whose
  answer came from another model than the record's, raises `SpaceMismatch` (reason
  `embedding_model_mismatch`) instead of returning vectors that would be compared with,
  or written beside, another model's;
- `hold_for_write(conn, identity)` runs inside every transaction that writes vectors: it
  share-locks the record row, so a re-embed (which updates that row first) waits for
  writers in flight and later writers see it; on a database without vectors it records the
  writer's model, sizing the vector columns to its dimension.

`reembed` (used by `python -m retrieval.reembed` and `python -m commons.reembed`, which
`cograph reembed` runs) moves a database to the embedder's model: it records the target,
changes every vector column to `vector(N) USING NULL` (dropping the HNSW indexes), fills
the NULL vectors from the stored text in batches, re-creates the indexes and records the
new model last. An interrupted run resumes where it stopped: rows whose vector is NULL are
the work left.

Table, column and index names come from the services' code, never from input; the model
name an embedder reports reaches SQL only as a parameter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import numpy as np

from cograph_api.embedder_client import EmbedderUnavailable, Identity, Vectors
from svckit.server import GrpcHost

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


class IdentifyingEmbedder(Protocol):
    async def embed_identified(
        self, texts: list[str], timeout: float | None = None
    ) -> tuple[Vectors, Identity]: ...

    async def identity(self) -> Identity: ...


class EmbeddingSpace:
    """A service's view of its record and of its embedder (see the module doc)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        spec: SpaceSpec,
        embedder: IdentifyingEmbedder,
        *,
        check_s: float = 10.0,
        on_verdict: Callable[[str | None], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self._pool = pool
        self._embedder = embedder
        self._check_s = check_s
        self.on_verdict = on_verdict
        self._clock = clock
        self._record: SpaceRecord | None = None
        self._record_at = 0.0
        self._identity: Identity | None = None  # the embedder's, once reached
        self._reason: str | None = None
        self._reported: str | None = None  # the last verdict logged / reported
        self._task: asyncio.Task[None] | None = None

    @property
    def embedder_identity(self) -> Identity | None:
        return self._identity

    @property
    def reason(self) -> str | None:
        """Why vectors are off now (None: they may be used)."""
        return self._reason

    async def record(self, *, fresh: bool = False) -> SpaceRecord:
        """The record, read again when older than `check_s` (or when `fresh`)."""
        if fresh or self._record is None or self._clock() - self._record_at >= self._check_s:
            async with self._pool.acquire() as conn:
                self._record = await read_record(conn, self.spec)
            self._record_at = self._clock()
        return self._record

    async def refresh(self) -> str | None:
        """Asks the embedder and the database again; returns the verdict. Raises
        EmbedderUnavailable when the embedder does not answer."""
        identity = await self._embedder.identity()
        record = await self.record(fresh=True)
        return await self._judge(record, identity)

    async def _judge(self, record: SpaceRecord, identity: Identity) -> str | None:
        self._identity = identity
        self._reason = verdict(record, identity)
        if self._reason != self._reported:
            self._reported = self._reason
            if self._reason is not None:
                log.error(
                    "embedding model mismatch: %s",
                    self._reason,
                    extra={
                        "space": self.spec.table,
                        "reason": MISMATCH_REASON,
                        "embedder_model": identity.model,
                        "embedder_dimension": identity.dimension,
                        "stored_model": record.model,
                        "stored_dimension": record.dimension,
                    },
                )
            elif record.identity is not None:
                log.info(
                    "embedding model matches the stored vectors",
                    extra={"space": self.spec.table, "model": identity.model},
                )
            if self.on_verdict is not None:
                await self.on_verdict(self._reason)
        return self._reason

    def start(self) -> None:
        """The monitor: first contact (retried while the embedder is down), then a check
        every `check_s`."""
        self._task = asyncio.get_running_loop().create_task(
            self._monitor(), name=f"{self.spec.service}-embedding-space"
        )

    async def _monitor(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except EmbedderUnavailable:
                pass  # the embedder's own health says so; try again
            except Exception as err:  # a database hiccup: the next check retries
                log.warning("embedding space check failed", extra={"error": str(err)})
            await asyncio.sleep(self._check_s)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def check(self, identity: Identity) -> None:
        """Raises SpaceMismatch unless vectors of `identity` may be used with the stored
        ones (a change is logged and reported at once)."""
        record = await self.record()
        if verdict(record, identity) is not None:
            record = await self.record(fresh=True)  # may have just been re-embedded
        reason = await self._judge(record, identity)
        if reason is not None:
            raise SpaceMismatch(reason)

    async def hold_for_write(self, conn: asyncpg.Connection, identity: Identity) -> None:
        await hold_for_write(conn, self.spec, identity)

    def checked(self, client: IdentifyingEmbedder) -> CheckedEmbedder:
        return CheckedEmbedder(client, self)


class CheckedEmbedder:
    """An embedder client whose vectors are only returned when they belong with the stored
    ones; otherwise SpaceMismatch. While a mismatch is known the embedder is not called."""

    def __init__(self, client: IdentifyingEmbedder, space: EmbeddingSpace) -> None:
        self._client = client
        self._space = space

    async def embed_identified(
        self, texts: list[str], timeout: float | None = None
    ) -> tuple[Vectors, Identity]:
        if self._space.reason is not None:
            # Known already: the stored record may have changed since (a re-embed done).
            record = await self._space.record()
            identity = self._space.embedder_identity
            if verdict(record, identity) is not None:
                raise SpaceMismatch(verdict(record, identity) or MISMATCH_REASON)
        vectors, identity = await self._client.embed_identified(texts, timeout)
        await self._space.check(identity)
        return vectors, identity

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        vectors, _ = await self.embed_identified(texts, timeout)
        return vectors

    async def embed_one(self, text: str, timeout: float | None = None) -> Vectors:
        vectors = await self.embed([text], timeout)
        return vectors[0]

    async def identity(self) -> Identity:
        return await self._client.identity()


# ---- re-embedding ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    """How one vector column is refilled: which rows need a vector (`needs`, SQL over the
    table's own columns), what to read (`fields`) and the text to embed from them. Rows are
    walked by `key` (unique, ordered)."""

    column: VectorColumn
    key: str
    fields: tuple[str, ...]
    text: Callable[[asyncpg.Record], str]
    needs: str = "true"

    def select_sql(self, after: bool) -> str:
        col = self.column
        cursor = f" AND {self.key} > $2" if after else ""
        return (
            f"SELECT {self.key} AS key, {', '.join(self.fields)} FROM {col.table} "
            f"WHERE {col.column} IS NULL AND ({self.needs}){cursor} ORDER BY {self.key} LIMIT $1"
        )

    def count_sql(self) -> str:
        col = self.column
        return f"SELECT count(*) FROM {col.table} WHERE {col.column} IS NULL AND ({self.needs})"

    def update_sql(self) -> str:
        col = self.column
        return (
            f"UPDATE {col.table} SET {col.column} = $2 "
            f"WHERE {self.key} = $1 AND {col.column} IS NULL"
        )


@dataclass
class ReembedReport:
    service: str
    model: str
    dimension: int
    started: bool  # False: an interrupted re-embed to the same model was resumed
    embedded: int
    already: bool = False  # the vectors were already that model's: nothing to do


class Progress(Protocol):
    def update(self, n: int) -> Any: ...


class ReembedBusy(RuntimeError):
    """Another re-embed of this service's vectors is running."""


async def reembed(
    conn: asyncpg.Connection,
    spec: SpaceSpec,
    works: Sequence[Work],
    embedder: IdentifyingEmbedder,
    *,
    batch: int = 64,
    timeout_s: float = 120.0,
    progress: Callable[[int], Progress] | None = None,
    stop_after: int | None = None,
) -> ReembedReport:
    """Moves `spec`'s vectors to the embedder's model (see the module doc). `progress`
    is called with the number of rows to fill and returns something with `update(n)`.
    `stop_after` stops after that many rows (tests of an interrupted run)."""
    from pgvector.asyncpg import register_vector

    await register_vector(conn)
    key = REEMBED_LOCK_KEYS[spec.service]
    if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
        raise ReembedBusy(f"another re-embed of {spec.service}'s vectors is running")
    try:
        target = await embedder.identity()
        record = await read_record(conn, spec)
        if record.reembed is None and record.identity == target:
            return ReembedReport(spec.service, target.model, target.dimension, False, 0, True)
        started = record.reembed != target
        if started:
            # The record row first: its lock waits for every write in flight
            # (hold_for_write share-locks it) and makes later writers refuse.
            async with conn.transaction():
                await conn.execute(
                    f"UPDATE {spec.table} SET reembed_model = $1, reembed_dimension = $2, "
                    "reembed_started_at = now()",
                    target.model,
                    target.dimension,
                )
                await resize_columns(conn, spec, target.dimension)
            log.info(
                "re-embed started",
                extra={"space": spec.table, "model": target.model, "dimension": target.dimension},
            )
        total = 0
        for work in works:
            total += int(await conn.fetchval(work.count_sql()))
        bar = progress(total) if progress is not None else None
        embedded = 0
        for work in works:
            cursor: Any = None
            while True:
                if cursor is None:
                    rows = await conn.fetch(work.select_sql(False), batch)
                else:
                    rows = await conn.fetch(work.select_sql(True), batch, cursor)
                if not rows:
                    break
                if stop_after is not None and embedded + len(rows) > stop_after:
                    rows = rows[: max(stop_after - embedded, 0)]
                    if not rows:
                        return ReembedReport(
                            spec.service, target.model, target.dimension, started, embedded
                        )
                texts = [work.text(row) for row in rows]
                vectors, identity = await embedder.embed_identified(texts, timeout_s)
                if identity != target:
                    raise SpaceMismatch(
                        f"the embedder changed model during the re-embed ({target.model} -> "
                        f"{identity.model}); run it again"
                    )
                await conn.executemany(
                    work.update_sql(),
                    [
                        (row["key"], np.asarray(vector, dtype=np.float32))
                        for row, vector in zip(rows, vectors, strict=True)
                    ],
                )
                cursor = rows[-1]["key"]
                embedded += len(rows)
                if bar is not None:
                    bar.update(len(rows))
        async with conn.transaction():
            await create_indexes(conn, spec)
            await record_model(conn, spec, target)
        log.info(
            "re-embed finished",
            extra={"space": spec.table, "model": target.model, "embedded": embedded},
        )
        return ReembedReport(spec.service, target.model, target.dimension, started, embedded)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", key)


# ---- the maintenance command ------------------------------------------------------------------


def reembed_main(
    spec: SpaceSpec, plan: Callable[[Any], Sequence[Work]], argv: Sequence[str] | None = None
) -> int:
    """`python -m <service>.embedding_space`: re-embeds `spec`'s vectors with the embedder at
    EMBEDDER_ADDR, on COGRAPH_DATABASE_URL, signing with the operator's internal secret.
    `plan(env)` lists the columns' refill work. A progress bar is drawn on a terminal only.
    Exit 0 when done, 1 when refused (another re-embed, the embedder down), 2 on settings."""
    import argparse
    import os
    import sys

    from svckit.config import ConfigError, Env, operator_internal_secret

    parser = argparse.ArgumentParser(prog=f"python -m {spec.service}.embedding_space")
    parser.add_argument("--batch", type=int, default=64, help="texts per Embed call (1-256)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per Embed call")
    args = parser.parse_args(argv)
    if not 1 <= args.batch <= 256:
        parser.error("--batch must be between 1 and 256")
    env = Env(os.environ)
    try:
        dsn = env.str("COGRAPH_DATABASE_URL")
        address = env.str("EMBEDDER_ADDR", "127.0.0.1:50051")
        secret = operator_internal_secret(env)
        works = plan(env)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(
            _reembed_command(spec, works, dsn=dsn, address=address, secret=secret, args=args)
        )
    except (ReembedBusy, SpaceMismatch, EmbedderUnavailable) as err:
        print(f"{spec.service}: error: {err}", file=sys.stderr)
        return 1
    if report.already:
        print(f"{spec.service}: the vectors are already {report.model}'s; nothing to do")
    else:
        how = "re-embedded" if report.started else "resumed and re-embedded"
        print(
            f"{spec.service}: {how} {report.embedded} vectors with {report.model} "
            f"({report.dimension} dimensions); model recorded"
        )
    return 0


async def _reembed_command(
    spec: SpaceSpec, works: Sequence[Work], *, dsn: str, address: str, secret: bytes, args: Any
) -> ReembedReport:
    import sys

    from tqdm import tqdm

    from cograph_api.embedder_client import EmbedderClient
    from svckit.clients import dial
    from svckit.internal_auth import TokenSigner

    channel = dial(address, signer=TokenSigner(secret), default_timeout_s=args.timeout)
    bars: list[tqdm[Any]] = []

    def progress(total: int) -> tqdm[Any]:
        bar = tqdm(
            total=total,
            desc=f"{spec.service} vectors",
            unit="vec",
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
        )
        bars.append(bar)
        return bar

    conn = await asyncpg.connect(dsn)
    try:
        client = EmbedderClient(channel, timeout_s=args.timeout)
        return await reembed(
            conn,
            spec,
            works,
            client,
            batch=args.batch,
            timeout_s=args.timeout,
            progress=progress,
        )
    finally:
        for bar in bars:
            bar.close()
        await conn.close()
        await channel.close(None)


def health_reporter(host: GrpcHost) -> Callable[[str | None], Awaitable[None]]:
    """Reports a verdict on `host`'s health service under HEALTH_NAME: SERVING when
    vectors may be used, NOT_SERVING with a mismatch. Call after `host.start()`."""

    async def report(reason: str | None) -> None:
        await host.set_health(HEALTH_NAME, reason is None)

    return report
