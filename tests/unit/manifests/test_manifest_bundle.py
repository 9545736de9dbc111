"""The shipped manifests parse and agree with the controller's contract.

Pure YAML checks: no cluster and no kustomize binary. What only an API server
can judge (the CEL rules compile, the CRD is structural) is exercised by
hack/smoke.sh, which applies these very files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
BASE = MANIFESTS / "base"
SMOKE = MANIFESTS / "overlays" / "smoke"
CHART = ROOT / "charts" / "openrl-place"
NAMESPACE = "openrl"
SA = "open-rl-scheduler"

Doc = dict[str, Any]


def load_all(path: Path) -> list[Doc]:
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def kustomization(directory: Path) -> Doc:
    doc = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def base_docs() -> list[Doc]:
    docs: list[Doc] = []
    for name in kustomization(BASE)["resources"]:
        docs.extend(load_all(BASE / name))
    return docs


def find(kind: str, name: str) -> Doc:
    hits = [d for d in base_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, f"want exactly one {kind}/{name}, found {len(hits)}"
    return hits[0]


# ----------------------------------------------------------------- structure


def test_every_manifest_parses_and_is_named() -> None:
    # manifests/monitoring holds Prometheus rule files, not objects (test_monitoring.py).
    files = sorted(p for p in MANIFESTS.rglob("*.yaml") if "monitoring" not in p.parts)
    assert files
    for path in files:
        for doc in load_all(path):
            assert isinstance(doc, dict), path
            if path.name == "kustomization.yaml":
                assert doc["kind"] in ("Kustomization", "Component")  # manifests/kueue
                continue
            assert doc.get("apiVersion") and doc.get("kind"), path
            assert doc.get("metadata", {}).get("name"), path


def test_base_kustomization_lists_every_file_once() -> None:
    listed = kustomization(BASE)["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk


def test_no_two_objects_share_an_identity() -> None:
    seen = set()
    for d in base_docs():
        key = (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
        assert key not in seen, key
        seen.add(key)


def test_namespaced_objects_live_in_openrl() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for d in base_docs():
        if d["kind"] in cluster_scoped:
            assert "namespace" not in d["metadata"], d["kind"]
        else:
            assert d["metadata"].get("namespace") == NAMESPACE, (d["kind"], d["metadata"])
    assert find("Namespace", NAMESPACE)


def test_smoke_overlay_builds_on_base_and_patches_known_objects() -> None:
    k = kustomization(SMOKE)
    assert k["resources"] == ["../../base"]
    known = {(d["kind"], d["metadata"]["name"]) for d in base_docs()}
    for patch in k["patches"]:
        for doc in load_all(SMOKE / patch["path"]):
            assert (doc["kind"], doc["metadata"]["name"]) in known


def smoke_deployment() -> Doc:
    k = kustomization(SMOKE)
    for patch in k["patches"]:
        for doc in load_all(SMOKE / patch["path"]):
            if doc["kind"] == "Deployment":
                return doc
    raise AssertionError("smoke overlay does not patch the Deployment")


def test_smoke_overlay_scales_to_zero_and_shortens_timers() -> None:
    dep = smoke_deployment()
    assert dep["spec"]["replicas"] == 0
    env = {e["name"]: e["value"] for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OPEN_RL_DEVICE_CLASS"] == "gpu.example.com"
    for name in ("OPEN_RL_RETRY_INTERVAL", "OPEN_RL_RECLAIM_INTERVAL", "OPEN_RL_RECLAIM_GRACE"):
        assert seconds(env[name]) <= 30, name
    # The patched container must be the base's, or the patch would add a second one.
    base_names = [c["name"] for c in pod_spec(find("Deployment", SA))["containers"]]
    assert dep["spec"]["template"]["spec"]["containers"][0]["name"] in base_names


def seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    total = 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)([smh])", text)
    assert parts and "".join(a + b for a, b in parts) == text, text
    for amount, unit in parts:
        total += float(amount) * units[unit]
    return total


# ----------------------------------------------------------------------- CRD


def crd() -> Doc:
    return find("CustomResourceDefinition", "openrlworkers.openrl.io")


def version() -> Doc:
    versions = crd()["spec"]["versions"]
    assert [v["name"] for v in versions] == ["v1alpha1"]
    return versions[0]


def walk(schema: Doc, path: str = "") -> Iterator[tuple[str, Doc]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")


def test_crd_names_and_scope() -> None:
    spec = crd()["spec"]
    assert spec["group"] == "openrl.io"
    assert spec["scope"] == "Namespaced"
    names = spec["names"]
    assert (names["kind"], names["plural"], names["singular"]) == (
        "OpenRLWorker",
        "openrlworkers",
        "openrlworker",
    )
    assert names["shortNames"] == ["orw"]
    v = version()
    assert v["served"] and v["storage"]
    assert v["subresources"] == {"status": {}}


def test_crd_printer_columns() -> None:
    cols = [c["name"] for c in version()["additionalPrinterColumns"] if c.get("priority", 0) == 0]
    assert cols == ["Role", "Owner", "GPUs", "MemEach", "Phase", "Claim", "Node", "Age"]
    schema = version()["schema"]["openAPIV3Schema"]
    for col in version()["additionalPrinterColumns"]:
        path = col["jsonPath"].lstrip(".").split(".")
        if path[0] == "metadata":
            continue
        node = schema
        for part in path:
            node = node["properties"][part]


def test_crd_schema_is_structural_and_described() -> None:
    schema = version()["schema"]["openAPIV3Schema"]
    for path, node in walk(schema):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        if path in ("", ".apiVersion", ".kind", ".metadata"):
            continue
        if path.endswith("[]") and node.get("type") != "object":
            continue  # scalar list items: the list's description covers them
        assert node.get("description", "").strip(), f"{path} has no description"


def test_crd_spec_contract() -> None:
    spec = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert sorted(spec["required"]) == ["memory", "modelId", "role"]
    props = spec["properties"]
    assert set(props) == {
        "role",
        "modelId",
        "ownerId",
        "memory",
        "exclusive",
        "devices",
        "movable",
        "estimatorVersion",
        "podTemplate",
        "container",
    }
    assert props["role"]["enum"] == ["trainer", "sampler"]
    # A worker that runs alone says so at creation; like the rest of spec, never after.
    assert props["exclusive"] == {**props["exclusive"], "type": "boolean", "default": False}
    # An exact device count: a whole number from 1, fixed once set (as the rest of spec).
    assert props["devices"] == {**props["devices"], "type": "integer", "minimum": 1}
    assert [r["rule"] for r in props["devices"]["x-kubernetes-validations"]] == [
        "self == oldSelf"]
    # A worker that may be moved says so at creation, with its own message when changed.
    assert props["movable"] == {**props["movable"], "type": "boolean", "default": False}
    assert props["movable"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "movable is immutable once set"}]
    assert props["modelId"]["minLength"] == 1
    assert props["podTemplate"]["required"] == ["name"]
    assert props["podTemplate"]["properties"]["key"]["default"] == "pod.yaml"
    container = props["container"]["properties"]
    assert set(container) == {"image", "command", "args", "env"}
    assert set(container["env"]["items"]["properties"]) == {"name", "value"}
    assert container["env"]["maxItems"] == 1000  # thousands made each update take seconds
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert "self == oldSelf" in rules


def test_crd_memory_is_a_positive_quantity() -> None:
    memory = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["memory"]
    assert memory["x-kubernetes-int-or-string"] is True
    assert {t["type"] for t in memory["anyOf"]} == {"integer", "string"}
    pattern = re.compile(memory["pattern"])
    for good in ("10Gi", "60Gi", "1.5Ti", "60G", "1024", "0.5Ti"):
        assert pattern.fullmatch(good), good
    for bad in ("10 Gi", "Gi", "ten", "10GiB", ""):
        assert not pattern.fullmatch(bad), bad
    (rule,) = memory["x-kubernetes-validations"]
    assert "quantity(" in rule["rule"] and "isGreaterThan" in rule["rule"]


def test_crd_status_contract() -> None:
    status = version()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {
        "phase",
        "deviceCount",
        "memoryPerDevice",
        "hostMemoryWhenParked",
        "estimatorVersion",
        "claimName",
        "podName",
        "nodeName",
        "reason",
        "observedGeneration",
        "conditions",
        "moves",
        "move",
    }
    assert status["phase"]["enum"] == ["Pending", "Placing", "Running", "Succeeded", "Failed"]
    assert set(status["moves"]["items"]["properties"]) == {"at", "reason", "node", "claim"}
    cond = status["conditions"]["items"]
    assert set(cond["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


# ---------------------------------------------------------------------- RBAC

# What the controller does, and nothing more (group, resource) -> verbs.
NAMESPACED = {
    ("openrl.io", "openrlworkers"): {"get", "list", "watch", "update", "patch"},
    ("openrl.io", "openrlworkers/status"): {"get", "update", "patch"},
    ("openrl.io", "openrlworkers/finalizers"): {"update"},
    ("", "pods"): {"get", "list", "watch", "create", "delete", "patch"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch", "create", "delete",
                                            "patch"},
    ("", "configmaps"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
}
CLUSTER = {
    ("", "nodes"): {"get", "list", "watch"},
    # Every namespace's pods, for the pod slots they take on a node: list and watch only.
    ("", "pods"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch"},
    ("resource.k8s.io", "deviceclasses"): {"get", "list", "watch"},
    # Every namespace's claims, for the devices they hold: list and watch only (claims
    # are written in the scheduler's namespace alone, by the Role).
    ("resource.k8s.io", "resourceclaims"): {"list", "watch"},
}
READ = {"get", "list", "watch"}


def grants(role: Doc) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for value in (*rule["apiGroups"], *rule["resources"], *rule["verbs"]):
            assert value != "*", f"wildcard in {role['kind']} rule {rule}"
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_role_grants_exactly_what_the_controller_uses() -> None:
    role = find("Role", SA)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == NAMESPACED


def test_lease_updates_are_limited_to_the_scheduler_lease() -> None:
    dep_env = env_of(find("Deployment", SA))
    for rule in find("Role", SA)["rules"]:
        if "leases" in rule["resources"] and set(rule["verbs"]) & {"get", "update"}:
            assert rule.get("resourceNames") == [dep_env["OPEN_RL_LEASE_NAME"]["value"]]


def test_cluster_role_only_reads_the_cluster_wide_inventory() -> None:
    role = find("ClusterRole", SA)
    got = grants(role)
    assert got == CLUSTER
    for verbs in got.values():
        assert verbs <= READ


@pytest.mark.parametrize(
    ("kind", "role_kind"), [("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")]
)
def test_bindings_bind_the_service_account(kind: str, role_kind: str) -> None:
    binding = find(kind, SA)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": SA,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]
    assert find("ServiceAccount", SA)


# ---------------------------------------------------------------- Deployment


def pod_spec(dep: Doc) -> Doc:
    spec = dep["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def env_of(dep: Doc) -> dict[str, Doc]:
    (container,) = pod_spec(dep)["containers"]
    return {e["name"]: e for e in container["env"]}


def test_deployment_runs_the_controller_as_its_service_account() -> None:
    dep = find("Deployment", SA)
    assert dep["metadata"]["labels"]["app"] == SA
    assert dep["spec"]["selector"]["matchLabels"] == {"app": SA}
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == SA
    spec = pod_spec(dep)
    assert spec["serviceAccountName"] == SA
    (container,) = spec["containers"]
    assert container["command"] == ["openrl-place", "controller"]
    assert "--http-address=:8080" in container["args"]
    env = env_of(dep)
    assert env["OPEN_RL_NAMESPACE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }
    assert env["OPEN_RL_DEVICE_CLASS"]["value"] == "gpu.example.com"
    if dep["spec"]["replicas"] > 1:
        assert env["OPEN_RL_LEADER_ELECT"]["value"] == "true"


def controller_options() -> tuple[set[str], set[str]]:
    """The flags and environment variables ``openrl-place controller`` declares."""
    source = (ROOT / "controller" / "main.py").read_text()
    envvars = set(re.findall(r'envvar="(OPEN_RL_[A-Z_]+)"', source))
    flags = set(re.findall(r'"(--[a-z][a-z-]*)', source))
    return envvars, flags


def test_deployment_env_and_args_are_controller_settings() -> None:
    envvars, flags = controller_options()
    assert "OPEN_RL_DEVICE_CLASS" in envvars and "--http-address" in flags
    env = env_of(find("Deployment", SA))
    assert set(env) <= envvars
    (container,) = pod_spec(find("Deployment", SA))["containers"]
    for arg in container["args"]:
        assert arg.split("=")[0] in flags, arg
    for name, entry in env.items():
        if name.endswith(("_INTERVAL", "_TIMEOUT", "_GRACE")):
            assert seconds(entry["value"]) > 0
    smoke_env = smoke_deployment()["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {e["name"] for e in smoke_env} <= envvars


def test_deployment_probes_and_ports() -> None:
    (container,) = pod_spec(find("Deployment", SA))["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert 8080 in ports.values()
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in ports or get["port"] == 8080


def test_deployment_is_locked_down() -> None:
    spec = pod_spec(find("Deployment", SA))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])


# ------------------------------------------------------------- pod templates

PLACEMENT_OWNED_POD = {"nodeName", "nodeSelector", "affinity", "resourceClaims"}


@pytest.mark.parametrize("role", ["trainer", "sampler"])
def test_default_template_is_a_clean_pod(role: str) -> None:
    cm = find("ConfigMap", f"openrl-template-{role}")
    pod = yaml.safe_load(cm["data"]["pod.yaml"])
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    spec = pod["spec"]
    assert not PLACEMENT_OWNED_POD & set(spec)
    workers = [c for c in spec["containers"] if c["name"] == "worker"]
    assert len(workers) == 1
    for c in spec["containers"] + spec.get("initContainers", []):
        resources = c.get("resources", {})
        assert "claims" not in resources
        for kind in ("requests", "limits"):
            for name in resources.get(kind, {}):
                assert name in ("cpu", "memory", "ephemeral-storage"), name
        for e in c.get("env", []):
            assert not e["name"].startswith("OPEN_RL_TIME_SLICE_"), e["name"]


@pytest.mark.parametrize("role", ["trainer", "sampler"])
def test_default_templates_are_marked_and_hand_out_nothing(role: str) -> None:
    from controller.reconcile.privileges import (
        LABEL_POD_TEMPLATE,
        TemplatePolicy,
        privilege_refusal,
        unmarked_refusal,
    )

    cm = find("ConfigMap", f"openrl-template-{role}")
    assert cm["metadata"]["labels"][LABEL_POD_TEMPLATE] == "true"
    assert unmarked_refusal(cm, "cm") is None
    spec = yaml.safe_load(cm["data"]["pod.yaml"])["spec"]
    assert privilege_refusal(spec, "cm", cm["metadata"]["name"], TemplatePolicy()) is None
    # The restricted Pod Security level, so the namespace's warning never fires for them.
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in spec["containers"]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_namespace_enforces_baseline_and_warns_restricted() -> None:
    labels = find("Namespace", NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] in ("baseline", "restricted")
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


def test_deployment_tells_the_scheduler_its_own_account() -> None:
    env = env_of(find("Deployment", SA))
    assert env["OPEN_RL_SERVICE_ACCOUNT"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "spec.serviceAccountName"}}


GATEWAY = {
    ("openrl.io", "openrlworkers"): {"create", "get", "list", "watch", "delete"},
    ("openrl.io", "openrlworkers/status"): {"get"},
}


def test_gateway_role_creates_watches_and_deletes_workers_and_nothing_more() -> None:
    role = find("Role", "openrl-place-gateway")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == GATEWAY
    assert not any(d["kind"].endswith("Binding") and d["roleRef"]["name"] == "openrl-place-gateway"
                   for d in base_docs())  # bound to nobody: the operator names the gateway


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_runs_the_controller_unprivileged() -> None:
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms and all(f.startswith(("${PYTHON_IMAGE}", "python:3.11-slim")) for f in froms)
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", text, re.M)
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["openrl-place", "controller"\]$', text, re.M)
    run_as = pod_spec(find("Deployment", SA))["securityContext"]["runAsUser"]
    assert str(run_as) == user[-1].split(":")[0]


def test_viewer_role_reads_what_snapshot_and_explain_read_and_nothing_more() -> None:
    from controller.inspect_fleet import READS

    role = find("ClusterRole", "openrl-place-viewer")
    got = grants(role)
    for verbs in got.values():
        assert verbs == READ
    assert {(res.group, res.plural) for res in READS} <= set(got)
    assert not any(d["kind"].endswith("Binding") and d["roleRef"]["name"] == "openrl-place-viewer"
                   for d in base_docs())  # the operator binds it to whom they choose


# Files the chart carries as copies of the canonical ones, so a packaged chart is whole.
CHART_COPIES = {
    CHART / "files" / "crd.yaml": BASE / "crd.yaml",
    CHART / "files" / "rules.yaml": MANIFESTS / "monitoring" / "rules.yaml",
    CHART / "files" / "dashboard.json": MANIFESTS / "monitoring" / "dashboard.json",
}


@pytest.mark.parametrize("copy", sorted(CHART_COPIES),
                         ids=lambda p: str(p.relative_to(CHART)))
def test_the_charts_files_are_the_canonical_ones(copy: Path) -> None:
    source = CHART_COPIES[copy]
    assert copy.read_bytes() == source.read_bytes(), (
        f"{copy.relative_to(ROOT)} is not {source.relative_to(ROOT)}: "
        f"cp {source.relative_to(ROOT)} {copy.relative_to(ROOT)}")
