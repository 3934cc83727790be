"""Pure edge resolution: a raw target name to the qualified name of a repository node.

Order, first hit wins: the member of the enclosing type (``self.x``, ``this.x``, Go's
receiver) or of one of its bases, the member of a typed receiver's class or of one of its
bases (``app.route`` where the file binds ``app = Flask(...)``, annotates ``app: Flask`` or
imports an ``app`` that its own module binds so), a node in the same file, a node in a file
the source file imports (for Go and Java also its own package), then a name that is unique
in the repository. Anything else (outside the repository, or ambiguous) stays unresolved:
a receiver whose type no file states is never guessed from the member's name alone.
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
# How far a member is looked for up a class's bases, and how many modules a receiver's
# binding is followed through (`from .app import app` re-exported by a package): deeper
# chains are rare and each step is a lookup per edge.
_BASE_DEPTH = 8
_BINDING_HOPS = 3

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
    def __init__(
        self,
        repo: _Repository,
        imports: Mapping[str, Sequence[str]],
        import_map: ImportMap,
        bindings: Mapping[str, Mapping[str, str]],
        edges_by_file: Mapping[str, Sequence[Edge]],
    ) -> None:
        self.repo = repo
        self.imports = imports
        self.import_map = import_map
        self.bindings = bindings
        self._unique: dict[tuple[tuple[str, ...], frozenset[str]], _Hit | None] = {}
        self._types: dict[tuple[str, str], _Hit | None] = {}
        # (path, class qualified name) -> its resolved bases, filled before calls resolve
        self.bases: dict[tuple[str, str], list[_Hit]] = defaultdict(list)
        # path -> imported name -> the import paths naming it (a package's re-exports)
        self.imported: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for path, edges in edges_by_file.items():
            for edge in edges:
                if edge.kind == "imports":
                    self.imported[path][edge.dst_name.rpartition(".")[2]].append(edge.dst_name)

    def member(self, owner: _Hit, name: str, kinds: frozenset[str]) -> _Hit | None:
        """``name`` defined in the type ``owner`` or, nearest first, in one of its bases."""
        seen: set[tuple[str, str]] = set()
        level = [owner]
        for _ in range(_BASE_DEPTH):
            following: list[_Hit] = []
            for path, node in level:
                key = (path, node.qualified_name)
                if key in seen:
                    continue
                seen.add(key)
                qname = f"{_plain(node.qualified_name)}.{name}"
                hits = [h for h in self.repo.by_qname.get(qname, []) if h[1].kind in kinds]
                hit = _one([h for h in hits if h[0] == path]) or _one(hits)
                if hit is not None:
                    return hit
                following.extend(self.bases.get(key, ()))
            if not following:
                break
            level = following
        return None

    def receiver_type(self, path: str, receiver: str, hops: int = 0) -> _Hit | None:
        """The class a receiver's type names, seen from ``path``: a type the file can see,
        a name imported from a module that binds it to one or that imports it in turn
        (a package re-exporting it; at most _BINDING_HOPS modules), else the one type of
        that name in the repository (what a call of the bare name resolves to)."""
        key = (path, receiver)
        if key in self._types:
            return self._types[key]
        self._types[key] = None  # a cycle of re-exports ends here
        index = self.repo.files.get(path)
        hit = None
        if index is not None:
            hit = self.resolve(path, Edge(index.module or "", receiver, "inherits"))
        name = receiver.rpartition(".")[2]
        if hit is None and hops < _BINDING_HOPS and "." in receiver:
            for other in self.import_map.targets(path, receiver):
                if self.import_map.module(other) == receiver:
                    continue  # the name is a module, not a value in one
                bound = self.bindings.get(other, {}).get(name)
                onward = [bound] if bound else self.imported.get(other, {}).get(name, [])
                for again in onward:
                    hit = self.receiver_type(other, again, hops + 1)
                    if hit is not None:
                        break
                if hit is not None:
                    break
        if hit is None and "." in receiver:
            hit = self.unique((name,), TYPE_KINDS)
        self._types[key] = hit
        return hit

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
                owner_type = _one(
                    [h for h in self.repo.by_qname.get(owner, []) if h[1].kind in TYPE_KINDS]
                )
                inherited = self.member(owner_type, parts[1], kinds) if owner_type else None
                if inherited is not None:
                    return inherited
            parts = parts[-1:]  # dynamic: fall back to the member's bare name
        elif edge.receiver and edge.kind == "calls" and len(parts) == 2:
            typed = self.receiver_type(path, edge.receiver)
            hit = self.member(typed, parts[1], kinds) if typed is not None else None
            if hit is not None:
                return hit
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
    bindings: Mapping[str, Mapping[str, str]] | None = None,
) -> list[ResolvedEdge]:
    """Resolve every edge of every file against the nodes of the whole repository.

    ``imports`` maps a file path to the repository files it imports; when omitted it is
    derived from the ``imports`` edges (see ``resolve_imports``). Import edges resolve
    to the imported symbol when the repository defines it, else to the imported file's
    module node; ``dst_path`` is the first such file. ``bindings`` maps a file path to
    its module-level typed names (``ParsedFile.bindings``): what a receiver imported from
    that file is.
    """
    import_map = ImportMap(nodes_by_file)
    if imports is None:
        imports = resolve_imports(nodes_by_file, edges_by_file, import_map)
    repo = _Repository(nodes_by_file)
    resolver = _Resolver(repo, imports, import_map, bindings or {}, edges_by_file)
    # Bases first: a member call may land on what a class inherits.
    inherited: dict[tuple[str, int], _Hit | None] = {}
    for path, edges in edges_by_file.items():
        for i, edge in enumerate(edges):
            if edge.kind == "inherits":
                hit = inherited[(path, i)] = resolver.resolve(path, edge)
                if hit is not None:
                    resolver.bases[(path, edge.src)].append(hit)
    out: list[ResolvedEdge] = []
    for path, edges in edges_by_file.items():
        for i, edge in enumerate(edges):
            dst: str | None = None
            dst_path: str | None = None
            if edge.kind == "inherits":
                found = inherited[(path, i)]
                if found is not None:
                    dst_path, dst = found[0], found[1].qualified_name
            elif edge.kind == "contains":
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
        {f.path: f.nodes for f in materialised},
        {f.path: f.edges for f in materialised},
        bindings={f.path: f.bindings for f in materialised},
    )
