"""Localisation from history: hunks to changed definitions, subjects to questions, and the
whole derivation on a small repository made here."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from bench.quality import history
from retrieval.indexing.parsing import CodeParser

DIFF = """\
diff --git a/src/pkg/a.py b/src/pkg/a.py
--- a/src/pkg/a.py
+++ b/src/pkg/a.py
@@ -3,2 +3,3 @@ def f():
-    x = 1
-    y = 2
+    x = 10
@@ -9,0 +11 @@ def g():
+    added = True
diff --git a/src/pkg/new.py b/src/pkg/new.py
--- /dev/null
+++ b/src/pkg/new.py
@@ -0,0 +1 @@
+z = 1
"""

SOURCE = """\
class C:
    def f(self):
        x = 1
        y = 2

    def g(self):
        def inner():
            return 1
        return inner()


def top():
    return 3
"""


def test_old_lines_reads_the_old_side_and_insertion_points() -> None:
    assert history.old_lines(DIFF) == {"src/pkg/a.py": {3, 4, 9, 10}}


def test_changed_definitions_are_the_innermost_callables() -> None:
    parsed = CodeParser().parse("pkg/a.py", SOURCE.encode())
    assert parsed is not None
    nodes = list(parsed.nodes)
    assert history.changed_definitions(nodes, [3, 8]) == ["pkg.a.C.f", "pkg.a.C.g.inner"]
    assert history.changed_definitions(nodes, [13, 1]) == ["pkg.a.top"]
    assert history.changed_definitions(nodes, [11]) == []  # between definitions


def test_subjects_become_questions_without_pull_request_numbers() -> None:
    assert history.clean_subject("Fix pep440 edge case in filter (#123)") == (
        "Fix pep440 edge case in filter"
    )
    assert history.clean_subject("fix(tags): reject empty tags (#1, #2)") == (
        "fix(tags): reject empty tags"
    )
    for subject in (
        "Merge pull request #5 from x/y",
        "Bump version to 2.0",
        "chore: enable ruff ALL",
        "ci(deps): update actions",
        "Update to mypy 1.15.0",
        "Fix typo",
    ):
        assert history.clean_subject(subject) is None, subject


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=True)
    return done.stdout.decode().strip()


def test_derive_and_snapshot_on_a_small_repository(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / "src" / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    source = repo / "src" / "pkg" / "a.py"
    source.write_text(SOURCE)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "initial")
    base = _git(repo, "rev-parse", "HEAD")
    source.write_text(SOURCE.replace("return 3", "return 4"))
    _git(repo, "commit", "-q", "-am", "Make top return four (#7)")
    source.write_text(SOURCE.replace("return 3", "return 4").replace("y = 2", "y = 5"))
    _git(repo, "commit", "-q", "-am", "chore: tidy")
    (repo / "src" / "pkg" / "b.py").write_text("def new():\n    return 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Add a new function that did not exist at base")

    commits = history.derive(repo / ".git", base)
    assert [(c.subject, c.answers) for c in commits] == [
        ("Make top return four", (("src/pkg/a.py", "pkg.a.top"),)),
    ]
    archive = tmp_path / "snap.tar.xz"
    assert history.snapshot(repo / ".git", base, ["src/"], archive) == 1
    with tarfile.open(archive) as tar:
        member = tar.extractfile("src/pkg/a.py")
        assert member is not None and member.read().decode() == SOURCE
