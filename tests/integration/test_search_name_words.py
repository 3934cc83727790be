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


async def _first_results(
    fresh_db_url: str, embedder_address: str, data: Path, root: Path, **env: str
) -> list[pb.SearchResult]:
    async with serving(fresh_db_url, data, embedder_address, **env) as (_, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(root), slug=SLUG), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, started.job.id)
        reply = await stub.Search(
            pb.SearchRequest(query=QUESTION, repo=SLUG, top_k=5, layers=[pb.LAYER_CODE]),
            metadata=ADMIN,
            timeout=30,
        )
    return list(reply.results)


async def test_the_method_the_question_names_in_words_outranks_a_documented_neighbour(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = tmp_path / "chars"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "src/main/java/org/example/chars/CharUtils.java", CHAR_UTILS)
    commit_all(root, "char utils", JAN)

    results = await _first_results(fresh_db_url, embedder_address, tmp_path / "on", root)
    names = [r.qualified_name.rsplit(".", 1)[-1] for r in results]
    assert names[0] == "isAsciiControl", names
    first = results[0]
    # is, ascii, control: three words of three.
    assert first.HasField("symbol_score") and first.symbol_score == pytest.approx(3.0)
    assert pb.STREAM_SYMBOL in [p.stream for p in first.provenance]

    # The same index without the name words: the documented neighbour's phrasing wins.
    off = await _first_results(
        fresh_db_url, embedder_address, tmp_path / "off", root, RETRIEVAL_NAME_WORDS="false"
    )
    off_names = [r.qualified_name.rsplit(".", 1)[-1] for r in off]
    assert off_names[0] != "isAsciiControl", off_names
    assert not any(r.HasField("symbol_score") for r in off)
