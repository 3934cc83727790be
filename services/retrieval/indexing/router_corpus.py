"""The router's corpus for one repository or collection, computed at index time.

Entries are lowercased and kept whole (a qualified name stays `billing.retry.backoff`) so
the router's substring match hits inside dotted names; README and description text is
split into words. See the repository_terms / collection_terms tables.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

README_CHARS = 2000
CORPUS_CAP = 1500  # module-level qualified names and file paths, together, per repository
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 1}


def label_terms(label: str) -> set[tuple[str, str]]:
    """The label itself and its '/'-separated segments (host, owner, name)."""
    lowered = label.strip().lower()
    terms = {("label", lowered)}
    terms.update(("label", part) for part in lowered.split("/") if part)
    return terms


def repository_corpus(
    slug: str,
    branch: str,
    readme: str,
    module_names: Sequence[tuple[str, str, bool]],
    paths: Sequence[str],
) -> set[tuple[str, str]]:
    """`module_names` is (qualified_name, path, is_module) shallow paths first.

    The cap keeps the breadth of the repository: every file's path and module name come
    before any module's inner definitions.
    """
    terms = label_terms(slug)
    if branch:
        terms.add(("branch", branch.lower()))
    terms.update(("readme", w) for w in words(readme[:README_CHARS]))
    corpus: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def push(source: str, value: str) -> None:
        item = (source, value.lower())
        if item not in seen and len(corpus) < CORPUS_CAP:
            seen.add(item)
            corpus.append(item)

    modules = [qname for qname, _path, is_module in module_names if is_module]
    for i in range(max(len(paths), len(modules))):
        if i < len(paths):
            push("path", paths[i])
        if i < len(modules):
            push("qualified_name", modules[i])
    for qname, _path, is_module in module_names:
        if not is_module:
            push("qualified_name", qname)
    return terms | set(corpus)


def collection_corpus(name: str, description: str, heading_tree: str) -> set[tuple[str, str]]:
    terms = label_terms(name)
    terms.update(("description", w) for w in words(description))
    for line in heading_tree.splitlines():
        path, _, outline = line.partition(": ")
        terms.add(("path", path.lower()))
        if outline:
            terms.add(("heading", outline.rsplit(" > ", 1)[-1].strip().lower()))
    return {t for t in terms if t[1]}
