"""The two forms of a search answer on REST and MCP, and what one costs in tokens.

`verbose` is the whole SearchResponse as JSON (proto_json.to_json). The compact form (the
default) keeps what an agent acts on: per result its location (`path:start-end`),
qualified name, kind, snippet (and whether it was cut), one score (4 significant digits)
and its confidence, and the notes anchored to it (`{id, title, score, status}`, only when
there are some); on the answer its confidence, only when true, `no_good_answer`, and only
when notes are missing, `notes_reason`;
the repository (with its indexed ref, when not the default branch; or the collection) and
the short commit once on the answer when every
result comes from the same one, on each result otherwise. Ids, stores, layers, provenance,
per-stream scores, languages and timings are left to `verbose`. An answer to `explain`
keeps, in either form, the explanation (the query's class, what each ranking stage did) and
per result its streams' ranks and raw scores and each stage's effect on it.

Both are written by `dumps` (no spaces, non-ASCII kept: what the web framework sends), and
`tokens` is the count of exactly that text, so a budget bounds what the agent receives.
"""

from __future__ import annotations

import json
from typing import Any

from cograph_api.tokens import Counter, numbers_apart

Json = dict[str, Any]

SHORT_COMMIT = 12
# The confidence levels as JSON names them (retrieval's search/confidence.py grades them);
# "unspecified" (an answer with no results) is left out of the compact form.
CONFIDENCES = ("low", "medium", "high")


def dumps(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _source(row: Json) -> tuple[str, str, str, str]:
    return (
        row.get("repo") or "",
        row.get("ref") or "",
        row.get("collection") or "",
        str(row.get("commit") or ""),
    )


def single_source(rows: list[Json]) -> tuple[str, str, str, str] | None:
    """The (repo, ref, collection, commit) every row shares, or None when they differ."""
    sources = {_source(row) for row in rows}
    return next(iter(sources)) if len(sources) == 1 else None


def _source_fields(repo: str, ref: str, collection: str, commit: str) -> Json:
    out: Json = {}
    if repo:
        out["repo"] = repo
    if ref:
        out["ref"] = ref
    if collection:
        out["collection"] = collection
    if commit:
        out["commit"] = commit[:SHORT_COMMIT]
    return out


def count_source(row: Json, count: Counter) -> int:
    """Tokens the answer spends carrying `row`'s source once (with the commas around)."""
    return count(dumps(_source_fields(*_source(row)))) + 1


def compact_result(row: Json, *, hoisted: bool) -> Json:
    """One result as the compact answer holds it; `hoisted` when the answer carries the
    source once for every result."""
    lines = f"{row.get('start_line', 0)}-{row.get('end_line', 0)}"
    item: Json = {"location": f"{row.get('path', '')}:{lines}"}
    if not hoisted:
        item.update(_source_fields(*_source(row)))
    if row.get("qualified_name"):
        item["qualified_name"] = row["qualified_name"]
    item["kind"] = row.get("kind", "")
    item["snippet"] = row.get("snippet", "")
    if row.get("truncated"):
        item["truncated"] = True
    item["score"] = _short(row.get("score"))
    if row.get("confidence") in CONFIDENCES:
        item["confidence"] = row["confidence"]
    if row.get("notes"):
        item["notes"] = [_note(note) for note in row["notes"]]
    if row.get("stages"):
        item["streams"] = [
            {"stream": p.get("stream"), "rank": p.get("rank"), "score": _short(p.get("score"))}
            for p in row.get("provenance") or []
        ]
        item["stages"] = [_effect(effect) for effect in row["stages"]]
    return item


def _note(note: Json) -> Json:
    return {
        "id": note.get("id", ""),
        "title": note.get("title", ""),
        "score": note.get("score", 0),
        "status": note.get("status", ""),
    }


def _short(value: Any) -> float:
    """A score at 4 significant digits: what ranking needs, at a third of the tokens."""
    return float(f"{float(value or 0.0):.4g}")


def _effect(effect: Json) -> Json:
    out: Json = {"stage": effect.get("stage", "")}
    if effect.get("rank_before") is not None:
        out["rank_before"] = effect["rank_before"]
        out["score_before"] = _short(effect.get("score_before"))
    out["rank_after"] = effect.get("rank_after", 0)
    out["score_after"] = _short(effect.get("score_after"))
    return out


def compact_search(answer: Json) -> Json:
    """The compact form of a verbose answer (see the module doc)."""
    rows: list[Json] = list(answer.get("results") or [])
    shared = single_source(rows)
    out: Json = {"query": answer.get("query", "")}
    if shared is not None:
        out.update(_source_fields(*shared))
    out["results"] = [compact_result(row, hoisted=shared is not None) for row in rows]
    out["tokens"] = answer.get("tokens", 0)
    out["omitted"] = answer.get("omitted", 0)
    if answer.get("first_result_tokens"):
        out["first_result_tokens"] = answer["first_result_tokens"]
    if answer.get("confidence") in CONFIDENCES:
        out["confidence"] = answer["confidence"]
    if answer.get("no_good_answer"):
        out["no_good_answer"] = True
    streams = answer.get("streams") or {}
    degraded: Json = {k: v for k, v in streams.items() if v == "unavailable"}
    if degraded:
        if streams.get("reasons"):
            degraded["reasons"] = streams["reasons"]
        out["streams"] = degraded
    if answer.get("notes_reason"):
        out["notes_reason"] = answer["notes_reason"]
    if answer.get("graph"):
        out["graph"] = answer["graph"]
    if answer.get("explanation"):
        out["explanation"] = answer["explanation"]
    return out


def answer_form(answer: Json, verbose: bool) -> Json:
    return answer if verbose else compact_search(answer)


def result_cost(row: Json, *, verbose: bool, hoisted: bool, count: Counter) -> int:
    """Tokens one result adds to an answer (its JSON and the comma before the next)."""
    item = row if verbose else compact_result(row, hoisted=hoisted)
    return count(dumps(item)) + 1


def answer_tokens(answer: Json, verbose: bool, count: Counter) -> int:
    """Tokens of the answer as sent, `tokens` field included. Its own digits are part of
    the count, so the count is written into the body and raised until the body holds no
    more than it says (at most one token over the exact figure, never under)."""
    body = dict(answer)
    if numbers_apart(count):
        # Counted once with a 0; the figure's own tokens then follow from its digits alone.
        body["tokens"] = 0
        rest = count(dumps(answer_form(body, verbose))) - count("0")
        tokens = rest
        while (total := rest + count(str(tokens))) > tokens:
            tokens = total
        return tokens
    tokens = 0
    while True:  # rises to a fixed point: a count grows by a token or two per digit
        body["tokens"] = tokens
        counted = count(dumps(answer_form(body, verbose)))
        if counted <= tokens:
            return tokens
        tokens = counted
