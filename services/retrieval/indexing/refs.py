"""Named refs: the branches and tags a repository indexes besides its default branch.

An indexed ref is a repositories row of its own, a child of the repository's row (retrieval
migration 0016), so it has its own files, generations, published snapshot, jobs and sync
state like any repository. Its slug is `<repository slug>@<ref>`: '@' is in no slug
(source_policy.check_slug) and in no ref name (check_ref), so the two split back without
doubt, and every lookup by a caller's slug finds repositories only. Its stored branch is
the branch's name, or `refs/tags/<name>` for a tag, which is what the clone, the freshness
lookup and the sync read (sources.py, freshness.py).

Ref names come from callers: they are checked as branch names (git check-ref-format rules,
no leading '-', no '..', no control characters, at most REF_MAX_CHARS) and must name a
branch or tag the source has (`git ls-remote`), and they reach git only as full ref names
after `--`, never where they could be read as an option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cograph_api.limits import REF_MAX_CHARS
from retrieval.indexing.source_policy import check_branch, check_text
from svckit.errors import InvalidArgument

RefKind = Literal["branch", "tag"]
SEPARATOR = "@"
TAG_PREFIX = "refs/tags/"
HEADS_PREFIX = "refs/heads/"
_PEELED = "^{}"


def check_ref(raw: str) -> str:
    """A ref name a caller gave: a short branch or tag name, never a full `refs/...` name,
    `HEAD` or a commit; InvalidArgument naming what is wrong otherwise."""
    value = check_text(raw, "ref", REF_MAX_CHARS)
    if not value:
        raise InvalidArgument("ref is required: a branch or tag name")
    if value.startswith("refs/") or value == "HEAD":
        raise InvalidArgument(f"ref {value!r}: give the branch or tag name, not {value!r}")
    try:
        return check_branch(value)
    except InvalidArgument:
        raise InvalidArgument(
            f"ref {value!r} is not a valid branch or tag name (letters, digits, '.', '_', "
            "'-', '+', '/'; no '..', not starting with '-' or '.')"
        ) from None


def ref_slug(slug: str, ref: str) -> str:
    """The slug of the row that indexes `ref` of repository `slug`."""
    return f"{slug}{SEPARATOR}{ref}"


def split_ref_slug(slug: str) -> tuple[str, str]:
    """(repository slug, ref name); the ref is '' for a repository's own slug."""
    parent, _, ref = slug.partition(SEPARATOR)
    return parent, ref


def scoped_slug(repo: str, ref: str) -> str:
    """What a request scoped to `repo` (a slug, maybe '') and `ref` reads: the ref's row
    when a ref is given (it needs a repository), the repository's otherwise."""
    if not ref:
        return repo
    if not repo:
        raise InvalidArgument("ref needs repo: name the repository whose ref to read")
    return ref_slug(repo, check_ref(ref))


def stored_branch(name: str, kind: RefKind) -> str:
    """The branch column of a ref's row."""
    return f"{TAG_PREFIX}{name}" if kind == "tag" else name


def kind_of(branch: str) -> RefKind:
    """Whether a ref row's stored branch is a tag or a branch."""
    return "tag" if branch.startswith(TAG_PREFIX) else "branch"


@dataclass(frozen=True)
class RemoteRef:
    """A branch or tag the source has, and the commit it points at."""

    name: str
    kind: RefKind
    commit: str


def parse_ls_remote(output: str) -> list[RemoteRef]:
    """Branches and tags from `git ls-remote --heads --tags` output, by kind then name;
    an annotated tag's commit is the one it names (its peeled line)."""
    found: dict[tuple[RefKind, str], str] = {}
    peeled: dict[str, str] = {}
    for line in output.splitlines():
        sha, _, full = line.partition("\t")
        if full.startswith(HEADS_PREFIX):
            found[("branch", full[len(HEADS_PREFIX) :])] = sha
        elif full.startswith(TAG_PREFIX):
            name = full[len(TAG_PREFIX) :]
            if name.endswith(_PEELED):
                peeled[name[: -len(_PEELED)]] = sha
            else:
                found.setdefault(("tag", name), sha)
    return [
        RemoteRef(name, kind, peeled.get(name, sha) if kind == "tag" else sha)
        for (kind, name), sha in sorted(found.items())
    ]


def resolve(remote: list[RemoteRef], name: str) -> RemoteRef | None:
    """The source's ref called `name`: its branch when it has both a branch and a tag of
    that name (a branch is what moves and what a push names), else its tag."""
    by_kind = {r.kind: r for r in remote if r.name == name}
    return by_kind.get("branch") or by_kind.get("tag")
