"""Embedder configuration, read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from embedder.backends import EndpointSettings
from svckit.config import ConfigError, Env, data_dir, http_url, internal_secret
from svckit.metrics import MetricsSettings

BACKENDS = ("onnx-int8", "torch", "openai")


@dataclass(frozen=True)
class EmbedderSettings:
    address: str
    backend: str  # "onnx-int8", "torch" or "openai"
    model_path: Path | None  # None: the packaged all-MiniLM-L6-v2
    cache_dir: Path  # where the locally exported ONNX model is kept
    max_batch_texts: int  # per request
    max_text_chars: int
    batch_size: int  # per model call, after coalescing
    max_wait_ms: float  # how long an idle batcher waits for companions
    bulk_batch_texts: int  # bulk (indexing) texts per model call: what a query may wait on
    bulk_queue_texts: int  # bulk texts queued at most; more are refused (RESOURCE_EXHAUSTED)
    bulk_threads: int  # inference threads of the bulk lane (onnx-int8); 0: every core
    reranker_path: Path | None  # local cross-encoder, optional
    threads: int  # inference threads; 0 lets the runtime use every core it sees
    ready_file: Path | None
    log_level: str
    # Signs and verifies calls between services (svckit.internal_auth); never logged.
    internal_secret: bytes = field(repr=False)
    endpoint: EndpointSettings | None = None  # the openai backend's endpoint
    # Where /metrics is served (svckit.metrics); the default serves nothing.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)

    @classmethod
    def from_env(cls, env: Env) -> EmbedderSettings:
        model_path = env.optional_str("EMBEDDER_MODEL_PATH")
        reranker = env.optional_str("EMBEDDER_RERANKER_PATH")
        ready = env.optional_str("EMBEDDER_READY_FILE")
        backend = env.choice("EMBEDDER_BACKEND", "onnx-int8", BACKENDS)
        if model_path and backend != "openai":
            _check_model_dir("EMBEDDER_MODEL_PATH", Path(model_path), MODEL_FILES)
        return cls(
            address=env.str("EMBEDDER_LISTEN", "127.0.0.1:50051"),
            backend=backend,
            model_path=Path(model_path) if model_path else None,
            cache_dir=env.path("EMBEDDER_CACHE_DIR", data_dir(env) / "models"),
            max_batch_texts=env.int("EMBEDDER_MAX_BATCH_TEXTS", 256, min=1, max=4096),
            max_text_chars=env.int("EMBEDDER_MAX_TEXT_CHARS", 16384, min=16, max=1_000_000),
            batch_size=env.int("EMBEDDER_BATCH_SIZE", 64, min=1, max=1024),
            max_wait_ms=env.float("EMBEDDER_MAX_WAIT_MS", 2.0, min=0.0, max=1000.0),
            # 8 code chunks of 2,000 characters take about 0.4 s on one core (bench/RESULTS.md,
            # "Embedder bulk slices"); queries run beside that on their own thread.
            bulk_batch_texts=env.int("EMBEDDER_BULK_BATCH_TEXTS", 8, min=1, max=1024),
            bulk_queue_texts=env.int("EMBEDDER_BULK_QUEUE_TEXTS", 256, min=1, max=65536),
            # One thread leaves the other cores to queries and the other services; on one
            # text at a time a second thread barely speeds the model up (bench/RESULTS.md,
            # "Embedder bulk slices").
            bulk_threads=env.int("EMBEDDER_BULK_THREADS", 1, min=0, max=256),
            reranker_path=Path(reranker) if reranker else None,
            threads=env.int("EMBEDDER_THREADS", 0, min=0, max=256),
            ready_file=Path(ready) if ready else None,
            log_level=env.str("COGRAPH_LOG_LEVEL", "INFO"),
            internal_secret=internal_secret(env),
            metrics=MetricsSettings.from_env(env, "embedder"),
            endpoint=_endpoint(env),
        )


# What a local model directory must hold (each entry: one of these names), as saved by
# sentence-transformers: without it the loaders take the path for a hub repository id and
# fail with a message about that, over and over under a supervisor.
MODEL_FILES: tuple[tuple[str, ...], ...] = (
    ("config.json",),
    ("tokenizer.json",),
    ("model.safetensors", "pytorch_model.bin"),
)


def _check_model_dir(variable: str, path: Path, required: tuple[tuple[str, ...], ...]) -> None:
    """Fails at start, in one line, when `path` is not a model directory (models are
    never downloaded: the path must hold one)."""
    path = path.expanduser()
    if not path.exists():
        raise ConfigError(f"{variable}: {path} does not exist (a local model directory)")
    if not path.is_dir():
        raise ConfigError(f"{variable}: {path} is not a directory (a local model directory)")
    missing = [
        " or ".join(names) for names in required if not any((path / n).is_file() for n in names)
    ]
    if missing:
        raise ConfigError(f"{variable}: {path} is not a saved model: it lacks {', '.join(missing)}")


def _endpoint(env: Env) -> EndpointSettings | None:
    """EMBEDDER_OPENAI_*, used (and the URL and model required) with EMBEDDER_BACKEND=openai."""
    base_url = env.optional_str("EMBEDDER_OPENAI_BASE_URL")
    model = env.optional_str("EMBEDDER_OPENAI_MODEL")
    api_key = env.optional_str("EMBEDDER_OPENAI_API_KEY")
    dimension = env.int("EMBEDDER_OPENAI_DIMENSION", 0, min=0, max=16_000)
    timeout_s = env.float("EMBEDDER_OPENAI_TIMEOUT_S", 30.0, min=0.1, max=600.0)
    if env.str("EMBEDDER_BACKEND", "onnx-int8").strip().lower() != "openai":
        return None
    if not base_url or not model:
        raise ConfigError(
            "EMBEDDER_BACKEND=openai needs EMBEDDER_OPENAI_BASE_URL (e.g. "
            "https://api.openai.com/v1) and EMBEDDER_OPENAI_MODEL"
        )
    return EndpointSettings(
        base_url=http_url("EMBEDDER_OPENAI_BASE_URL", base_url),
        model=model,
        api_key=api_key,
        dimension=dimension,
        timeout_s=timeout_s,
    )
