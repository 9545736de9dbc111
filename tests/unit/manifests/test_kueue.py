"""Team quotas through Kueue: manifests/kueue and the chart's ``kueue`` values agree.

The component (``manifests/kueue``) adds the scheduler's rights on Kueue's API and
``OPEN_RL_KUEUE=true``; the chart adds the same objects behind ``kueue.enabled``,
and renders nothing new with it off. The example queues exist twice too, as
``manifests/kueue/example-queues.yaml`` and behind ``kueue.queues``. The pure YAML
checks need no tool; the ones that render run Helm and kustomize (``tools``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.k8s import kube, naming
from tests.tools import ROOT, run
from tests.unit.manifests import test_chart
from tests.unit.manifests.test_chart import (
    by_key,
    container,
    find,
    template,
    without_deliberate,
)
from tests.unit.manifests.test_manifest_bundle import (
    MANIFESTS,
    NAMESPACE,
    READ,
    SA,
    base_docs,
    controller_options,
    grants,
    load_all,
)

KUEUE = MANIFESTS / "kueue"
OVERLAY = MANIFESTS / "overlays" / "kueue"
EXAMPLE = KUEUE / "example-queues.yaml"
NAME = f"{SA}-kueue"  # the Role, ClusterRole and their bindings

Doc = dict[str, Any]

# The chart tests' fixtures: a Helm home of the module's own, the default render.
helm_env = test_chart.helm_env
defaults = test_chart.defaults
base = test_chart.base  # kustomize build manifests/base

# What team quotas add, and nothing more: (group, resource) -> verbs.
KUEUE_NAMESPACED = {
    # A queued worker's Workload: written, watched, deleted after its worker; never updated.
    ("kueue.x-k8s.io", "workloads"): {"get", "list", "watch", "create", "delete"},
    # Handing an evicted worker's quota back, and finishing it: status patches.
    ("kueue.x-k8s.io", "workloads/status"): {"get", "patch"},
}
KUEUE_CLUSTER = {
    ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list", "watch"},
}
# The values that render manifests/kueue/example-queues.yaml.
EXAMPLE_VALUES = ("--set", "kueue.queues.create=true",
                  "--set", "kueue.queues.cohort=openrl-teams",
                  "--set", "kueue.queues.preemption.reclaimWithinCohort=Any",
                  "--set-json", 'kueue.queues.teams=[{"name": "team-a", "nominalQuota": "160Gi"},'
                                '{"name": "team-b", "nominalQuota": "80Gi"}]')


def component() -> Doc:
    doc = yaml.safe_load((KUEUE / "kustomization.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def component_docs() -> list[Doc]:
    return [d for name in component()["resources"] for d in load_all(KUEUE / name)]


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    hits = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, f"want one {kind}/{name}, found {len(hits)}"
    return hits[0]


# ----------------------------------------------------------------- the component


def test_the_component_adds_rbac_and_patches_the_base_deployment() -> None:
    k = component()
    assert (k["apiVersion"], k["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    on_disk = {p.name for p in KUEUE.glob("*.yaml")}
    patches = [p["path"] for p in k["patches"]]
    # The example queues are the operator's to adapt: never applied by the component.
    assert on_disk == {"kustomization.yaml", EXAMPLE.name, *k["resources"], *patches}
    assert EXAMPLE.name not in k["resources"]
    known = {(d["kind"], d["metadata"]["name"]) for d in base_docs()}
    (patch,) = [d for p in patches for d in load_all(KUEUE / p)]
    assert (patch["kind"], patch["metadata"]["name"]) in known
    (scheduler,) = patch["spec"]["template"]["spec"]["containers"]
    base_names = [c["name"] for c in one(base_docs(), "Deployment", SA)["spec"]["template"]
                  ["spec"]["containers"]]
    assert scheduler["name"] in base_names  # else the patch would add a second container
    assert scheduler["env"] == [{"name": "OPEN_RL_KUEUE", "value": "true"}]
    assert "OPEN_RL_KUEUE" in controller_options()[0]


def test_the_overlay_is_the_base_with_the_component() -> None:
    doc = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert doc["resources"] == ["../../base"] and doc["components"] == ["../../kueue"]


def test_the_rbac_grants_exactly_what_team_quotas_use() -> None:
    docs = component_docs()
    role = one(docs, "Role", NAME)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == KUEUE_NAMESPACED
    cluster = grants(one(docs, "ClusterRole", NAME))
    assert cluster == KUEUE_CLUSTER
    for verbs in cluster.values():
        assert verbs <= READ
    # The controller's own resources: Workloads in its namespace, priority classes cluster-wide.
    assert kube.WORKLOADS.namespaced and not kube.PRIORITY_CLASSES.namespaced
    assert (kube.WORKLOADS.group, kube.WORKLOADS.plural) in KUEUE_NAMESPACED
    assert (kube.PRIORITY_CLASSES.group, kube.PRIORITY_CLASSES.plural) in KUEUE_CLUSTER
    for kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = one(docs, kind, NAME)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": role_kind, "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA,
                                        "namespace": NAMESPACE}]


# ----------------------------------------------------------------- the example queues


def test_the_example_queues_count_accelerator_memory_for_the_schedulers_namespace() -> None:
    docs = load_all(EXAMPLE)
    api = f"{kube.WORKLOADS.group}/{kube.WORKLOADS.version}"
    assert {d["apiVersion"] for d in docs} == {api}
    (flavor,) = [d for d in docs if d["kind"] == "ResourceFlavor"]
    assert "nodeLabels" not in flavor.get("spec", {})  # quota only: placement picks nodes
    queues = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterQueue"}
    assert queues
    for name, queue in queues.items():
        spec = queue["spec"]
        assert spec["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}, name
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == [naming.ACCELERATOR_MEMORY], name
        (each,) = group["flavors"]
        assert each["name"] == flavor["metadata"]["name"]
        assert [r["name"] for r in each["resources"]] == [naming.ACCELERATOR_MEMORY]
    local = [d for d in docs if d["kind"] == "LocalQueue"]
    assert {d["spec"]["clusterQueue"] for d in local} == set(queues)
    for d in local:
        assert d["metadata"]["namespace"] == NAMESPACE


# ----------------------------------------------------------------- the chart


def env_sorted(doc: Doc) -> Doc:
    """The object with its containers' env in name order: a strategic merge patch puts
    the entries it adds first, the chart last (order matters only to $(VAR) references,
    and none of these make one)."""
    if doc["kind"] == "Deployment":
        for c in doc["spec"]["template"]["spec"]["containers"]:
            c["env"] = sorted(c.get("env", []), key=lambda e: e["name"])
    return doc


def without_labels(doc: Doc) -> Doc:
    """The example queues as the operator's file has them: the chart's labels off."""
    doc = without_deliberate(doc)
    doc["metadata"].pop("labels", None)
    return doc


def kueue_objects(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["apiVersion"].startswith("kueue.x-k8s.io/")
            or d["metadata"]["name"].endswith("-kueue")]


@pytest.mark.tools
def test_off_the_chart_renders_nothing_of_kueue(defaults: list[Doc]) -> None:
    assert not kueue_objects(defaults)
    assert "OPEN_RL_KUEUE" not in {e["name"] for e in container(defaults)["env"]}


@pytest.mark.tools
def test_on_the_chart_adds_what_the_overlay_adds(helm_env: dict[str, str], defaults: list[Doc],
                                                 base: list[Doc]) -> None:
    chart = by_key(template(helm_env, "--set", "kueue.enabled=true"))
    kustomized = by_key([d for d in yaml.safe_load_all(
        run("kustomize", "build", str(OVERLAY)).stdout) if d])
    added = sorted(set(kustomized) - set(by_key(base)))
    assert sorted(set(chart) - set(by_key(defaults))) == added
    assert {k[1] for k in added} == {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    deployment = next(k for k in kustomized if k[1] == "Deployment")
    for k in (*added, deployment):
        got, want = env_sorted(without_deliberate(chart[k])), env_sorted(kustomized[k])
        assert got == want, (
            f"{'/'.join(k)} differs from manifests/overlays/kueue\n--- chart\n"
            f"{yaml.safe_dump(got, sort_keys=True)}"
            f"--- kustomize\n{yaml.safe_dump(want, sort_keys=True)}")


@pytest.mark.tools
def test_the_example_queues_are_the_manifests_example(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, *EXAMPLE_VALUES)
    assert not [d for d in docs if d["metadata"]["name"].endswith("-kueue")]  # queues alone
    assert "OPEN_RL_KUEUE" not in {e["name"] for e in container(docs)["env"]}
    chart = {k: without_labels(d) for k, d in by_key(docs).items()
             if k[0].startswith("kueue.x-k8s.io/")}
    assert chart == by_key(load_all(EXAMPLE))


@pytest.mark.tools
def test_the_names_and_namespace_follow(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "kueue.enabled=true", "--set", "scheduler.name=place-b",
                    "--set", "namespace.name=ml", "--set", "kueue.queues.create=true",
                    "--set", "kueue.queues.teams[0].name=vision",
                    "--set", "kueue.queues.teams[0].nominalQuota=1099511627776")
    for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        assert find(docs, kind, "place-b-kueue")
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        assert find(docs, kind, "place-b-kueue")["subjects"] == [
            {"kind": "ServiceAccount", "name": "place-b", "namespace": "ml"}]
    assert find(docs, "Role", "place-b-kueue")["metadata"]["namespace"] == "ml"
    queue = find(docs, "ClusterQueue", "vision")["spec"]
    assert "cohortName" not in queue  # no cohort unless one is named
    assert queue["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "ml"}
    assert queue["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == (
        "1099511627776")
    assert find(docs, "LocalQueue", "vision")["metadata"]["namespace"] == "ml"


@pytest.mark.tools
def test_the_install_notes_say_what_kueue_needs(helm_env: dict[str, str],
                                                tmp_path: Path) -> None:
    assert "externalFrameworks" not in test_chart.notes(helm_env, tmp_path / "off")
    text = " ".join(test_chart.notes(helm_env, tmp_path / "on", "--set",
                                     "kueue.enabled=true").split())
    assert "OpenRLWorker.v1alpha1.openrl.io in integrations.externalFrameworks" in text
    assert "LocalQueue must be in namespace openrl" in text


@pytest.mark.tools
def test_helm_lint_passes_with_kueue(helm_env: dict[str, str]) -> None:
    proc = run("helm", "lint", "--strict", str(test_chart.CHART),
               "--set", "kueue.enabled=true", *EXAMPLE_VALUES, env=helm_env)
    assert "0 chart(s) failed" in proc.stdout, proc.stdout


def kueue_crds() -> dict[tuple[str, str], Doc]:
    """Kueue's own CRD schemas, (apiVersion, kind) -> openAPIV3Schema, from the module
    hack/kueue builds Kueue from (fetched into Go's module cache if it is not there)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    proc = subprocess.run([go, "mod", "download", "-json", "sigs.k8s.io/kueue"],
                          cwd=ROOT / "hack" / "kueue", capture_output=True, text=True,
                          timeout=600, check=False,
                          env={**os.environ, "GOFLAGS": "-mod=readonly"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bases = Path(json.loads(proc.stdout)["Dir"]) / "config" / "components" / "crd" / "bases"
    out = {}
    for path in bases.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            out[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] = (
                version["schema"]["openAPIV3Schema"])
    return out


def breaches(value: Any, schema: Doc, path: str) -> list[str]:
    """Where ``value`` leaves its CRD schema: a field the API server would drop as
    unknown, a wrong type, a value outside an enum or pattern, a required field missing.
    (CEL rules are the API server's: the e2e tier applies queues.)"""
    found = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is none of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        found.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        found += [f"{path}: {key} missing" for key in schema.get("required", ())
                  if key not in value]
        known = schema.get("properties")
        for key, sub in value.items():
            if known is not None and key not in known:
                found.append(f"{path}.{key}: no such field")
            elif known is not None:
                found += breaches(sub, known[key], f"{path}.{key}")
    elif isinstance(value, list):
        found += [b for i, item in enumerate(value)
                  for b in breaches(item, schema.get("items", {}), f"{path}[{i}]")]
    return found


@pytest.mark.tools
def test_the_example_queues_are_kueues_own_objects(helm_env: dict[str, str]) -> None:
    crds = kueue_crds()
    docs = load_all(EXAMPLE) + [
        d for d in template(helm_env, *EXAMPLE_VALUES, "--set",
                            "kueue.queues.preemption.withinClusterQueue=LowerPriority")
        if d["apiVersion"].startswith("kueue.x-k8s.io/")]
    for doc in docs:
        schema = crds[(doc["apiVersion"], doc["kind"])]
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
        assert not breaches(body, schema, doc["kind"]), doc["metadata"]["name"]
    # The chart's choices for the preemption values are Kueue's own.
    queue = crds[(f"{kube.WORKLOADS.group}/{kube.WORKLOADS.version}", "ClusterQueue")]
    preemption = queue["properties"]["spec"]["properties"]["preemption"]["properties"]
    chart = test_chart.CHART / "values.schema.json"
    ours = json.loads(chart.read_text())["properties"]["kueue"]["properties"]["queues"][
        "properties"]["preemption"]["properties"]
    for field in ("reclaimWithinCohort", "withinClusterQueue"):
        assert ours[field]["enum"] == preemption[field]["enum"], field
