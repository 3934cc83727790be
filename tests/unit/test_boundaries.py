"""Process boundaries: every service imports only libs/ and the generated stubs, never another
service, and libs/ imports no service.

What crosses a process boundary (access rules, the embedder client, the REST client, models
and errors, the MCP tools, proto <-> JSON, limits) lives in libs/cograph_api; a service that
needs another service's behaviour calls it over gRPC or REST. Every import is checked,
including those inside functions and `importlib.import_module("...")` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) for every absolute import in a module, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def boundary_violations(root: Path) -> list[str]:
    """Each import that crosses a boundary, as `path:line: imports module (rule)`."""
    services_dir, libs_dir = root / "services", root / "libs"
    services = {p.name for p in services_dir.iterdir() if (p / "__init__.py").is_file()}
    found: list[str] = []
    for top in (services_dir, libs_dir):
        for path in sorted(top.rglob("*.py")):
            owner = path.relative_to(top).parts[0]
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, module in _imported(tree):
                target = module.split(".")[0]
                if target not in services:
                    continue
                where = f"{path.relative_to(root)}:{line}: imports {module}"
                if top == libs_dir:
                    found.append(f"{where} (libs/ may not import a service)")
                elif target != owner:
                    found.append(f"{where} (services/{owner} may not import services/{target})")
    return found


def test_no_service_imports_another_and_libs_import_no_service() -> None:
    assert (ROOT / "services" / "retrieval" / "__init__.py").is_file()
    assert boundary_violations(ROOT) == []


def _write(root: Path, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("alpha", "beta"):
        _write(tmp_path, f"services/{name}/__init__.py")
    _write(tmp_path, "libs/kit/__init__.py")
    _write(tmp_path, "services/alpha/ok.py", "from alpha import ok\nimport kit\nfrom . import ok\n")
    _write(tmp_path, "libs/kit/ok.py", "from kit import ok\nimport json\n")
    return tmp_path


def test_a_clean_synthetic_tree_passes(tree: Path) -> None:
    assert boundary_violations(tree) == []


def test_a_service_importing_another_fails_naming_the_import(tree: Path) -> None:
    _write(
        tree, "services/alpha/bad.py", "import json\n\n\ndef f():\n    from beta.client import C\n"
    )
    assert boundary_violations(tree) == [
        "services/alpha/bad.py:5: imports beta.client (services/alpha may not import services/beta)"
    ]


def test_libs_importing_a_service_fails(tree: Path) -> None:
    _write(tree, "libs/kit/bad.py", "import beta\n")
    _write(tree, "libs/kit/worse.py", 'import importlib\nimportlib.import_module("alpha.keys")\n')
    assert boundary_violations(tree) == [
        "libs/kit/bad.py:1: imports beta (libs/ may not import a service)",
        "libs/kit/worse.py:2: imports alpha.keys (libs/ may not import a service)",
    ]
