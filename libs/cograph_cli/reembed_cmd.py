"""`cograph reembed`: move every stored vector to the model the embedder serves now.

A maintenance command like `cograph migrate`, run by the operator against
COGRAPH_DATABASE_URL with the embedder at EMBEDDER_ADDR (its Embed calls signed with the
internal secret). Each service that holds vectors re-embeds its own tables with its own
rules for the text (`python -m retrieval.embedding_space`, `python -m
commons.embedding_space`, run here one after the other in this Python), so the CLI never
imports a service. The services may keep running: while a re-embed is in progress they
refuse to write vectors (index jobs fail saying so, notes wait for the backfill) and search
answers without its vector stream; they use the new vectors once it has recorded the model.
Interrupted, it resumes where it stopped when run again.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from cograph_cli.services import SERVICES

# The services whose tables hold vectors, in the order they are re-embedded.
VECTOR_SERVICES = ("retrieval", "commons")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reembed",
        help="re-embed every stored vector with the embedder's current model (operator)",
        description=(
            "Changes the vector columns to the embedder's dimension and recomputes every "
            "vector from the stored text, in batches; resumable; records the new model when "
            "done. Needs COGRAPH_DATABASE_URL, EMBEDDER_ADDR and the internal secret."
        ),
    )
    parser.add_argument(
        "--only", choices=VECTOR_SERVICES, help="re-embed one service's vectors only"
    )
    parser.add_argument("--batch", type=int, default=64, help="texts per Embed call (1-256)")
    parser.set_defaults(handler=run_reembed)


def run_reembed(args: argparse.Namespace) -> int:
    if not os.environ.get("COGRAPH_DATABASE_URL"):
        print("error: COGRAPH_DATABASE_URL: required (the database to re-embed)", file=sys.stderr)
        return 2
    available = {spec.name for spec in SERVICES if spec.available()}
    wanted = [args.only] if args.only else [n for n in VECTOR_SERVICES if n in available]
    for name in wanted:
        done = subprocess.run(
            [sys.executable, "-m", f"{name}.embedding_space", "--batch", str(args.batch)],
            check=False,
        )
        if done.returncode != 0:
            return done.returncode
    return 0
