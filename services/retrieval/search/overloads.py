"""Overloads share their documentation's evidence: a summary names the group, code picks one.

Overloads are the definitions of one name in one file (`toBoolean(int)`,
`toBoolean(Integer)`: qualified names `X.toBoolean`, `X.toBoolean#2`). Their doc comments
are usually near-copies ("Converts an int to a boolean" beside "Converts an Integer to a
boolean"), so a summary row says which *group* a question is about far better than which
member. Ranked as its own candidate, an overload's summary takes the place of the member the
question is about whenever that member is undocumented or documented a little differently.

`share_summaries` gives each summary hit's place in a stream to the group's member whose
body ranks best in that stream (the member itself when it does): documentation ranks the
group, the code ranks inside it. A summary whose group has no body in the stream keeps its
place. Measured on the harness's corpora (bench/notes/quality-unseen.md, "Overloads share
their summaries"): Java gains on both halves, every other set is unchanged.

`order_by_code` applies the same split to the fused list of a prose question: the
overloads of a name keep the places fusion gave the group, and the vector stream's ranking
of their bodies says which member takes which place. The lexical and symbol streams cannot
tell overloads apart (one name, near-copies of one doc comment), yet they decide their
order under RRF: `isHex#2` first and `isHex` second for a question the code of `isHex`
answers (bench/notes/quality-unseen.md, "Overloads ordered by their code").

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from cograph_text.names import unnumbered
from retrieval.search.fusion import Fused, Span, StreamHit


def overload_key(span: Span) -> tuple[int, str, str] | None:
    """The overload group of a node: its repository, file and name without `#N`."""
    if not span.qualified_name:
        return None
    return (span.repository_id, span.path, unnumbered(span.qualified_name))


def share_summaries(hits: Sequence[StreamHit]) -> list[StreamHit]:
    """One stream's list (best first, body and summary units merged) with every summary hit
    of an overloaded name moved to the group's best-ranked body; order and scores kept."""
    best_body: dict[tuple[int, str, str], StreamHit] = {}
    repeated: set[tuple[int, str, str]] = set()
    members: dict[tuple[int, str, str], set[int]] = {}
    for hit in hits:
        key = overload_key(hit.span) if hit.span is not None else None
        if key is None:
            continue
        ids = members.setdefault(key, set())
        ids.add(hit.id)
        if len(ids) > 1:
            repeated.add(key)
        if hit.unit == "body":
            best_body.setdefault(key, hit)
    if not repeated:
        return list(hits)
    out: list[StreamHit] = []
    for hit in hits:
        key = overload_key(hit.span) if hit.span is not None else None
        target = best_body.get(key) if key in repeated and hit.unit == "summary" else None
        if target is None or target.id == hit.id:
            out.append(hit)
        else:
            out.append(
                StreamHit(
                    "body",
                    target.id,
                    hit.score,
                    hit.exact,
                    target.span,
                    target.store,
                    target.place,
                )
            )
    return out


def order_by_code(items: Sequence[Fused], vector: Sequence[StreamHit]) -> list[Fused]:
    """A fused list (best first) with each overload group's members reordered among the
    group's own places by their body's rank in `vector` (the vector stream's list, best
    first); a member whose body the stream did not find goes after those it did, in fused
    order. Each place keeps its score, so the list stays sorted; everything else stays."""
    body_rank: dict[tuple[str, int], int] = {}
    for i, hit in enumerate(vector):
        if hit.unit == "body":
            body_rank.setdefault((hit.store, hit.id), i)
    places: dict[tuple[int, str, str], list[int]] = {}
    for place, item in enumerate(items):
        key = overload_key(item.span) if item.span is not None else None
        if key is not None:
            places.setdefault(key, []).append(place)
    out = list(items)
    for group in places.values():
        if len(group) < 2:
            continue
        members = sorted(
            (items[p] for p in group),
            key=lambda item: body_rank.get((item.store, item.id), len(vector)),
        )  # stable: the fused order among members the stream ranked alike
        scores = [items[p].score for p in group]
        for place, member, score in zip(group, members, scores, strict=True):
            member.score = score
            out[place] = member
    return out
