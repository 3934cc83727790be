"""Which repository files an import edge points at, per language's lookup rules."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from .languages import detect_language
from .nodes import CodeNode, Edge

_JS_FAMILY = frozenset(("javascript", "typescript", "tsx"))
_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_C_FAMILY = frozenset(("c", "cpp"))


def _strip_ext(path: str) -> str:
    base = posixpath.basename(path)
    dot = base.find(".")
    return path[: len(path) - len(base) + dot] if dot > 0 else path


class ImportMap:
    """Indexes every file once; ``targets`` then answers each import in O(path depth)."""

    def __init__(self, nodes_by_file: Mapping[str, Sequence[CodeNode]]) -> None:
        self._language: dict[str, str] = {}
        self._module: dict[str, str] = {}
        self._files_by_qname: dict[str, list[str]] = defaultdict(list)
        self._go_dirs: dict[str, list[str]] = defaultdict(list)
        self._by_stem: dict[str, list[str]] = defaultdict(list)  # path without extension
        self._by_basename: dict[str, list[str]] = defaultdict(list)
        # every proper tail of a module name / extensionless path -> files, so that
        # "rooted elsewhere" lookups cost one probe instead of a scan over the repository
        self._module_tails: dict[str, list[str]] = defaultdict(list)
        self._stem_tails: dict[str, list[str]] = defaultdict(list)
        for path in sorted(nodes_by_file):
            nodes = nodes_by_file[path]
            module = next((n for n in nodes if n.kind == "module"), None)
            language = module.language if module else detect_language(path) or ""
            self._language[path] = language
            if module is not None:
                self._module[path] = module.qualified_name
            for node in nodes:
                if node.kind in ("module", "class", "struct", "interface", "trait", "enum"):
                    self._files_by_qname[node.qualified_name].append(path)
            if language == "go":
                self._go_dirs[posixpath.dirname(path)].append(path)
            stem = _strip_ext(path)
            self._by_stem[stem].append(path)
            for i, ch in enumerate(stem):
                if ch == "/":
                    self._stem_tails[stem[i + 1 :]].append(path)
            if module is not None:
                qname = module.qualified_name
                for i, ch in enumerate(qname):
                    if ch == ".":
                        self._module_tails[qname[i + 1 :]].append(path)
            self._by_basename[posixpath.basename(path)].append(path)

    def language(self, path: str) -> str:
        return self._language.get(path, "")

    def module(self, path: str) -> str | None:
        return self._module.get(path)

    def package_siblings(self, path: str) -> list[str]:
        """Files whose names a Go or Java file sees without importing them."""
        language = self._language.get(path)
        if language not in ("go", "java"):
            return []
        module = self._module.get(path)
        directory = posixpath.dirname(path)
        return [
            other
            for other in self._files_by_qname.get(module or "", [])
            if other != path and posixpath.dirname(other) == directory
        ]

    def targets(self, importer: str, dst_name: str) -> list[str]:
        """Repository files that ``dst_name``, imported by ``importer``, refers to."""
        language = self._language.get(importer, "")
        if language == "go":
            return self._go(dst_name)
        if language in _JS_FAMILY:
            return self._js(importer, dst_name)
        if language in _C_FAMILY:
            return self._include(importer, dst_name)
        if language == "ruby":
            return self._ruby(importer, dst_name)
        if language == "rust":
            return self._dotted(importer, self._rust_absolute(importer, dst_name))
        return self._dotted(importer, dst_name)

    def _same_language(self, importer: str, paths: Iterable[str]) -> list[str]:
        language = self._language.get(importer)
        family: set[str | None]
        if language in _C_FAMILY:
            family = set(_C_FAMILY)
        elif language in _JS_FAMILY:
            family = set(_JS_FAMILY)
        else:
            family = {language}
        return [p for p in paths if self._language.get(p) in family and p != importer]

    def _dotted(self, importer: str, name: str) -> list[str]:
        # a.b.c may be a module, or a symbol c in module a.b (from a.b import c)
        candidate = name
        for _ in range(3):
            if not candidate:
                break
            found = self._same_language(importer, self._files_by_qname.get(candidate, ()))
            if found:
                return found
            candidate = candidate.rpartition(".")[0]
        # the repository may root its modules elsewhere (services/x/y.py imported as x.y)
        matches = self._same_language(importer, self._module_tails.get(name, ()))
        return matches if len(matches) == 1 else []

    def _rust_absolute(self, importer: str, name: str) -> str:
        parts = name.split(".")
        module = (self._module.get(importer) or "").split(".")
        if parts[0] == "crate":
            return ".".join(parts[1:])
        if parts[0] == "self":
            return ".".join([*module, *parts[1:]])
        if parts[0] == "super":
            ups = 0
            while ups < len(parts) and parts[ups] == "super":
                ups += 1
            return ".".join([*module[: max(0, len(module) - ups)], *parts[ups:]])
        return name

    def _go(self, import_path: str) -> list[str]:
        parts = import_path.strip("/").split("/")
        for i in range(len(parts)):
            files = self._go_dirs.get("/".join(parts[i:]))
            if files:
                return list(files)
        return []

    def _js(self, importer: str, spec: str) -> list[str]:
        if spec.startswith("."):
            base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
        elif spec.startswith(("@/", "~/")):
            base = spec[2:]
        else:
            base = spec
        for stem in (base, _strip_ext(base)):
            exact = self._by_stem.get(stem)
            if exact:
                found = self._same_language(importer, exact)
                if found:
                    return found[:1]
            index = self._by_stem.get(stem + "/index")
            if index:
                return index[:1]
        if not spec.startswith("."):
            # path aliases (src/, app/) the resolver cannot see: accept one unique suffix
            matches = self._same_language(importer, self._stem_tails.get(_strip_ext(base), ()))
            return matches if len(matches) == 1 else []
        return []

    def _include(self, importer: str, header: str) -> list[str]:
        local = posixpath.normpath(posixpath.join(posixpath.dirname(importer), header))
        if local in self._language:
            return [local]
        matches = [
            p
            for p in self._by_basename.get(posixpath.basename(header), ())
            if p == header or p.endswith("/" + header)
        ]
        return self._closest(importer, matches)

    def _ruby(self, importer: str, feature: str) -> list[str]:
        name = feature if feature.endswith(".rb") else feature + ".rb"
        if feature.startswith("."):
            local = posixpath.normpath(posixpath.join(posixpath.dirname(importer), name))
            return [local] if local in self._language else []
        matches = [
            p
            for p in self._by_basename.get(posixpath.basename(name), ())
            if p == name or p.endswith("/" + name)
        ]
        return self._closest(importer, matches)

    @staticmethod
    def _closest(importer: str, matches: list[str]) -> list[str]:
        if len(matches) <= 1:
            return matches

        def shared(p: str) -> int:
            return len(posixpath.commonpath([importer, p]).split("/"))

        best = max(shared(p) for p in matches)
        closest = [p for p in matches if shared(p) == best]
        return closest if len(closest) == 1 else []


def resolve_imports(
    nodes_by_file: Mapping[str, Sequence[CodeNode]],
    edges_by_file: Mapping[str, Sequence[Edge]],
    import_map: ImportMap | None = None,
) -> dict[str, list[str]]:
    """File path -> repository files it imports (its own package's files for Go and Java)."""
    imap = import_map or ImportMap(nodes_by_file)
    result: dict[str, list[str]] = {}
    for path, edges in edges_by_file.items():
        seen: dict[str, None] = {}
        for edge in edges:
            if edge.kind == "imports":
                for target in imap.targets(path, edge.dst_name):
                    seen.setdefault(target)
        for sibling in imap.package_siblings(path):
            seen.setdefault(sibling)
        result[path] = list(seen)
    return result
