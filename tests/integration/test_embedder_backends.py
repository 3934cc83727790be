"""The ONNX int8 backend agrees with the PyTorch reference on real code and prose."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.corpus import QUERIES, code_chunks
from embedder.backends import OnnxInt8Backend, TorchBackend, packaged_model_path
from tests.integration.support.embedders import MODEL_CACHE

PROSE = [
    "Retries a failed charge with exponential backoff and gives up after five attempts.",
    "The configuration file is read once at start-up; later edits need a restart.",
    "Agents should treat an unavailable search as a signal to carry on without it.",
    "This module parses HTTP headers into a case-insensitive multi-valued mapping.",
]


def test_int8_vectors_agree_with_the_reference() -> None:
    path = packaged_model_path()
    reference = TorchBackend(path)
    int8 = OnnxInt8Backend(path, MODEL_CACHE)
    texts = code_chunks(120, seed=11) + code_chunks(40, chars=150, seed=12) + PROSE + QUERIES
    want = reference.encode(texts, batch_size=32)
    got = int8.encode(texts, batch_size=32)
    cosine = np.sum(want * got, axis=1)
    assert cosine.min() >= 0.98, f"worst agreement {cosine.min():.4f}"
    assert cosine.mean() >= 0.99


def test_int8_vector_does_not_depend_on_batch_companions() -> None:
    int8 = OnnxInt8Backend(packaged_model_path(), MODEL_CACHE)
    alone = int8.encode(["def retry(charge): ..."], batch_size=1)[0]
    together = int8.encode(["x" * 2000, "def retry(charge): ...", "short"], batch_size=3)[1]
    np.testing.assert_array_equal(alone, together)


def test_two_exports_at_once_into_one_cache_both_succeed(tmp_path: Path) -> None:
    """Two embedders starting together on an empty cache (two test workers, `cograph up`
    beside a test run) each export the int8 model; neither may read the other's half
    written files, and the cache ends with one whole model and no leftovers."""
    script = (
        "import sys; from pathlib import Path; "
        "from embedder.backends import export_int8, packaged_model_path; "
        "print(export_int8(packaged_model_path(), Path(sys.argv[1])))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=280) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in outputs]
    made = {Path(out.strip().splitlines()[-1]) for out, _ in outputs}
    assert len(made) == 1 and sorted(tmp_path.iterdir()) == sorted(made)
    vectors = OnnxInt8Backend(packaged_model_path(), tmp_path).encode(["retry"], batch_size=1)
    assert vectors.shape == (1, 384)
