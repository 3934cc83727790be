"""Ref names and the ref rows' slugs (retrieval/indexing/refs.py): pure logic."""

from __future__ import annotations

import pytest

from cograph_api import limits
from retrieval.indexing.refs import (
    RemoteRef,
    check_ref,
    kind_of,
    parse_ls_remote,
    ref_slug,
    resolve,
    scoped_slug,
    split_ref_slug,
    stored_branch,
)
from svckit.errors import InvalidArgument


@pytest.mark.parametrize("name", ["main", "release/2.0", "v1.2", "feature_x+y", "a" * 255])
def test_branch_and_tag_names_are_taken(name: str) -> None:
    assert check_ref(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        "--upload-pack=evil",
        "-b",
        "a..b",
        "a b",
        "x\ny",
        "x\x00y",
        "x\x7f",
        "refs/heads/main",
        "HEAD",
        "a@{1}",
        "a@b",
        ".hidden",
        "a/.b",
        "a.lock",
        "a/",
        "a//b",
        "a~1",
        "a^",
        "a:b",
        "a" * (limits.REF_MAX_CHARS + 1),
    ],
)
def test_hostile_ref_names_are_refused_naming_the_ref(name: str) -> None:
    with pytest.raises(InvalidArgument, match="ref"):
        check_ref(name)


def test_a_ref_slug_splits_back() -> None:
    slug = ref_slug("github.com/acme/billing", "release/2.0")
    assert slug == "github.com/acme/billing@release/2.0"
    assert split_ref_slug(slug) == ("github.com/acme/billing", "release/2.0")
    assert split_ref_slug("github.com/acme/billing") == ("github.com/acme/billing", "")


def test_scoped_slug_needs_a_repo_for_a_ref() -> None:
    assert scoped_slug("github.com/a/b", "") == "github.com/a/b"
    assert scoped_slug("", "") == ""
    assert scoped_slug("github.com/a/b", "v1") == "github.com/a/b@v1"
    with pytest.raises(InvalidArgument, match="ref needs repo"):
        scoped_slug("", "v1")
    with pytest.raises(InvalidArgument, match="ref"):
        scoped_slug("github.com/a/b", "-x")


def test_tags_are_stored_by_full_name() -> None:
    assert stored_branch("v1", "tag") == "refs/tags/v1"
    assert stored_branch("dev", "branch") == "dev"
    assert kind_of("refs/tags/v1") == "tag"
    assert kind_of("dev") == "branch"


def test_ls_remote_output_peels_annotated_tags_and_prefers_branches() -> None:
    output = (
        "1111\tHEAD\n"
        "2222\trefs/heads/main\n"
        "3333\trefs/heads/v1\n"
        "4444\trefs/tags/v1\n"
        "5555\trefs/tags/v1^{}\n"
        "6666\trefs/tags/light\n"
        "7777\trefs/pull/1/head\n"
    )
    remote = parse_ls_remote(output)
    assert remote == [
        RemoteRef("main", "branch", "2222"),
        RemoteRef("v1", "branch", "3333"),
        RemoteRef("light", "tag", "6666"),
        RemoteRef("v1", "tag", "5555"),
    ]
    assert resolve(remote, "v1") == RemoteRef("v1", "branch", "3333")
    assert resolve(remote, "light") == RemoteRef("light", "tag", "6666")
    assert resolve(remote, "nope") is None
