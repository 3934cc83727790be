"""`python -m embedder`: run the embedder service until SIGTERM/SIGINT."""

from __future__ import annotations

from embedder.app import start_embedder
from embedder.settings import EmbedderSettings
from svckit.runner import run

if __name__ == "__main__":
    run("embedder", EmbedderSettings.from_env, start_embedder)
