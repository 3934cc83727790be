"""`python -m retrieval`: run the retrieval service until SIGTERM/SIGINT."""

from __future__ import annotations

from retrieval.app import start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.runner import run

if __name__ == "__main__":
    run("retrieval", RetrievalSettings.from_env, start_retrieval)
