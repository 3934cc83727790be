"""What one prepared file turns into before it is written: rows plus embedding slots.

`embed_index` / `summary_index` point into the file's WorkUnit texts, so the writer finds
each row's vector without a second lookup structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(slots=True)
class NodeRecord:
    qualified_name: str
    name: str
    kind: str
    language: str
    path: str
    start_line: int
    end_line: int
    signature: str
    body: str
    docstring: str | None
    parent: str | None
    created_at: datetime | None
    last_changed_at: datetime | None
    summary: str | None = None
    embed_index: int | None = None
    summary_index: int | None = None


@dataclass(frozen=True, slots=True)
class EdgeRecord:
    src: str  # qualified name of a node in the same file
    dst_name: str
    kind: str
    lines: tuple[int, ...] = ()  # the uses' lines (parsing.Edge); none for `contains`
    receiver: str | None = None  # the receiver's stated type (parsing.Edge)


@dataclass(slots=True)
class DocRecord:
    path: str
    heading_path: tuple[str, ...]
    start_line: int
    end_line: int
    body: str
    updated_at: datetime | None
    embed_index: int | None = None


@dataclass(slots=True)
class FilePayload:
    path: str
    content_hash: str
    language: str
    store: str  # code | repo_docs
    size: int
    updated_at: datetime | None
    nodes: list[NodeRecord] = field(default_factory=list)
    edges: list[EdgeRecord] = field(default_factory=list)
    docs: list[DocRecord] = field(default_factory=list)
    # Module-level typed names (parsing.ParsedFile.bindings), stored on the module's node.
    bindings: dict[str, str] = field(default_factory=dict)
    # The file's text as indexed (UTF-8, invalid bytes replaced): what read and grep answer.
    content: str = ""
