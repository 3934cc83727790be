"""The typed client every service uses to embed text, and the circuit breaker that lets a
query fail fast while the embedder is down."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np
import numpy.typing as npt

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from svckit.errors import InvalidArgument

Vectors = npt.NDArray[np.float32]

log = logging.getLogger(__name__)

# Codes that mean "the embedder cannot answer now", as opposed to "the request was wrong".
_UNAVAILABLE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}


class EmbedderUnavailable(Exception):
    """The embedder did not answer in time or is down."""


class EmbedderBusy(EmbedderUnavailable):
    """The embedder's bulk lane is full (RESOURCE_EXHAUSTED): it is up and working through
    other bulk requests; retry after a pause. Only bulk clients (`for_bulk`) see it."""


@dataclass(frozen=True)
class Identity:
    """The model an embedder serves: vectors of two identities are never compared."""

    model: str
    dimension: int


class CircuitBreaker:
    """Consecutive failures open it: after `failures` calls in a row found the embedder
    unavailable, calls fail at once (EmbedderUnavailable, without waiting for a deadline)
    for `cooldown_s`; then one call goes through as a probe while the others still fail
    fast. The probe's success closes the breaker, its failure opens it for another
    cool-down. A call that ends otherwise (cancelled, a refused request) frees the probe's
    place without deciding anything."""

    def __init__(
        self,
        failures: int = 3,
        cooldown_s: float = 5.0,
        *,
        name: str = "embedder",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._name = name
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None  # None: closed
        self._probing = False

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._probing or self._clock() - self._opened_at >= self.cooldown_s:
            return "half_open"
        return "open"

    def admit(self) -> bool:
        """Whether a call may go out now; True makes it the probe when the breaker is open."""
        if self._opened_at is None:
            return True
        if self._probing or self._clock() - self._opened_at < self.cooldown_s:
            return False
        self._probing = True
        return True

    def succeeded(self) -> None:
        if self._opened_at is not None:
            log.info("embedder answers again; circuit closed", extra={"breaker": self._name})
        self._consecutive, self._opened_at, self._probing = 0, None, False

    def failed(self) -> None:
        self._consecutive += 1
        if self._opened_at is not None or self._consecutive >= self.failures:
            if self._opened_at is None:
                log.warning(
                    "embedder unavailable; circuit open, calls fail fast",
                    extra={"breaker": self._name, "cooldown_s": self.cooldown_s},
                )
            self._opened_at, self._probing = self._clock(), False

    def released(self) -> None:
        """A call that neither succeeded nor found the embedder down."""
        self._probing = False


class EmbedderClient:
    def __init__(
        self,
        channel: grpc.aio.Channel,
        timeout_s: float = 2.0,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        self._timeout_s = timeout_s
        self._breaker = breaker
        self._answered_by: Identity | None = None
        self._priority: embedder_pb2.EmbedPriority.ValueType = embedder_pb2.EMBED_PRIORITY_QUERY

    def for_bulk(self) -> EmbedderClient:
        """The same client whose calls wait in the embedder's bulk lane: for indexing and
        re-embedding, so queries never queue behind them. Calls raise EmbedderBusy while
        that lane is full."""
        clone = copy.copy(self)
        clone._priority = embedder_pb2.EMBED_PRIORITY_BULK
        return clone

    def with_breaker(self, breaker: CircuitBreaker) -> EmbedderClient:
        """The same client (channel, deadline) whose calls go through `breaker`: for the
        calls that must not wait on a down embedder (queries), not for batch work."""
        clone = copy.copy(self)
        clone._breaker = breaker
        return clone

    @property
    def breaker(self) -> CircuitBreaker | None:
        return self._breaker

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        """One row per text; raises EmbedderUnavailable on deadline or outage, and at once
        while the breaker (if any) is open."""
        return await self._guarded(texts, timeout)

    async def embed_identified(
        self, texts: list[str], timeout: float | None = None
    ) -> tuple[Vectors, Identity]:
        """Like `embed`, with the model that made the vectors (as its answer says)."""
        vectors = await self._guarded(texts, timeout)
        identity = self._answered_by or Identity("", int(vectors.shape[1]))
        return vectors, identity

    async def _guarded(self, texts: list[str], timeout: float | None) -> Vectors:
        breaker = self._breaker
        if breaker is None:
            return await self._embed(texts, timeout)
        if not breaker.admit():
            raise EmbedderUnavailable("circuit open: the embedder failed recently")
        decided = False
        try:
            vectors = await self._embed(texts, timeout)
            breaker.succeeded()
            decided = True
            return vectors
        except EmbedderBusy:
            raise  # the embedder answered: not a failure, and not a success either
        except EmbedderUnavailable:
            breaker.failed()
            decided = True
            raise
        finally:
            if not decided:
                breaker.released()

    async def _embed(self, texts: list[str], timeout: float | None) -> Vectors:
        try:
            response = await self._stub.Embed(
                embedder_pb2.EmbedRequest(texts=texts, priority=self._priority),
                timeout=self._timeout_s if timeout is None else timeout,
            )
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(err.details() or "invalid embed request") from err
            if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise EmbedderBusy(f"{err.code().name}: {err.details()}") from err
            if err.code() in _UNAVAILABLE_CODES:
                raise EmbedderUnavailable(f"{err.code().name}: {err.details()}") from err
            raise
        # The model of the latest answer: one embedder serves one model, so concurrent
        # answers agree (a swapped embedder is caught by the next answer).
        self._answered_by = Identity(response.model, int(response.dimension))
        if not response.vectors:
            return np.zeros((0, response.dimension), dtype=np.float32)
        return np.array([v.values for v in response.vectors], dtype=np.float32)

    async def embed_one(self, text: str, timeout: float | None = None) -> Vectors:
        vectors = await self.embed([text], timeout)
        return vectors[0]

    async def info(self) -> embedder_pb2.InfoResponse:
        try:
            return await self._stub.Info(embedder_pb2.InfoRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as err:
            raise EmbedderUnavailable(f"{err.code().name}: {err.details()}") from err

    async def identity(self) -> Identity:
        """The model the embedder serves now (its Info); EmbedderUnavailable when down."""
        info = await self.info()
        return Identity(info.model, int(info.dimension))
