"""The optional cross-encoder behind the Rerank RPC, loaded from a local path.

It lives in the embedder because that is where the model runtime (torch) and its threads
already are; retrieval's `local_cross_encoder` provider calls it over gRPC. Nothing is
fetched from a hub: the path must hold a saved sentence-transformers CrossEncoder.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from embedder.library_logs import quiet_model_libraries

log = logging.getLogger(__name__)


class CrossEncoderScorer:
    def __init__(self, path: Path, threads: int = 0) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        if threads:
            torch.set_num_threads(threads)
        quiet_model_libraries()
        self._model = CrossEncoder(str(path), device="cpu", local_files_only=True)
        self.name = path.name
        # One inference at a time: torch already uses every thread it was given, and
        # the tokenizer is not safe to share between threads.
        self._lock = threading.Lock()

    def _predict(self, query: str, documents: list[str], batch_size: int) -> list[float]:
        with self._lock:
            scores = self._model.predict(
                [(query, document) for document in documents],
                batch_size=batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [float(value) for value in scores.reshape(len(documents), -1)[:, 0]]

    async def score(self, query: str, documents: list[str], batch_size: int = 32) -> list[float]:
        return await asyncio.to_thread(self._predict, query, documents, batch_size)


def load_cross_encoder(path: Path | None, threads: int = 0) -> CrossEncoderScorer | None:
    """The scorer, or None (logged) when no path is set or the model cannot be loaded:
    a missing reranker degrades reranking to none, it never stops the embedder."""
    if path is None:
        return None
    try:
        scorer = CrossEncoderScorer(path, threads)
    except Exception as err:  # any load failure: serve embeddings without reranking
        log.warning(
            "cross-encoder could not be loaded; Rerank is unavailable",
            extra={"path": str(path), "error": str(err)},
        )
        return None
    log.info("cross-encoder loaded", extra={"path": str(path)})
    return scorer
