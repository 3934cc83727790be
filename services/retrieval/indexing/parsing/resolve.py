"""Pure edge resolution: a raw target name to the qualified name of a repository node.

Order, first hit wins: the member of the enclosing type (``self.x``, ``this.x``, Go's
receiver), a node in the same file, a node in a file the source file imports (for Go
and Java also its own package), then a name that is unique in the repository. Anything
else (outside the repository, or ambiguous) stays unresolved.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .importmap import ImportMap, resolve_imports
from .nodes import CALLABLE_KINDS, TYPE_KINDS, CodeNode, Edge, ParsedFile, ResolvedEdge
from .overloads import is_overload_stub

_RECEIVERS: Mapping[str, frozenset[str]] = {
    "python": frozenset(("self", "cls")),
    "javascript": frozenset(("this",)),
    "typescript": frozenset(("this",)),
    "tsx": frozenset(("this",)),
    "java": frozenset(("this",)),
    "cpp": frozenset(("this",)),
    "rust": frozenset(("self", "Self")),
    "ruby": frozenset(("self",)),
}
# Languages where a bare call inside a method may name another member of the same type.
_IMPLICIT_THIS = frozenset(("java", "cpp", "ruby"))
_GO_RECEIVER = re.compile(r"^func\s*\(\s*([A-Za-z_]\w*)")
_DUP = re.compile(r"#\d+$")

_Hit = tuple[str, CodeNode]  # (path, node)


def _plain(qname: str) -> str:
    return _DUP.sub("", qname)


def _kinds_for(kind: str) -> frozenset[str]:
    return CALLABLE_KINDS if kind == "calls" else TYPE_KINDS


@dataclass(slots=True)
class _FileIndex:
    by_qname: dict[str, CodeNode]
    by_name: dict[str, list[CodeNode]]
    module: str | None
    language: str


def _index_file(nodes: Sequence[CodeNode]) -> _FileIndex:
    by_name: dict[str, list[CodeNode]] = defaultdict(list)
    module: str | None = None
    language = ""
    for node in nodes:
        if node.kind == "module":
            module = node.qualified_name
            language = node.language
        else:
            by_name[node.name].append(node)
    return _FileIndex({n.qualified_name: n for n in nodes}, by_name, module, language)


class _Repository:
    def __init__(self, nodes_by_file: Mapping[str, Sequence[CodeNode]]) -> None:
        self.files = {path: _index_file(nodes) for path, nodes in nodes_by_file.items()}
        self.by_name: dict[str, list[_Hit]] = defaultdict(list)
        self.by_qname: dict[str, list[_Hit]] = defaultdict(list)
        for path in sorted(self.files):
            index = self.files[path]
            for name, nodes in index.by_name.items():
                self.by_name[name].extend((path, n) for n in nodes)
            for qname, node in index.by_qname.items():
                self.by_qname[_plain(qname)].append((path, node))


def _matches(node: CodeNode, parts: Sequence[str], kinds: frozenset[str]) -> bool:
    if node.kind not in kinds:
        return False
    if len(parts) == 1:
        return True
    qname = _plain(node.qualified_name)
    dotted = ".".join(parts)
    return qname == dotted or qname.endswith("." + dotted)


def _one(hits: Sequence[_Hit]) -> _Hit | None:
    distinct = {(p, n.qualified_name): (p, n) for p, n in hits}
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    # Overloads of one name in one file (`f`, `f#2`, ...): the one implementation, when
    # the others are typing stubs, is what a call runs.
    found = list(distinct.values())
    if len({(p, _plain(n.qualified_name)) for p, n in found}) == 1:
        real = [h for h in found if not is_overload_stub(h[1].language, h[1].body)]
        if len(real) == 1:
            return real[0]
    return None


class _Resolver:
    def __init__(self, repo: _Repository, imports: Mapping[str, Sequence[str]]) -> None:
        self.repo = repo
        self.imports = imports
        self._unique: dict[tuple[tuple[str, ...], frozenset[str]], _Hit | None] = {}

    def owner_of(self, index: _FileIndex, src: str) -> str | None:
        """The type whose members ``self.x`` names, as a qualified-name prefix."""
        node = index.by_qname.get(src)
        while node is not None:
            if node.kind == "method":
                return _plain(node.qualified_name).rpartition(".")[0]
            if node.kind in TYPE_KINDS:
                return _plain(node.qualified_name)
            node = index.by_qname.get(node.parent) if node.parent else None
        return None

    def receiver_words(self, index: _FileIndex, src: str) -> frozenset[str]:
        words = _RECEIVERS.get(index.language, frozenset())
        if index.language == "go":
            node = index.by_qname.get(src)
            if node is not None and node.kind == "method":
                match = _GO_RECEIVER.match(node.signature)
                if match:
                    words = frozenset((match.group(1),))
        return words

    def resolve(self, path: str, edge: Edge) -> _Hit | None:
        index = self.repo.files.get(path)
        if index is None:
            return None
        kinds = _kinds_for(edge.kind)
        parts = edge.dst_name.split(".")
        if len(parts) >= 2 and parts[0] in self.receiver_words(index, edge.src):
            owner = self.owner_of(index, edge.src)
            if owner is not None and len(parts) == 2:
                member = f"{owner}.{parts[1]}"
                hits = [h for h in self.repo.by_qname.get(member, []) if h[1].kind in kinds]
                local = [h for h in hits if h[0] == path]
                hit = _one(local) or _one(hits)
                if hit is not None:
                    return hit
            parts = parts[-1:]  # inherited or dynamic: fall back to the member's bare name
        name = parts[-1]

        # 1. the same file
        same_file = [n for n in index.by_name.get(name, []) if _matches(n, parts, kinds)]
        if same_file:
            return self._pick_local(path, index, edge.src, same_file)

        # 2. files this one imports
        hits = [
            (other, node)
            for other in self.imports.get(path, ())
            if (other_index := self.repo.files.get(other)) is not None
            for node in other_index.by_name.get(name, ())
        ]
        found = [h for h in hits if _matches(h[1], parts, kinds)]
        if not found and len(parts) > 1:
            # ``alias.f()``: the alias hides the module's real name
            found = [h for h in hits if h[1].kind in kinds]
        if found:
            top_level = [h for h in found if h[1].parent == self.repo.files[h[0]].module]
            return _one(top_level) or _one(found)

        # 3. a name unique in the repository
        return self.unique(tuple(parts), kinds)

    def unique(self, parts: tuple[str, ...], kinds: frozenset[str]) -> _Hit | None:
        # context-free, and common names (get, run, __init__) recur across thousands of edges
        key = (parts, kinds)
        if key in self._unique:
            return self._unique[key]
        everywhere = [
            h for h in self.repo.by_name.get(parts[-1], []) if _matches(h[1], parts, kinds)
        ]
        hit = self._unique[key] = _one(everywhere)
        return hit

    def _pick_local(
        self, path: str, index: _FileIndex, src: str, local: list[CodeNode]
    ) -> _Hit | None:
        if len(local) == 1:
            return path, local[0]
        if index.language in _IMPLICIT_THIS:
            owner = self.owner_of(index, src)
            members = [
                n for n in local if owner and _plain(n.qualified_name).rpartition(".")[0] == owner
            ]
            if len(members) == 1:
                return path, members[0]
        top_level = [n for n in local if n.parent == index.module]
        if len(top_level) == 1:
            return path, top_level[0]
        return None


def resolve_edges(
    nodes_by_file: Mapping[str, Sequence[CodeNode]],
    edges_by_file: Mapping[str, Sequence[Edge]],
    imports: Mapping[str, Sequence[str]] | None = None,
) -> list[ResolvedEdge]:
    """Resolve every edge of every file against the nodes of the whole repository.

    ``imports`` maps a file path to the repository files it imports; when omitted it is
    derived from the ``imports`` edges (see ``resolve_imports``). Import edges resolve
    to the imported symbol when the repository defines it, else to the imported file's
    module node; ``dst_path`` is the first such file.
    """
    import_map = ImportMap(nodes_by_file)
    if imports is None:
        imports = resolve_imports(nodes_by_file, edges_by_file, import_map)
    repo = _Repository(nodes_by_file)
    resolver = _Resolver(repo, imports)
    out: list[ResolvedEdge] = []
    for path, edges in edges_by_file.items():
        for edge in edges:
            dst: str | None = None
            dst_path: str | None = None
            if edge.kind == "contains":
                dst, dst_path = edge.dst_name, path
            elif edge.kind == "imports":
                targets = import_map.targets(path, edge.dst_name)
                if targets:
                    dst_path = targets[0]
                    symbol = repo.files[dst_path].by_qname.get(edge.dst_name)
                    dst = symbol.qualified_name if symbol else import_map.module(dst_path)
            else:
                hit = resolver.resolve(path, edge)
                if hit is not None:
                    dst_path, dst = hit[0], hit[1].qualified_name
            out.append(ResolvedEdge(path, edge.src, edge.dst_name, edge.kind, dst, dst_path))
    return out


def resolve_parsed(files: Iterable[ParsedFile]) -> list[ResolvedEdge]:
    """``resolve_edges`` over a batch of parsed files."""
    materialised = list(files)
    return resolve_edges(
        {f.path: f.nodes for f in materialised}, {f.path: f.edges for f in materialised}
    )
