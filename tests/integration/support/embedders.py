"""The embedder as the integration tests use it: settings for a real one on 127.0.0.1:0 (the
model cache kept between runs), and a client wrapper that counts what it is asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cograph_api.embedder_client import EmbedderClient, Vectors
from embedder.settings import EmbedderSettings
from svckit.config import Env
from tests.internal_auth import with_secret

REPO_ROOT = Path(__file__).resolve().parents[3]
# Kept between runs so the ONNX export happens once per machine, not once per test session.
MODEL_CACHE = REPO_ROOT / ".cograph" / "test-models"


def embedder_settings(**overrides: str) -> EmbedderSettings:
    environ = {
        "EMBEDDER_LISTEN": "127.0.0.1:0",
        "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
        **overrides,
    }
    return EmbedderSettings.from_env(Env(with_secret(environ)))


@dataclass
class CountingEmbedder:
    """The real client, counting calls and texts; optionally failing after N calls."""

    inner: EmbedderClient
    calls: int = 0
    texts: list[str] = field(default_factory=list)
    fail_after: int | None = None

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("injected embedder failure")
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.embed(texts, timeout=timeout)

    def reset(self) -> None:
        self.calls = 0
        self.texts.clear()
