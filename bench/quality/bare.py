"""`bare-files`: the frozen split's small-file shape cut from tuning sources.

One short top-level function per file, every comment and docstring removed, the question the
first sentence of its docstring as the package wrote it (frozen_build's cutting rules,
applied to other packages): Python from networkx (which the `small-files` corpus also reads,
with its comments kept and two functions in half its files) and Go from google/uuid and
spf13/pflag (the `languages` excerpts). rust-lang/log has too few documented functions (10)
to make a cell. The frozen split's
sources are not read, so this is the set a change for that shape is tuned on; the frozen
split then says once whether it carries over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from bench.quality import frozen_build, unseen
from bench.quality.corpus import python_package, read_sources
from bench.quality.datasets import Answer
from bench.quality.unseen import UnseenClass, UnseenSet, UQuery
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.languages import Grammars

CORPUS = "bare-files"
SEED = 20261203


def _sources() -> dict[str, dict[str, dict[str, str]]]:
    """language -> source name -> files (path -> text)."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    networkx = python_package("networkx")
    if networkx is not None:
        out["python"] = {"networkx": read_sources(networkx)}
    out["go"] = {"uuid": unseen._excerpts("go-uuid"), "pflag": unseen._excerpts("go-pflag")}
    return out


def build(workdir: Path, semantic: int, files: int) -> UnseenSet:
    parser, grammars = CodeParser(), Grammars()
    queries: list[UQuery] = []
    repos = []
    notes: dict[str, Any] = {}
    for language, sources in _sources().items():
        cuts = []
        for name, tree in sources.items():
            source = frozen_build.Source(name, language, "", "", "", "", "", ())
            cuts += frozen_build.cuts_of(source, tree, parser, grammars)
        tree, questions, set_notes = frozen_build.small_files(
            language,
            cuts,
            parser,
            grammars,
            files=files,
            semantic=semantic,
            symbol=semantic // 3,
            seed=SEED,
        )
        name = f"{CORPUS}-{language}"
        repo = unseen._repo(name, language, ",".join(sorted(sources)), workdir, tree)
        repos.append(repo)
        notes[name] = set_notes
        spans = {
            (f.path, n.qualified_name): (n.start_line, n.end_line)
            for f, n in unseen.definitions(unseen.parse_tree(parser, tree))
        }
        for q in questions:
            answers = tuple(
                Answer(
                    repo.slug,
                    a["path"],
                    a["qualified_name"],
                    *spans[(a["path"], a["qualified_name"])],
                )
                for a in q["answers"]
            )
            klass = cast(UnseenClass, q["class"])
            queries.append(UQuery("", CORPUS, klass, language, q["text"], answers, 0))
    return UnseenSet(CORPUS, repos, queries, notes)
