"""Module qualified names derived from a file's repository path."""

from __future__ import annotations

from collections.abc import Sequence

# Conventional source roots that are not part of an import path.
_SOURCE_ROOTS = ("src", "lib")
# File stems that stand for their directory (``pkg/__init__.py`` is ``pkg``).
_DIRECTORY_STEMS: dict[str, frozenset[str]] = {
    "python": frozenset(("__init__",)),
    "javascript": frozenset(("index",)),
    "typescript": frozenset(("index",)),
    "tsx": frozenset(("index",)),
    "rust": frozenset(("mod", "lib", "main")),
}
# Languages whose definitions are named without the file (C++ ``ns::Class`` and Ruby
# ``A::B`` are global); their module node keeps the extension so that it cannot collide
# with a definition of the same name (``main.c`` and ``main``).
KEEP_EXTENSION = frozenset(("c", "cpp", "ruby"))


def _split_ext(name: str) -> tuple[str, str]:
    dot = name.rfind(".")
    if dot <= 0:
        return name, ""
    return name[:dot], name[dot + 1 :]


def module_name(
    path: str,
    language: str,
    source_roots: Sequence[str] = (),
    *,
    keep_extension: bool | None = None,
) -> str:
    """``src/billing/retry.py`` -> ``billing.retry``; ``src/net/socket.c`` -> ``net.socket.c``.

    ``source_roots`` are extra leading directories to strip (``services`` makes
    ``services/retrieval/x.py`` the module ``retrieval.x``); the longest that matches wins.
    ``keep_extension`` defaults to whether the language names definitions without the file.
    """
    if keep_extension is None:
        keep_extension = language in KEEP_EXTENSION
    parts = [p for p in path.strip("/").split("/") if p and p != "."]
    for root in sorted(source_roots, key=len, reverse=True):
        root_parts = [p for p in root.strip("/").split("/") if p]
        if root_parts and parts[: len(root_parts)] == root_parts and len(parts) > len(root_parts):
            parts = parts[len(root_parts) :]
            break
    else:
        if language == "rust" and "src" in parts[:-1]:
            # Crate-relative: everything up to the crate's src/ is outside the module path.
            last_src = len(parts) - 1 - parts[::-1].index("src", 1)
            parts = parts[last_src + 1 :]
        elif len(parts) > 1 and parts[0] in _SOURCE_ROOTS:
            parts = parts[1:]
    if not parts:
        return path
    stem, ext = _split_ext(parts[-1])
    if keep_extension:
        parts[-1] = stem + "." + ext if ext else stem
        return ".".join(parts)
    if stem in _DIRECTORY_STEMS.get(language, frozenset()) and len(parts) > 1:
        parts = parts[:-1]
    elif stem in _DIRECTORY_STEMS.get(language, frozenset()) and language == "rust":
        return "crate"
    else:
        parts[-1] = stem
    return ".".join(parts)
