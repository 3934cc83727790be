"""Summaries for the ast_summary layer: one per node and per file (the module node).

Two providers behind one interface: the offline default writes an extractive summary from
the signature, the docstring and the names a node calls or contains; the OpenAI-compatible
provider asks a chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp server). A
failed HTTP summary falls back to the extractive one for that node, so a flaky model never
fails an index run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from cograph_text.names import unnumbered

log = logging.getLogger(__name__)

_MAX_NAMES = 12
_PROMPT_BODY_CHARS = 4000


@dataclass(frozen=True, slots=True)
class SummaryInput:
    """What a summarizer may look at for one node."""

    qualified_name: str
    kind: str
    language: str
    signature: str
    docstring: str | None
    body: str
    calls: Sequence[str] = field(default_factory=tuple)
    members: Sequence[str] = field(default_factory=tuple)  # names it contains


class Summarizer(Protocol):
    name: str

    async def summarize(self, items: Sequence[SummaryInput]) -> list[str]:
        """One summary per item, in order."""
        ...

    async def close(self) -> None: ...


def _first_sentence(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    for stop in (". ", "\n\n"):
        cut = flat.find(stop)
        if 0 < cut < limit:
            return flat[: cut + 1]
    return flat[:limit]


def _names(values: Sequence[str]) -> str:
    unique = list(dict.fromkeys(v for v in values if v))
    shown = ", ".join(unique[:_MAX_NAMES])
    return shown + (f" and {len(unique) - _MAX_NAMES} more" if len(unique) > _MAX_NAMES else "")


def extractive_summary(item: SummaryInput) -> str:
    """`<kind> <qualified name>`: first docstring sentence, signature, members, calls."""
    parts = [f"{item.language} {item.kind} {unnumbered(item.qualified_name)}."]
    if item.docstring:
        parts.append(_first_sentence(item.docstring))
    if item.signature and item.kind not in ("module",):
        parts.append(f"Signature: {' '.join(item.signature.split())[:300]}")
    if item.members:
        label = "Defines" if item.kind == "module" else "Members"
        parts.append(f"{label}: {_names(item.members)}.")
    if item.calls:
        parts.append(f"Calls: {_names(item.calls)}.")
    return " ".join(parts)


class ExtractiveSummarizer:
    """Offline and deterministic; the default."""

    name = "extractive"

    async def summarize(self, items: Sequence[SummaryInput]) -> list[str]:
        return [extractive_summary(item) for item in items]

    async def close(self) -> None:
        return None


_SYSTEM = (
    "You summarise source code for a code search index. Reply with one or two plain "
    "sentences saying what the given symbol does and why it exists. No markdown."
)


def chat_request(model: str, item: SummaryInput, max_tokens: int) -> dict[str, Any]:
    """The documented chat-completions request body for one node."""
    user = (
        f"Language: {item.language}\nKind: {item.kind}\nName: {unnumbered(item.qualified_name)}\n"
        f"Signature: {item.signature}\n"
        + (f"Docstring: {item.docstring}\n" if item.docstring else "")
        + f"Code:\n{item.body[:_PROMPT_BODY_CHARS]}"
    )
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": user},
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


class OpenAISummarizer:
    """POSTs `{base_url}/chat/completions`; reads `choices[0].message.content`."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        concurrency: int = 4,
        max_tokens: int = 160,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )
        self._model = model
        self._max_tokens = max_tokens
        self._limit = asyncio.Semaphore(concurrency)
        self.failures = 0

    async def _one(self, item: SummaryInput) -> str:
        async with self._limit:
            try:
                response = await self._client.post(
                    "/chat/completions", json=chat_request(self._model, item, self._max_tokens)
                )
                response.raise_for_status()
                content = response.json()["choices"][0]["message"]["content"]
                text = " ".join(str(content).split())
                if text:
                    return text
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as err:
                self.failures += 1
                log.warning(
                    "summary request failed; using the extractive summary",
                    extra={"node": item.qualified_name, "error": str(err)},
                )
        return extractive_summary(item)

    async def summarize(self, items: Sequence[SummaryInput]) -> list[str]:
        return list(await asyncio.gather(*(self._one(item) for item in items)))

    async def close(self) -> None:
        await self._client.aclose()
