"""What each image's Python dependencies weigh, installed: requirements.txt (the full image,
which the embedder runs) against requirements-slim.txt (the slim image, every other service).

Docker is not needed: the figures are read from an installed environment (this interpreter's,
normally `.venv`, built by scripts/bootstrap.sh with the same pins and the CPU build of
PyTorch that the Dockerfile installs). For each list it follows the requirements of every
distribution named, transitively (markers evaluated here, extras only where a line asks for
them), and sums the size on disk of every file each distribution's RECORD lists, `.pyc`
bytecode left out (the Dockerfile's pip compiles it, this checkout's bootstrap does not; it
adds roughly the size of the `.py` sources, printed beside). What an image adds on top, the
base image (`python:3.11.14-slim-bookworm`) and the Debian packages (git), is not counted.

    python -m scripts.image_sizes            # a table, sizes in MiB
    python -m scripts.image_sizes --json

tests/unit/test_slim_image.py uses `closure` to block, for the services the slim image runs,
every module no distribution of the slim list's closure provides.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
FULL = "requirements.txt"
SLIM = "requirements-slim.txt"


def normal(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(name: str) -> dict[str, str]:
    """Distribution (normalised) -> its line in the file `name`, comments and options left out."""
    out: dict[str, str] = {}
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        out[normal(Requirement(line).name)] = line
    return out


def closure(lines: list[str]) -> set[str]:
    """Every installed distribution (normalised) that `lines` need, transitively.

    A requirement whose marker does not hold here (another platform, an extra nobody asked
    for) is skipped; one that holds but is not installed is an error, since the figures would
    then leave it out silently.
    """
    seen: set[str] = set()
    pending: list[tuple[Requirement, str]] = [(Requirement(line), "") for line in lines]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = normal(requirement.name)
        try:
            dist = distribution(name)
        except PackageNotFoundError as exc:
            raise SystemExit(f"{requirement}: not installed in this environment") from exc
        extras = sorted(requirement.extras)
        key = name if not extras else f"{name}[{','.join(extras)}]"
        if key in seen:
            continue
        seen.add(key)
        for child in dist.requires or []:
            for wanted in extras or [""]:
                pending.append((Requirement(child), wanted))
    return {key.split("[", 1)[0] for key in seen}


@dataclass(frozen=True)
class Size:
    """Bytes on disk of a set of distributions, bytecode left out."""

    distributions: int
    files: int
    total: int
    python_sources: int


def installed_size(names: set[str]) -> Size:
    files = total = sources = 0
    for name in sorted(names):
        dist = distribution(name)
        for record in dist.files or []:
            if record.suffix == ".pyc":
                continue
            path = Path(str(dist.locate_file(record)))
            if not path.is_file():
                continue  # a RECORD entry pip did not create here (a script for another OS)
            size = path.stat().st_size
            files += 1
            total += size
            if record.suffix == ".py":
                sources += size
    return Size(len(names), files, total, sources)


def heaviest(names: set[str], count: int) -> list[tuple[str, int]]:
    """The `count` largest distributions of `names`, with their sizes."""
    sizes = [(name, installed_size({name}).total) for name in names]
    return sorted(sizes, key=lambda item: -item[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    full = closure(list(requirement_lines(FULL).values()))
    slim = closure(list(requirement_lines(SLIM).values()))
    report = {
        "full": installed_size(full),
        "slim": installed_size(slim),
        "full only": installed_size(full - slim),
    }
    if args.json:
        print(json.dumps({key: vars(size) for key, size in report.items()}, indent=2))
        return
    mib = 1024 * 1024
    print("set        distributions  files   MiB (no .pyc)  of which .py")
    for key, size in report.items():
        print(
            f"{key:<10} {size.distributions:>13} {size.files:>6} {size.total / mib:>14.1f}"
            f" {size.python_sources / mib:>13.1f}"
        )
    print("largest only in the full image:")
    for name, weight in heaviest(full - slim, 6):
        print(f"  {name:<28} {weight / mib:>8.1f} MiB")
    print("Installed Python packages only: the base image and git come on top of both.")


if __name__ == "__main__":
    main()
