"""A Rust type and the `impl` blocks named after it: asking for the name finds the type's
definition first, the impl blocks after it, both pinned above everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.retrieval import ADMIN, serving, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/kv"
ERROR_RS = """\
/// An error while reading a key-value pair.
pub struct Error {
    msg: &'static str,
}

impl Error {
    /// An error with a message.
    pub fn msg(msg: &'static str) -> Self {
        Error { msg }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.msg)
    }
}

impl From<fmt::Error> for Error {
    fn from(_: fmt::Error) -> Self {
        Error::msg("formatting failed")
    }
}

/// An error value with its source, for the error that caused it.
pub fn error_source(err: &Error) -> Option<&Error> {
    Some(err)
}
"""


async def test_a_type_comes_before_the_impl_blocks_named_after_it(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = tmp_path / "kv"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "src/kv/error.rs", ERROR_RS)
    commit_all(root, "kv errors", JAN)
    async with serving(fresh_db_url, tmp_path / "data", embedder_address) as (_, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(root), slug=SLUG), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, started.job.id)
        reply = await stub.Search(
            pb.SearchRequest(query="Error", repo=SLUG, top_k=10, layers=[pb.LAYER_CODE]),
            metadata=ADMIN,
            timeout=30,
        )
    kinds = [(r.kind, r.qualified_name) for r in reply.results]
    assert kinds[0] == ("struct", "kv.error.Error"), kinds
    impls = [i for i, (kind, _) in enumerate(kinds) if kind == "impl"]
    assert len(impls) == 3 and impls == [1, 2, 3], kinds  # pinned right after the type
    scores = [r.score for r in reply.results]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] >= 3000 > scores[1] >= 2000 > scores[4]
