"""Static checks of deploy/: the Kubernetes manifests and the Dockerfile.

Every Kubernetes object under deploy/k8s is validated against the bundled OpenAPI schemas of
a fixed Kubernetes version in strict mode (unknown fields fail), then the properties the
services rely on are asserted on the base: ports, probes, hardening, env wiring, selectors.
kustomize's own files are checked for dangling references. When a kustomize binary (or
kubectl, which embeds it) is on PATH, each overlay is also rendered and its output validated.
No cluster, Docker engine or network is needed.
"""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import kubernetes_validate.utils  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from tests.internal_auth import with_secret

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
COMPONENTS = K8S / "components"
OVERLAYS = K8S / "overlays"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "docker" / "Dockerfile.dockerignore"

KUBERNETES_VERSION = "1.33.0"  # the oldest release the manifests promise to work on
KUSTOMIZE_KINDS = {"Kustomization", "Component"}
GRPC_SERVICES = {"embedder": 50051, "retrieval": 50052, "router": 50053, "commons": 50054}
HTTP_SERVICES = {"gateway": 8080}
# Where the gRPC services serve Prometheus metrics in the cluster (<SERVICE>_METRICS_LISTEN).
METRICS_PORT = 9464
SERVICES = {**GRPC_SERVICES, **HTTP_SERVICES}
DB_SERVICES = {"retrieval", "router", "commons", "gateway"}
# Every pod that uses the database first runs the migrations in an initContainer.
MIGRATE_COMMAND = ["python", "-m", "cograph_cli", "migrate"]
MIGRATE_MODULE = ROOT / "libs" / "cograph_cli" / "migrate_cmd.py"
# The gateway also stores the first admin key before it starts (`cograph keys bootstrap`).
INIT_AFTER_MIGRATE = {"gateway": ["bootstrap-admin"]}
# Secret keys a container may read only with `optional: true` (the overlays need not make them).
OPTIONAL_SECRET_KEYS = {"router-url", "read-url"}
SHUTDOWN_GRACE_S = 5  # svckit.server.GrpcHost.grace_s
DB_SECRET = "cograph-db"
CONFIG_MAP = "cograph-config"
PART_OF = "app.kubernetes.io/part-of"
NAME = "app.kubernetes.io/name"
# The environment defaults the ConfigMap must carry.
CONFIG_DEFAULTS = {
    "EMBEDDER_ADDR": "embedder:50051",
    "RETRIEVAL_ADDR": "retrieval:50052",
    "ROUTER_ADDR": "router:50053",
    "COMMONS_ADDR": "commons:50054",
    "EMBEDDER_TIMEOUT_S": "2",
    "SEARCH_LIMIT": "10",
    "SEARCH_W_SEMANTIC": "1.0",
    "SEARCH_W_VOTES": "0.15",
    "SEARCH_BODY_SNIPPET": "1200",
    "RETRIEVAL_RRF_K": "10",
    "RETRIEVAL_CANDIDATE_CAP": "100",
    "RETRIEVAL_RERANK_THRESHOLD": "50",
}

Obj = dict[str, Any]

# libyaml's safe loader where PyYAML has it: the same constructors, about ten times faster.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module", autouse=True)
def _schemas_parsed_once() -> Iterator[None]:
    """kubernetes_validate parses its JSON schemas, the definitions file included, on every
    call; here each is parsed once (validation never changes them)."""
    utils = kubernetes_validate.utils
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utils, "schema_contents", cache(utils.schema_contents))
        yield


# --- loading ------------------------------------------------------------------------------


def _load(path: Path) -> list[Obj]:
    docs = [doc for doc in yaml.load_all(path.read_text(), Loader=YAML_LOADER) if doc is not None]
    for doc in docs:
        assert isinstance(doc, dict), f"{path}: every YAML document must be a mapping"
    return docs


YAML_FILES = sorted(K8S.rglob("*.yaml")) + sorted(K8S.rglob("*.yml"))
KUSTOMIZATION_FILES = [p for p in YAML_FILES if p.name == "kustomization.yaml"]
OBJECT_FILES = [p for p in YAML_FILES if p.name != "kustomization.yaml"]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@cache
def _kustomization(directory: Path) -> Obj:
    docs = _load(directory / "kustomization.yaml")
    assert len(docs) == 1, f"{directory}: one document per kustomization.yaml"
    return docs[0]


@cache
def _base_objects() -> tuple[Obj, ...]:
    """The base's objects, in the order its kustomization lists the files."""
    objects: list[Obj] = []
    for name in _kustomization(BASE)["resources"]:
        objects.extend(_load(BASE / name))
    return tuple(objects)


def _objects(kind: str) -> dict[str, Obj]:
    found = {o["metadata"]["name"]: o for o in _base_objects() if o["kind"] == kind}
    return found


def _workloads() -> dict[str, Obj]:
    return {**_objects("Deployment"), **_objects("StatefulSet")}


def _pod(workload: Obj) -> Obj:
    pod: Obj = workload["spec"]["template"]["spec"]
    return pod


def _volumes(workload: Obj) -> dict[str, Obj]:
    """The volumes a pod's containers may mount by name: the pod's own and, for a
    StatefulSet, one claim per volumeClaimTemplate."""
    volumes = {v["name"]: v for v in _pod(workload).get("volumes", [])}
    for claim in workload["spec"].get("volumeClaimTemplates", []):
        volumes[claim["metadata"]["name"]] = {"persistentVolumeClaim": claim}
    return volumes


def _service_workloads() -> dict[str, Obj]:
    """The five services' workloads (retrieval is a StatefulSet, the rest Deployments)."""
    return {name: w for name, w in _workloads().items() if name in SERVICES}


def _containers(workload: Obj) -> list[Obj]:
    pod = _pod(workload)
    return [*pod.get("initContainers", []), *pod["containers"]]


def _main(workload: Obj) -> Obj:
    containers: list[Obj] = _pod(workload)["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: one container per pod"
    return containers[0]


def _env(container: Obj) -> dict[str, Obj]:
    return {item["name"]: item for item in container.get("env", [])}


def _port_number(container: Obj, port: int | str) -> int:
    """A probe's or Service's port, resolved through the container's named ports."""
    if isinstance(port, int):
        return port
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise AssertionError(f"{container['name']}: no container port named {port!r}")


def _listen_port(name: str, container: Obj) -> int:
    variable = f"{name.upper()}_LISTEN"
    entry = _env(container).get(variable)
    assert entry is not None, f"{name}: {variable} must be set"
    host, _, port = str(entry["value"]).rpartition(":")
    assert host == "0.0.0.0", f"{variable} must listen on every interface, got {host!r}"
    return int(port)


def _cpu(quantity: str | int | float) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _bytes(quantity: str | int) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i|[kMGT])?", str(quantity))
    assert match, f"unreadable quantity {quantity!r}"
    number, unit = match.groups()
    scale = _BINARY.get(unit or "", _DECIMAL.get(unit or "", 1))
    return int(float(number) * scale)


def _subset(small: dict[str, str], big: dict[str, str]) -> bool:
    return bool(small) and all(big.get(key) == value for key, value in small.items())


def _local_secret_keys() -> dict[str, str]:
    """The keys (and values) of the development `cograph-db` Secret the local overlay makes."""
    generators = _kustomization(OVERLAYS / "local").get("secretGenerator", [])
    for generator in generators:
        if generator["name"] == DB_SECRET:
            pairs = (literal.split("=", 1) for literal in generator.get("literals", []))
            return {key: value for key, value in pairs}
    raise AssertionError(f"the local overlay must generate the {DB_SECRET} Secret")


# --- schema validation ----------------------------------------------------------------------


# Kinds from an operator's CRDs, which the Kubernetes schemas do not know: each is checked
# by a test of its own (test_service_monitor_scrapes_every_service; CloudNativePG's in
# test_deploy_cloudnative_pg.py).
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("postgresql.cnpg.io/v1", "Cluster"),
    ("postgresql.cnpg.io/v1", "Pooler"),
    ("postgresql.cnpg.io/v1", "ScheduledBackup"),
}


@pytest.mark.parametrize("path", OBJECT_FILES, ids=_rel)
def test_manifest_is_valid_kubernetes(path: Path) -> None:
    docs = _load(path)
    assert docs, f"{_rel(path)} holds no objects"
    for doc in docs:
        assert doc.get("kind") not in KUSTOMIZE_KINDS, "kustomize files are kustomization.yaml"
        if (doc.get("apiVersion"), doc.get("kind")) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            name = doc.get("metadata", {}).get("name")
            pytest.fail(f"{_rel(path)}: {doc.get('kind')}/{name}: {error.message}")


def test_there_is_something_to_validate() -> None:
    assert len(OBJECT_FILES) >= 10
    assert {p.parent for p in KUSTOMIZATION_FILES} >= {
        BASE,
        COMPONENTS / "otel",
        COMPONENTS / "external-postgres",
        OVERLAYS / "local",
        OVERLAYS / "production",
    }


# --- kustomize wiring ---------------------------------------------------------------------


def _referenced_files(directory: Path, kustomization: Obj) -> Iterator[tuple[str, Path]]:
    for entry in kustomization.get("resources", []):
        yield "resources", directory / entry
    for entry in kustomization.get("components", []):
        yield "components", directory / entry
    for patch in kustomization.get("patches", []):
        if "path" in patch:
            yield "patches", directory / patch["path"]
    for field in ("configMapGenerator", "secretGenerator"):
        for generator in kustomization.get(field, []):
            for entry in [*generator.get("files", []), *generator.get("envs", [])]:
                yield field, directory / entry.split("=", 1)[-1]


@pytest.mark.parametrize("path", KUSTOMIZATION_FILES, ids=_rel)
def test_kustomization_references_exist(path: Path) -> None:
    kustomization = _kustomization(path.parent)
    kind = kustomization.get("kind")
    assert kind in KUSTOMIZE_KINDS, f"{_rel(path)}: kind {kind!r}"
    expected_api = "v1alpha1" if kind == "Component" else "v1beta1"
    assert kustomization["apiVersion"] == f"kustomize.config.k8s.io/{expected_api}"
    for field, target in _referenced_files(path.parent, kustomization):
        assert target.exists(), f"{_rel(path)}: {field} names missing {target}"
        if field == "components":
            assert _kustomization(target.resolve())["kind"] == "Component", target
        elif target.is_dir():
            assert (target / "kustomization.yaml").is_file(), f"{target}: not a kustomization"
            assert _kustomization(target.resolve())["kind"] == "Kustomization", target


def test_every_manifest_file_is_used() -> None:
    """A YAML file no kustomization lists would silently never be applied."""
    used: set[Path] = set()
    for path in KUSTOMIZATION_FILES:
        for _, target in _referenced_files(path.parent, _kustomization(path.parent)):
            used.add(target.resolve())
    orphans = [_rel(p) for p in OBJECT_FILES if p.resolve() not in used]
    assert not orphans, f"listed by no kustomization: {orphans}"


# --- the base: labels, selectors, hardening -------------------------------------------------


# Services whose replicas each keep a volume of their own (a StatefulSet's claim template).
STATEFUL_SERVICES = {"retrieval"}


def test_base_has_one_workload_and_service_per_service() -> None:
    deployments, services = _objects("Deployment"), _objects("Service")
    assert set(deployments) == set(SERVICES) - STATEFUL_SERVICES
    assert set(_objects("StatefulSet")) == {*STATEFUL_SERVICES, "postgres"}
    assert set(services) == {*SERVICES, "postgres"}
    for name in SERVICES:
        kind = "StatefulSet" if name in STATEFUL_SERVICES else "Deployment"
        file_kinds = {(o["kind"], o["metadata"]["name"]) for o in _load(BASE / f"{name}.yaml")}
        assert {(kind, name), ("Service", name)} <= file_kinds


def test_every_object_is_labelled() -> None:
    for obj in _base_objects():
        labels = obj["metadata"].get("labels", {})
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        assert labels.get(PART_OF) == "cograph", f"{where}: needs {PART_OF}: cograph"
        assert labels.get(NAME), f"{where}: needs {NAME}"


@pytest.mark.parametrize("name", sorted([*SERVICES, "postgres"]))
def test_workload_selector_matches_its_pods(name: str) -> None:
    workload = _workloads()[name]
    selector = workload["spec"]["selector"]["matchLabels"]
    template_labels = workload["spec"]["template"]["metadata"]["labels"]
    assert _subset(selector, template_labels)
    assert template_labels.get(PART_OF) == "cograph"
    assert template_labels.get(NAME) == name


@pytest.mark.parametrize("name", sorted([*SERVICES, "postgres"]))
def test_workload_is_hardened(name: str) -> None:
    workload = _workloads()[name]
    pod = _pod(workload)
    assert pod.get("automountServiceAccountToken") is False, "no pod talks to the API server"
    assert pod.get("terminationGracePeriodSeconds", 30) > SHUTDOWN_GRACE_S
    pod_security = pod.get("securityContext", {})
    volumes = set(_volumes(workload))
    for container in _containers(workload):
        where = f"{name}/{container['name']}"
        security = container.get("securityContext", {})

        def setting(key: str, security: Obj = security) -> Any:
            return security.get(key, pod_security.get(key))

        assert setting("runAsNonRoot") is True, f"{where}: runAsNonRoot"
        assert setting("runAsUser") not in (0, "0"), f"{where}: runs as root"
        assert (setting("seccompProfile") or {}).get("type") == "RuntimeDefault", where
        assert security.get("allowPrivilegeEscalation") is False, where
        assert not security.get("privileged"), where
        assert security.get("capabilities", {}).get("drop") == ["ALL"], where
        assert not security.get("capabilities", {}).get("add"), where
        assert security.get("readOnlyRootFilesystem") is True, where
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        assert "/tmp" in mounts, f"{where}: a read-only root needs a writable /tmp"
        for volume in mounts.values():
            assert volume in volumes, f"{where}: mounts undeclared volume {volume!r}"


@pytest.mark.parametrize("name", sorted([*SERVICES, "postgres"]))
def test_containers_have_resources_and_probes(name: str) -> None:
    pod = _pod(_workloads()[name])
    for container in _containers(_workloads()[name]):
        where = f"{name}/{container['name']}"
        resources = container.get("resources", {})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        for key in ("cpu", "memory"):
            assert key in requests, f"{where}: requests.{key}"
            assert key in limits, f"{where}: limits.{key}"
        assert _cpu(requests["cpu"]) <= _cpu(limits["cpu"]), where
        assert _bytes(requests["memory"]) <= _bytes(limits["memory"]), where
        if container in pod.get("initContainers", []):
            # Run-to-completion steps: no probes, and not a sidecar that would never finish.
            assert "restartPolicy" not in container, f"{where}: an initContainer, not a sidecar"
            assert not set(container) & {"readinessProbe", "livenessProbe", "startupProbe"}
            continue
        assert container.get("readinessProbe"), f"{where}: readinessProbe"
        assert container.get("livenessProbe"), f"{where}: livenessProbe"


@pytest.mark.parametrize(("name", "port"), sorted(GRPC_SERVICES.items()))
def test_grpc_service_listens_and_is_probed_on_its_port(name: str, port: int) -> None:
    container = _main(_workloads()[name])
    assert container["command"] == ["python", "-m", name]
    assert (ROOT / "services" / name).is_dir(), f"python -m {name}: no such package"
    assert _listen_port(name, container) == port
    assert port in {p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe not in container:
            assert probe == "startupProbe", f"{name}: {probe} missing"
            continue
        # Native gRPC probes ask grpc.health.v1 for the server ("" service) status, which
        # svckit keeps NOT_SERVING until the service is ready.
        assert set(container[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}
        assert container[probe]["grpc"]["port"] == port, f"{name}: {probe} on another port"
        assert not container[probe]["grpc"].get("service"), "probe the whole server"


@pytest.mark.parametrize(("name", "port"), sorted(HTTP_SERVICES.items()))
def test_gateway_is_probed_over_http(name: str, port: int) -> None:
    container = _main(_workloads()[name])
    assert container["command"] == ["python", "-m", name]
    assert (ROOT / "services" / name).is_dir(), f"python -m {name}: no such package"
    assert _listen_port(name, container) == port
    readiness = container["readinessProbe"]["httpGet"]
    liveness = container["livenessProbe"]["httpGet"]
    assert readiness["path"] == "/readyz"
    assert liveness["path"] == "/healthz"
    for probe in (readiness, liveness, container.get("startupProbe", {}).get("httpGet")):
        if probe is not None:
            assert _port_number(container, probe["port"]) == port


def test_services_select_workloads_and_target_their_ports() -> None:
    workloads = _workloads()
    for name, service in _objects("Service").items():
        selector = service["spec"]["selector"]
        matches = [
            w
            for w in workloads.values()
            if _subset(selector, w["spec"]["template"]["metadata"]["labels"])
        ]
        assert len(matches) == 1, f"Service {name} selects {len(matches)} workloads"
        container = _main(matches[0])
        declared = {p["containerPort"] for p in container["ports"]}
        for port in service["spec"]["ports"]:
            target = _port_number(container, port.get("targetPort", port["port"]))
            assert target in declared, f"Service {name}: targets undeclared port {target}"
        if name in SERVICES:
            ports = [p["port"] for p in service["spec"]["ports"]]
            assert ports == [SERVICES[name], METRICS_PORT]


# --- configuration and secrets ------------------------------------------------------------


def test_config_map_carries_the_documented_defaults() -> None:
    data = _objects("ConfigMap")[CONFIG_MAP]["data"]
    for key, value in CONFIG_DEFAULTS.items():
        assert data.get(key) == value, f"{key}: expected {value!r}, got {data.get(key)!r}"
    assert all(isinstance(v, str) for v in data.values()), "ConfigMap values are strings"


def test_config_peer_addresses_point_at_services() -> None:
    data = _objects("ConfigMap")[CONFIG_MAP]["data"]
    services = _objects("Service")
    peers = {key: value for key, value in data.items() if key.endswith("_ADDR")}
    assert set(peers) == {f"{name.upper()}_ADDR" for name in GRPC_SERVICES}
    for key, address in peers.items():
        host, _, port = address.rpartition(":")
        assert host in services, f"{key}={address}: no Service {host!r}"
        assert int(port) in {p["port"] for p in services[host]["spec"]["ports"]}, key
        assert key == f"{host.upper()}_ADDR", f"{key} points at another service"


def _env_references(container: Obj) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key) of every ConfigMap/Secret a container's environment reads."""
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            yield "ConfigMap", ref["name"], ref["key"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            yield "Secret", ref["name"], ref["key"]
    for item in container.get("envFrom", []):
        if "configMapRef" in item:
            yield "ConfigMap", item["configMapRef"]["name"], None
        if "secretRef" in item:
            yield "Secret", item["secretRef"]["name"], None


def _optional_secret_keys(container: Obj) -> set[str]:
    refs = (item.get("valueFrom", {}).get("secretKeyRef") for item in container.get("env", []))
    return {ref["key"] for ref in refs if ref and ref.get("optional") is True}


def test_env_references_resolve() -> None:
    config_maps = {name: cm.get("data", {}) for name, cm in _objects("ConfigMap").items()}
    secret_keys = _local_secret_keys()
    for name, workload in _workloads().items():
        for container in _containers(workload):
            optional = _optional_secret_keys(container)
            for kind, ref, key in _env_references(container):
                where = f"{name}/{container['name']}: {kind} {ref} key {key}"
                if kind == "ConfigMap":
                    assert ref in config_maps, where
                    assert key is None or key in config_maps[ref], where
                    continue
                assert ref == DB_SECRET, where
                assert key is not None, where
                if key in optional:
                    # May be absent from any overlay's Secret; the pod starts without it.
                    assert key in OPTIONAL_SECRET_KEYS, f"{where}: undocumented optional key"
                    continue
                assert key in secret_keys, where
                if name != "postgres":
                    # With a managed database only `url` is sure to exist (external-postgres).
                    assert key == "url", where


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_services_read_the_shared_config(name: str) -> None:
    container = _main(_workloads()[name])
    assert ("ConfigMap", CONFIG_MAP, None) in set(_env_references(container))


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_database_url_only_from_the_secret(name: str) -> None:
    env = _env(_main(_workloads()[name]))
    if name in DB_SERVICES:
        assert "COGRAPH_DATABASE_URL" in env, f"{name} needs COGRAPH_DATABASE_URL"
    for container in _containers(_workloads()[name]):
        where = f"{name}/{container['name']}"
        for variable, item in _env(container).items():
            if variable.endswith("DATABASE_URL"):
                assert "value" not in item, f"{where}: credentials never in plain env"
                ref = item["valueFrom"]["secretKeyRef"]
                assert ref["name"] == DB_SECRET, where
                if variable == "COGRAPH_DATABASE_URL":
                    assert ref == {"name": DB_SECRET, "key": "url"}, where
            # A *_FILE variable holds the path of a mounted Secret, not the secret itself.
            if re.search(r"PASSWORD|SECRET|TOKEN|API_KEY", variable) and not variable.endswith(
                "_FILE"
            ):
                assert "value" not in item, f"{where}: {variable} in plain text"


def test_no_credentials_in_config_map() -> None:
    for key, value in _objects("ConfigMap")[CONFIG_MAP]["data"].items():
        assert not re.search(r"PASSWORD|SECRET|TOKEN|DATABASE_URL", key), key
        assert "://" not in value or not urlsplit(value).password, key


# --- per-service specifics ----------------------------------------------------------------


def test_embedder_is_sized_and_scalable() -> None:
    deployment = _workloads()["embedder"]
    requests = _main(deployment)["resources"]["requests"]
    assert _cpu(requests["cpu"]) >= 1
    assert _bytes(requests["memory"]) >= int(1.5 * 2**30)
    assert "replicas" not in deployment["spec"], "leave the count to overlays / the HPA"
    # Headless, so gRPC clients can see (and balance over) every replica.
    assert _objects("Service")["embedder"]["spec"].get("clusterIP") == "None"
    assert "COGRAPH_DATABASE_URL" not in _env(_main(deployment)), "the embedder is stateless"
    assert not _pod(deployment).get("initContainers"), "nothing to migrate, nothing to wait for"


def test_embedder_threads_match_its_cpu_limit() -> None:
    """ONNX Runtime sizes its pool by the node's cores unless told; a pool larger than the
    CPU limit is throttled, so EMBEDDER_THREADS must track the limit."""
    container = _main(_workloads()["embedder"])
    limit = _cpu(container["resources"]["limits"]["cpu"])
    entry = _env(container).get("EMBEDDER_THREADS")
    assert entry is not None and "value" in entry, "set EMBEDDER_THREADS to the CPU limit"
    assert limit.is_integer() and limit >= 1, "a whole number of cores, so threads can match"
    assert int(entry["value"]) == int(limit), "EMBEDDER_THREADS and limits.cpu move together"
    settings = importlib.import_module("embedder.settings")
    env = importlib.import_module("svckit.config").Env(
        with_secret({"EMBEDDER_THREADS": entry["value"]})
    )
    assert settings.EmbedderSettings.from_env(env).threads == int(limit)


def _init_containers(name: str) -> list[Obj]:
    containers: list[Obj] = _pod(_workloads()[name]).get("initContainers", [])
    return containers


def test_migrate_command_exists() -> None:
    """The initContainers run `python -m cograph_cli migrate` from the image."""
    assert MIGRATE_MODULE.is_file(), f"{_rel(MIGRATE_MODULE)}: the migrate command is gone"
    assert (MIGRATE_MODULE.parent / "__main__.py").is_file(), "python -m cograph_cli"
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # `pip install --no-deps .` in the image must ship the CLI and every migrations/*.sql.
    assert package_dir["package-dir"]["cograph_cli"] == "libs/cograph_cli"
    assert "*.sql" in package_dir["package-data"]["*"]
    assert (
        importlib.import_module("cograph_cli.main").COMMANDS["migrate"] == "cograph_cli.migrate_cmd"
    )
    migrate_cmd = importlib.import_module("cograph_cli.migrate_cmd")
    parser = argparse.ArgumentParser()
    migrate_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(MIGRATE_COMMAND[3:])
    assert args.handler is migrate_cmd.run_migrate
    # It migrates every service that has migrations, retrieval's tables before the router's.
    with_migrations = {p.parent.parent.name for p in ROOT.glob("services/*/migrations/*.sql")}
    assert with_migrations <= set(migrate_cmd._ORDER)
    assert migrate_cmd._ORDER.index("retrieval") < migrate_cmd._ORDER.index("router")


def test_migrate_reads_the_url_the_init_containers_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (variable,) = {item["name"] for c in _init_containers("retrieval") for item in c["env"]}
    monkeypatch.delenv(variable, raising=False)
    migrate_cmd = importlib.import_module("cograph_cli.migrate_cmd")
    assert migrate_cmd.run_migrate(argparse.Namespace()) == 2
    assert variable in capsys.readouterr().err


def test_database_services_migrate_before_they_start() -> None:
    """One approach, initContainers (see base/kustomization.yaml), the same in every pod."""
    assert not _objects("Job"), "migrations run in initContainers; a Job would duplicate them"
    first: Obj | None = None
    for name in sorted(DB_SERVICES):
        init = _init_containers(name)
        expected = ["migrate", *INIT_AFTER_MIGRATE.get(name, [])]
        assert [c["name"] for c in init] == expected, f"{name}: migrate first"
        migrate = init[0]
        assert migrate["command"] == MIGRATE_COMMAND, name
        assert migrate["image"] == _main(_workloads()[name])["image"], name
        env = _env(migrate)
        assert set(env) == {"COGRAPH_DATABASE_URL"}, f"{name}: the migrator needs only the URL"
        ref = env["COGRAPH_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": DB_SECRET, "key": "url"}, "the role that may write"
        assert not migrate.get("envFrom"), name
        # The same step everywhere, from the pod's own image (slim or full: both ship the
        # CLI and every service's migrations).
        same = {k: v for k, v in migrate.items() if k != "image"}
        first = first or same
        assert same == first, f"{name}: its migrate initContainer differs from the others'"


def test_router_may_use_a_read_only_role() -> None:
    container = _main(_workloads()["router"])
    env = _env(container)
    ref = env["ROUTER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": DB_SECRET, "key": "router-url", "optional": True}
    assert env["COGRAPH_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    # The router prefers ROUTER_DATABASE_URL and falls back when the key (hence the variable)
    # is absent, as with the local overlay's Secret.
    router_settings = importlib.import_module("router.settings").RouterSettings
    env_type = importlib.import_module("svckit.config").Env
    shared = with_secret({"COGRAPH_DATABASE_URL": "postgresql://writer@db/cograph"})
    read_only = {**shared, "ROUTER_DATABASE_URL": "postgresql://reader@db/cograph"}
    assert (
        router_settings.from_env(env_type(read_only)).database_url
        == read_only["ROUTER_DATABASE_URL"]
    )
    assert router_settings.from_env(env_type(shared)).database_url == shared["COGRAPH_DATABASE_URL"]
    for name in sorted(SERVICES):
        for other in _containers(_workloads()[name]):
            if (name, other["name"]) != ("router", "router"):
                assert "ROUTER_DATABASE_URL" not in _env(other), f"{name}/{other['name']}"


def _gateway_settings(objects: list[Obj] | None = None) -> Any:
    """The gateway's settings as its pod would read them, in the base or in `objects` (an
    overlay as rendered)."""
    objects = list(_base_objects()) if objects is None else objects
    (gateway,) = [o for o in objects if (o["kind"], o["metadata"]["name"]) == _GATEWAY]
    (config,) = [o for o in objects if (o["kind"], o["metadata"]["name"]) == _CONFIG]
    env = _env(_main(gateway))
    # What the gateway sees: the ConfigMap (envFrom), then its own env, a URL for the Secret.
    seen = dict(config["data"])
    seen.update({k: str(v["value"]) for k, v in env.items() if "value" in v})
    seen["COGRAPH_DATABASE_URL"] = "postgresql://gateway@db/cograph"
    # The internal secret's file exists only in the pod; the test secret stands in for it.
    seen.pop("COGRAPH_INTERNAL_SECRET_FILE", None)
    seen = with_secret(seen)
    module = importlib.import_module("gateway.settings")
    return module.GatewaySettings.from_env(importlib.import_module("svckit.config").Env(seen))


_GATEWAY = ("Deployment", "gateway")
_CONFIG = ("ConfigMap", CONFIG_MAP)


def test_gateway_reads_the_database_and_its_backends() -> None:
    container = _main(_workloads()["gateway"])
    env = _env(container)
    assert env["COGRAPH_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": DB_SECRET,
        "key": "url",
    }, "API keys are stored in PostgreSQL"
    module = importlib.import_module("gateway.settings")
    settings = _gateway_settings()
    assert settings.allow_anonymous is False, "key-less requests stay refused unless opted in"
    assert settings.backend_addrs == {
        name: f"{name}:{GRPC_SERVICES[name]}" for name in module.BACKEND_NAMES
    }, "every backend the gateway fronts is configured"
    assert settings.host_port == ("0.0.0.0", HTTP_SERVICES["gateway"])


def test_retrieval_keeps_its_clones_on_a_claim_per_replica() -> None:
    """COGRAPH_DATA_DIR (the git clones) is writable and on a volumeClaimTemplate of the
    retrieval StatefulSet, so each replica has a claim of its own that outlives its pod;
    the node's ephemeral storage no longer has to hold the clones."""
    statefulset = _workloads()["retrieval"]
    assert statefulset["kind"] == "StatefulSet"
    container = _main(statefulset)
    data_dir = _env(container)["COGRAPH_DATA_DIR"]["value"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert data_dir in mounts, "git clones need a volume under COGRAPH_DATA_DIR"
    assert not mounts[data_dir].get("readOnly")
    claim = _volumes(statefulset)[mounts[data_dir]["name"]].get("persistentVolumeClaim")
    assert claim is not None, "the clones must be on the replica's claim, not an emptyDir"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"], "one replica per claim"
    assert _bytes(claim["spec"]["resources"]["requests"]["storage"]) >= 10 * 2**30
    assert claim["metadata"]["labels"][PART_OF] == "cograph"
    spec = statefulset["spec"]
    # Any replica serves any call: no ordered start, and the Service callers use governs it.
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == "retrieval" and "retrieval" in _objects("Service")
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenScaled": "Delete",
        "whenDeleted": "Retain",
    }
    pod_security = _pod(statefulset)["securityContext"]
    assert pod_security["fsGroup"] == pod_security["runAsGroup"], "the claim is writable"
    assert pod_security["fsGroupChangePolicy"] == "OnRootMismatch", "no chown of every clone"
    # /tmp's emptyDir and the logs stay on the node; the clones do not.
    ephemeral = _bytes(container["resources"]["limits"]["ephemeral-storage"])
    assert ephemeral < _bytes(claim["spec"]["resources"]["requests"]["storage"])


def test_bundled_postgres() -> None:
    statefulset = _objects("StatefulSet")["postgres"]
    container = _main(statefulset)
    # An exact release (pgvector and PostgreSQL's major), never the floating `pg17`.
    assert re.fullmatch(r"pgvector/pgvector:0\.8\.\d+-pg17@sha256:[0-9a-f]{64}", container["image"])
    claims = {c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]}
    data = _env(container)["PGDATA"]["value"]
    data_mounts = [m for m in container["volumeMounts"] if data.startswith(m["mountPath"])]
    assert data_mounts and data_mounts[0]["name"] in claims, "PGDATA must live on the PVC"
    password = _env(container)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password == {"name": DB_SECRET, "key": "password"}
    assert statefulset["spec"]["serviceName"] in _objects("Service")


def test_local_secret_url_reaches_the_bundled_postgres() -> None:
    secret = _local_secret_keys()
    url = urlsplit(secret["url"])
    postgres = _env(_main(_objects("StatefulSet")["postgres"]))
    assert url.scheme in {"postgresql", "postgres"}
    assert url.hostname == "postgres" and url.port == 5432
    assert url.password == secret["password"], "the URL and the password must agree"
    assert url.username == postgres["POSTGRES_USER"]["value"]
    assert url.path.lstrip("/") == postgres["POSTGRES_DB"]["value"]


# --- components and overlays --------------------------------------------------------------


def _inline_patches(kustomization: Obj) -> list[Obj]:
    return [
        yaml.load(p["patch"], Loader=YAML_LOADER)
        for p in kustomization.get("patches", [])
        if "patch" in p
    ]


def test_otel_component_sets_the_endpoint_for_every_service() -> None:
    directory = COMPONENTS / "otel"
    patched: dict[str, Obj] = {}
    for patch in _kustomization(directory).get("patches", []):
        for doc in _load(directory / patch["path"]):
            patched[doc["metadata"]["name"]] = doc
    endpoint = patched[CONFIG_MAP]["data"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert urlsplit(endpoint).scheme in {"http", "https"} and urlsplit(endpoint).port
    # Every service reads the ConfigMap whole, so the one key reaches all of them.
    for name in SERVICES:
        assert {"configMapRef": {"name": CONFIG_MAP}} in _main(_workloads()[name]).get(
            "envFrom", []
        )


def test_external_postgres_component_removes_the_bundled_database() -> None:
    deleted = {
        (p["kind"], p["metadata"]["name"])
        for p in _inline_patches(_kustomization(COMPONENTS / "external-postgres"))
        if p.get("$patch") == "delete"
    }
    assert deleted == {
        ("StatefulSet", "postgres"),
        ("Service", "postgres"),
        ("NetworkPolicy", "postgres"),
    }


def _overlay_objects(overlay: str) -> list[Obj]:
    directory = OVERLAYS / overlay
    objects: list[Obj] = []
    for entry in _kustomization(directory).get("resources", []):
        path = directory / entry
        if path.is_file():
            objects.extend(_load(path))
    return objects


def test_production_overlay() -> None:
    directory = OVERLAYS / "production"
    kustomization = _kustomization(directory)
    components = {(directory / c).resolve() for c in kustomization["components"]}
    assert components == {
        (COMPONENTS / c).resolve() for c in ("otel", "external-postgres", "ingress-tls")
    }
    assert (directory / "../../base").resolve() in {
        (directory / r).resolve() for r in kustomization["resources"]
    }
    assert "secretGenerator" not in kustomization, "production credentials are not in git"

    objects = _overlay_objects("production")
    deployments = _service_workloads()
    counts = {r["name"]: r["count"] for r in kustomization.get("replicas", [])}
    autoscalers = {o["metadata"]["name"]: o for o in objects if o["kind"].startswith("Horizontal")}
    assert set(autoscalers) == {"embedder", "gateway"}
    minimum: dict[str, int] = {name: counts.get(name, 1) for name in deployments}
    for name, hpa in autoscalers.items():
        target = hpa["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", name)
        assert name not in counts, f"{name}: a fixed replica count fights its HPA"
        assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
        minimum[name] = hpa["spec"]["minReplicas"]
        for container in _pod(deployments[name])["containers"]:
            assert "cpu" in container["resources"]["requests"], "CPU utilisation needs requests"
    assert all(count >= 2 for count in counts.values())

    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    covered: set[str] = set()
    for budget in budgets:
        selected = [
            name
            for name, deployment in deployments.items()
            if _subset(
                budget["spec"]["selector"]["matchLabels"],
                deployment["spec"]["template"]["metadata"]["labels"],
            )
        ]
        assert len(selected) == 1, f"PDB {budget['metadata']['name']} selects {selected}"
        (name,) = selected
        covered.add(name)
        # A budget as large as the replica count would block every node drain.
        assert budget["spec"].get("minAvailable", 0) < minimum[name], name
    assert covered == set(deployments)


# Every service but the embedder runs the slim image (no PyTorch, no model): the embedder
# alone loads the model (tests/unit/test_slim_image.py checks what the others import).
SLIM_SERVICES = frozenset({"gateway", "router", "commons", "retrieval"})


def _image_of(name: str) -> str:
    return "cograph-slim" if name in SLIM_SERVICES else "cograph"


def test_overlays_set_the_image() -> None:
    for overlay in ("local", "production"):
        images = {i["name"]: i for i in _kustomization(OVERLAYS / overlay)["images"]}
        for image in ("cograph", "cograph-slim"):
            assert images[image].get("newTag"), f"{overlay}: pin the {image} tag"
    for name in SERVICES:
        for container in _containers(_workloads()[name]):
            assert container["image"] == _image_of(name), f"{name}/{container['name']}"


# --- network policies: who may talk to whom -------------------------------------------------

OUTSIDE = "outside"  # a client outside the namespace (Ingress controller, port-forward, ...)


@dataclass(frozen=True)
class Endpoint:
    """Somewhere outside Cograph's namespace a pod might send packets to: an address, and for
    a pod of another namespace the labels of that namespace and of the pod."""

    name: str
    ip: str
    namespace: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


def _pod_in(namespace: str) -> tuple[tuple[str, str], ...]:
    """The labels of a namespace as Kubernetes sets them (1.21 and later)."""
    return (("kubernetes.io/metadata.name", namespace),)


INTERNET = "internet"  # a public address (a git host, an HTTPS provider)
INTERNET_V6 = "internet-v6"
# The cluster's DNS pods: what every Cograph pod but PostgreSQL may ask for names.
KUBE_DNS = "kube-dns"
# Addresses outside the namespace, public and inside the cluster.
ENDPOINTS = [
    Endpoint(INTERNET, "140.82.112.3"),
    Endpoint(INTERNET_V6, "2606:50c0:8000::154"),
    Endpoint(KUBE_DNS, "10.244.0.3", _pod_in("kube-system"), (("k8s-app", "kube-dns"),)),
    # Never reachable from a Cograph pod except as the policies name them.
    Endpoint("metadata", "169.254.169.254"),  # cloud instance metadata (credentials)
    Endpoint("metadata-v6", "fd00:ec2::254"),
    Endpoint("api-server", "10.0.0.1"),  # the control plane's in-cluster address
    Endpoint("service-ip", "10.96.0.1"),  # a ClusterIP (kubernetes.default)
    Endpoint("node", "192.168.1.10"),  # a node's kubelet
    Endpoint("pod-172", "172.17.0.5", _pod_in("default"), (("app", "web"),)),
    Endpoint("pod-cgnat", "100.64.0.5", _pod_in("default"), (("app", "web"),)),
    Endpoint("pod-v6", "fd00:10:244::5", _pod_in("default"), (("app", "web"),)),
    # Another namespace's pod that answers on 53 is not the cluster's DNS.
    Endpoint("pod-other-dns", "10.244.2.7", _pod_in("default"), (("app", "dnsmasq"),)),
    Endpoint("ipv4-mapped", "::ffff:169.254.169.254"),
]
INSIDE_CLUSTER = [e for e in ENDPOINTS if e.name not in (INTERNET, INTERNET_V6)]
# Ports a pod might try to reach outside the namespace (DNS, git, HTTPS, a database, HTTP,
# the kubelet, OTLP).
EXTERNAL_PORTS = [("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 22), ("TCP", 9418)]
EXTERNAL_PORTS += [("TCP", 5432), ("TCP", 80), ("TCP", 10250), ("TCP", 4317)]
Edge = tuple[str, str, str, int]  # (from, to, protocol, port)


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    if not _subset_or_empty(selector.get("matchLabels", {}), labels):
        return False
    for expression in selector.get("matchExpressions", []):
        value = labels.get(expression["key"])
        operator, values = expression["operator"], expression.get("values", [])
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
    return True


def _subset_or_empty(small: dict[str, str], big: dict[str, str]) -> bool:
    return all(big.get(key) == value for key, value in small.items())


def _in_block(block: Obj, ip: str) -> bool:
    """Whether an ipBlock admits `ip`: inside its CIDR and outside every `except`. An
    IPv4-mapped IPv6 address is admitted if either of its forms is (a dual-stack socket
    sends it as IPv4; a CNI may judge it as either)."""
    address = ipaddress.ip_address(ip)
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    forms = [address] if mapped is None else [address, mapped]

    def admits(form: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        def inside(cidr: str) -> bool:
            network = ipaddress.ip_network(cidr)
            return network.version == form.version and form in network

        return inside(block["cidr"]) and not any(inside(e) for e in block.get("except", []))

    return any(admits(form) for form in forms)


def _endpoint_matches(peer: Obj, endpoint: Endpoint) -> bool:
    """Whether one from/to peer admits an endpoint outside the namespace. An ipBlock is
    judged by address whatever is behind it (Calico and Cilium apply it to pod addresses
    too); a podSelector alone names this namespace's pods only."""
    if "ipBlock" in peer:
        return _in_block(peer["ipBlock"], endpoint.ip)
    if "namespaceSelector" in peer:
        if not endpoint.namespace or not _selects(
            peer["namespaceSelector"], dict(endpoint.namespace)
        ):
            return False
        return "podSelector" not in peer or _selects(peer["podSelector"], dict(endpoint.labels))
    return False


def _peer_matches(peers: list[Obj] | None, other: str | Endpoint, labels: dict[str, str]) -> bool:
    """Whether a rule's from/to admits `other`: a pod of this namespace, OUTSIDE or an
    Endpoint."""
    if not peers:
        return True  # no from/to: every source or destination
    for peer in peers:
        if isinstance(other, Endpoint):
            if _endpoint_matches(peer, other):
                return True
            continue
        if "ipBlock" in peer and other == OUTSIDE:
            return True
        in_namespace = other != OUTSIDE and "namespaceSelector" not in peer
        if in_namespace and "podSelector" in peer and _selects(peer["podSelector"], labels):
            return True
    return False


def _port_matches(ports: list[Obj] | None, protocol: str, port: int) -> bool:
    if not ports:
        return True
    return any(p.get("protocol", "TCP") == protocol and p.get("port") == port for p in ports)


def _allowed(
    policies: list[Obj],
    direction: str,
    pod_labels: dict[str, str],
    other: str | Endpoint,
    other_labels: Obj,
) -> Any:
    """(protocol, port) -> allowed, for traffic of `direction` at a pod, as a predicate."""
    kind = "Ingress" if direction == "ingress" else "Egress"
    peer_key = "from" if direction == "ingress" else "to"
    selecting = [
        p
        for p in policies
        if kind in p["spec"].get("policyTypes", ["Ingress"])
        and _selects(p["spec"]["podSelector"], pod_labels)
    ]

    def check(protocol: str, port: int) -> bool:
        if not selecting:
            return True  # no policy isolates this pod in this direction
        return any(
            _peer_matches(rule.get(peer_key), other, other_labels)
            and _port_matches(rule.get("ports"), protocol, port)
            for policy in selecting
            for rule in policy["spec"].get(direction, [])
        )

    return check


def _policy_graph(objects: list[Obj]) -> set[Edge]:
    """Every (from, to, protocol, port) the NetworkPolicies among `objects` allow, between the
    workloads' pods (to the ports they listen on), a client outside, and the ENDPOINTS
    outside the namespace (to EXTERNAL_PORTS)."""
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] in {"Deployment", "StatefulSet"}}
    labels = {name: w["spec"]["template"]["metadata"]["labels"] for name, w in pods.items()}
    edges: set[Edge] = set()
    for source in [*pods, OUTSIDE]:
        source_labels = labels.get(source, {})
        for target, workload in pods.items():
            if source == target:
                continue
            ports = [p for c in _pod(workload)["containers"] for p in c.get("ports", [])]
            for declared in ports:
                protocol, port = declared.get("protocol", "TCP"), int(declared["containerPort"])
                into = _allowed(policies, "ingress", labels[target], source, source_labels)
                out = (
                    _allowed(policies, "egress", source_labels, target, labels[target])
                    if source != OUTSIDE
                    else (lambda *_: True)
                )
                if into(protocol, port) and out(protocol, port):
                    edges.add((source, target, protocol, port))
        if source == OUTSIDE:
            continue
        for endpoint in ENDPOINTS:
            out = _allowed(policies, "egress", source_labels, endpoint, {})
            edges |= {(source, endpoint.name, pr, po) for pr, po in EXTERNAL_PORTS if out(pr, po)}
    return edges


# The pods that resolve names: the services find their peers (and a trace collector) by
# name; the bundled PostgreSQL resolves nothing.
DNS_CLIENTS = set(SERVICES)


def _expected_graph(database: str | None) -> set[Edge]:
    """Who must reach whom, from the code: the gateway's backends (gateway.settings), the
    peers each service's settings read (`<PEER>_ADDR`), the database users, the cluster's
    DNS for the services."""
    backends = importlib.import_module("gateway.settings").BACKEND_NAMES
    edges: set[Edge] = {(OUTSIDE, "gateway", "TCP", HTTP_SERVICES["gateway"])}
    for caller in SERVICES:
        source = (ROOT / "services" / caller / "settings.py").read_text()
        for peer, port in GRPC_SERVICES.items():
            reads = f'"{peer.upper()}_ADDR"' in source
            if peer != caller and (reads or (caller == "gateway" and peer in backends)):
                edges.add((caller, peer, "TCP", port))
        if caller in DNS_CLIENTS:
            edges |= {(caller, KUBE_DNS, protocol, 53) for protocol in ("UDP", "TCP")}
        if caller in DB_SERVICES:
            if database:
                edges.add((caller, database, "TCP", 5432))
            else:
                # components/external-postgres: the managed database's address is the
                # operator's to narrow (deploy/README.md), so 5432 is open to any address.
                edges |= {(caller, e.name, "TCP", 5432) for e in ENDPOINTS}
    # Git over https, ssh and git://, and the HTTPS rerank / summary providers: the
    # internet, over IPv4 and IPv6, and nothing inside the cluster.
    edges |= {
        ("retrieval", internet, "TCP", port)
        for internet in (INTERNET, INTERNET_V6)
        for port in (443, 22, 9418)
    }
    return edges


def test_network_policies_allow_exactly_the_calls_the_code_makes() -> None:
    graph = _policy_graph(list(_base_objects()))
    expected = _expected_graph("postgres")
    assert graph - expected == set(), "allowed but never needed"
    assert expected - graph == set(), "needed but denied"
    # Spelled out, so a change to the code that derives the expectation shows up here too.
    callers_of = {
        target: {s for s, t, _, _ in graph if t == target and s != OUTSIDE} for target in SERVICES
    }
    assert callers_of == {
        "gateway": set(),
        "retrieval": {"gateway", "commons"},
        "router": {"gateway"},
        "commons": {"gateway", "retrieval"},
        # The gateway only for /readyz's health check; the embedder serves embeddings to two.
        "embedder": {"retrieval", "commons", "gateway"},
    }
    assert {s for s, t, _, _ in graph if t == "postgres"} == DB_SERVICES
    assert {t for s, t, _, _ in graph if s == OUTSIDE} == {"gateway"}
    assert {(t, p) for s, t, _, p in graph if s == "embedder"} == {(KUBE_DNS, 53)}
    assert {t for s, t, _, _ in graph if s == "postgres"} == set(), "PostgreSQL: no egress"


def test_retrieval_reaches_the_internet_and_nothing_inside_the_cluster() -> None:
    """Retrieval's egress to git hosts is an ipBlock: it must leave out the cluster's pods
    and Services (the API server's address among them), the nodes and the metadata
    address, over IPv4, IPv6 and IPv4-mapped IPv6."""
    graph = _policy_graph(list(_base_objects()))
    reached = {(t, p) for s, t, _, p in graph if s == "retrieval" and t not in SERVICES}
    for endpoint in INSIDE_CLUSTER:
        ports = {p for t, p in reached if t == endpoint.name}
        allowed = {53} if endpoint.name == KUBE_DNS else set()
        assert ports == allowed, f"retrieval reaches {endpoint.name} ({endpoint.ip}) on {ports}"
    for internet in (INTERNET, INTERNET_V6):
        assert {p for t, p in reached if t == internet} == {443, 22, 9418}


def test_no_ip_block_admits_a_cluster_or_metadata_address() -> None:
    """Whatever a future rule is for, an ipBlock in the base never covers the cluster's
    ranges or the metadata address; they are the `except` defaults deploy/README.md
    tells an operator to extend."""
    for name, policy in _objects("NetworkPolicy").items():
        for direction, key in (("egress", "to"), ("ingress", "from")):
            for rule in policy["spec"].get(direction, []):
                for peer in rule.get(key, []):
                    if "ipBlock" not in peer:
                        continue
                    for endpoint in INSIDE_CLUSTER:
                        assert not _in_block(peer["ipBlock"], endpoint.ip), (
                            f"NetworkPolicy {name}: an ipBlock admits {endpoint.name} "
                            f"({endpoint.ip})"
                        )


def test_the_rules_deploy_readme_patches_are_where_it_says() -> None:
    """deploy/README.md tells operators to extend retrieval's `except` lists and the DNS
    rule with JSON patches by index; moving a rule must move the README's paths too."""
    readme = (ROOT / "deploy" / "README.md").read_text()
    policies = _objects("NetworkPolicy")
    internet = policies["retrieval"]["spec"]["egress"][2]["to"]
    assert [p["ipBlock"]["cidr"] for p in internet] == ["0.0.0.0/0", "::/0"]
    for index in (0, 1):
        assert f"path: /spec/egress/2/to/{index}/ipBlock/except/-" in readme
        for cidr in internet[index]["ipBlock"]["except"]:
            assert cidr in readme, f"{cidr}: the README's table of defaults"
    dns = policies["cograph-allow-dns"]["spec"]["egress"][0]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert "path: /spec/egress/0/to/-" in readme


def test_dns_goes_to_the_cluster_dns_pods_only() -> None:
    graph = _policy_graph(list(_base_objects()))
    on_53 = {(s, t) for s, t, _, p in graph if p == 53}
    assert on_53 == {(s, KUBE_DNS) for s in DNS_CLIENTS}, "port 53 to kube-dns, nothing else"
    assert "postgres" not in {s for s, _ in on_53}


def test_network_policies_deny_by_default_every_cograph_pod() -> None:
    policies = _objects("NetworkPolicy")
    deny = [
        p
        for p in policies.values()
        if set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert deny, "a default-deny policy"
    for name, workload in _workloads().items():
        template = workload["spec"]["template"]["metadata"]["labels"]
        assert any(_selects(p["spec"]["podSelector"], template) for p in deny), name
    for name, policy in policies.items():
        selected = [
            n
            for n, w in _workloads().items()
            if _selects(policy["spec"]["podSelector"], w["spec"]["template"]["metadata"]["labels"])
        ]
        assert selected, f"NetworkPolicy {name} selects no pod"


@cache
def _render(overlay: str) -> subprocess.CompletedProcess[str] | None:
    """The overlay as kustomize renders it (once per overlay), or None without kustomize."""
    command = _kustomize_command()
    if command is None:
        return None
    return subprocess.run(
        [*command, str(OVERLAYS / overlay)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rendered(overlay: str) -> list[Obj]:
    result = _render(overlay)
    if result is None:
        pytest.skip("neither kustomize nor kubectl is installed")
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.load_all(result.stdout, Loader=YAML_LOADER) if d]


def test_production_network_policies() -> None:
    docs = _rendered("production")
    graph = _policy_graph(docs)
    # Without the bundled database the services reach a managed one outside the cluster, and
    # traces go to the collector's namespace (not modelled as a pod here).
    assert graph == _expected_graph(None)
    names = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NetworkPolicy"}
    assert names["namespace-default-deny"]["spec"]["podSelector"] == {}
    otel = names["otel-collector-egress"]["spec"]["egress"][0]
    endpoint = urlsplit(
        next(d for d in docs if d["kind"] == "ConfigMap")["data"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    )
    assert otel["ports"] == [{"protocol": "TCP", "port": endpoint.port}]
    namespace = (endpoint.hostname or "").split(".")[1]
    selector = otel["to"][0]["namespaceSelector"]["matchLabels"]
    assert selector == {"kubernetes.io/metadata.name": namespace}


# --- secrets mounted as files: the internal-call secret, the first admin key ----------------

INTERNAL_SECRET = "cograph-internal"
INTERNAL_SECRET_PATH = "/var/run/cograph/internal/secret"
ADMIN_SECRET = "cograph-admin"


def _secret_volume_file(workload: Obj, container: Obj, secret: str) -> tuple[str, Obj] | None:
    """(the path at which `container` sees the Secret's item, the volume), if it mounts it."""
    volumes = _volumes(workload)
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if volume.get("secret", {}).get("secretName") == secret:
            (item,) = volume["secret"]["items"]
            assert mount.get("readOnly") is True, f"{container['name']}: mount {secret} read-only"
            return f"{mount['mountPath']}/{item['path']}", volume
    return None


def _generated_secret(overlay: str, name: str) -> dict[str, str]:
    for generator in _kustomization(OVERLAYS / overlay).get("secretGenerator", []):
        if generator["name"] == name:
            return dict(literal.split("=", 1) for literal in generator.get("literals", []))
    return {}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_reads_the_internal_secret_from_a_file(name: str) -> None:
    config = importlib.import_module("svckit.config")
    workload = _workloads()[name]
    container = _main(workload)
    assert _env(container)[config.INTERNAL_SECRET_FILE_VAR] == {
        "name": config.INTERNAL_SECRET_FILE_VAR,
        "value": INTERNAL_SECRET_PATH,
    }
    assert config.INTERNAL_SECRET_VAR not in _env(container), "never the value in env"
    found = _secret_volume_file(workload, container, INTERNAL_SECRET)
    assert found is not None, f"{name}: mounts the {INTERNAL_SECRET} Secret"
    path, volume = found
    assert path == INTERNAL_SECRET_PATH
    assert volume["secret"]["items"][0]["key"] == "secret"
    assert "optional" not in volume["secret"], "a pod must not start without it"
    assert volume["secret"]["defaultMode"] & 0o007 == 0, "not world-readable"
    for init in _init_containers(name):
        assert _secret_volume_file(workload, init, INTERNAL_SECRET) is None, init["name"]
        assert config.INTERNAL_SECRET_FILE_VAR not in _env(init), init["name"]


GIT_CREDENTIALS_SECRET = "cograph-git-credentials"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_only_retrieval_mounts_the_git_credentials(name: str) -> None:
    workload = _workloads()[name]
    volumes = _volumes(workload)
    mounted = {
        m["mountPath"]: (m, volumes[m["name"]])
        for container in _containers(workload)
        for m in container.get("volumeMounts", [])
        if volumes[m["name"]].get("secret", {}).get("secretName") == GIT_CREDENTIALS_SECRET
    }
    if name != "retrieval":
        assert not mounted, f"{name}: only retrieval reaches git hosts"
        return
    directory = _env(_main(workload))["RETRIEVAL_CREDENTIALS_DIR"]["value"]
    ((path, (mount, volume)),) = mounted.items()
    assert path == directory and mount["readOnly"] is True
    assert volume["secret"]["optional"] is True, "retrieval starts without it"
    assert volume["secret"]["defaultMode"] & 0o007 == 0, "not world-readable"
    for init in _init_containers(name):
        assert all(m["mountPath"] != path for m in init.get("volumeMounts", [])), init["name"]


WEBHOOKS_SECRET = "cograph-webhooks"
WEBHOOKS_DIR = "/var/run/cograph/webhooks"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_only_the_gateway_mounts_the_webhook_secrets(name: str) -> None:
    workload = _workloads()[name]
    volumes = _volumes(workload)
    mounted = [
        (container["name"], m, volumes[m["name"]])
        for container in _containers(workload)
        for m in container.get("volumeMounts", [])
        if volumes[m["name"]].get("secret", {}).get("secretName") == WEBHOOKS_SECRET
    ]
    if name != "gateway":
        assert not mounted, f"{name}: only the gateway serves the webhooks"
        return
    ((container, mount, volume),) = mounted
    assert container == "gateway", "the main container, not an initContainer"
    assert mount["mountPath"] == WEBHOOKS_DIR and mount["readOnly"] is True
    assert volume["secret"]["optional"] is True, "the gateway starts without it (hooks off)"
    assert volume["secret"]["defaultMode"] & 0o007 == 0, "not world-readable"
    # Off unless an overlay turns a hook on: the base names no file that may be missing.
    env = _env(_main(workload))
    assert not any("WEBHOOK" in variable for variable in env)


def test_deploy_readme_turns_the_webhooks_on_with_the_variables_the_gateway_reads() -> None:
    text = (ROOT / "deploy" / "README.md").read_text()
    settings = (ROOT / "services" / "gateway" / "settings.py").read_text()
    for vendor in ("GITHUB", "GITLAB"):
        variable = f"GATEWAY_{vendor}_WEBHOOK_SECRET_FILE"
        assert f'"{variable}"' in settings and variable in text
    assert f"value: {WEBHOOKS_DIR}/github" in text and WEBHOOKS_SECRET in text


def test_overlays_provide_the_internal_secret() -> None:
    minimum = importlib.import_module("svckit.internal_auth").MIN_SECRET_BYTES
    local = _generated_secret("local", INTERNAL_SECRET)
    assert len(local["secret"].encode()) >= minimum
    assert not _generated_secret("production", INTERNAL_SECRET), "made by the operator"


def test_gateway_bootstraps_the_first_admin_key() -> None:
    workload = _workloads()["gateway"]
    init = {c["name"]: c for c in _init_containers("gateway")}["bootstrap-admin"]
    found = _secret_volume_file(workload, init, ADMIN_SECRET)
    assert found is not None
    path, volume = found
    assert volume["secret"]["optional"] is True, "the gateway starts without it"
    assert volume["secret"]["items"][0]["key"] == "api-key"
    assert _secret_volume_file(workload, _main(workload), ADMIN_SECRET) is None
    keys_cmd = importlib.import_module("cograph_cli.keys_cmd")
    assert _env(init)[keys_cmd.KEY_FILE_ENV]["value"] == path
    assert _env(init)["COGRAPH_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": DB_SECRET,
        "key": "url",
    }
    # The command is the real CLI's: `python -m cograph_cli keys bootstrap --if-present`.
    assert init["command"][:3] == ["python", "-m", "cograph_cli"]
    assert importlib.import_module("cograph_cli.main").COMMANDS["keys"] == keys_cmd.__name__
    parser = argparse.ArgumentParser()
    keys_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(init["command"][3:])
    assert args.handler is keys_cmd._bootstrap and args.if_present
    # The local overlay's development key is one the command accepts.
    store = importlib.import_module("cograph_api.admin_keys")
    store.check_provided_key(_generated_secret("local", ADMIN_SECRET)["api-key"])
    assert not _generated_secret("production", ADMIN_SECRET)


# --- rendered overlays (only where kustomize is available) ----------------------------------


def _kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


@pytest.mark.parametrize("overlay", ["local", "production"])
def test_rendered_overlay_is_valid(overlay: str) -> None:
    result = _render(overlay)
    if result is None:
        pytest.skip("neither kustomize nor kubectl is installed")
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.load_all(result.stdout, Loader=YAML_LOADER) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    secrets = {name for kind, name in kinds if kind == "Secret"}
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    images = {i["name"]: i for i in _kustomization(OVERLAYS / overlay)["images"]}
    for doc in docs:
        if doc["kind"] not in {"Deployment", "StatefulSet"}:
            continue
        if doc["metadata"]["name"] in DB_SERVICES:
            init = [c["name"] for c in _pod(doc).get("initContainers", [])]
            expected = ["migrate", *INIT_AFTER_MIGRATE.get(doc["metadata"]["name"], [])]
            assert init == expected, f"{doc['metadata']['name']}: migrate first"
        for container in _containers(doc):
            if doc["metadata"]["name"] in SERVICES:
                # The images transformer rewrites initContainers too: one image, one version.
                image = images[_image_of(doc["metadata"]["name"])]
                assert container["image"] == f"{image['newName']}:{image['newTag']}"
            for kind, ref, _ in _env_references(container):
                if kind == "Secret" and overlay == "local":
                    assert ref in secrets, f"{ref}: not generated"  # hashed name rewritten
    if overlay == "production":
        assert ("StatefulSet", "postgres") not in kinds
        assert ("Service", "postgres") not in kinds
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" in config
        assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {
            "cograph"
        }
    else:
        assert ("StatefulSet", "postgres") in kinds
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in config


# --- the image ----------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue  # comments, including those Docker allows inside a continuation
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            logical.append(full)
    pairs = []
    for entry in logical:
        keyword, _, arguments = entry.partition(" ")
        pairs.append((keyword.upper(), arguments.strip()))
    return pairs


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


# An exact Python release on Debian bookworm, optionally pinned by digest too: a floating
# tag (python:3.11-slim) would change the image under an unchanged Dockerfile.
EXACT_PYTHON = re.compile(r"^python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}$")


def _stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions, by its name (`FROM x AS name`)."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for keyword, arguments in _instructions():
        if keyword == "FROM":
            current = []
            words = arguments.split()
            stages[words[-1] if len(words) >= 3 and words[-2].upper() == "AS" else ""] = current
        current.append((keyword, arguments))
    return stages


def test_dockerfile_is_multi_stage_on_an_exact_python_slim() -> None:
    steps = _instructions()
    args = dict(a.split("=", 1) for k, a in steps if k == "ARG" and "=" in a)
    stages = _stages()
    bases = [a.split()[0] for k, a in steps if k == "FROM"]
    assert len(bases) >= 2, "build and runtime stages"
    images = [base for base in bases if base not in stages]
    assert images
    for base in images:
        resolved = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert EXACT_PYTHON.match(resolved), base
    assert list(stages)[-1] == "runtime", "a plain `docker build` builds the full image"


def test_the_slim_target_has_no_torch_and_runs_every_service_but_the_embedder() -> None:
    stages = _stages()
    assert "slim" in stages
    copies = [a for k, a in stages["slim"] if k == "COPY"]
    assert copies == ["--from=build-slim /opt/venv /opt/venv"], "the venv alone, no model"
    text = " ".join(a for k, a in stages["build-slim"] if k == "RUN")
    assert "-r requirements-slim.txt" in text and "-r requirements.txt" not in text
    assert "download.pytorch.org" not in text and "export_int8" not in text
    users = [a for k, a in stages["slim"] if k == "USER"]
    assert users and users[-1].split(":")[0] == "10001"
    exposed = {int(p) for k, a in stages["slim"] if k == "EXPOSE" for p in a.split()}
    assert exposed == {*(SERVICES[name] for name in SLIM_SERVICES), METRICS_PORT}
    assert set(SERVICES) - {"embedder"} == SLIM_SERVICES
    for name in SERVICES:
        workload = _workloads()[name]
        images = {c["image"] for c in _pod(workload)["containers"]}
        images |= {c["image"] for c in _pod(workload).get("initContainers", [])}
        assert images == {_image_of(name)}, (name, images)
    assert _image_of("embedder") == "cograph"


def test_both_images_have_git_for_retrieval() -> None:
    """Retrieval clones over https and ssh (deploy keys): git, ssh and the CA certificates
    are installed in the stage both images start from."""
    stages = _stages()
    text = " ".join(a for k, a in stages["user"] if k == "RUN")
    assert {"git", "openssh-client", "ca-certificates"} <= set(text.split())
    assert stages["slim"][0][1].split()[0] == "user"
    assert stages["runtime"][0][1].split()[0] == "user"


def test_dockerfile_runs_as_a_numeric_non_root_user() -> None:
    users = [a for k, a in _final_stage() if k == "USER"]
    assert users, "the runtime stage must set USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, "numeric, so runAsNonRoot can verify it"
    uids = {int(_pod(w)["securityContext"]["runAsUser"]) for w in _service_workloads().values()}
    assert uids == {int(user)}, "the pods run as the image's user"


def test_dockerfile_installs_the_project_and_bakes_the_model() -> None:
    text = " ".join(a for k, a in _instructions() if k == "RUN")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    assert "-r requirements.txt" in text
    assert re.search(r"pip install --no-deps \.(\s|$)", text)
    assert "export_int8" in text and "packaged_model_path" in text
    backends = importlib.import_module("embedder.backends")
    assert callable(backends.export_int8) and callable(backends.packaged_model_path)
    env = " ".join(a for k, a in _final_stage() if k == "ENV")
    match = re.search(r"EMBEDDER_CACHE_DIR=(\S+)", env)
    assert match, "the runtime stage must point EMBEDDER_CACHE_DIR at the baked model"
    assert f"Path('{match.group(1)}')" in text, "export into the directory the runtime reads"


def test_dockerfile_copies_exist_and_are_not_ignored() -> None:
    allowed = {
        line[1:].strip().rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.startswith("!")
    }
    copied: list[str] = []
    for keyword, arguments in _instructions():
        if keyword != "COPY" or arguments.startswith("--from"):
            continue
        words = [w for w in arguments.split() if not w.startswith("--")]
        copied.extend(words[:-1])
    assert {"gen/python", "libs", "services", "pyproject.toml", "requirements.txt"} <= set(copied)
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert source in allowed, f"COPY {source}: excluded by {DOCKERIGNORE.name}"


def test_dockerfile_exposes_every_service_port() -> None:
    exposed = {int(p) for k, a in _final_stage() if k == "EXPOSE" for p in a.split()}
    assert exposed == {*SERVICES.values(), METRICS_PORT}


# --- metrics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_serves_its_metrics_on_the_metrics_port(name: str) -> None:
    """svckit.metrics reads <SERVICE>_METRICS_LISTEN; the pod declares the port and the
    Service names it `metrics`. The gateway's too: never on its public HTTP port, which an
    Ingress publishes."""
    container = _main(_workloads()[name])
    assert _env(container)[f"{name.upper()}_METRICS_LISTEN"]["value"] == f"0.0.0.0:{METRICS_PORT}"
    assert _port_number(container, "metrics") == METRICS_PORT
    service_ports = {p["name"]: p for p in _objects("Service")[name]["spec"]["ports"]}
    assert service_ports["metrics"]["port"] == METRICS_PORT
    assert service_ports["metrics"]["targetPort"] == "metrics"


def test_only_the_monitoring_namespace_reaches_the_metrics_port() -> None:
    """No pod of Cograph's namespace and no outside client reaches 9464 (the policy graph
    test covers those); the one rule that opens it admits the monitoring namespace only."""
    opening = [
        rule
        for policy in _objects("NetworkPolicy").values()
        for rule in policy["spec"].get("ingress", [])
        if any(p.get("port") == METRICS_PORT for p in rule.get("ports", []))
    ]
    assert len(opening) == 1
    (rule,) = opening
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert [(p.get("protocol", "TCP"), p["port"]) for p in rule["ports"]] == [("TCP", METRICS_PORT)]
    graph = _policy_graph(list(_base_objects()))
    assert not [edge for edge in graph if edge[3] == METRICS_PORT]


def test_service_monitor_scrapes_every_service() -> None:
    """The component's ServiceMonitor selects Cograph's Services, and each of its endpoints
    names a port that a Service has: `metrics`, on every service, never the gateway's public
    HTTP port."""
    (monitor,) = _load(COMPONENTS / "service-monitor" / "service-monitor.yaml")
    assert (monitor["apiVersion"], monitor["kind"]) in CRD_KINDS
    assert _kustomization(COMPONENTS / "service-monitor")["kind"] == "Component"
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = _objects("Service")
    selected = {n for n, svc in services.items() if _subset(selector, svc["metadata"]["labels"])}
    assert selected >= set(SERVICES)
    scraped = {
        name
        for endpoint in monitor["spec"]["endpoints"]
        for name in selected
        if endpoint["path"] == "/metrics"
        and any(p["name"] == endpoint["port"] for p in services[name]["spec"]["ports"])
    }
    assert scraped == set(SERVICES)
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} == {"metrics"}


# --- the Grafana dashboard as a ConfigMap (components/grafana-dashboard) --------------------

GRAFANA_DASHBOARD = ROOT / "deploy" / "grafana" / "cograph.json"
# `kubectl apply` (client side) copies the whole object into an annotation, and an
# object's annotations may hold 256 KiB in all.
APPLY_ANNOTATION_BYTES = 256 * 1024


def test_grafana_dashboard_component_ships_the_dashboard() -> None:
    """kustomize reads no file outside a kustomization's directory, so the component holds
    a copy of deploy/grafana/cograph.json: the two must be the same bytes."""
    directory = COMPONENTS / "grafana-dashboard"
    kustomization = _kustomization(directory)
    assert kustomization["kind"] == "Component"
    (generator,) = kustomization["configMapGenerator"]
    (name,) = generator["files"]
    assert (directory / name).read_bytes() == GRAFANA_DASHBOARD.read_bytes(), (
        "copy deploy/grafana/cograph.json into components/grafana-dashboard"
    )
    options = generator["options"]
    # The sidecar's label; a fixed name, so that a change replaces the ConfigMap instead of
    # leaving the old one (the same dashboard uid twice) behind.
    assert options["labels"]["grafana_dashboard"] == "1"
    assert options["labels"][PART_OF] == "cograph" and options["labels"][NAME]
    assert options["disableNameSuffixHash"] is True
    assert len(GRAFANA_DASHBOARD.read_bytes()) < APPLY_ANNOTATION_BYTES // 2


def test_grafana_dashboard_component_renders(tmp_path: Path) -> None:
    command = _kustomize_command()
    if command is None:
        pytest.skip("neither kustomize nor kubectl is installed")
    # An overlay of the local one with the component, as an operator's would be; kustomize
    # takes relative paths only.
    relative = Path(*[".."] * len(tmp_path.resolve().parts[1:])) / K8S.resolve().relative_to("/")
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [str(relative / "overlays" / "local")],
                "components": [str(relative / "components" / "grafana-dashboard")],
            }
        )
    )
    result = subprocess.run(
        [*command, str(tmp_path)], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.load_all(result.stdout, Loader=YAML_LOADER) if d]
    (config,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("dashboard")
    ]
    assert config["metadata"]["name"] == "cograph-grafana-dashboard"
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["data"] == {"cograph.json": GRAFANA_DASHBOARD.read_text()}
    kubernetes_validate.validate(config, KUBERNETES_VERSION, strict=True)


# --- Ingress and TLS (components/ingress-tls) ----------------------------------------------

INGRESS_FILE = COMPONENTS / "ingress-tls" / "ingress.yaml"
NGINX = "nginx.ingress.kubernetes.io/"
ISSUER_ANNOTATION = "cert-manager.io/cluster-issuer"
# How long ingress-nginx keeps an idle connection to an upstream: its controller ConfigMap's
# `upstream-keepalive-timeout` (no Ingress annotation sets it), 60 s unless the cluster's
# controller changes it. The gateway must keep a connection longer (GATEWAY_KEEPALIVE_S).
INGRESS_NGINX_UPSTREAM_KEEPALIVE_S = 60


def _nginx_size(text: str) -> int:
    """nginx's size syntax (`16m`: MiB, `k`: KiB, `g`: GiB, bare bytes)."""
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    assert match, f"not an nginx size: {text!r}"
    number, unit = match.groups()
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()]


def _check_ingress(ingress: Obj, settings: Any = None) -> None:
    """What every Ingress of Cograph's must be, as written or as an overlay renders it
    (`settings`: the gateway's there; the base's by default)."""
    spec = ingress["spec"]
    annotations = ingress["metadata"]["annotations"]
    service = _objects("Service")["gateway"]
    container = _main(_workloads()["gateway"])
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    hosts = [rule["host"] for rule in spec["rules"]]
    assert hosts and all(hosts), "a host per rule: no catch-all publishing"
    assert {h for tls in spec["tls"] for h in tls["hosts"]} >= set(hosts), "TLS for every host"
    assert all(tls.get("secretName") for tls in spec["tls"])
    assert annotations.get(ISSUER_ANNOTATION), "cert-manager issues the certificate"
    assert annotations[f"{NGINX}ssl-redirect"] == "true"
    assert annotations[f"{NGINX}force-ssl-redirect"] == "true"
    assert "defaultBackend" not in spec
    for rule in spec["rules"]:
        for path in rule["http"]["paths"]:
            assert "metrics" not in path["path"], "the metrics are never published"
            backend = path["backend"]["service"]
            assert backend["name"] == "gateway", "the gateway is the only entry point"
            # By name, the Service's API port, which leads to the port the gateway listens
            # on (GATEWAY_LISTEN), never to the metrics listener.
            name = backend["port"]["name"]
            assert name == "http" and "number" not in backend["port"]
            target = _port_number(container, service_ports[name]["targetPort"])
            assert target == _listen_port("gateway", container) != METRICS_PORT
    # The proxy's limits follow the gateway's own (gateway.settings from the pod's env).
    settings = settings or _gateway_settings()
    assert _nginx_size(annotations[f"{NGINX}proxy-body-size"]) == settings.max_body_bytes
    longest = settings.key_lookup_timeout_s + settings.backend_timeout_s
    for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
        seconds = int(annotations[f"{NGINX}{timeout}"])
        assert longest < seconds <= 2 * longest + 10, f"{timeout}: {seconds} s"
    assert int(annotations[f"{NGINX}proxy-connect-timeout"]) <= 10
    # The proxy closes an idle upstream connection before the gateway does; otherwise it now
    # and then sends a request on a connection the gateway is closing, and answers 502.
    assert settings.keepalive_s > INGRESS_NGINX_UPSTREAM_KEEPALIVE_S, (
        f"GATEWAY_KEEPALIVE_S={settings.keepalive_s}: not above the proxy's keep-alive"
    )


def test_ingress_publishes_the_gateway_api_over_tls_only() -> None:
    (ingress,) = _load(INGRESS_FILE)
    assert ingress["kind"] == "Ingress"
    assert ingress["spec"]["ingressClassName"]
    _check_ingress(ingress)
    limits = importlib.import_module("cograph_api.limits")
    assert _nginx_size("16m") == limits.REQUEST_BODY_MAX_BYTES
    assert f"{NGINX}proxy-body-size" in (ROOT / "deploy" / "README.md").read_text()


def test_the_ingress_checks_refuse_what_must_not_be_published() -> None:
    """The checks above fail on the mistakes they exist for."""
    (good,) = _load(INGRESS_FILE)

    def variant(change: Any) -> Obj:
        ingress: Obj = yaml.safe_load(yaml.safe_dump(good))
        change(ingress)
        return ingress

    def backend(ingress: Obj) -> Obj:
        found: Obj = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
        return found

    def annotations(ingress: Obj) -> Obj:
        found: Obj = ingress["metadata"]["annotations"]
        return found

    broken = [
        variant(lambda i: backend(i).update(port={"name": "metrics"})),
        variant(lambda i: backend(i).update(port={"number": METRICS_PORT})),
        variant(lambda i: i["spec"]["rules"][0]["http"]["paths"][0].update(path="/metrics")),
        variant(lambda i: i["spec"].pop("tls")),
        variant(lambda i: i["spec"]["rules"][0].update(host="other.example.com")),
        variant(lambda i: annotations(i).pop(ISSUER_ANNOTATION)),
        variant(lambda i: annotations(i).update({f"{NGINX}proxy-body-size": "1m"})),
        variant(lambda i: annotations(i).update({f"{NGINX}proxy-read-timeout": "30"})),
    ]
    for ingress in broken:
        with pytest.raises((AssertionError, KeyError)):
            _check_ingress(ingress)
    # A gateway closing idle connections before the proxy does (uvicorn's default, 5 s).
    settings = _gateway_settings()
    for keepalive in (5, INGRESS_NGINX_UPSTREAM_KEEPALIVE_S):
        with pytest.raises(AssertionError, match="GATEWAY_KEEPALIVE_S"):
            _check_ingress(good, replace(settings, keepalive_s=keepalive))
    _check_ingress(good, replace(settings, keepalive_s=61))


def test_production_publishes_the_gateway_through_the_ingress() -> None:
    docs = _rendered("production")
    (ingress,) = [d for d in docs if d["kind"] == "Ingress"]
    assert ingress["metadata"]["namespace"] == "cograph"
    _check_ingress(ingress, _gateway_settings(docs))
    # The overlay's host and issuer, set in one place, replace the component's.
    patches = "\n".join(
        p["patch"]
        for p in _kustomization(OVERLAYS / "production").get("patches", [])
        if p.get("target", {}).get("kind") == "Ingress"
    )
    (host,) = {rule["host"] for rule in ingress["spec"]["rules"]}
    assert ingress["spec"]["tls"][0]["hosts"] == [host]
    assert f"value: {host}" in patches
    assert f"value: {ingress['metadata']['annotations'][ISSUER_ANNOTATION]}" in patches


# --- the production overlay as the package a team installs ---------------------------------


def _production_patch(kind: str, name: str) -> Obj | str:
    """The production overlay's patch of one object: a strategic merge patch (parsed) or a
    JSON patch (its text)."""
    for patch in _kustomization(OVERLAYS / "production").get("patches", []):
        target = patch.get("target", {})
        if (target.get("kind"), target.get("name")) == (kind, name):
            text: str = patch["patch"]
            return text
        if "target" not in patch:
            parsed: Obj = yaml.load(patch["patch"], Loader=YAML_LOADER)
            if (parsed["kind"], parsed["metadata"]["name"]) == (kind, name):
                return parsed
    raise AssertionError(f"overlays/production patches no {kind}/{name}")


def test_production_overlay_sets_in_one_place_what_a_team_changes() -> None:
    """Images, replicas, the settings, the collector, the public host and its issuer, the
    clones' claims: each is in overlays/production/kustomization.yaml, and each setting the
    overlay names is one the services read (docs/configuration.md is generated from the
    code that reads them)."""
    kustomization = _kustomization(OVERLAYS / "production")
    assert {i["name"] for i in kustomization["images"]} == {"cograph", "cograph-slim"}
    assert {r["name"] for r in kustomization["replicas"]} == {"retrieval", "router", "commons"}
    config = _production_patch("ConfigMap", CONFIG_MAP)
    assert isinstance(config, dict)
    documented = (ROOT / "docs" / "configuration.md").read_text()
    for key in config["data"]:
        assert key.startswith("OTEL_") or f"| `{key}` |" in documented, f"{key}: no such setting"
    assert {"OTEL_EXPORTER_OTLP_ENDPOINT", "GATEWAY_MAX_BODY_BYTES"} <= set(config["data"])
    for kind, name in (
        ("NetworkPolicy", "otel-collector-egress"),
        ("Ingress", "gateway"),
        ("StatefulSet", "retrieval"),
    ):
        assert isinstance(_production_patch(kind, name), str), f"{kind}/{name}"
    # The Secrets are made by the team, never generated from git; the file says how.
    text = (OVERLAYS / "production" / "kustomization.yaml").read_text()
    for secret in (DB_SECRET, INTERNAL_SECRET, ADMIN_SECRET, GIT_CREDENTIALS_SECRET):
        assert secret in text, f"{secret}: say how to make it"
    assert "secretGenerator" not in kustomization


def test_production_renders_what_its_kustomization_sets() -> None:
    docs = _rendered("production")
    config = _production_patch("ConfigMap", CONFIG_MAP)
    assert isinstance(config, dict)
    (rendered,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == CONFIG_MAP
    ]
    # The overlay's values win over the base's and the components' (the otel endpoint).
    for key, value in config["data"].items():
        assert rendered["data"][key] == value, key
    (retrieval,) = [
        d for d in docs if (d["kind"], d["metadata"]["name"]) == ("StatefulSet", "retrieval")
    ]
    assert retrieval["spec"]["replicas"] == 2
    claim = retrieval["spec"]["volumeClaimTemplates"][0]["spec"]
    patch = _production_patch("StatefulSet", "retrieval")
    assert f"value: {claim['resources']['requests']['storage']}" in patch
    settings = _gateway_settings(docs)
    assert settings.max_body_bytes == int(config["data"]["GATEWAY_MAX_BODY_BYTES"])
    assert settings.backend_timeout_s == float(config["data"]["GATEWAY_BACKEND_TIMEOUT_S"])
