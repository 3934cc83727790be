"""Reranking: the gate and the providers.

Gate: rerank only when it is enabled, the query is not blank, at least `threshold`
candidates came back, and no exact symbol match is among the results -- fusion pins exact
matches first, and for `ParseConfig` with ParseConfig first a cross-encoder can only make
things worse. Exact means ignoring case and including dotted suffixes (`RetryPolicy.delay`),
as the symbol stream decides it.

Providers: `local_cross_encoder` asks the embedder service (which holds the CrossEncoder
next to the embedding model); `cohere`, `voyage` and `jina` are HTTP clients of those
vendors' documented rerank APIs. A provider that cannot be built degrades to none with a
warning; one that fails at query time leaves the fused order (engine.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
import httpx

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from retrieval.search.search_settings import RerankSettings

log = logging.getLogger(__name__)


class RerankError(Exception):
    """The provider did not answer, or answered something unusable."""


class Reranker(Protocol):
    name: str

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in input order; higher is better."""
        ...

    async def close(self) -> None: ...


def exact_symbol_match(query: str, qualified_name: str, name: str) -> bool:
    """The query names the node outright: its qualified name, its bare name or a dotted
    suffix of the qualified name (`RetryPolicy.delay`), ignoring case."""
    text = query.strip().replace("::", ".").lower()
    if not text:
        return False
    qualified = qualified_name.lower()
    return text in (qualified, name.lower()) or qualified.endswith("." + text)


def should_rerank(
    settings: RerankSettings, query: str, candidates: int, exact_symbol_match: bool
) -> bool:
    """The gate: enabled, a non-blank query, enough candidates, and no exact symbol match
    among the results (fusion pins those first; a cross-encoder can only move them down).
    The caller also needs a working provider."""
    return (
        settings.enabled
        and bool(query.strip())
        and candidates >= settings.threshold
        and not exact_symbol_match
    )


def _scores_by_index(items: Any, count: int, vendor: str) -> list[float]:
    """Vendor answers list {index, relevance_score}, sorted by relevance; put them back in
    input order. Every document must be scored exactly once."""
    if not isinstance(items, list):
        raise RerankError(f"{vendor}: unexpected response shape")
    scores: list[float | None] = [None] * count
    for item in items:
        try:
            index = int(item["index"])
            value = float(item["relevance_score"])
        except (KeyError, TypeError, ValueError) as err:
            raise RerankError(f"{vendor}: malformed result {item!r}") from err
        if not 0 <= index < count or scores[index] is not None:
            raise RerankError(f"{vendor}: bad index {index}")
        scores[index] = value
    if any(score is None for score in scores):
        raise RerankError(f"{vendor}: not every document was scored")
    return [float(score) for score in scores if score is not None]


class _VendorReranker:
    """Shared HTTP plumbing: bearer auth, JSON in and out, timeout."""

    name = "vendor"
    path = ""
    results_key = "results"

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not api_key:
            raise ValueError(f"{self.name} reranking needs RETRIEVAL_RERANK_API_KEY")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{self.name} reranking needs an http(s) RETRIEVAL_RERANK_URL")
        self.model = model
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout_s,
            transport=transport,
        )

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        raise NotImplementedError

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        try:
            response = await self._client.post(self.path, json=self.body(query, documents))
            response.raise_for_status()
            payload = response.json()
        except (httpx.HTTPError, ValueError) as err:
            raise RerankError(f"{self.name}: {err}") from err
        if not isinstance(payload, dict):
            raise RerankError(f"{self.name}: unexpected response shape")
        return _scores_by_index(payload.get(self.results_key), len(documents), self.name)

    async def close(self) -> None:
        await self._client.aclose()


class CohereReranker(_VendorReranker):
    """POST /v2/rerank {model, query, documents, top_n} -> {results: [{index,
    relevance_score}]} (Cohere API v2)."""

    name = "cohere"
    path = "/v2/rerank"

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {
            "model": self.model,
            "query": query,
            "documents": list(documents),
            "top_n": len(documents),
        }


class VoyageReranker(_VendorReranker):
    """POST /v1/rerank {query, documents, model, top_k} -> {data: [{index,
    relevance_score}]} (Voyage AI reranker API)."""

    name = "voyage"
    path = "/v1/rerank"
    results_key = "data"

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {
            "query": query,
            "documents": list(documents),
            "model": self.model,
            "top_k": len(documents),
            "truncation": True,
        }


class JinaReranker(_VendorReranker):
    """POST /v1/rerank {model, query, documents, top_n} -> {results: [{index,
    relevance_score}]} (Jina AI reranker API)."""

    name = "jina"
    path = "/v1/rerank"

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {
            "model": self.model,
            "query": query,
            "documents": list(documents),
            "top_n": len(documents),
            "return_documents": False,
        }


class CrossEncoderReranker:
    """The embedder service's Rerank RPC (sentence-transformers CrossEncoder)."""

    name = "local_cross_encoder"

    def __init__(self, channel: grpc.aio.Channel, timeout_s: float) -> None:
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        self._timeout_s = timeout_s

    async def available(self) -> bool:
        """False when the embedder answers that it has no cross-encoder; True when it has
        one or cannot be asked now (it may still be starting; query-time errors then leave
        the fused order)."""
        try:
            info = await self._stub.Info(embedder_pb2.InfoRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as err:
            log.warning(
                "could not ask the embedder about its cross-encoder",
                extra={"error": f"{err.code().name}: {err.details()}"},
            )
            return True
        return bool(info.reranker)

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        try:
            reply = await self._stub.Rerank(
                embedder_pb2.RerankRequest(query=query, documents=list(documents)),
                timeout=self._timeout_s,
            )
        except grpc.aio.AioRpcError as err:
            raise RerankError(f"embedder Rerank: {err.code().name}: {err.details()}") from err
        if len(reply.scores) != len(documents):
            raise RerankError("embedder Rerank: wrong number of scores")
        return [float(value) for value in reply.scores]

    async def close(self) -> None:
        return None


_VENDORS: dict[str, type[_VendorReranker]] = {
    "cohere": CohereReranker,
    "voyage": VoyageReranker,
    "jina": JinaReranker,
}


def build_reranker(
    settings: RerankSettings, embedder_channel: grpc.aio.Channel | None
) -> Reranker | None:
    """The configured provider, or None: a provider that was asked for but cannot be built
    degrades to none, with a warning, rather than stopping the service."""
    if settings.provider == "none":
        if settings.enabled:
            log.warning("RETRIEVAL_RERANK_ENABLED is set but the provider is none")
        return None
    try:
        if settings.provider == "local_cross_encoder":
            if embedder_channel is None:
                raise ValueError("no embedder channel to run the cross-encoder on")
            return CrossEncoderReranker(embedder_channel, settings.timeout_s)
        vendor = _VENDORS[settings.provider]
        return vendor(settings.base_url or "", settings.api_key, settings.model, settings.timeout_s)
    except (ValueError, KeyError) as err:
        log.warning(
            "reranker could not be built; reranking is off",
            extra={"provider": settings.provider, "error": str(err)},
        )
        return None
