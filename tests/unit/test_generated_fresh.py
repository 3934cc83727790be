"""The committed gen/python matches what scripts/gen_protos.sh produces from protos/."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _files(root: Path) -> set[Path]:
    return {
        p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run(
        [str(ROOT / "scripts" / "gen_protos.sh"), str(tmp_path)],
        check=True,
        env={"PYTHON": sys.executable, "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
        capture_output=True,
    )
    committed = ROOT / "gen" / "python"
    fresh, old = _files(tmp_path), _files(committed)
    assert fresh == old, f"missing or extra generated files: {sorted(fresh ^ old)}; run make protos"
    stale = [
        str(p) for p in sorted(fresh) if not filecmp.cmp(tmp_path / p, committed / p, shallow=False)
    ]
    assert not stale, f"stale generated files: {stale}; run make protos"
