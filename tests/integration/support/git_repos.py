"""Git repositories with a known history, built in a temporary directory: `make_repo` is the
small multi-language repository of the indexing tests (January creates it, March edits
ParseConfig), and `git`/`write`/`commit_all` build any other."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

JAN = "2024-01-01T00:00:00+00:00"
MAR = "2024-03-01T00:00:00+00:00"
JAN_TS = 1704067200
MAR_TS = 1709251200

CONFIG_V1 = '''"""Configuration loading."""
from pkg.util import read_text


class ParseConfig:
    """Parses configuration files."""

    def load(self, path: str) -> dict:
        return self.parse(read_text(path))

    def parse(self, text: str) -> dict:
        return {"raw": text}
'''

CONFIG_V2 = '''"""Configuration loading."""
from pkg.util import read_text


class ParseConfig:
    """Parses configuration files."""

    def load(self, path: str) -> dict:
        return self.parse(read_text(path))

    def parse(self, text: str) -> dict:
        return {"raw": text.strip()}

    def validate(self, config: dict) -> bool:
        return "raw" in config
'''

UTIL = """def read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()
"""

GO = """package server

// Server answers requests.
type Server struct {
\tname string
}

// Handle serves one request.
func (s *Server) Handle(req string) string {
\treturn s.format(req)
}

func (s *Server) format(req string) string {
\treturn s.name + req
}
"""

TS = """export interface Greeter {
  greet(name: string): string;
}

export class Hello implements Greeter {
  greet(name: string): string {
    return format(name);
  }
}

export function format(name: string): string {
  return "hi " + name;
}
"""

README = """# Demo

A demo repository about billing retries.

## Setup

Run `make` to build the billing service.
"""

SETTINGS_YAML = "retries: 3\nbackoff: exponential\n"


def git(root: Path, *args: str, date: str = JAN) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, check=True, text=True
    )
    return done.stdout.strip()


def write(root: Path, path: str, content: str | bytes) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)


def commit_all(root: Path, message: str, date: str) -> None:
    git(root, "add", "-A", date=date)
    git(root, "commit", "-q", "-m", message, date=date)


def make_repo(root: Path) -> Path:
    """Two commits: January creates everything, March edits ParseConfig."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/config.py", CONFIG_V1)
    write(root, "pkg/util.py", UTIL)
    write(root, "server/server.go", GO)
    write(root, "web/app.ts", TS)
    write(root, "README.md", README)
    write(root, "config/settings.yaml", SETTINGS_YAML)
    write(root, ".gitignore", "*.log\nbuild/\n")
    write(root, "package-lock.json", "{}\n")
    write(root, "vendor/lib/lib.go", "package lib\n\nfunc Vendored() {}\n")
    write(root, "assets/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary")
    write(root, "web/app.min.js", "var a=1;" * 200 + "\n")
    write(root, "data/big.txt", "x" * 9000 + "\n")
    commit_all(root, "initial", JAN)
    write(root, "pkg/config.py", CONFIG_V2)
    commit_all(root, "validate configs", MAR)
    write(root, "debug.log", "ignored\n")
    write(root, "build/out.py", "print('ignored')\n")
    return root
