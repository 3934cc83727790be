"""docs/configuration.md, generated from the code that reads each setting.

Every service's settings are read by a `from_env(env)` classmethod over svckit.config.Env.
This module runs each of them over a `RecordingEnv`, which notes every variable read (its
name, default, bounds or choices, and who read it) and answers as an empty environment
would, with placeholders where a value is required. The meanings are written by hand, once,
in `META` below; the rest of each table comes from the code.

    python -m scripts.config_docs           # rewrite docs/configuration.md
    python -m scripts.config_docs --check   # exit 1 when the file is out of date

tests/unit/test_config_docs.py fails when the committed file differs from what this
produces, so a new variable without a meaning here fails `make test`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svckit.config import Env

_Str = str
_Int = int
_Float = float
_Bool = bool

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
# Required values, so that the loaders run to the end; never shown in the document.
PLACEHOLDERS: dict[str, str] = {
    "COGRAPH_DATABASE_URL": "postgresql://placeholder/cograph",
    "COGRAPH_INTERNAL_SECRET": "placeholder-internal-secret-of-32-bytes-or-more",
}


@dataclass
class Read:
    """One variable as one reader reads it."""

    name: str
    kind: str  # str, optional_str, int, float, bool, choice, path
    default: Any = None  # None: required (str) or unset (optional_str)
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


@dataclass
class Recorder:
    """Every read, by reader (a service or a command) and variable name."""

    reads: dict[str, dict[str, Read]] = field(default_factory=dict)

    def note(self, reader: str, read: Read) -> None:
        self.reads.setdefault(reader, {}).setdefault(read.name, read)

    def env(self, reader: str) -> RecordingEnv:
        return RecordingEnv(self, reader)


class RecordingEnv(Env):
    """An Env over an empty environment (placeholders for required values) that records
    what is read."""

    def __init__(self, recorder: Recorder, reader: _Str) -> None:
        super().__init__(PLACEHOLDERS)
        self._recorder = recorder
        self._reader = reader

    def _note(self, read: Read) -> None:
        self._recorder.note(self._reader, read)

    def str(self, name: _Str, default: _Str | None = None) -> _Str:
        self._note(Read(name, "str", default))
        return super().str(name, default)

    def optional_str(self, name: _Str) -> _Str | None:
        self._note(Read(name, "optional_str"))
        return super().optional_str(name)

    def int(
        self, name: _Str, default: _Int, *, min: _Int | None = None, max: _Int | None = None
    ) -> _Int:
        self._note(Read(name, "int", default, min, max))
        return super().int(name, default, min=min, max=max)

    def float(
        self,
        name: _Str,
        default: _Float,
        *,
        min: _Float | None = None,
        max: _Float | None = None,
    ) -> _Float:
        self._note(Read(name, "float", default, min, max))
        return super().float(name, default, min=min, max=max)

    def bool(self, name: _Str, default: _Bool) -> _Bool:
        self._note(Read(name, "bool", default))
        return super().bool(name, default)

    def choice(self, name: _Str, default: _Str, choices: tuple[_Str, ...]) -> _Str:
        self._note(Read(name, "choice", default, choices=choices))
        # Env.choice reads through self.str; keep that read from being noted as a plain str.
        return Env.choice(Env(PLACEHOLDERS), name, default, choices)

    def path(self, name: _Str, default: Path) -> Path:
        self._note(Read(name, "path", default))
        return super().path(name, default)


def _record_services(recorder: Recorder) -> None:
    from commons.settings import CommonsSettings
    from embedder.settings import EmbedderSettings
    from gateway.settings import GatewaySettings
    from retrieval.settings import RetrievalSettings
    from router.settings import RouterSettings
    from svckit.db import DbTimeouts
    from svckit.logs import LogSettings

    EmbedderSettings.from_env(recorder.env("embedder"))
    RetrievalSettings.from_env(recorder.env("retrieval"))
    RouterSettings.from_env(recorder.env("router"))
    CommonsSettings.from_env(recorder.env("commons"))
    GatewaySettings.from_env(recorder.env("gateway"))
    DbTimeouts.from_env(recorder.env("database"))
    LogSettings.from_env(recorder.env("logging"))


def _record_commands(recorder: Recorder) -> None:
    from cograph_api.git_credentials import credentials_directory
    from cograph_cli.identity import DEFAULT_ADDRS, OperatorIdentity, service_address
    from cograph_cli.supervisor import RestartPolicy
    from svckit.config import data_dir, internal_secret, operator_internal_secret

    up = recorder.env("cograph up")
    data_dir(up)
    up.optional_str("COGRAPH_DATABASE_URL")
    internal_secret(up)
    RestartPolicy.from_env(up)

    cli = recorder.env("cograph CLI")
    data_dir(cli)
    OperatorIdentity.from_env(cli)
    for service in DEFAULT_ADDRS:
        service_address(service, cli)
    operator_internal_secret(cli)
    credentials_directory(cli)


# Read outside an Env (os.environ or a mapping of their own); declared here, and
# tests/unit/test_config_docs.py checks that every variable named in the code is documented.
MANUAL: dict[str, list[Read]] = {
    "tracing": [Read("OTEL_EXPORTER_OTLP_ENDPOINT", "optional_str")],
    "cograph CLI": [
        Read("COGRAPH_GATEWAY_URL", "str", "http://127.0.0.1:8080"),
        Read("COGRAPH_API_KEY", "optional_str"),
        Read("COGRAPH_ADMIN_KEY_FILE", "optional_str"),
        Read("COGRAPH_ADMIN_KEY", "optional_str"),
    ],
}


def record() -> Recorder:
    recorder = Recorder()
    _record_services(recorder)
    _record_commands(recorder)
    for reader, reads in MANUAL.items():
        for read in reads:
            recorder.note(reader, read)
    return recorder


@dataclass(frozen=True)
class Meta:
    """What a variable means, written by hand; `default` and `allowed` replace what the code
    says where that would read badly (a computed default, a placeholder, free text)."""

    meaning: str
    default: str | None = None
    allowed: str | None = None


HOST_PORT = "`host:port`"
READY = "Set by `cograph up`: once serving, the process writes the port it bound to this file."
METRICS_LISTEN = (
    "Where {who} serves its Prometheus metrics (GET `/metrics`, on a listener of its own; "
    'README "Metrics"). Port 0 picks a free one; `off` serves none. On Kubernetes, an '
    "address a scraper can reach (`0.0.0.0:9464`)."
)
METRICS_FILE = (
    "Set by `cograph up` (`$COGRAPH_DATA_DIR/run/<service>.metrics`): once listening, the "
    "process writes its metrics address (`host:port`) to this file."
)

META: dict[str, Meta] = {
    # ---- read by several processes ----
    "COGRAPH_DATABASE_URL": Meta(
        "PostgreSQL with the `vector` and `pg_trgm` extensions. Unset, `cograph up` runs an "
        "embedded server (data under `$COGRAPH_DATA_DIR/pg`) and hands its URL to the services; "
        "the router falls back to it when `ROUTER_DATABASE_URL` is unset. `cograph migrate` and "
        "`cograph keys bootstrap` read it too.",
        default="required; `cograph up`: embedded",
        allowed="a `postgresql://` URL",
    ),
    "COGRAPH_DATABASE_READ_URL": Meta(
        "Streaming replicas of `COGRAPH_DATABASE_URL` for read-only requests (retrieval: "
        "searches, read, files, outline, grep, references, graph; the commons: note search, "
        "listing, a note and its comments), several separated by spaces. A replica is used "
        "while it is at most `COGRAPH_REPLICA_MAX_LAG_S` behind and has replayed the caller's "
        "own last write (its index job's publication, a grant naming it, its note, vote or "
        "comment) and every change all readers must see (a repository made private or "
        "deleted, a note hidden or deleted); otherwise the primary answers. An unreachable "
        "replica is left out until it answers again.",
        default="unset: every request on the primary",
        allowed="`postgresql://` URLs separated by spaces",
    ),
    "COGRAPH_REPLICA_CHECK_S": Meta(
        "How often each read replica's state and the primary's WAL position are read, in seconds.",
        default="1",
        allowed="0.05-60",
    ),
    "COGRAPH_REPLICA_MAX_LAG_S": Meta(
        "A read replica that has not replayed what the primary had written this many seconds "
        "ago is left out until it catches up.",
        default="30",
        allowed="0-3600",
    ),
    "COGRAPH_DATA_DIR": Meta(
        "Where `cograph up` keeps the embedded database, the internal secret, the admin key "
        "and `run/` (service logs, port files, `up.log`); retrieval keeps its clones there and "
        "the embedder its exported model. Sources inside it are never indexed.",
        allowed="a directory",
    ),
    "COGRAPH_DISK_MIN_FREE_MB": Meta(
        "Free space kept on the filesystem of `COGRAPH_DATA_DIR` (the embedded database, the "
        "clones, the logs), in MB. Below it retrieval and the commons refuse writes (index "
        "requests, notes, votes, comments: 507 `disk_full`, naming the disk) and index jobs "
        "pause; reads go on, and writes resume by themselves once there is room. 0 turns "
        "the watch off."
    ),
    "COGRAPH_DISK_CHECK_S": Meta(
        "How long a free-space measurement is trusted, in seconds: space that returns is "
        "seen within this long."
    ),
    "COGRAPH_INTERNAL_SECRET_FILE": Meta(
        "A file holding the secret (at least 32 bytes) that signs every internal gRPC call. "
        "Every service refuses to start without it or `COGRAPH_INTERNAL_SECRET` (not both). "
        "`cograph up` creates `$COGRAPH_DATA_DIR/internal.secret` (0600) and passes its path "
        "on; the operator commands read that file when neither is set; Kubernetes mounts the "
        "`cograph-internal` Secret.",
        default="required (this or `COGRAPH_INTERNAL_SECRET`)",
        allowed="a file path",
    ),
    "COGRAPH_INTERNAL_SECRET": Meta(
        "The internal secret as a value, instead of `COGRAPH_INTERNAL_SECRET_FILE`; a file keeps "
        "it out of the process environment.",
        default="required (this or `COGRAPH_INTERNAL_SECRET_FILE`)",
        allowed="32 bytes or more",
    ),
    "COGRAPH_LOG_LEVEL": Meta(
        "Level of the JSON logs on stderr.",
        allowed="`DEBUG`, `INFO`, `WARNING`, `ERROR`",
    ),
    "EMBEDDER_ADDR": Meta(
        "Where the embedder is found. The gateway only checks its health for `/readyz` and "
        "skips that check when it is unset.",
        default="`127.0.0.1:50051`; gateway: unset",
        allowed=HOST_PORT,
    ),
    "EMBEDDER_TIMEOUT_S": Meta(
        "Deadline of a query's embedding, in seconds. Past it code search answers without its "
        "vector stream and note search fails with 503 `semantic_search_unavailable`."
    ),
    "EMBEDDING_SPACE_CHECK_S": Meta(
        "How often, in seconds, retrieval and the commons ask the embedder for its model and "
        "compare it with the one their stored vectors come from (also at first contact). On a "
        "mismatch vectors are off (`embedding_model_mismatch`) until `cograph reembed` ran."
    ),
    "EMBEDDING_TIMEOUT_QUERY": Meta(
        "Overrides `EMBEDDER_TIMEOUT_S` for query embeddings when set.",
        default="`EMBEDDER_TIMEOUT_S`",
    ),
    "EMBEDDER_BREAKER_FAILURES": Meta(
        "Consecutive query embeddings that found the embedder unavailable before the circuit "
        "opens: searches then skip the vector stream (retrieval) or answer 503 (commons) at "
        "once instead of waiting `EMBEDDER_TIMEOUT_S`."
    ),
    "EMBEDDER_BREAKER_COOLDOWN_S": Meta(
        "How long the open circuit fails query embeddings at once before one goes through as "
        "a probe, in seconds; the probe's success closes it, its failure opens it again."
    ),
    "RETRIEVAL_ADDR": Meta(
        "Where retrieval is found. The gateway fronts only the backends whose address is set "
        "(`cograph up` sets them): an unset one's routes answer 503 and `/readyz` does not wait "
        "for it. `cograph index`, `collection` and `search` call it directly. The commons "
        "calls it to resolve and re-check notes' anchors.",
        default="gateway: unset; commons and CLI: `127.0.0.1:50052`",
        allowed=HOST_PORT,
    ),
    "ROUTER_ADDR": Meta(
        "Where the router is found, as `RETRIEVAL_ADDR`; `cograph route` calls it directly.",
        default="gateway: unset; CLI: `127.0.0.1:50053`",
        allowed=HOST_PORT,
    ),
    "COMMONS_ADDR": Meta(
        "Where the commons is found, as `RETRIEVAL_ADDR`; `cograph notes` calls it directly. "
        "Retrieval asks it for the notes anchored to the code it returns (search results, "
        "read, references); with it unset, retrieval shows no notes beside code.",
        default="gateway and retrieval: unset; CLI: `127.0.0.1:50054`",
        allowed=HOST_PORT,
    ),
    # ---- embedder ----
    "EMBEDDER_LISTEN": Meta("Where the embedder's gRPC server listens.", allowed=HOST_PORT),
    "EMBEDDER_READY_FILE": Meta(READY, allowed="a file path"),
    "EMBEDDER_METRICS_LISTEN": Meta(
        METRICS_LISTEN.format(who="the embedder"), allowed=f"{HOST_PORT} or `off`"
    ),
    "EMBEDDER_METRICS_FILE": Meta(METRICS_FILE, allowed="a file path"),
    "EMBEDDER_BACKEND": Meta(
        "`onnx-int8`: an int8 export of the packaged model, made locally on first start (every "
        "vector within cosine 0.98 of PyTorch's); `torch`: the model under PyTorch; `openai`: "
        "an OpenAI-compatible embeddings endpoint (OpenAI, Voyage, Ollama, vLLM, "
        "text-embeddings-inference), `EMBEDDER_OPENAI_*`."
    ),
    "EMBEDDER_OPENAI_BASE_URL": Meta(
        "With `EMBEDDER_BACKEND=openai` (required): the API root; requests go to "
        "`{base}/embeddings`, e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`.",
        allowed="a URL",
    ),
    "EMBEDDER_OPENAI_MODEL": Meta(
        "With `EMBEDDER_BACKEND=openai` (required): the model named in each request."
    ),
    "EMBEDDER_OPENAI_API_KEY": Meta(
        "With `EMBEDDER_BACKEND=openai`: sent as a bearer token when set; never logged."
    ),
    "EMBEDDER_OPENAI_DIMENSION": Meta(
        "With `EMBEDDER_BACKEND=openai`: the model's vector dimension; 0 takes the length of "
        "the first vector the endpoint returns. Every vector must have it."
    ),
    "EMBEDDER_OPENAI_TIMEOUT_S": Meta(
        "With `EMBEDDER_BACKEND=openai`: deadline of one embeddings request, in seconds."
    ),
    "EMBEDDER_MODEL_PATH": Meta(
        "A sentence-transformers model directory to load instead of the packaged all-MiniLM-L6-v2; "
        "checked at start (it must hold config.json, tokenizer.json and model.safetensors or "
        "pytorch_model.bin): models are never downloaded.",
        allowed="a directory",
    ),
    "EMBEDDER_CACHE_DIR": Meta(
        "Where the ONNX export is kept; the container image ships one in `/opt/cograph/models`.",
        default="`$COGRAPH_DATA_DIR/models`",
        allowed="a directory",
    ),
    "EMBEDDER_MAX_BATCH_TEXTS": Meta("Texts one Embed request may carry."),
    "EMBEDDER_MAX_TEXT_CHARS": Meta("Characters of one text in an Embed request."),
    "EMBEDDER_BATCH_SIZE": Meta("Texts per model call, after concurrent requests are coalesced."),
    "EMBEDDER_MAX_WAIT_MS": Meta(
        "How long an idle batcher waits for companions before it runs a batch, in milliseconds."
    ),
    "EMBEDDER_BULK_BATCH_TEXTS": Meta(
        "Texts per model call in the bulk lane (indexing): bulk requests run in slices of at "
        "most this many, beside queries, so a query never waits for bulk work."
    ),
    "EMBEDDER_BULK_QUEUE_TEXTS": Meta(
        "Bulk (indexing) texts the embedder holds queued at most; a bulk request that would "
        "pass it gets RESOURCE_EXHAUSTED and the indexer retries after a pause. An empty "
        "lane takes any request."
    ),
    "EMBEDDER_BULK_THREADS": Meta(
        "Inference threads of the bulk lane's own model instance (onnx-int8; torch and openai "
        "share the query lane's); 0 lets the runtime use every core. Keep it below "
        "`EMBEDDER_THREADS` so indexing leaves cores to queries. The second instance costs "
        "about 70 MiB; equal to `EMBEDDER_THREADS`, both lanes share one instance."
    ),
    "EMBEDDER_RERANKER_PATH": Meta(
        "A local cross-encoder model directory, for `RETRIEVAL_RERANK_PROVIDER="
        "local_cross_encoder`. Unset or unloadable: Rerank is unavailable, embeddings are not "
        "affected.",
        allowed="a directory",
    ),
    "EMBEDDER_THREADS": Meta(
        "Inference threads; 0 lets the runtime use every core it sees. On Kubernetes keep it "
        "equal to the container's CPU limit."
    ),
    # ---- retrieval: service ----
    "RETRIEVAL_LISTEN": Meta("Where retrieval's gRPC server listens.", allowed=HOST_PORT),
    "RETRIEVAL_READY_FILE": Meta(READY, allowed="a file path"),
    "RETRIEVAL_METRICS_LISTEN": Meta(
        METRICS_LISTEN.format(who="retrieval"), allowed=f"{HOST_PORT} or `off`"
    ),
    "RETRIEVAL_METRICS_FILE": Meta(METRICS_FILE, allowed="a file path"),
    "RETRIEVAL_DB_POOL_SIZE": Meta(
        "Retrieval's database connections; a search holds one per stream and store at once."
    ),
    "RETRIEVAL_HEAD_CHECK_TIMEOUT_S": Meta(
        "Freshness: how long `git ls-remote` may take to report a branch's current head, in "
        "seconds; past it `freshness` is `unknown`."
    ),
    "RETRIEVAL_HEAD_CACHE_S": Meta("Freshness: how long a looked-up head is trusted, in seconds."),
    "RETRIEVAL_NOTES_TIMEOUT_S": Meta(
        "Notes beside code: how long a search, read or references answer waits for the "
        "commons' notes before it goes without them (`notes_reason: commons_unavailable`), in "
        "seconds. After 3 failed calls in a row the commons is not asked for 5 s."
    ),
    "RETRIEVAL_SYNC_INTERVAL_S": Meta(
        "Sync: how often each indexed repository and each collection indexed from a server "
        "directory is compared with its source (a git branch's head; a plain directory's "
        "listing of paths, sizes and mtimes), in seconds; when it moved, an incremental "
        "re-index is queued. Each wait is cut by up to 20 % at random. `0` turns sync off; "
        "otherwise at least 0.1."
    ),
    "RETRIEVAL_SYNC_CONCURRENCY": Meta(
        "Sync: checks (head lookups, directory listings) in flight at once on each replica. "
        "Replicas never check the same source at once (a claim in PostgreSQL)."
    ),
    "RETRIEVAL_SYNC_BACKOFF_MAX_S": Meta(
        "Sync: the longest wait between checks of a source that keeps failing (unreadable, "
        "or its re-index failed), in seconds; each failure in a row doubles the wait from "
        "the interval up to this (never below the interval)."
    ),
    # ---- retrieval: indexing ----
    "RETRIEVAL_MAX_FILE_BYTES": Meta("Larger files are skipped and counted as `too_large`."),
    "RETRIEVAL_EMBED_BATCH": Meta("Texts per Embed call while indexing."),
    "RETRIEVAL_EMBED_CONCURRENCY": Meta(
        "Embed calls in flight while indexing, so that the embedder never waits."
    ),
    "RETRIEVAL_INDEX_EMBED_TIMEOUT_S": Meta(
        "Deadline of one Embed batch while indexing, in seconds."
    ),
    "RETRIEVAL_EMBED_MAX_CHARS": Meta(
        "Characters of a text sent for embedding while indexing (the model reads about 256 "
        "tokens; more only costs transfer)."
    ),
    "RETRIEVAL_PARSE_WORKERS": Meta("Threads parsing, blaming and hashing files."),
    "RETRIEVAL_WRITE_GROUP": Meta("Files written per transaction."),
    "RETRIEVAL_MAX_CONCURRENT_JOBS": Meta(
        "Index jobs running at once; jobs on the same repository or collection never overlap."
    ),
    "RETRIEVAL_JOB_LEASE_S": Meta(
        "How long a claimed index job stays its worker's without a heartbeat, in seconds; a "
        "job whose lease ran out (its worker died) is taken up again by any replica."
    ),
    "RETRIEVAL_JOB_HEARTBEAT_S": Meta(
        "How often a running job renews its lease and saves its progress, in seconds (at "
        "most half the lease)."
    ),
    "RETRIEVAL_JOB_MAX_ATTEMPTS": Meta(
        "Times a job is started before it fails because its worker stopped each time."
    ),
    "RETRIEVAL_JOB_POLL_S": Meta(
        "How often idle workers look for queued jobs, in seconds (jobs submitted to the same "
        "process start at once)."
    ),
    "RETRIEVAL_EMBEDDER_WAIT_S": Meta(
        "How long indexing waits for an embedder that is loading or down (the job's phase "
        "says so) before the job fails, in seconds."
    ),
    "RETRIEVAL_DISK_WAIT_S": Meta(
        "How long an index job stays paused on a nearly full disk (`COGRAPH_DISK_MIN_FREE_MB`; "
        "its phase says so) before it fails, in seconds."
    ),
    "RETRIEVAL_LOCAL_SOURCES": Meta(
        "Who may index a path on the server or a `file://` URL: `admin` keys, or `any` key "
        "(only on a single-user laptop: any key could then index and read back any directory "
        "the service can read)."
    ),
    "RETRIEVAL_LOCAL_ROOTS": Meta(
        "Directories that local sources and collection directories must lie under; unset: "
        "anywhere. The data directory, anything in it and anything above it are refused "
        "whatever this says.",
        allowed="absolute directories, `:`-separated",
    ),
    "RETRIEVAL_CREATE_SOURCES": Meta(
        "Who may create a repository or collection: `admin`, or `any` key (it gets a write "
        "grant on what it creates; refusals then reveal which names are taken)."
    ),
    "RETRIEVAL_SOURCE_HOSTS": Meta(
        "Hosts that remote sources (https, ssh, git URLs) may name, whoever names them: "
        "`git.example.com`, `*.example.com` (names below example.com, not example.com "
        "itself), an IPv4 address or `[ipv6]`, each with an optional `:port`. Unset: any "
        "host that `RETRIEVAL_PRIVATE_SOURCES` allows. Keys that may not use private "
        "sources can name ssh and git:// hosts only when this lists them.",
        allowed="host patterns, separated by commas or spaces",
    ),
    "RETRIEVAL_PRIVATE_SOURCES": Meta(
        "Who may name a remote source whose host is, or resolves to, an address that is not "
        "public (loopback, private, link-local such as 169.254.169.254, CGNAT, multicast, "
        "reserved): `admin` keys, `any` key (then only `RETRIEVAL_SOURCE_HOSTS` limits "
        "sources), or `none`. Checked on the request and again when the job starts; other "
        "callers' https fetches are pinned to the addresses checked. Freshness lookups "
        "follow the rule for a key that is not an admin."
    ),
    "RETRIEVAL_CREDENTIALS_DIR": Meta(
        "The directory of git credentials for private repositories (`credentials.json` and "
        "the token and ssh key files it names; docs/credentials.md). Retrieval reads it at "
        "each clone, fetch and freshness lookup, so changes need no restart; "
        "`cograph credentials add|list|remove` edits it. On Kubernetes, the optional "
        "`cograph-git-credentials` Secret mounted there.",
        default="`$COGRAPH_DATA_DIR/credentials`",
        allowed="a directory",
    ),
    "RETRIEVAL_GIT_TIMEOUT_S": Meta(
        "Deadline of a clone or fetch, in seconds (other git commands have short fixed ones); "
        "past it the job fails."
    ),
    "RETRIEVAL_CODE_EMBED_TEXT": Meta(
        "What a code node's vector is computed from: its name, signature and body; the name "
        "split into words instead; name, signature and docstring; or the body alone. Applies "
        "to files indexed after a change."
    ),
    "SUMMARIZER_PROVIDER": Meta(
        "How the `ast_summary` layer is written: `extractive` (offline: kind, name, first "
        "docstring sentence, signature, what a node contains and calls) or `openai` (any "
        "OpenAI-compatible chat-completions endpoint; a failed request keeps the extractive "
        "summary)."
    ),
    "SUMMARIZER_BASE_URL": Meta(
        "The chat-completions endpoint's base URL (OpenAI, vLLM, Ollama, llama.cpp server).",
        default="`https://api.openai.com/v1` with `openai`",
        allowed="a URL",
    ),
    "SUMMARIZER_MODEL": Meta("The model asked for summaries."),
    "SUMMARIZER_API_KEY": Meta("The endpoint's API key, when it needs one."),
    "SUMMARIZER_TIMEOUT_S": Meta("Deadline of one summary request, in seconds."),
    "SUMMARIZER_CONCURRENCY": Meta("Summary requests in flight."),
    # ---- retrieval: search ----
    "RETRIEVAL_RRF_K": Meta(
        "k of Reciprocal Rank Fusion, each stream adding 1/(k + rank); 10 rather than the "
        "customary 60 (measured, docs/adr/0003-rrf-k-and-exact-symbol-pinning.md)."
    ),
    "RETRIEVAL_CANDIDATE_CAP": Meta(
        "Candidates each stream keeps before fusion; the vector stream raises `hnsw.ef_search` "
        "to it (pgvector allows at most 1000)."
    ),
    "RETRIEVAL_STREAMS_CONCURRENT": Meta(
        "`false` runs the streams one after another (for benchmarks)."
    ),
    "RETRIEVAL_TOP_K": Meta("Results a search returns when the request does not say."),
    "RETRIEVAL_SNIPPET_CHARS": Meta(
        "Most characters of a snippet when the request does not say (snippets are cut at "
        "line boundaries where possible)."
    ),
    "RETRIEVAL_LAYER_WEIGHTS": Meta(
        "Multipliers on fused scores by layer before the stores merge, e.g. "
        "`ast_summary=0.8,repo_doc=1.2`; unset layers weigh 1.",
        allowed="`layer=weight,…` over `code`, `ast_summary`, `repo_doc`; weights 0.01 to 100",
    ),
    "RETRIEVAL_STREAM_WEIGHTS": Meta(
        "Weighted RRF per query class: each stream adds weight / (k + rank). The class is "
        "read from the query's text (`identifier`: one name; `signature`: a declaration; "
        "`prose`: words only; `mixed`: words naming code), e.g. "
        "`prose:vector=1.5,lexical=0.5;mixed:lexical=0.8`; streams not named weigh 1. "
        "Together with the layer and test-code weights and `RETRIEVAL_RRF_K`, the "
        "weights must keep every fused score below the 1000 an exact symbol match is pinned "
        "by (the service refuses to start otherwise, naming the score they allow).",
        allowed="`class:stream=weight,…;…` over `identifier`, `signature`, `prose`, `mixed` "
        "and `vector`, `lexical`, `symbol`; weights 0 to 5",
    ),
    "RETRIEVAL_DOC_STREAM_WEIGHTS": Meta(
        "The stream weights document rows (repository documents, collection chunks) fuse "
        "with, per query class, in the format of `RETRIEVAL_STREAM_WEIGHTS`; a class not "
        "named here weighs documents as code. The default weighs documents' lexical stream "
        "twice the code's on prose and mixed questions (bench/notes/quality-unseen.md, "
        '"Small classes stay", "Documents weigh their words"). A single stream asked for alone '
        "keeps its own order.",
        allowed="`class:stream=weight,…;…` over `identifier`, `signature`, `prose`, `mixed` "
        "and `vector`, `lexical`, `symbol`; weights 0 to 5",
    ),
    "RETRIEVAL_CONTAINMENT_MEMBER_RATIO": Meta(
        "The containment stage keeps one row of a container (module, class) and its member "
        "(and one of a node's `code` and `ast_summary` rows): for identifier and signature "
        "questions the better ranked, for prose and mixed ones the member when its fused "
        "score is at least this times the container's (0: always; a module always gives way; "
        "a function or method ranked above a function nested in it stays). The one that "
        "stays ranks where the best of them ranked; a node the query names outright always "
        "stays."
    ),
    "RETRIEVAL_CONTAINMENT_CLASS_LINES": Meta(
        "Containment, prose and mixed questions: a class (struct, "
        "interface, trait, enum) of at most this many lines, ranked above its best member, "
        "stays instead of giving way under the member ratio when its own vector score is at "
        "least the member's or the member is its constructor (`__init__`, `constructor`, or "
        "named like the class), and a class that size whose name the question opens with, "
        "written as code (`MockPool provides ...`), counts as named; larger classes give way "
        'as before (0: never stays; bench/notes/quality-unseen.md, "Small classes stay", '
        '"Opening names").'
    ),
    "RETRIEVAL_TEST_CODE_WEIGHT": Meta(
        "Multiplier on the fused score of test code, so tests do not crowd the code they "
        "test: nodes the indexer classed by their path (`tests/`, `test_*.py`, `*_test.go`, "
        "`*.test.js`, `*Test.java`, …; `libs/cograph_text/paths.py`)."
    ),
    "RETRIEVAL_RERANK_ENABLED": Meta(
        "Turns reranking on. It then runs only for a non-blank query with at least "
        "`RETRIEVAL_RERANK_THRESHOLD` candidates and no exact symbol match among them."
    ),
    "RETRIEVAL_RERANK_PROVIDER": Meta(
        "Who reranks: the embedder's local cross-encoder (`EMBEDDER_RERANKER_PATH`), Cohere, "
        "Voyage or Jina."
    ),
    "RETRIEVAL_RERANK_THRESHOLD": Meta("Fewer fused candidates than this: no reranking."),
    "RETRIEVAL_RERANK_TOP_N": Meta("How many of the best fused candidates the reranker sees."),
    "RETRIEVAL_RERANK_TIMEOUT_S": Meta("Deadline of a rerank call, in seconds."),
    "RETRIEVAL_RERANK_URL": Meta(
        "The provider's API root.",
        default="the provider's",
        allowed="a URL",
    ),
    "RETRIEVAL_RERANK_API_KEY": Meta("The provider's API key."),
    "RETRIEVAL_RERANK_MODEL": Meta(
        "The provider's model.",
        default="Cohere `rerank-v3.5`, Voyage `rerank-2.5`, Jina "
        "`jina-reranker-v2-base-multilingual`, else `cross-encoder`",
    ),
    "RETRIEVAL_RERANK_DOC_CHARS": Meta(
        "Each candidate's text is cut to this many characters before it is sent."
    ),
    # ---- router ----
    "ROUTER_LISTEN": Meta("Where the router's gRPC server listens.", allowed=HOST_PORT),
    "ROUTER_READY_FILE": Meta(READY, allowed="a file path"),
    "ROUTER_METRICS_LISTEN": Meta(
        METRICS_LISTEN.format(who="the router"), allowed=f"{HOST_PORT} or `off`"
    ),
    "ROUTER_METRICS_FILE": Meta(METRICS_FILE, allowed="a file path"),
    "ROUTER_DATABASE_URL": Meta(
        "The router's own database URL, for a role with SELECT only (deploy/README.md); its "
        "pool opens every transaction read-only either way.",
        default="`COGRAPH_DATABASE_URL`",
        allowed="a `postgresql://` URL",
    ),
    "ROUTER_DB_POOL_MAX": Meta("The router's database connections."),
    "ROUTER_STATEMENT_TIMEOUT_MS": Meta(
        "`statement_timeout` of route queries, in milliseconds; replaces "
        "`COGRAPH_DB_STATEMENT_TIMEOUT_S` for the router."
    ),
    "ROUTER_DEFAULT_REPOSITORIES": Meta(
        "Repositories a route returns when the request does not say."
    ),
    "ROUTER_DEFAULT_COLLECTIONS": Meta(
        "Collections a route returns when the request does not say."
    ),
    "ROUTER_MAX_QUERY_TERMS": Meta("Query terms past this are ignored (each is an index lookup)."),
    "ROUTER_WEAK_THRESHOLD": Meta(
        "A collection scoring below this, or matching nothing, ends its rationale with "
        "`(weak/fallback)`."
    ),
    "ROUTER_CACHE_TERMS": Meta(
        "Per pool, how many terms' matches the router keeps (about 2 bytes per repository or "
        "collection each); every route checks, in one small query, that nothing changed since. "
        "0 turns the cache off: every route derives N and df in SQL."
    ),
    "ROUTER_CACHE_VIEWERS": Meta(
        "Per pool, how many principals' readable sources the router keeps (1 byte per source each)."
    ),
    # ---- commons ----
    "COMMONS_LISTEN": Meta("Where the commons' gRPC server listens.", allowed=HOST_PORT),
    "COMMONS_READY_FILE": Meta(READY, allowed="a file path"),
    "COMMONS_METRICS_LISTEN": Meta(
        METRICS_LISTEN.format(who="the commons"), allowed=f"{HOST_PORT} or `off`"
    ),
    "COMMONS_METRICS_FILE": Meta(METRICS_FILE, allowed="a file path"),
    "COMMONS_DB_POOL_MAX": Meta("The commons' database connections."),
    "COMMONS_EMBED_WRITE_TIMEOUT_S": Meta(
        "Deadline of a note's embedding (the detached task after a post, and the backfill), "
        "in seconds."
    ),
    "COMMONS_BACKFILL_INTERVAL_S": Meta(
        "How often the backfill worker looks for notes left without a vector, in seconds."
    ),
    "COMMONS_BACKFILL_BATCH": Meta("Notes the backfill embeds per round."),
    "COMMONS_RETRIEVAL_TIMEOUT_S": Meta(
        "The deadline of each call the commons makes to retrieval for notes' anchors "
        "(resolving them when a note is posted, anchored or confirmed, which readers may see "
        "them, and their staleness checks), in seconds."
    ),
    "COMMONS_ANCHOR_CHECK_INTERVAL_S": Meta(
        "How often the commons checks anchors against repositories that published a newer "
        "index, in seconds; also the most one check runs (the next resumes what is left). "
        "An admin runs one at once with `cograph notes anchors --check`."
    ),
    "COMMONS_ANCHOR_CHECK_BATCH": Meta(
        "Anchors a staleness check sends retrieval per call (at most `ANCHORS_RECHECK_MAX`, 500)."
    ),
    "SEARCH_LIMIT": Meta("Notes a search returns."),
    "SEARCH_BODY_SNIPPET": Meta(
        "Characters of a note's body in search results (`body_truncated` says when it is cut)."
    ),
    "SEARCH_W_SEMANTIC": Meta(
        "Weight of cosine similarity in a note's rank: "
        "`SEARCH_W_SEMANTIC * cosine + SEARCH_W_VOTES * ln(1 + max(score, 0)) "
        "- SEARCH_W_CHANGED_ANCHORS * changed`."
    ),
    "SEARCH_W_VOTES": Meta(
        "Weight of a note's vote score in its rank (the expression under `SEARCH_W_SEMANTIC`)."
    ),
    "SEARCH_W_CHANGED_ANCHORS": Meta(
        "Subtracted from the rank of a note whose anchors are all body_changed, "
        "signature_changed or orphaned (not moved): about one up-vote, so it ranks below "
        "equally close fresh notes (bench.commons_changed)."
    ),
    "COMMONS_TWO_STAGE_THRESHOLD": Meta(
        "From this many embedded notes on, search takes its candidates from the HNSW index "
        "(two stages) instead of scoring every note."
    ),
    "COMMONS_TWO_STAGE_K": Meta(
        "Candidates the first stage takes by cosine, re-ranked with the full expression."
    ),
    "COMMONS_NOTE_COUNT_TTL_S": Meta(
        "How long the count of embedded notes, which picks the strategy, is trusted, in seconds."
    ),
    "COMMONS_FILTER_FIRST_MAX": Meta(
        "In the two-stage regime, a quoted phrase matching at most this many notes (counted "
        "through a trigram index) is answered by scoring just those notes."
    ),
    # ---- gateway ----
    "GATEWAY_LISTEN": Meta("Where REST, MCP and the console listen.", allowed=HOST_PORT),
    "GATEWAY_READY_FILE": Meta(READY, allowed="a file path"),
    "GATEWAY_BACKEND_TIMEOUT_S": Meta(
        "Deadline of every call to retrieval, router and commons, in seconds."
    ),
    "GATEWAY_HEALTH_TIMEOUT_S": Meta("Deadline of each `/readyz` check, in seconds."),
    "GATEWAY_KEY_LOOKUP_TIMEOUT_S": Meta(
        "Deadline of an API key's lookup, in seconds; past it the request gets 503."
    ),
    "GATEWAY_ALLOW_ANONYMOUS": Meta(
        "`true`: a request without a key acts as no principal and sees public sources only; "
        "`false`: every request needs an API key."
    ),
    "GATEWAY_MAX_BODY_BYTES": Meta(
        "Larger request bodies, declared or chunked, get 413 `payload_too_large` before they "
        "are parsed."
    ),
    "GATEWAY_KEY_LAST_USED_RESOLUTION_S": Meta(
        "How stale a key's `last_used_at` may get before it is written again, in seconds."
    ),
    "GATEWAY_MCP_ENABLED": Meta("Serves MCP over streamable HTTP at `/mcp`."),
    "GATEWAY_KEEPALIVE_S": Meta(
        "How long an idle client connection stays open, in seconds. Keep it above the "
        "longest a proxy in front keeps an idle connection to the gateway (ingress-nginx's "
        "`upstream-keepalive-timeout`, 60 s), so that the proxy closes first; below it, the "
        "proxy now and then reuses a connection the gateway is closing and answers 502."
    ),
    "GATEWAY_METRICS_LISTEN": Meta(
        METRICS_LISTEN.format(who="the gateway")
        + " Never the API's port, so an Ingress that publishes the API does not publish them.",
        allowed=f"{HOST_PORT} or `off`",
    ),
    "GATEWAY_METRICS_FILE": Meta(METRICS_FILE, allowed="a file path"),
    "GATEWAY_QUOTAS": Meta(
        "Per-key rate and concurrency limits on REST and MCP alike (`GATEWAY_QUOTA_*`); "
        "`false` admits every request."
    ),
    "GATEWAY_QUOTA_ADMINS": Meta(
        "`true`: admin keys are limited like any other key (each its own allowance); "
        "`false`: admin keys are never limited."
    ),
    "GATEWAY_QUOTA_MAX_BUCKETS": Meta(
        "How many (key, class) allowances the gateway remembers; past it the least recently "
        "used idle ones are forgotten (a forgotten key starts again with a full allowance)."
    ),
    "GATEWAY_QUOTA_HOLD_S": Meta(
        "A refusal (429) to a key that came back before the `Retry-After` it was given is "
        "answered after this many seconds instead of at once, so a client looping on 429s "
        "sends one request per connection per hold; a client that honours `Retry-After` is "
        "never held. `0` answers every refusal at once."
    ),
    "GATEWAY_QUOTA_MAX_HELD_PER_KEY": Meta(
        "At most this many refusals held at once for one key (`GATEWAY_QUOTA_HOLD_S`); past "
        "it that key's refusals are answered at once."
    ),
    "GATEWAY_QUOTA_MAX_HELD": Meta(
        "At most this many refusals held at once in all, per gateway process; past it "
        "refusals are answered at once (bounds the sockets and tasks holding costs)."
    ),
    **{
        f"GATEWAY_QUOTA_{work}_{what}": Meta(meaning.format(work=classes))
        for work, classes in (
            ("SEARCH", "searches, routes, graph and references calls and commons searches"),
            (
                "READ",
                "file reads, file lists, repository, collection, job and note lookups "
                "and access changes",
            ),
            ("GREP", "greps"),
            ("INDEX", "index, re-index and delete calls for repositories and collections"),
            ("NOTES", "notes posted, comments, votes and note deletions"),
        )
        for what, meaning in (
            (
                "RATE",
                "Sustained {work} a key may start, per second; past it 429 `rate_limited` "
                "with `Retry-After`.",
            ),
            (
                "BURST",
                "How many {work} a key may start at once after a pause (the token bucket's size).",
            ),
            (
                "CONCURRENT",
                "How many {work} a key may have in flight at once; one more gets "
                "429 `rate_limited` with `Retry-After: 1`.",
            ),
        )
    },
    "GATEWAY_QUOTA_HOOKS_RATE": Meta(
        "Sustained push webhook deliveries per second, per vendor (GitHub's and GitLab's "
        "each have one allowance: deliveries carry no key), counted before the signature is "
        "checked; past it 429 `rate_limited` with `Retry-After`."
    ),
    "GATEWAY_QUOTA_HOOKS_BURST": Meta(
        "How many push webhook deliveries a vendor may make at once after a pause."
    ),
    "GATEWAY_QUOTA_HOOKS_CONCURRENT": Meta(
        "How many push webhook deliveries of one vendor are read and checked at once (each "
        "body is read, up to `GATEWAY_MAX_BODY_BYTES`, before its signature can be checked); "
        "one more gets 429 `rate_limited`."
    ),
    "GATEWAY_GITHUB_WEBHOOK_SECRET_FILE": Meta(
        "A file holding the secret of the GitHub push webhook at `POST /api/hooks/github` "
        "(at least 32 bytes; the webhook's Secret on GitHub). Each delivery must carry "
        "`X-Hub-Signature-256`, the HMAC-SHA256 of its body under it. Unset, with "
        "`GATEWAY_GITHUB_WEBHOOK_SECRET` unset too, the route answers 404.",
        default="unset: the GitHub webhook is off",
        allowed="a file path",
    ),
    "GATEWAY_GITHUB_WEBHOOK_SECRET": Meta(
        "The GitHub webhook's secret as a value, instead of "
        "`GATEWAY_GITHUB_WEBHOOK_SECRET_FILE` (not both); a file keeps it out of the process "
        "environment.",
        default="unset: the GitHub webhook is off",
        allowed="32 bytes or more",
    ),
    "GATEWAY_GITLAB_WEBHOOK_SECRET_FILE": Meta(
        "A file holding the secret token of the GitLab push webhook at "
        "`POST /api/hooks/gitlab` (at least 32 bytes; the webhook's Secret token on GitLab, "
        "which GitLab sends as `X-Gitlab-Token` with every delivery: serve the gateway over "
        "HTTPS). Unset, with `GATEWAY_GITLAB_WEBHOOK_SECRET` unset too, the route answers 404.",
        default="unset: the GitLab webhook is off",
        allowed="a file path",
    ),
    "GATEWAY_GITLAB_WEBHOOK_SECRET": Meta(
        "The GitLab webhook's secret token as a value, instead of "
        "`GATEWAY_GITLAB_WEBHOOK_SECRET_FILE` (not both).",
        default="unset: the GitLab webhook is off",
        allowed="32 bytes or more",
    ),
    # ---- database (svckit.db) ----
    "COGRAPH_DB_CONNECT_TIMEOUT_S": Meta(
        "Opening a database connection (TLS and start-up included), in seconds."
    ),
    "COGRAPH_DB_ACQUIRE_TIMEOUT_S": Meta("Waiting for a pooled connection, in seconds."),
    "COGRAPH_DB_STATEMENT_TIMEOUT_S": Meta(
        "PostgreSQL's `statement_timeout` for every request-path statement, in seconds; the "
        "client stops waiting 1 s later. A timeout or lost connection is gRPC UNAVAILABLE "
        "`database_unavailable`, 503 at the gateway."
    ),
    "COGRAPH_DB_INDEX_STATEMENT_TIMEOUT_S": Meta(
        "`statement_timeout` of the indexer's own pool, in seconds: its batch writes and "
        "linking are long by nature."
    ),
    # ---- logs (svckit.logs) ----
    "COGRAPH_LOG_MAX_BYTES": Meta(
        "Size at which a log file `cograph up` writes (`run/<service>.log`, `run/up.log`) is "
        "rotated to `.1`, `.2`, ...; a file stays below it, in bytes."
    ),
    "COGRAPH_LOG_BACKUPS": Meta(
        "Rotated log files kept per log; older ones are deleted. A service's logs take at "
        "most `COGRAPH_LOG_MAX_BYTES` x (this + 1)."
    ),
    "COGRAPH_LOG_REPEAT_WINDOW_S": Meta(
        "A warning or error with the same message from the same logger is written at most "
        "once per this many seconds; the next one written carries `suppressed`, the count "
        "left out. 0 writes every one."
    ),
    # ---- tracing (svckit.telemetry) ----
    "OTEL_EXPORTER_OTLP_ENDPOINT": Meta(
        "Exports traces over OTLP (gRPC) to this endpoint; no export when unset.",
        allowed="a URL",
    ),
    # ---- cograph up ----
    "COGRAPH_UP_RESTART_BACKOFF_S": Meta(
        "Delay before the first restart of a crashed service (or the embedded PostgreSQL), "
        "doubling with each further crash, in seconds."
    ),
    "COGRAPH_UP_RESTART_BACKOFF_MAX_S": Meta("Cap of the doubling restart delay, in seconds."),
    "COGRAPH_UP_STABLE_AFTER_S": Meta(
        "A process up this long starts from the first delay again at its next crash."
    ),
    "COGRAPH_UP_GIVE_UP_CRASHES": Meta(
        "Give up on a process after this many crashes within `COGRAPH_UP_GIVE_UP_WINDOW_S`; "
        "the others keep running."
    ),
    "COGRAPH_UP_GIVE_UP_WINDOW_S": Meta(
        "The window, in seconds, within which `COGRAPH_UP_GIVE_UP_CRASHES` crashes make "
        "`cograph up` give up on a process."
    ),
    # ---- the cograph command ----
    "COGRAPH_PRINCIPAL": Meta(
        "The principal the operator commands that call the services directly (`index`, "
        "`collection`, `search`, `route`, `notes`) act for, always as an admin; the default is "
        "the principal of the admin key `cograph up` creates. `cograph notes --as` overrides it.",
        allowed="a principal name",
    ),
    "COGRAPH_GATEWAY_URL": Meta(
        "The gateway that `cograph keys`, `cograph access` and `cograph mcp` call.",
        allowed="a URL",
    ),
    "COGRAPH_API_KEY": Meta(
        "The API key that `cograph keys`, `access` and `mcp` send.",
        default="`$COGRAPH_DATA_DIR/admin.key`",
    ),
    "COGRAPH_ADMIN_KEY_FILE": Meta(
        "`cograph keys bootstrap`: a file holding the first admin key to store (the "
        "`cograph-admin` Secret on Kubernetes).",
        allowed="a file path",
    ),
    "COGRAPH_ADMIN_KEY": Meta(
        "`cograph keys bootstrap`: the first admin key as a value, when "
        "`COGRAPH_ADMIN_KEY_FILE` is unset.",
        allowed="`cg_` and 32 or more of `[A-Za-z0-9_-]`",
    ),
}


@dataclass(frozen=True)
class Section:
    reader: str
    title: str
    intro: str


SECTIONS: tuple[Section, ...] = (
    Section(
        "embedder",
        "Embedder",
        "`services/embedder/settings.py`: the model, its batching and its limits.",
    ),
    Section(
        "retrieval",
        "Retrieval",
        "`services/retrieval/settings.py`, with the indexing, summariser, search and rerank "
        "settings it reads.",
    ),
    Section("router", "Router", "`services/router/settings.py`."),
    Section("commons", "Commons", "`services/commons/settings.py`: notes and their search."),
    Section("gateway", "Gateway", "`services/gateway/settings.py`: REST, MCP, API keys."),
    Section(
        "database",
        "Database deadlines",
        "`libs/svckit/db.py` (`DbTimeouts`): every pool of retrieval, the router, the commons "
        "and the gateway, and the connections `cograph up` and `cograph migrate` open.",
    ),
    Section(
        "logging",
        "Logs",
        "`libs/svckit/logs.py` (`LogSettings`): every service rate-limits repeated warnings; "
        "`cograph up` rotates the log files it writes.",
    ),
    Section("tracing", "Tracing", "`libs/svckit/telemetry.py`, in every service."),
    Section(
        "cograph up",
        "`cograph up`",
        "`libs/cograph_cli/up.py` and `supervisor.py`: the local supervisor. It also sets "
        "`<SERVICE>_LISTEN`, `<SERVICE>_ADDR`, `<SERVICE>_READY_FILE`, `<SERVICE>_METRICS_FILE` "
        "and (unless set) `<SERVICE>_METRICS_LISTEN` for its children.",
    ),
    Section(
        "cograph CLI",
        "The `cograph` command",
        "`libs/cograph_cli`: the operator commands call the services directly (see the "
        'README\'s "Use it"); `keys`, `access` and `mcp` go through the gateway.',
    ),
)
READERS = [section.reader for section in SECTIONS]
SHARED_INTRO = (
    "Variables read by more than one process, with the value each reader falls back to "
    "where they differ."
)
HEADER = """# Configuration

<!-- Generated by `python -m scripts.config_docs` from the code that reads each variable
and the meanings in scripts/config_docs.py; edit those, not this file.
tests/unit/test_config_docs.py fails when the two disagree. -->

Every setting is an environment variable, read once at start-up through
`svckit.config.Env`; a malformed or out-of-range value stops the process with a message
naming it (exit 2). Bounds are inclusive. Booleans accept `1`/`true`/`yes`/`on` and
`0`/`false`/`no`/`off` (an empty boolean is false); any other empty value counts as unset.
Request limits (query lengths, `top_k`, note sizes) are not settings: they are the published
contract in `libs/cograph_api/limits.py`.
"""


class DocsError(ValueError):
    """The code and the meanings here disagree; the message says how to fix it."""


def _number(value: float) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _default(read: Read) -> str:
    if read.kind == "optional_str":
        return "unset"
    if read.kind == "str" and read.default is None:
        return "required"
    if read.kind == "bool":
        return f"`{str(read.default).lower()}`"
    if read.kind in ("int", "float"):
        return f"`{_number(read.default)}`"
    if read.default == "":
        return "empty"
    return f"`{read.default}`"


def _allowed(read: Read) -> str:
    if read.kind == "choice":
        return ", ".join(f"`{choice}`" for choice in read.choices)
    if read.kind == "bool":
        return "boolean"
    if read.kind in ("int", "float"):
        noun = "integer" if read.kind == "int" else "number"
        if read.low is not None and read.high is not None:
            return f"{_number(read.low)} to {_number(read.high)}"
        if read.low is not None:
            return f"{noun} ≥ {_number(read.low)}"
        if read.high is not None:
            return f"{noun} ≤ {_number(read.high)}"
        return noun
    return "a path" if read.kind == "path" else "text"


def _one(name: str, values: dict[str, str], override: str | None, what: str) -> str:
    if override is not None:
        return override
    distinct = set(values.values())
    if len(distinct) != 1:
        readers = ", ".join(f"{reader}: {value}" for reader, value in values.items())
        raise DocsError(f"{name}: readers disagree on its {what} ({readers}); set Meta.{what}")
    return distinct.pop()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(recorder: Recorder) -> str:
    by_name: dict[str, dict[str, Read]] = {}
    for reader in READERS:
        for name, read in recorder.reads.get(reader, {}).items():
            by_name.setdefault(name, {})[reader] = read
    unknown = set(recorder.reads) - set(READERS)
    if unknown:
        raise DocsError(f"readers without a section: {', '.join(sorted(unknown))}")
    missing = sorted(name for name in by_name if not META.get(name, Meta("")).meaning.strip())
    if missing:
        raise DocsError(f"no meaning in scripts/config_docs.py META for: {', '.join(missing)}")
    stale = sorted(set(META) - set(by_name))
    if stale:
        raise DocsError(f"META describes variables nothing reads: {', '.join(stale)}")

    def row(name: str, shared: bool) -> str:
        reads, meta = by_name[name], META[name]
        default = _one(name, {r: _default(x) for r, x in reads.items()}, meta.default, "default")
        allowed = _one(name, {r: _allowed(x) for r, x in reads.items()}, meta.allowed, "allowed")
        cells = [f"`{name}`", default, allowed]
        if shared:
            cells.append(", ".join(reads))
        cells.append(meta.meaning)
        return "| " + " | ".join(_cell(cell) for cell in cells) + " |"

    # Shared variables alphabetically; each section's in the order its code reads them,
    # which keeps related settings together.
    shared = sorted(name for name, reads in by_name.items() if len(reads) > 1)
    lines = [HEADER, "## Read by several processes", "", SHARED_INTRO, ""]
    lines += [
        "| variable | default | allowed values | read by | meaning |",
        "|---|---|---|---|---|",
    ]
    lines += [row(name, True) for name in shared]
    for section in SECTIONS:
        own = [n for n in recorder.reads.get(section.reader, {}) if n not in shared]
        lines += ["", f"## {section.title}", "", section.intro, ""]
        lines += ["| variable | default | allowed values | meaning |", "|---|---|---|---|"]
        lines += [row(name, False) for name in own]
    lines += ["", "## Removed settings", "", RETIRED_INTRO, ""]
    lines += ["| variable | instead |", "|---|---|"]
    lines += [f"| `{name}` | {_cell(instead)} |" for name, instead in sorted(retired().items())]
    return "\n".join(lines) + "\n"


RETIRED_INTRO = (
    "Settings that each restored an earlier ranking were removed; a service started with one "
    "of them set refuses to start, naming it. The ranking stages they switched are skipped "
    'per request (`skip_stages`, README.md "How ranking works").'
)


def retired() -> dict[str, str]:
    from retrieval.search.search_settings import RETIRED_SETTINGS

    return dict(RETIRED_SETTINGS)


def generate() -> str:
    """The text docs/configuration.md must hold."""
    return render(record())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Writes docs/configuration.md from the code.")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args(argv)
    try:
        text = generate()
    except DocsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if args.check:
        if current != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python -m scripts.config_docs")
            return 1
        return 0
    if current != text:
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
