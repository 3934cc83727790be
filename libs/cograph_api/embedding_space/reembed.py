"""Re-embedding a database to the embedder's model, and the maintenance command around
it (`python -m <service>.embedding_space`, which `cograph reembed` runs)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import numpy as np

from cograph_api.embedder_client import EmbedderUnavailable
from cograph_api.embedding_space.monitor import IdentifyingEmbedder
from cograph_api.embedding_space.record import (
    REEMBED_LOCK_KEYS,
    SpaceMismatch,
    SpaceSpec,
    VectorColumn,
    create_indexes,
    read_record,
    record_model,
    resize_columns,
)

log = logging.getLogger(__name__)

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
