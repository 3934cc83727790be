"""Parsing of `NAME=WEIGHT,NAME=WEIGHT` lists, the shape of every weight setting
(RETRIEVAL_LAYER_WEIGHTS, and each class of RETRIEVAL_STREAM_WEIGHTS)."""

from __future__ import annotations

from collections.abc import Collection


def parse_weights(
    text: str, names: Collection[str], *, label: str, noun: str, low: float, high: float
) -> dict[str, float]:
    """`a=0.5, b=2` -> {"a": 0.5, "b": 2.0}; every name must be one of `names` and every
    weight within [low, high]. Raises ValueError saying what is wrong, in the words of the
    setting (`label` names the key, e.g. LAYER; `noun` the value, e.g. "a weight")."""
    weights: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise ValueError(
                f"{item!r} must be {label}=WEIGHT with {label} one of {', '.join(names)}"
            )
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value.strip()!r} is not a number") from None
        if not low <= weight <= high:
            raise ValueError(f"{item!r}: {noun} must be in [{low}, {high}]")
        weights[name] = weight
    return weights
