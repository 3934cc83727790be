"""Names said in words (name_words.py): the symbol stream of a question that writes no name
is filled from the words it uses, and the ranking plan applies it only there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.layers import Store
from retrieval.search.fusion import Span, StreamHit, StreamName
from retrieval.search.name_words import (
    name_score,
    name_word_hits,
    question_words,
    singular,
    word_forms,
)
from retrieval.search.pipeline import rank
from retrieval.search.ranking import default_fusion, plan_fusion

FILE = "src/CharUtils.java"
SPANS = {
    1: Span(1, FILE, 80, 84, "method", "lang3.CharUtils.isAsciiNumeric"),
    2: Span(1, FILE, 87, 90, "method", "lang3.CharUtils.isAsciiControl"),
    3: Span(1, FILE, 92, 95, "method", "lang3.CharUtils.toChar#2"),
    4: Span(1, FILE, 1, 400, "class", "lang3.CharUtils"),
    5: Span(1, "src/ascii.java", 1, 900, "module", "ascii"),
    6: Span(1, FILE, 97, 99, "method", "lang3.CharUtils.isAscii"),
}
QUESTION = "Tests whether the character is ASCII 7 bit control."


def hit(node: int, unit: str = "body", score: float = 0.5, store: Store = "code") -> StreamHit:
    span = SPANS[node] if store == "code" else None
    return StreamHit(unit, node, score, 0, span, store, (1, FILE, node))  # type: ignore[arg-type]


def test_words_are_identifier_parts_without_a_plural_or_third_person_s() -> None:
    assert word_forms("Gets the entries' matches of ParseConfig, parse_config") == [
        "get", "the", "entry", "match", "of", "parse", "config", "parse", "config"
    ]  # fmt: skip
    assert [singular(w) for w in ("is", "class", "status", "bus", "booleans")] == [
        "is", "class", "statu", "bus", "boolean"
    ]  # fmt: skip
    assert word_forms("") == []
    # A question is only ever a set of words to compare names with: quoting, SQL and other
    # scripts stay words (nothing of it reaches a query or a path).
    assert question_words("x'; DROP TABLE code_nodes; --") == {"x", "drop", "table", "code", "node"}
    assert question_words("Größe ändern 数据") == {"größe", "ändern", "数据"}


def test_a_name_scores_its_matched_words_times_the_share_of_the_name_they_cover() -> None:
    words = question_words(QUESTION)
    assert name_score("lang3.CharUtils.isAsciiControl", words) == 3.0  # is, ascii, control
    assert abs(name_score("lang3.CharUtils.isAsciiNumeric", words) - 4 / 3) < 1e-12
    assert name_score("lang3.CharUtils.isAscii", words) == 2.0
    assert name_score("lang3.CharUtils.toChar#2", words) == 0.0  # to, char: neither said
    assert name_score("lang3.CharUtils.isAsciiControl#3", words) == 3.0  # `#N` is no word
    assert name_score("", words) == 0.0


def test_members_found_by_any_stream_are_ranked_by_their_names_containers_left_out() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(4), hit(1, "summary", 0.9), hit(3), hit(5)],
        "lexical": [hit(1), hit(2), hit(6), hit(9, "doc", store="repo_docs")],
    }
    named = name_word_hits(streams, question_words(QUESTION))
    # isAsciiControl (3), isAscii (2), isAsciiNumeric (1.33); toChar names no word; the
    # class and the module (whose name, `ascii`, the question says) are containers; the
    # document has no name.
    assert [(h.id, h.unit, h.store) for h in named] == [
        (2, "body", "code"),
        (6, "body", "code"),
        (1, "body", "code"),
    ]
    assert [h.span for h in named] == [SPANS[2], SPANS[6], SPANS[1]]
    assert name_word_hits(streams, frozenset()) == []
    assert name_word_hits({}, question_words(QUESTION)) == []


def test_equal_names_fall_to_their_place() -> None:
    twins = {
        7: Span(1, "b.py", 1, 2, "function", "b.read_file"),
        8: Span(1, "a.py", 1, 2, "function", "a.read_file"),
    }
    hits = [StreamHit("body", n, 0.5, 0, twins[n], "code", (1, twins[n].path)) for n in (7, 8)]
    named = name_word_hits({"vector": hits}, question_words("read a file"))
    assert [h.id for h in named] == [8, 7]  # a.py before b.py whatever the streams said


def lists_for(symbol: list[StreamHit]) -> Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]]:
    return {
        "code": {
            # The documented neighbour leads the vector stream, which prose weighs most.
            "vector": [hit(1, score=0.64), hit(2, score=0.57), hit(6, score=0.55)],
            "lexical": [hit(2, score=19.9), hit(1, score=13.6)],
            "symbol": symbol,
        }
    }


def test_a_prose_question_whose_symbol_stream_is_empty_gets_it_from_its_words() -> None:
    settings = default_fusion()
    plan = plan_fusion(QUESTION, 10, 300, settings)
    assert plan.query_class == "prose" and "control" in plan.name_words
    fused = rank(lists_for([]), plan)
    assert [item.id for item in fused] == [2, 1, 6]
    assert fused[0].raw("symbol") == 3.0
    # Turned off, the documented neighbour keeps the lead.
    off = plan_fusion(QUESTION, 10, 300, settings, skip=frozenset({"name_words"}))
    assert [item.id for item in rank(lists_for([]), off)] == [1, 2, 6]


def test_a_symbol_stream_that_found_a_name_or_did_not_run_is_left_as_it_is() -> None:
    plan = plan_fusion(QUESTION, 10, 300, default_fusion())
    # The trigram match found the neighbour: the words of other names add nothing.
    fused = rank(lists_for([hit(1, score=0.4)]), plan)
    assert [item.id for item in fused] == [1, 2, 6]
    assert fused[1].raw("symbol") is None
    # A caller that asked for the vector and lexical streams only gets no symbol evidence.
    without: Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]] = {
        "code": {k: v for k, v in lists_for([])["code"].items() if k != "symbol"}
    }
    assert [item.id for item in rank(without, plan)] == [1, 2, 6]
    assert all(item.raw("symbol") is None for item in rank(without, plan))


def test_code_shaped_questions_keep_the_trigram_symbol_stream_alone() -> None:
    settings = default_fusion()
    for text in ("CharUtils.isAsciiControl", "isAsciiControl(char ch)"):
        plan = plan_fusion(text, 10, 300, settings)
        assert plan.name_words == frozenset()
        assert all(item.raw("symbol") is None for item in rank(lists_for([]), plan))
