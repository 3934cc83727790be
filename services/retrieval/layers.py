"""Layers (what a caller asks for), stores (physical indexes) and the units streams rank.

Code, ast and ast_summary map to the code store, repo_doc to repo_docs; collections
are reached by naming one. Broad searches use code, ast_summary and repo_doc -- never the
bare ast layer, which repeats the code row with only the signature as its snippet.

Inside the code store two kinds of unit are ranked: a node's *body* (embedding, tsv) for
the code and ast layers, and its *summary* (summary_embedding, summary_tsv) for
ast_summary. A body unit becomes one row per requested body layer, so asking for both code
and ast returns the same chunk twice, at two layers: the result count is what bounds the
tokens a caller gets back, so a caller that names two layers asks for both rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from cograph_api import limits
from retrieval.weights import parse_weights
from svckit.errors import InvalidArgument

# The layer names are part of the request contract, so they are defined with the limits.
Layer = limits.Layer
Store = Literal["code", "repo_docs", "md_collections"]
Unit = Literal["body", "summary", "doc"]

LAYERS: tuple[Layer, ...] = limits.LAYERS
STORES: tuple[Store, ...] = ("code", "repo_docs", "md_collections")
BROAD: frozenset[Layer] = frozenset({"code", "ast_summary", "repo_doc"})
COLLECTION: frozenset[Layer] = frozenset({"md_collection"})

STORE_OF: dict[Layer, Store] = {
    "code": "code",
    "ast": "code",
    "ast_summary": "code",
    "repo_doc": "repo_docs",
    "md_collection": "md_collections",
}
UNIT_OF: dict[Layer, Unit] = {
    "code": "body",
    "ast": "body",
    "ast_summary": "summary",
    "repo_doc": "doc",
    "md_collection": "doc",
}
# Stable orders used to break ties deterministically.
STORE_ORDER: dict[Store, int] = {store: i for i, store in enumerate(STORES)}
UNIT_ORDER: dict[Unit, int] = {"body": 0, "summary": 1, "doc": 2}
LAYER_ORDER: dict[Layer, int] = {layer: i for i, layer in enumerate(LAYERS)}


def resolve_layers(requested: Iterable[str], collection: bool) -> frozenset[Layer]:
    """The layers a request searches: the broad set (or md_collection) when none is named.

    Raises InvalidArgument for an unknown layer, and for md_collection without a collection
    (or any other layer with one): a collection search is its own path, never mixed with code.
    """
    names = [name.strip().lower() for name in requested]
    if not names:
        return COLLECTION if collection else BROAD
    unknown = sorted({name for name in names if name not in LAYERS})
    if unknown:
        raise InvalidArgument(
            f"unknown layer {', '.join(unknown)}; expected one of {', '.join(LAYERS)}"
        )
    layers: frozenset[Layer] = frozenset(name for name in LAYERS if name in names)
    if collection and layers != COLLECTION:
        raise InvalidArgument("a collection search returns only the md_collection layer")
    if not collection and "md_collection" in layers:
        raise InvalidArgument("the md_collection layer needs a collection")
    return layers


def stores_for(layers: Iterable[Layer]) -> tuple[Store, ...]:
    """The stores the layers live in, in the fixed store order."""
    wanted = {STORE_OF[layer] for layer in layers}
    return tuple(store for store in STORES if store in wanted)


def units_for(store: Store, layers: Iterable[Layer]) -> tuple[Unit, ...]:
    """The units of `store` the layers need, in the fixed unit order."""
    wanted = {UNIT_OF[layer] for layer in layers if STORE_OF[layer] == store}
    return tuple(sorted(wanted, key=UNIT_ORDER.__getitem__))


def layers_of_unit(store: Store, unit: Unit, layers: Iterable[Layer]) -> tuple[Layer, ...]:
    """The requested layers one ranked unit becomes, in layer order (code before ast)."""
    chosen = [layer for layer in layers if STORE_OF[layer] == store and UNIT_OF[layer] == unit]
    return tuple(sorted(chosen, key=LAYER_ORDER.__getitem__))


# The layers a weight can be given to, and the unit each weighs (code and ast share the
# body unit; md_collection is searched alone, where a weight changes no order).
WEIGHTED_LAYERS: dict[str, Unit] = {"code": "body", "ast_summary": "summary", "repo_doc": "doc"}
WEIGHT_MIN, WEIGHT_MAX = 0.01, 100.0


def parse_layer_weights(text: str) -> dict[Unit, float]:
    """`ast_summary=0.8,repo_doc=1.2` -> {summary: 0.8, doc: 1.2}; raises ValueError saying
    what is wrong."""
    named = parse_weights(
        text, WEIGHTED_LAYERS, label="LAYER", noun="a weight", low=WEIGHT_MIN, high=WEIGHT_MAX
    )
    return {WEIGHTED_LAYERS[name]: weight for name, weight in named.items()}
