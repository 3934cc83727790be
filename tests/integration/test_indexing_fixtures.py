"""Shared fixtures for the indexing tests: a small multi-language git repository with a
known history, a counting embedder, and a migrated database. (No tests live here.)"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest_asyncio

from cograph_api.embedder_client import EmbedderClient, Vectors
from retrieval.app import MIGRATIONS
from svckit.db import create_pool
from svckit.migrations import migrate

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


@dataclass
class CountingEmbedder:
    """The real client, counting calls and texts; optionally failing after N calls."""

    inner: EmbedderClient
    calls: int = 0
    texts: list[str] = field(default_factory=list)
    fail_after: int | None = None

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("injected embedder failure")
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.embed(texts, timeout=timeout)

    def reset(self) -> None:
        self.calls = 0
        self.texts.clear()


@pytest_asyncio.fixture(loop_scope="session")
async def retrieval_pool(fresh_db_url: str) -> AsyncIterator[asyncpg.Pool]:
    await migrate(fresh_db_url, "retrieval", MIGRATIONS)
    pool = await create_pool(fresh_db_url)
    try:
        yield pool
    finally:
        await pool.close()
