"""Each MCP tool's inputSchema is generated from its argument model and says the same thing.

For every tool, arguments probing each bound (lengths, ranges, items, enums, types,
required and unknown properties; the schema's own and every limit in cograph_api.limits)
get the same verdict from the JSON schema (as a client validating with jsonschema would
give) and from the pydantic model the tool runs.
Two differences are by design and not probed: the model also takes an explicit null for an
optional argument (the schema publishes omitting it), and it refuses text the database
cannot store (NUL characters), which no JSON schema keyword expresses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError

from cograph_api import limits, mcp_args, mcp_tools

SAMPLE = {
    "query": "q",
    "symbol": "s",
    "repo": "h/o/n",
    "post_id": "p",
    "title": "t",
    "body": "b",
    "direction": "up",
    "path": "p",
    "pattern": "x",
    "job_id": "j",
    "anchor_id": "a",
    "anchors": [{"repo": "h/o/n", "symbol": "f"}],
}
TOOLS = sorted(mcp_args.ARGS)


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in `schema` (property names are not schemas)."""
    if isinstance(schema, list):
        for item in schema:
            yield from _nodes(item)
    elif isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key == "properties":
                for prop in value.values():
                    yield from _nodes(prop)
            else:
                yield from _nodes(value)


# Probes that do not come from the schema under test, so a bound the model enforces but
# the schema leaves out (or the other way round) is caught: every limit a tool could have,
# at and just past it.
_LIMITS = {k: v for k, v in vars(limits).items() if k.isupper() and type(v) is int}
LENGTHS = sorted({n for k, v in _LIMITS.items() if k.endswith("_CHARS") for n in (v, v + 1)})
NUMBERS = sorted({n for v in _LIMITS.values() for n in (v - 1, v, v + 1)} | {-1, 0})
COUNTS = sorted({n for v in (limits.LAYERS_MAX, limits.POST_TAGS_MAX) for n in (v, v + 1)})


# Anchors (commons_post), the one list of objects: each form, a mix, and what neither is.
ANCHORS = (
    {"repo": "h/o/n", "symbol": "f"},
    {"repo": "h/o/n", "symbol": "f", "path": "a.py"},
    {"repo": "h/o/n", "path": "a.py", "start_line": 1, "end_line": 2},
    {"repo": "h/o/n", "symbol": "f", "start_line": 1, "end_line": 2},
    {"repo": "h/o/n", "path": "a.py"},
    {"repo": "h/o/n"},
    {"symbol": "f"},
    {"repo": "h/o/n", "symbol": ""},
    {"repo": "h/o/n", "path": "a.py", "start_line": 0, "end_line": 1},
    {"repo": "h/o/n", "symbol": "f", "other": 1},
    "f",
)


def _values(prop: dict[str, Any]) -> Iterator[Any]:
    """Values at and just past each bound `prop` publishes or a limit sets; other types."""
    if "anyOf" in prop:
        yield from ANCHORS
        return
    kind = prop["type"]
    if kind == "string":
        yield from prop.get("enum", [])
        yield from ("x", "", "a b", " x", "2024-05-01T12:00:00Z")
        for n in (*LENGTHS, prop.get("maxLength", 1)):
            yield "x" * n
            yield "x" * (n + 1)
    elif kind == "integer":
        yield from NUMBERS
        for bound in ("minimum", "maximum"):
            if bound in prop:
                yield from (prop[bound] - 1, prop[bound], prop[bound] + 1)
    elif kind == "boolean":
        yield from (True, False)
    elif kind == "array":
        item = prop["items"]
        distinct = list(item.get("enum", ())) or [
            {"repo": "h/o/n", "symbol": f"f{i}"} if "anyOf" in item else f"x{i}"
            for i in range(max(COUNTS) + 1)
        ]
        yield []
        yield distinct[:1] * 2
        for value in _values(item):
            yield [value]
        for n in (*COUNTS, prop.get("maxItems", 1)):
            yield [distinct[i % len(distinct)] for i in range(n)]
            yield [distinct[i % len(distinct)] for i in range(n + 1)]
    # Another type: always wrong (a bool is no integer for jsonschema or StrictInt).
    yield {"string": 5, "integer": "5", "boolean": 1, "array": "x"}[kind]
    if kind == "integer":
        yield True


def _samples(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    base = {name: SAMPLE[name] for name in schema["required"]}
    yield base
    yield {**base, "no_such_argument": 1}
    for name in schema["required"]:
        yield {k: v for k, v in base.items() if k != name}
    for name, prop in schema["properties"].items():
        for value in _values(prop):
            yield {**base, name: value}


def _model_accepts(model: type[BaseModel], arguments: dict[str, Any]) -> bool:
    try:
        model.model_validate(arguments)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", TOOLS)
def test_input_schema_is_generated_from_the_argument_model(name: str) -> None:
    schema = mcp_tools.SCHEMAS[name]
    model = mcp_args.ARGS[name]
    assert schema == mcp_args.input_schema(model)
    assert set(schema["properties"]) == set(model.model_fields)
    assert set(schema["required"]) == {n for n, f in model.model_fields.items() if f.is_required()}
    assert (schema["type"], schema["additionalProperties"]) == ("object", False)
    Draft202012Validator.check_schema(schema)
    # Plain and self-contained: no references to resolve, no generated titles.
    for node in _nodes(schema):
        assert not {"$ref", "$defs", "title"} & set(node), node
    for prop_name, prop in schema["properties"].items():
        assert prop.get("description", "").strip(), f"{name}.{prop_name} has no description"


@pytest.mark.parametrize("name", TOOLS)
def test_schema_and_model_give_the_same_verdict(name: str) -> None:
    schema = mcp_tools.SCHEMAS[name]
    model = mcp_args.ARGS[name]
    validator = Draft202012Validator(schema)
    verdicts = {True: 0, False: 0}
    for arguments in _samples(schema):
        published = validator.is_valid(arguments)
        assert _model_accepts(model, arguments) == published, (name, arguments)
        verdicts[published] += 1
    assert verdicts[True] and verdicts[False]


def test_every_tool_has_a_model_a_handler_and_schemas() -> None:
    assert list(mcp_tools.SCHEMAS) == list(mcp_args.ARGS)
    assert set(mcp_tools.HANDLERS) == set(mcp_args.ARGS) == set(mcp_tools.DESCRIPTIONS)
    assert set(mcp_tools.OUTPUT_SCHEMAS) == set(mcp_args.ARGS)
    assert [tool.name for tool in mcp_tools.tool_list()] == list(mcp_args.ARGS)


def test_a_pydantic_reference_is_inlined() -> None:
    class Inner(BaseModel):
        depth: int

    class Outer(BaseModel):
        inner: Inner | None = None

    schema = mcp_args.input_schema(Outer)
    assert schema["properties"]["inner"] == {
        "type": "object",
        "properties": {"depth": {"type": "integer"}},
        "required": ["depth"],
    }
    assert schema["required"] == []
