"""Pydantic models of the JSON that cograph_api.proto_json writes for a protobuf message.

The REST answers are the backends' replies through proto_json.to_json, so their models are
derived from the same descriptors rather than written a second time: a field added to a
.proto appears in the OpenAPI document with the comment the .proto gives it
(cograph.proto_docs, generated from protos/ by scripts/proto_docs.py).

The shapes follow proto_json: every field is present; scalars are their JSON types; enums
their short lower-case names; Timestamps RFC 3339 strings; an unset message field or proto3
`optional` is null; repeated fields are arrays and maps objects with string keys. Models
forbid unknown fields, so a test validating a real answer fails when the two drift apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, ConfigDict, Field, create_model

from cograph.proto_docs import DOCS
from cograph_api.proto_json import enum_name

_SCALARS: dict[int, type] = {
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_UINT64: int,
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_FIXED64: int,
    FieldDescriptor.TYPE_FIXED32: int,
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_BYTES: str,  # hex, as proto_json writes it
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_SFIXED32: int,
    FieldDescriptor.TYPE_SFIXED64: int,
    FieldDescriptor.TYPE_SINT32: int,
    FieldDescriptor.TYPE_SINT64: int,
}


class ProtoJson(BaseModel):
    """Base of every derived model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class ProtoModels:
    """Builds (once per message) the model of a message's JSON; names stay unique across
    packages, the first message of a name keeping it plain."""

    def __init__(self) -> None:
        self._models: dict[str, type[BaseModel]] = {}
        self._names: set[str] = set()
        self._building: dict[str, str] = {}

    def model(self, descriptor: Descriptor) -> type[BaseModel]:
        cached = self._models.get(descriptor.full_name)
        if cached is not None:
            return cached
        fields: dict[str, Any] = {}
        name = self._name(descriptor)
        # A message that nests itself (an outline symbol's children) refers to its own
        # model by name while it is built, resolved once it exists.
        self._building[descriptor.full_name] = name
        for field in descriptor.fields:
            annotation = self._annotation(field)
            description = DOCS.get(field.full_name, "")
            # The Python name may not be a keyword (a graph edge's `from`): alias it.
            python_name = f"{field.name}_" if field.name in ("from", "in", "is") else field.name
            fields[python_name] = (
                annotation,
                Field(..., alias=field.name, description=description or None),
            )
        built = create_model(
            name,
            __base__=ProtoJson,
            __doc__=DOCS.get(descriptor.full_name) or descriptor.name,
            **fields,
        )
        del self._building[descriptor.full_name]
        built.model_rebuild(_types_namespace={name: built})
        self._models[descriptor.full_name] = built
        return built

    def _name(self, descriptor: Descriptor) -> str:
        name = descriptor.name
        if name in self._names:
            # cograph.commons.v1.SearchResult -> CommonsSearchResult
            name = descriptor.full_name.split(".")[1].title() + name
        self._names.add(name)
        return name

    def _annotation(self, field: FieldDescriptor) -> Any:
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            value = self._single(message.fields_by_name["value"])
            return dict[str, value]  # type: ignore[valid-type]
        item = self._single(field)
        if field.is_repeated:
            return list[item]  # type: ignore[valid-type]
        if message is not None or field.has_presence:
            return item | None
        return item

    def _single(self, field: FieldDescriptor) -> Any:
        if field.type == FieldDescriptor.TYPE_ENUM:
            enum = field.enum_type
            assert enum is not None
            names = tuple(enum_name(enum, value.number) for value in enum.values)
            return Literal[names]
        message = field.message_type
        if message is not None:
            if message.full_name == Timestamp.DESCRIPTOR.full_name:
                return datetime
            if message.full_name in self._building:
                return self._building[message.full_name]
            return self.model(message)
        return _SCALARS[field.type]
