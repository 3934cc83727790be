"""The CloudNativePG overlay (deploy/k8s/overlays/cloudnative-pg), rendered and checked.

CloudNativePG's kinds are CRDs the Kubernetes schemas do not know, and the operator cannot
run here: each object is checked against the fields of its documented API (v1) that this
package uses, and the network paths between the services, the poolers and the instances
are computed from the policies with the pods' labels as the operator sets them
(`cnpg.io/cluster`, `cnpg.io/podRole: instance`, `cnpg.io/poolerName`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from tests.unit.test_deploy_manifests import (
    DB_SECRET,
    DB_SERVICES,
    KUBERNETES_VERSION,
    YAML_LOADER,
    _render,
    _selects,
)

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "deploy" / "k8s" / "overlays" / "cloudnative-pg"
CNPG = "postgresql.cnpg.io/v1"
CLUSTER = "cograph-pg"
POOLERS = {"rw": "cograph-pg-pooler-rw", "ro": "cograph-pg-pooler-ro"}
# The fields of CloudNativePG's v1 API this package writes (the operator's API reference):
# a misspelt key would be ignored by a lenient apply, or refused by the CRD's schema.
CLUSTER_SPEC = {
    "instances", "imageName", "primaryUpdateStrategy", "minSyncReplicas",
    "maxSyncReplicas", "bootstrap", "postgresql", "resources", "storage", "walStorage",
    "affinity", "backup",
}  # fmt: skip
INITDB = {"database", "owner", "secret", "postInitApplicationSQL"}
BARMAN = {"destinationPath", "s3Credentials", "wal", "data"}
POOLER_SPEC = {"cluster", "instances", "type", "pgbouncer"}
SCHEDULED_BACKUP_SPEC = {"schedule", "backupOwnerReference", "target", "cluster"}

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def docs() -> list[Obj]:
    result = _render("cloudnative-pg")
    if result is None:
        pytest.fail("neither kustomize nor kubectl is installed (the suite needs one)")
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.load_all(result.stdout, Loader=YAML_LOADER) if d]


def _one(docs: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_every_kubernetes_object_is_valid_and_the_bundled_database_is_gone(
    docs: list[Obj],
) -> None:
    for doc in docs:
        if doc["apiVersion"] != CNPG:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("StatefulSet", "postgres") not in kinds
    # The managed database's open egress is not needed inside the namespace.
    assert ("NetworkPolicy", "external-postgres-egress") not in kinds
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"cograph"}


def test_the_cluster_has_replicas_the_extensions_and_backups(docs: list[Obj]) -> None:
    cluster = _one(docs, "Cluster", CLUSTER)
    spec = cluster["spec"]
    assert cluster["apiVersion"] == CNPG
    assert set(spec) <= CLUSTER_SPEC, set(spec) - CLUSTER_SPEC
    assert spec["instances"] >= 3, "a primary and at least two replicas"
    initdb = spec["bootstrap"]["initdb"]
    assert set(initdb) <= INITDB
    created = " ".join(initdb["postInitApplicationSQL"])
    for extension in ("vector", "pg_trgm"):
        assert f"CREATE EXTENSION IF NOT EXISTS {extension}" in created
    assert spec["postgresql"]["parameters"]["hot_standby_feedback"] == "on"
    barman = spec["backup"]["barmanObjectStore"]
    assert set(barman) <= BARMAN
    assert barman["destinationPath"].startswith("s3://")
    secrets = {ref["name"] for ref in barman["s3Credentials"].values()}
    assert secrets == {"cograph-pg-backup"}
    backup = _one(docs, "ScheduledBackup", "cograph-pg-nightly")
    assert set(backup["spec"]) <= SCHEDULED_BACKUP_SPEC
    assert backup["spec"]["cluster"]["name"] == CLUSTER
    assert len(backup["spec"]["schedule"].split()) == 6, "CloudNativePG's cron has seconds"


def test_a_pooler_for_writes_and_one_for_reads(docs: list[Obj]) -> None:
    for kind, name in POOLERS.items():
        pooler = _one(docs, "Pooler", name)
        assert set(pooler["spec"]) <= POOLER_SPEC
        assert pooler["spec"]["cluster"]["name"] == CLUSTER
        assert pooler["spec"]["type"] == kind
        # A search exports a snapshot from one transaction to others and asyncpg prepares
        # statements per connection: transaction pooling would break both.
        assert pooler["spec"]["pgbouncer"]["poolMode"] == "session"


def test_the_services_urls_name_the_poolers(docs: list[Obj]) -> None:
    """The Secret's keys as the overlay tells a team to make them, read by the services."""
    text = (OVERLAY / "kustomization.yaml").read_text()
    assert f"@{POOLERS['rw']}:5432/cograph" in text.split("url=", 1)[1].split("\n")[0]
    assert f"@{POOLERS['ro']}:5432/cograph" in text.split("read-url=", 1)[1].split("\n")[0]
    for kind, name in (("StatefulSet", "retrieval"), ("Deployment", "commons")):
        workload = _one(docs, kind, name)
        (main,) = [
            c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name
        ]
        env = {e["name"]: e for e in main["env"]}
        reference = env["COGRAPH_DATABASE_READ_URL"]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": DB_SECRET, "key": "read-url", "optional": True}, name


INSTANCE = {"cnpg.io/cluster": CLUSTER, "cnpg.io/podRole": "instance"}


def _pooler_labels(name: str) -> dict[str, str]:
    return {"cnpg.io/cluster": CLUSTER, "cnpg.io/poolerName": name}


def _allows(
    policies: list[Obj], direction: str, subject: dict[str, str], peer: dict[str, str], port: int
) -> bool:
    """Whether the policies selecting `subject` allow its `direction` traffic with `peer`
    on TCP `port` (a subject no policy selects for that direction is not isolated, but the
    production overlay's namespace-wide deny selects every pod)."""
    types = "Ingress" if direction == "ingress" else "Egress"
    side = "from" if direction == "ingress" else "to"
    for policy in policies:
        spec = policy["spec"]
        if types not in spec.get("policyTypes", []) or not _selects(spec["podSelector"], subject):
            continue
        for rule in spec.get(direction, []):
            ports = rule.get("ports")
            if ports is not None and not any(
                p.get("protocol", "TCP") == "TCP" and p.get("port") == port for p in ports
            ):
                continue
            peers = rule.get(side)
            if peers is None:
                return True
            for entry in peers:
                if "ipBlock" in entry or "namespaceSelector" in entry:
                    continue  # outside the namespace: not a pod of it
                if _selects(entry["podSelector"], peer):
                    return True
    return False


def _path(policies: list[Obj], source: dict[str, str], target: dict[str, str], port: int) -> bool:
    return _allows(policies, "egress", source, target, port) and _allows(
        policies, "ingress", target, source, port
    )


def test_only_the_database_services_reach_the_poolers_and_only_poolers_the_instances(
    docs: list[Obj],
) -> None:
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    workloads = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in docs
        if d["kind"] in {"Deployment", "StatefulSet"}
    }
    for name, labels in workloads.items():
        for pooler in POOLERS.values():
            expected = name in DB_SERVICES
            assert _path(policies, labels, _pooler_labels(pooler), 5432) == expected, name
        # Straight to the database: no service (the poolers are the way in).
        assert not _path(policies, labels, INSTANCE, 5432), name
    for pooler in POOLERS.values():
        assert _path(policies, _pooler_labels(pooler), INSTANCE, 5432)
    # Streaming replication between the instances.
    assert _path(policies, INSTANCE, INSTANCE, 5432)
    # The instances open no other port to pods of the namespace.
    for port in (8000, 9187):
        for pooler in POOLERS.values():
            assert not _path(policies, _pooler_labels(pooler), INSTANCE, port)
