"""deploy/grafana/cograph.json: an importable Grafana dashboard whose every query names series
the services really export.

What the services export is read from the code, two ways that must agree: the metrics
modules' registries are built (svckit's, the embedder's, retrieval's, the gateway's), and
every prometheus_client constructor under services/ and libs/svckit/ is read from the
source, which also finds the series a composition root declares inline (the router's cache
lookups, the commons' embedding backlog) without starting the service. A query naming a
series, or a label, that no service exports would draw an empty panel and never fail.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "cograph.json"
SOURCES = [ROOT / "services", ROOT / "libs" / "svckit"]
DATASOURCE_INPUT = "DS_PROMETHEUS"
GRID_COLUMNS = 24
# Labels Prometheus adds to every series it scrapes (the ServiceMonitor's target labels).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
# Exposed sample names of one family, by its type (prometheus_client's text format; the
# `_created` samples are left out: nothing here graphs them).
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("", "_count", "_sum"),
}
CONSTRUCTORS = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
}
# What the dashboard must show (the families, without suffixes): the operator's questions.
REQUIRED_FAMILIES = {
    "cograph_retrieval_search_seconds",  # search rate and latency
    "cograph_retrieval_search_streams",  # stream outcomes
    "cograph_grpc_server_handled",  # RPC errors by service
    "cograph_embedder_busy_seconds",
    "cograph_embedder_queue_texts",
    "cograph_embedder_batch_texts",
    "cograph_retrieval_index_jobs",
    "cograph_retrieval_indexed_files",
    "cograph_retrieval_indexed_embeddings",
    "cograph_db_pool_acquire_seconds",
    "cograph_commons_embedding_backlog",
    "cograph_gateway_requests",
    "cograph_gateway_mcp_tool_calls",
}

Obj = dict[str, Any]


@dataclass(frozen=True)
class Family:
    name: str  # as the code names it (a counter with its `_total`)
    kind: str
    labels: tuple[str, ...]

    @property
    def base(self) -> str:
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name

    def series(self) -> dict[str, set[str]]:
        """Each exposed sample name, with the labels it carries."""
        labels = set(self.labels)
        return {
            f"{self.base}{suffix}": labels | ({"le"} if suffix == "_bucket" else set())
            for suffix in SUFFIXES[self.kind]
        }


# --- what the services export ----------------------------------------------------------------


def _literal_strings(node: ast.expr | None) -> tuple[str, ...] | None:
    if isinstance(node, ast.Tuple | ast.List) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _declared_in(path: Path) -> Iterator[Family]:
    text = path.read_text()
    if "prometheus_client" not in text:
        return
    tree = ast.parse(text, filename=str(path))
    # Label tuples given by name (`labels = ("a", "b")` then `Counter(..., labels)`).
    named = {
        target.id: strings
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and (strings := _literal_strings(node.value)) is not None
    }
    constructors = {
        alias.asname or alias.name: CONSTRUCTORS[alias.name]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "prometheus_client"
        for alias in node.names
        if alias.name in CONSTRUCTORS
    }
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        kind = constructors.get(node.func.id)
        if kind is None:
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        name = node.args[0] if node.args else keywords.get("name")
        assert isinstance(name, ast.Constant) and isinstance(name.value, str), (
            f"{path}:{node.lineno}: a metric's name must be a literal, so that its "
            "dashboard queries can be checked"
        )
        label_node = node.args[2] if len(node.args) > 2 else keywords.get("labelnames")
        if isinstance(label_node, ast.Name):
            labels = named.get(label_node.id)
        else:
            labels = () if label_node is None else _literal_strings(label_node)
        assert labels is not None, f"{path}:{node.lineno}: labels must be literal strings"
        yield Family(name.value, kind, labels)


@cache
def declared_families() -> dict[str, Family]:
    """Every metric family constructed in the services' and svckit's source, by base name."""
    families: dict[str, Family] = {}
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            for family in _declared_in(path):
                assert families.get(family.base, family) == family, f"{family.base} twice"
                families[family.base] = family
    return families


def _registries() -> dict[str, CollectorRegistry]:
    """The registries the metrics modules build (nothing is started, nothing is scraped)."""
    svckit = importlib.import_module("svckit.metrics")
    embedder = svckit.ServiceMetrics()
    importlib.import_module("embedder.metrics").EmbedderMetrics(embedder)
    retrieval = svckit.ServiceMetrics()
    importlib.import_module("retrieval.metrics").RetrievalMetrics(retrieval)
    gateway = importlib.import_module("gateway.metrics").Metrics()
    return {
        "embedder": embedder.registry,
        "retrieval": retrieval.registry,
        "gateway": gateway.registry,
    }


@cache
def exported_series() -> dict[str, set[str]]:
    """Every sample name a service exposes, with its labels."""
    series: dict[str, set[str]] = {}
    for family in declared_families().values():
        series.update(family.series())
    return series


def test_the_source_scan_finds_every_family_the_registries_hold() -> None:
    declared = declared_families()
    seen = 0
    for service, registry in _registries().items():
        for metric in registry.collect():
            seen += 1
            assert metric.name in declared, f"{service}: {metric.name} not found in the source"
            assert declared[metric.name].kind == metric.type, metric.name
    assert seen >= 15
    # The ones composition roots declare inline, which no registry above holds.
    assert {"cograph_router_cache_lookups", "cograph_commons_embedding_backlog"} <= set(declared)
    assert exported_series()["cograph_router_cache_lookups_total"] == {"pool", "result"}
    assert exported_series()["cograph_embedder_batch_texts_bucket"] == {"lane", "le"}


# --- reading PromQL ----------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", re.IGNORECASE
)
_IDENTIFIER = re.compile(r"(?<![\w$.])([A-Za-z_:][\w:]*)(\s*\()?")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*\"((?:[^\"\\]|\\.)*)\"")
KEYWORDS = {"and", "or", "unless", "offset", "bool", "inf", "nan"}


@dataclass(frozen=True)
class Query:
    metrics: frozenset[str]
    labels: frozenset[str]  # label names the query matches on or groups by
    matchers: tuple[tuple[str, str, str], ...]  # (label, operator, value)


def parse(expr: str) -> Query:
    """The metric names, label names and label matchers of a PromQL expression: enough to
    check it against the exported series, not a full parser."""
    matchers = tuple(_MATCHER.findall(expr))
    labels = {name for name, _, _ in matchers}
    bare = _STRING.sub('""', expr)
    for match in _MATCHERS.finditer(bare):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", match.group(1)))
    bare = _MATCHERS.sub(" ", bare)
    bare = _RANGE.sub(" ", bare)
    for match in _GROUPING.finditer(bare):
        labels |= {label.strip() for label in match.group(2).split(",") if label.strip()}
    bare = _GROUPING.sub(" ", bare)
    metrics = {
        match.group(1)
        for match in _IDENTIFIER.finditer(bare)
        if match.group(2) is None and match.group(1).lower() not in KEYWORDS
    }
    return Query(frozenset(metrics), frozenset(labels), matchers)


def test_parse_reads_metrics_labels_and_matchers() -> None:
    query = parse(
        'histogram_quantile(0.95, sum by (le, pool) (rate(x_bucket{namespace=~"$ns",'
        'outcome="timeout"}[$__rate_interval]))) / ignoring(pool) sum(y_total offset 5m) '
        "or on() vector(0)"
    )
    assert query.metrics == {"x_bucket", "y_total"}
    assert query.labels == {"le", "pool", "namespace", "outcome"}
    assert ("outcome", "=", "timeout") in query.matchers
    # A metric inside a string, a function's name or a duration is not a metric.
    assert parse('label_replace(up, "dst", "$1", "src", "(.*)")').metrics == {"up"}
    assert parse("rate(a_total[5m])").metrics == {"a_total"}


# --- the dashboard -------------------------------------------------------------------------------


@cache
def dashboard() -> Obj:
    document: Obj = json.loads(DASHBOARD.read_text())
    return document


def _panels() -> list[Obj]:
    """Every panel, rows' nested panels included."""
    found: list[Obj] = []
    for panel in dashboard()["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def _query_panels() -> list[Obj]:
    return [p for p in _panels() if p["type"] != "row"]


def _expressions() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in _query_panels() for t in p["targets"]]


def test_dashboard_has_what_grafana_needs() -> None:
    board = dashboard()
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"]), "Grafana's uid: 40 characters"
    assert board["title"] and isinstance(board["schemaVersion"], int)
    assert board["schemaVersion"] >= 36, "the datasource-object form of panels"
    assert "id" not in board or board["id"] is None, "an id would collide on import"
    ids = [p["id"] for p in _panels()]
    assert all(isinstance(i, int) for i in ids)
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert len(_query_panels()) >= 15
    titles = [p["title"] for p in _query_panels()]
    assert len(titles) == len(set(titles))
    for panel in _query_panels():
        assert panel["targets"], f"{panel['title']}: no query"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        assert panel.get("description"), f"{panel['title']}: say what it shows"


def test_datasource_is_the_import_input() -> None:
    """Grafana's import asks for `DS_PROMETHEUS` and writes the chosen datasource wherever
    `${DS_PROMETHEUS}` stands; a dashboard loaded as it is (the sidecar of
    components/grafana-dashboard) resolves it through the variable of the same name."""
    board = dashboard()
    (wanted,) = board["__inputs"]
    assert wanted["name"] == DATASOURCE_INPUT
    assert (wanted["type"], wanted["pluginId"]) == ("datasource", "prometheus")
    reference = {"type": "prometheus", "uid": f"${{{DATASOURCE_INPUT}}}"}
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert (variables[DATASOURCE_INPUT]["type"], variables[DATASOURCE_INPUT]["query"]) == (
        "datasource",
        "prometheus",
    )
    for panel in _query_panels():
        assert panel["datasource"] == reference, panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource", reference) == reference, panel["title"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == reference, variable["name"]


def test_panels_fit_the_grid_without_overlapping() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["w"] >= 1 and grid["h"] >= 1 and grid["x"] >= 0 and grid["y"] >= 0
        assert grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
        cells = {
            (grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


@pytest.mark.parametrize(("title", "expr"), _expressions(), ids=lambda v: str(v)[:60])
def test_every_query_names_exported_series_and_labels(title: str, expr: str) -> None:
    series = exported_series()
    query = parse(expr)
    assert query.metrics, f"{title}: no metric in {expr!r}"
    unknown = sorted(query.metrics - set(series))
    assert not unknown, f"{title}: no service exports {unknown}"
    carried = set().union(*(series[m] for m in query.metrics)) | TARGET_LABELS
    assert query.labels <= carried, f"{title}: labels {sorted(query.labels - carried)} unknown"
    for name, operator, value in query.matchers:
        assert operator in {"=~", "!~"} or "$" not in value, f"{title}: {name} {value}"


def test_grpc_service_matchers_name_real_services() -> None:
    """`grpc_service` carries a proto service's full name; a misspelt one matches nothing."""
    services = set()
    for area in ("embedder", "retrieval", "router", "commons"):
        module = importlib.import_module(f"cograph.{area}.v1.{area}_pb2")
        services |= {s.full_name for s in module.DESCRIPTOR.services_by_name.values()}
    named = [
        value
        for _, expr in _expressions()
        for label, operator, value in parse(expr).matchers
        if label == "grpc_service" and operator == "="
    ]
    assert named, "the dashboard filters on a service somewhere"
    assert set(named) <= services


def test_dashboard_covers_what_an_operator_watches() -> None:
    used = {metric for _, expr in _expressions() for metric in parse(expr).metrics}
    families = declared_families()
    shown = {base for base, family in families.items() if set(family.series()) & used}
    assert set(families) >= REQUIRED_FAMILIES, "a required family is gone from the code"
    assert shown >= REQUIRED_FAMILIES, f"not on the dashboard: {REQUIRED_FAMILIES - shown}"
    # Latencies are quantiles over histogram buckets, never averages alone.
    quantiles = [e for _, e in _expressions() if "histogram_quantile(" in e]
    for family in ("cograph_retrieval_search_seconds", "cograph_gateway_request_duration_seconds"):
        for quantile in ("0.5", "0.95"):
            assert any(
                e.startswith(f"histogram_quantile({quantile},") and f"{family}_bucket" in e
                for e in quantiles
            ), f"{family}: p{quantile}"
    for expr in quantiles:
        assert re.search(r"\bby \(le\b", expr), f"histogram_quantile needs `le`: {expr}"


def test_template_variables_query_exported_series() -> None:
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", text)
        assert match, f"{variable['name']}: {text}"
        metric, label = match.groups()
        assert metric in exported_series()
        assert label in exported_series()[metric] | TARGET_LABELS
        # Where the label is absent (Prometheus outside Kubernetes), `.*` still matches.
        assert variable.get("allValue") == ".*" and variable.get("includeAll") is True


def test_every_panel_filters_on_the_namespace_variable() -> None:
    """Two Cograph installations scraped by one Prometheus must not add up on one graph."""
    for title, expr in _expressions():
        selectors = _MATCHERS.findall(_STRING.sub('""', expr))
        count = len(re.findall(r"\bcograph_\w+", expr))
        assert len(selectors) == count, f"{title}: every series selector needs its matchers"
    for title, expr in _expressions():
        for match in re.finditer(r"\bcograph_\w+\{([^}]*)\}", expr):
            assert 'namespace=~"$namespace"' in match.group(1), title
