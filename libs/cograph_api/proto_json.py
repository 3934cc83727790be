"""JSON <-> protobuf by field name, so a contract field added to a proto flows through.

JSON names are the proto field names (snake_case) on every surface. Out: int64 stays a
JSON number, enums become their short lower-case name (JOB_STATE_RUNNING -> running),
timestamps RFC 3339 UTC, unset message fields null. In: a validated dict is set field by
field, datetimes into Timestamps, names into enums. The stock json_format does not write
this JSON (int64 as strings, full enum names, unset fields left out), which is why the
gateway's REST answers and the CLI's --json output both come from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

_TIMESTAMP = Timestamp.DESCRIPTOR.full_name
M = TypeVar("M", bound=Message)


def _enum_prefix(enum: EnumDescriptor) -> str:
    # JobState -> JOB_STATE_ (buf STANDARD lint requires the prefix).
    out = []
    for i, char in enumerate(enum.name):
        if char.isupper() and i:
            out.append("_")
        out.append(char.upper())
    return "".join(out) + "_"


def enum_name(enum: EnumDescriptor, number: int) -> str:
    value = enum.values_by_number.get(number)
    if value is None:
        return str(number)
    name = value.name
    prefix = _enum_prefix(enum)
    return (name[len(prefix) :] if name.startswith(prefix) else name).lower()


def enum_number(enum: EnumDescriptor, name: str) -> int:
    full = _enum_prefix(enum) + name.upper()
    value = enum.values_by_name.get(full) or enum.values_by_name.get(name.upper())
    if value is None:
        raise ValueError(f"unknown {enum.name} value {name!r}")
    return int(value.number)


def _timestamp_json(message: Message) -> str:
    assert isinstance(message, Timestamp)
    moment = message.ToDatetime(tzinfo=UTC)
    text = moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None
        return enum_name(field.enum_type, value)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return value.hex()
    return value


def to_json(message: Message) -> Any:
    """A message as plain JSON data (dict), or an RFC 3339 string for a Timestamp."""
    descriptor: Any = message.DESCRIPTOR
    if descriptor.full_name == _TIMESTAMP:
        return _timestamp_json(message)
    out: dict[str, Any] = {}
    for field in descriptor.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {str(k): _scalar(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_scalar(field, item) for item in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            out[field.name] = to_json(value) if message.HasField(field.name) else None
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None  # proto3 `optional` left unset
        else:
            out[field.name] = _scalar(field, value)
    return out


def _set_scalar(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        assert field.enum_type is not None
        return enum_number(field.enum_type, value)
    return value


def _fill(message: Message, data: dict[str, Any]) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in data.items():
        if value is None:
            continue
        field = fields.get(name)
        if field is None:
            # A validated request field the backend proto does not have (yet): refuse
            # rather than drop it, so the caller is never told a filter applied when not.
            raise ValueError(f"{name}: not supported by this deployment")
        target = getattr(message, name)
        if field.message_type is not None and field.message_type.full_name == _TIMESTAMP:
            assert isinstance(value, datetime)
            moment = value if value.tzinfo else value.replace(tzinfo=UTC)
            target.FromDatetime(moment.astimezone(UTC))
        elif field.is_repeated:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for item in value:
                    _fill(target.add(), item)
            else:
                target.extend(_set_scalar(field, item) for item in value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill(target, value)
        else:
            setattr(message, name, _set_scalar(field, value))


def from_json(cls: type[M], data: dict[str, Any]) -> M:
    """Builds `cls` from validated request data (None means "not given")."""
    message = cls()
    _fill(message, data)
    return message
