"""A git repository whose own configuration, hooks and working tree try to run code or
to slip other bytes in when it is indexed (issue: a repository's git config ran code at
indexing, and a file swapped for a symlink put the admin key into the index).

`make_hostile_repo` commits three files, then arms the repository: every filter, diff
driver, fsmonitor and hook it configures runs `pwn.sh NAME`, which leaves a file NAME in
the marker directory; the working tree then differs from the commit (an uncommitted edit,
a tracked file replaced by a symlink to a secret, an untracked file). Indexing must store
exactly the committed bytes and leave the marker directory empty.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tests.integration.support.git_repos import JAN, commit_all, git, write

SECRET = "ADMIN-KEY-d41d8cd98f00b204e9800998ecf8427e"
UNCOMMITTED = "UNCOMMITTED-EDIT-9e107d9d372bb6826bd81d3542a419d6"

COMMITTED = {
    "app/billing.py": (
        'def retry_charge(card):\n    """Retries a failed charge."""\n    return card\n'
    ),
    "README.md": "# Billing\n\nCharges and retries.\n",
    "notes/zz_target.md": "# Target\n\nA plain note.\n",
    ".gitattributes": "* filter=pwn diff=pwn merge=pwn\n",
}

_HOOKS = (
    "pre-commit",
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
    "fsmonitor-watchman",
    "pre-push",
    "push-to-checkout",
)


@dataclass(frozen=True)
class HostileRepo:
    root: Path
    markers: Path  # empty unless something the repository configured ran
    secret: Path  # a file outside the repository the working tree links to

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


def _script(path: Path, markers: Path) -> Path:
    path.write_text(f'#!/bin/sh\ntouch "{markers}/${{1:-$(basename "$0")}}"\ncat\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_hostile_repo(base: Path) -> HostileRepo:
    root = base / "hostile"
    markers = base / "markers"
    markers.mkdir(parents=True)
    secret = base / "admin.key"
    secret.write_text(SECRET + "\n")
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in COMMITTED.items():
        write(root, path, text)
    os.symlink(secret, root / "notes" / "committed_link.md")  # a symlink in the commit
    commit_all(root, "initial", JAN)

    # Armed only now, so building the repository ran nothing.
    pwn = _script(base / "pwn.sh", markers)
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in _HOOKS:
        _script(hooks / name, markers)
    for key, value in (
        ("filter.pwn.clean", f"{pwn} filter-clean"),
        ("filter.pwn.smudge", f"{pwn} filter-smudge"),
        ("filter.pwn.process", f"{pwn} filter-process"),
        ("filter.pwn.required", "true"),
        ("diff.pwn.textconv", f"{pwn} textconv"),
        ("diff.pwn.command", f"{pwn} diff-command"),
        ("merge.pwn.driver", f"{pwn} merge-driver"),
        ("core.fsmonitor", str(hooks / "fsmonitor-watchman")),
        ("core.hooksPath", str(hooks)),
        ("core.pager", f"{pwn} pager"),
        ("core.sshCommand", f"{pwn} ssh"),
        ("uploadpack.packObjectsHook", f"{pwn} pack-objects-hook"),
        ("core.alternateRefsCommand", f"{pwn} alternate-refs"),
        ("blame.ignoreRevsFile", str(secret)),
    ):
        git(root, "config", key, value)

    # The working tree now says something else than the commit.
    (root / "app" / "billing.py").write_text(f"# {UNCOMMITTED}\n")
    (root / "notes" / "zz_target.md").unlink()
    os.symlink(secret, root / "notes" / "zz_target.md")
    write(root, "untracked.md", f"# Untracked\n\n{UNCOMMITTED}\n")
    return HostileRepo(root, markers, secret)
