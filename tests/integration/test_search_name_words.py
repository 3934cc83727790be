"""A question in words that says the name of an undocumented method finds it above a documented
neighbour whose doc comment matches the question's phrasing: the symbol stream, empty for such
a question by trigrams, is filled from the words of the candidates' names (name_words.py).
Through the real service: PostgreSQL, the embedder, the indexer, gRPC."""

from __future__ import annotations

from pathlib import Path

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.retrieval import ADMIN, serving, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/chars"
# One documented method; its neighbours' doc comments are gone (the question is the first
# sentence `isAsciiControl`'s comment would have had).
CHAR_UTILS = """\
package org.example.chars;

public class CharUtils {

    /**
     * Tests whether the character is ASCII 7 bit numeric.
     *
     * @param ch  the character to check
     * @return true if between 48 and 57 inclusive
     */
    public static boolean isAsciiNumeric(final char ch) {
        return ch >= '0' && ch <= '9';
    }

    /**
     * Tests whether the character is ASCII 7 bit numeric, written as a code point.
     *
     * @param codePoint  the code point to check
     * @return true if between 48 and 57 inclusive
     */
    public static boolean isAsciiNumeric(final int codePoint) {
        return codePoint >= '0' && codePoint <= '9';
    }

    public static boolean isAsciiControl(final char ch) {
        return ch < 32 || ch == 127;
    }

    public static boolean isAsciiPrintable(final char ch) {
        return ch >= 32 && ch < 127;
    }

    public static boolean isAsciiAlphaLower(final char ch) {
        return ch >= 'a' && ch <= 'z';
    }
}
"""
QUESTION = "Tests whether the character is ASCII 7 bit control."


async def _searches(
    fresh_db_url: str, embedder_address: str, data: Path, root: Path
) -> tuple[pb.SearchResponse, pb.SearchResponse]:
    """The question searched with every stage and explained, then without name_words."""
    async with serving(fresh_db_url, data, embedder_address) as (_, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(root), slug=SLUG), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, started.job.id)
        asked = {"query": QUESTION, "repo": SLUG, "top_k": 5, "layers": [pb.LAYER_CODE]}
        full = await stub.Search(
            pb.SearchRequest(**asked, explain=True),  # type: ignore[arg-type]
            metadata=ADMIN,
            timeout=30,
        )
        without = await stub.Search(
            pb.SearchRequest(**asked, skip_stages=["name_words"]),  # type: ignore[arg-type]
            metadata=ADMIN,
            timeout=30,
        )
    return full, without


async def test_the_method_the_question_names_in_words_outranks_a_documented_neighbour(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = tmp_path / "chars"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "src/main/java/org/example/chars/CharUtils.java", CHAR_UTILS)
    commit_all(root, "char utils", JAN)

    full, off = await _searches(fresh_db_url, embedder_address, tmp_path / "data", root)
    results = list(full.results)
    names = [r.qualified_name.rsplit(".", 1)[-1] for r in results]
    assert names[0] == "isAsciiControl", names
    first = results[0]
    # is, ascii, control: three words of three.
    assert first.HasField("symbol_score") and first.symbol_score == pytest.approx(3.0)
    assert pb.STREAM_SYMBOL in [p.stream for p in first.provenance]
    # The explanation says which stage did it.
    assert full.explanation.query_class == "prose"
    runs = {run.name: run for run in full.explanation.stages}
    assert runs["name_words"].applied and "filled" in runs["name_words"].detail
    assert first.stages[0].stage == "fusion"
    assert first.stages[-1].rank_after == 1

    # The same index without the name words: the documented neighbour's phrasing wins, and
    # an answer that did not ask for an explanation carries none.
    off_names = [r.qualified_name.rsplit(".", 1)[-1] for r in off.results]
    assert off_names[0] != "isAsciiControl", off_names
    assert not any(r.HasField("symbol_score") for r in off.results)
    assert not off.HasField("explanation") and not any(r.stages for r in off.results)
