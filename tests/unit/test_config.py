"""svckit.config: typed, prefixed, fail-fast environment reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from svckit.config import (
    ConfigError,
    Env,
    data_dir,
    ensure_writable_dir,
    http_url,
    query_embed_timeout_s,
)


def test_defaults_apply_when_unset_or_blank() -> None:
    env = Env({"A": ""})
    assert env.int("A", 7) == 7
    assert env.float("B", 0.5) == 0.5
    assert env.bool("C", True) is True
    assert env.str("D", "x") == "x"


def test_values_are_parsed() -> None:
    env = Env({"N": " 42 ", "F": "0.25", "B": "Yes", "S": "hello", "CH": "Torch"})
    assert env.int("N", 0) == 42
    assert env.float("F", 0.0) == 0.25
    assert env.bool("B", False) is True
    assert env.str("S") == "hello"
    assert env.choice("CH", "onnx", ("onnx", "torch")) == "torch"


def test_prefix_is_applied_and_named_in_errors() -> None:
    env = Env({"SVC_PORT": "abc"}, prefix="SVC_")
    with pytest.raises(ConfigError, match="SVC_PORT: must be an integer, got 'abc'"):
        env.int("PORT", 1)


@pytest.mark.parametrize(("value", "ok"), [("1", True), ("10", True), ("0", False), ("11", False)])
def test_int_bounds_are_inclusive(value: str, ok: bool) -> None:
    env = Env({"N": value})
    if ok:
        assert env.int("N", 5, min=1, max=10) == int(value)
    else:
        with pytest.raises(ConfigError, match="N: must be"):
            env.int("N", 5, min=1, max=10)


def test_float_rejects_nan_and_garbage() -> None:
    with pytest.raises(ConfigError, match="NaN"):
        Env({"F": "nan"}).float("F", 1.0)
    with pytest.raises(ConfigError, match="must be a number"):
        Env({"F": "fast"}).float("F", 1.0)


def test_bool_rejects_unknown_words() -> None:
    with pytest.raises(ConfigError, match="must be a boolean"):
        Env({"B": "maybe"}).bool("B", False)


def test_required_string_missing() -> None:
    with pytest.raises(ConfigError, match="X: is required but not set"):
        Env({}).str("X")


def test_choice_rejects_unknown() -> None:
    with pytest.raises(ConfigError, match="must be one of onnx, torch"):
        Env({"K": "tpu"}).choice("K", "onnx", ("onnx", "torch"))


def test_data_dir_defaults_to_dot_cograph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert data_dir(Env({})) == tmp_path / ".cograph"
    assert data_dir(Env({"COGRAPH_DATA_DIR": str(tmp_path / "d")})) == tmp_path / "d"


def test_query_embedding_deadline_reads_either_name() -> None:
    assert query_embed_timeout_s(Env({})) == 2.0
    assert query_embed_timeout_s(Env({"EMBEDDER_TIMEOUT_S": "3"})) == 3.0
    both = {"EMBEDDER_TIMEOUT_S": "3", "EMBEDDING_TIMEOUT_QUERY": "0.5"}
    assert query_embed_timeout_s(Env(both)) == 0.5
    with pytest.raises(ConfigError, match="EMBEDDING_TIMEOUT_QUERY"):
        query_embed_timeout_s(Env({"EMBEDDING_TIMEOUT_QUERY": "0"}))


@pytest.mark.parametrize(
    "url",
    ["https://api.openai.com/v1", "http://127.0.0.1:8000/v1", "HTTPS://user:key@h.example"],
)
def test_http_url_accepts(url: str) -> None:
    assert http_url("X_URL", f" {url} ") == url


@pytest.mark.parametrize(
    "url", ["api.openai.com/v1", "ftp://h.example", "https://", "http://:80/v1", "https//h"]
)
def test_http_url_refuses_in_one_line_naming_the_variable(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^X_URL: must be an http:// or https:// URL"):
        http_url("X_URL", url)


def test_writable_dir_is_made_and_proved(tmp_path: Path) -> None:
    made = tmp_path / "a" / "b"
    assert ensure_writable_dir(made, "SOME_DIR") == made
    assert made.is_dir() and not list(made.iterdir())  # the probe file is gone
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"^SOME_DIR: .*/file/d is not a writable directory"):
        ensure_writable_dir(blocker / "d", "SOME_DIR")
