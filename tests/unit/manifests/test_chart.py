"""The Helm chart renders what manifests/base holds, and its values do what they say.

With default values, ``helm template`` and ``kustomize build manifests/base`` must
give the same objects, compared whole, one by one; the only differences allowed
are listed in ``DELIBERATE`` (and in docs/operating.md). Each value is then
checked on the object it changes, and bad values are refused naming the value.
Helm and kustomize are built from their Go modules (tests/tools.py), so every
test here is marked ``tools``. That the chart's files are copies of the
canonical ones needs neither: test_manifest_bundle.py checks it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.reconcile.privileges import ALLOWABLE
from controller.settings import parse_template_allow
from tests.tools import ROOT, run

CHART = ROOT / "charts" / "openrl-place"
BASE = ROOT / "manifests" / "base"
TIMESLICER = ROOT / "manifests" / "timeslicer"
MONITORING = ROOT / "manifests" / "monitoring"
RELEASE = "openrl-place"

Doc = dict[str, Any]
Key = tuple[str, str, str, str]

# What the chart adds to every object on purpose, and nothing else.
HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart")
DELIBERATE = {
    "every object": f"Helm's labels {', '.join(HELM_LABELS)}",
    "CustomResourceDefinition": "annotation helm.sh/resource-policy: keep (crds.keep), so "
                                "uninstalling the chart never deletes the workers",
}

# Every test here runs Helm or kustomize: the tier that builds Go tools (`make test`).
pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    return {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}


def template(env: dict[str, str], *args: str, check: bool = True) -> list[Doc]:
    proc = run("helm", "template", RELEASE, str(CHART), "--namespace", "default", *args,
               env=env, check=check)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def refused(env: dict[str, str], *args: str) -> str:
    proc = run("helm", "template", RELEASE, str(CHART), *args, env=env, check=False)
    assert proc.returncode != 0, f"helm template {' '.join(args)} was accepted"
    return proc.stderr


def key(doc: Doc) -> Key:
    meta = doc["metadata"]
    return doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"]


def by_key(docs: list[Doc]) -> dict[Key, Doc]:
    out: dict[Key, Doc] = {}
    for doc in docs:
        assert key(doc) not in out, f"two objects {key(doc)}"
        out[key(doc)] = doc
    return out


def without_deliberate(doc: Doc) -> Doc:
    """The chart's object with the DELIBERATE differences taken out."""
    doc = json.loads(json.dumps(doc))
    meta = doc["metadata"]
    for label in HELM_LABELS:
        meta.get("labels", {}).pop(label, None)
    if doc["kind"] == "CustomResourceDefinition":
        meta.get("annotations", {}).pop("helm.sh/resource-policy", None)
    for field in ("labels", "annotations"):
        if field in meta and not meta[field]:
            del meta[field]
    return doc


def find(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    hits = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(hits) == 1, f"want one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def container(docs: list[Doc]) -> Doc:
    deployment = find(docs, "Deployment")
    (scheduler,) = deployment["spec"]["template"]["spec"]["containers"]
    return scheduler


def env_of(docs: list[Doc]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(docs)["env"]}


# ----------------------------------------------------------------- the same objects


@pytest.fixture(scope="module")
def defaults(helm_env: dict[str, str]) -> list[Doc]:
    return template(helm_env)


@pytest.fixture(scope="module")
def base() -> list[Doc]:
    out = run("kustomize", "build", str(BASE)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_default_values_render_the_base_object_by_object(defaults: list[Doc],
                                                         base: list[Doc]) -> None:
    chart, kustomized = by_key(defaults), by_key(base)
    assert sorted(chart) == sorted(kustomized), (
        f"only in the chart: {sorted(set(chart) - set(kustomized))}; "
        f"only in manifests/base: {sorted(set(kustomized) - set(chart))}")
    for k, want in kustomized.items():
        got = without_deliberate(chart[k])
        assert got == want, (
            f"{'/'.join(k)} differs from manifests/base\n--- chart\n"
            f"{yaml.safe_dump(got, sort_keys=True)}"
            f"--- base\n{yaml.safe_dump(want, sort_keys=True)}")


def test_the_time_slicer_renders_manifests_timeslicer_object_by_object(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert not [d for d in defaults if "timeslicer" in d["metadata"]["name"]]  # off by default
    chart = {k: d for k, d in by_key(template(helm_env, "--set", "timeslicer.enabled=true")).items()
             if k not in by_key(defaults)}
    kustomized = by_key([d for d in yaml.safe_load_all(
        run("kustomize", "build", str(TIMESLICER)).stdout) if d])
    assert sorted(chart) == sorted(kustomized)
    for k, want in kustomized.items():
        got = without_deliberate(chart[k])
        assert got == want, (
            f"{'/'.join(k)} differs from manifests/timeslicer\n--- chart\n"
            f"{yaml.safe_dump(got, sort_keys=True)}"
            f"--- kustomize\n{yaml.safe_dump(want, sort_keys=True)}")


def test_the_time_slicers_values(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "timeslicer.enabled=true",
                    "--set", "timeslicer.namespace.name=ts", "--set", "timeslicer.name=agent",
                    "--set", "timeslicer.kubeletRoot=/data/kubelet/",
                    "--set", "timeslicer.quantum=5m", "--set", "timeslicer.yieldGrace=45s",
                    "--set", "timeslicer.nvml.mode=off",
                    "--set", "timeslicer.nvml.libraryPath=/usr/lib64")
    daemonset = find(docs, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert daemonset["metadata"]["namespace"] == "ts" and pod["serviceAccountName"] == "agent"
    assert "hostPID" not in pod  # only the NVML check needs the host's PIDs
    (agent,) = pod["containers"]
    assert agent["args"] == ["--kubelet-root=/data/kubelet", "--metrics-address=:9478",
                             "--nvml=off", "--quantum=5m", "--yield-grace=45s"]
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host == {"kubelet-pods": "/data/kubelet/pods", "nvml": "/usr/lib64"}
    policy = find(docs, "ValidatingAdmissionPolicy")
    assert "system:serviceaccount:ts:agent" in policy["spec"]["matchConditions"][0]["expression"]
    assert find(docs, "ClusterRoleBinding", "agent")["subjects"][0]["namespace"] == "ts"
    assert "mode" in refused(helm_env, "--set", "timeslicer.nvml.mode=sometimes")


def test_the_differences_are_only_the_deliberate_ones(defaults: list[Doc]) -> None:
    for doc in defaults:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["helm.sh/chart"].startswith("openrl-place-")
    crd = find(defaults, "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_helm_lint_passes(helm_env: dict[str, str]) -> None:
    for values in ([], ["--set", "monitoring.rules.enabled=true",
                        "--set", "monitoring.dashboard.enabled=true"]):
        proc = run("helm", "lint", "--strict", str(CHART), *values, env=helm_env)
        assert "0 chart(s) failed" in proc.stdout, proc.stdout


# ----------------------------------------------------------------- each value


def test_image_replicas_and_resources(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "image.repository=reg.local/place",
                    "--set", "image.tag=1.2.3", "--set", "image.pullPolicy=Always",
                    "--set", "replicas=3", "--set", "resources.limits.memory=1Gi",
                    "--set", "imagePullSecrets[0].name=pull")
    scheduler = container(docs)
    assert scheduler["image"] == "reg.local/place:1.2.3"
    assert scheduler["imagePullPolicy"] == "Always"
    assert scheduler["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    deployment = find(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "pull"}]


def test_an_empty_tag_is_the_charts_app_version(defaults: list[Doc]) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container(defaults)["image"].endswith(f":{app_version}")


def test_device_class_driver_and_timers_reach_the_scheduler(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "device.class=gpu.nvidia.com",
                    "--set", "device.driver=gpu.nvidia.com",
                    "--set", "scheduler.retryInterval=5s",
                    "--set", "scheduler.placementTimeout=1h30m",
                    "--set", "scheduler.reclaimInterval=10s",
                    "--set", "scheduler.reclaimGrace=45",
                    "--set", "scheduler.leaderElect=false",
                    "--set", "scheduler.extraEnv[0].name=OPEN_RL_LOG_FORMAT",
                    "--set", "scheduler.extraEnv[0].value=text")
    env = env_of(docs)
    assert env["OPEN_RL_DEVICE_CLASS"] == "gpu.nvidia.com"
    assert env["OPEN_RL_DEVICE_DRIVER"] == "gpu.nvidia.com"
    assert env["OPEN_RL_RETRY_INTERVAL"] == "5s"
    assert env["OPEN_RL_PLACEMENT_TIMEOUT"] == "1h30m"
    assert env["OPEN_RL_RECLAIM_INTERVAL"] == "10s"
    assert env["OPEN_RL_RECLAIM_GRACE"] == "45"
    assert env["OPEN_RL_LEADER_ELECT"] == "false"
    assert env["OPEN_RL_LOG_FORMAT"] == "text"


def test_without_a_driver_the_scheduler_reads_the_class(defaults: list[Doc]) -> None:
    assert "OPEN_RL_DEVICE_DRIVER" not in env_of(defaults)


def test_the_lease_name_follows_into_the_role(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "scheduler.leaseName=place-lease")
    assert env_of(docs)["OPEN_RL_LEASE_NAME"] == "place-lease"
    role = find(docs, "Role", "open-rl-scheduler")
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": ["place-lease"], "verbs": ["get", "update"]}]


def test_the_scheduler_name_names_all_of_its_objects(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "scheduler.name=place-b", "--set", "viewer.name=view-b")
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for kind in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
                 "Deployment", "PodDisruptionBudget"):
        assert (kind, "place-b") in names, kind
    assert ("ClusterRole", "view-b") in names
    env = {e["name"]: e.get("valueFrom") for e in container(docs)["env"]}
    # The scheduler learns its own account from its pod, whatever it is called.
    assert env["OPEN_RL_SERVICE_ACCOUNT"] == {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}
    deployment = find(docs, "Deployment")
    assert deployment["spec"]["selector"]["matchLabels"] == {"app": "place-b"}
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "place-b"
    assert find(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == {
        "app": "place-b"}
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        assert find(docs, kind)["subjects"][0]["name"] == "place-b"


def test_extra_labels_and_annotations_reach_every_object(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "commonLabels.team=ml-infra",
                    "--set", "commonLabels.app=overridden",
                    "--set", "commonAnnotations.owner=ml-infra@example.com",
                    "--set", "podLabels.tier=control", "--set", "podAnnotations.note=x")
    for doc in docs:
        meta = doc["metadata"]
        assert meta["labels"]["team"] == "ml-infra", key(doc)
        assert meta["annotations"]["owner"] == "ml-infra@example.com", key(doc)
    deployment = find(docs, "Deployment")
    # An object's own label (a selector's) is never overridden by commonLabels.
    assert deployment["metadata"]["labels"]["app"] == "open-rl-scheduler"
    pod = deployment["spec"]["template"]["metadata"]
    assert pod["labels"] == {"app": "open-rl-scheduler", "tier": "control"}
    assert pod["annotations"]["note"] == "x"
    assert pod["annotations"]["prometheus.io/scrape"] == "true"


def test_the_namespace(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "namespace.name=ml", "--set", "namespace.labels.a=b")
    assert find(docs, "Namespace")["metadata"]["name"] == "ml"
    assert find(docs, "Namespace")["metadata"]["labels"]["a"] == "b"
    for doc in docs:
        if doc["kind"] not in ("Namespace", "CustomResourceDefinition", "ClusterRole",
                               "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "ml", key(doc)
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        assert find(docs, kind)["subjects"][0]["namespace"] == "ml"
    # Into the release's own namespace, made by `helm install --create-namespace`.
    docs = template(helm_env, "--set", "namespace.name=", "--set", "namespace.create=false",
                    "--namespace", "team-a")
    assert not [d for d in docs if d["kind"] == "Namespace"]
    assert find(docs, "Deployment")["metadata"]["namespace"] == "team-a"


def test_pod_security_levels(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "namespace.podSecurity.enforce=restricted",
                    "--set", "namespace.podSecurity.audit=", "--set",
                    "namespace.podSecurity.version=v1.36")
    labels = find(docs, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.36"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert not [k for k in labels if k.startswith("pod-security.kubernetes.io/audit")]
    assert "baseline" in refused(helm_env, "--set", "namespace.podSecurity.enforce=lax")


def test_the_gateway_role_grants_workers_only(defaults: list[Doc],
                                              helm_env: dict[str, str]) -> None:
    role = find(defaults, "Role", "openrl-place-gateway")
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources == {"openrlworkers", "openrlworkers/status"}
    assert not [d for d in defaults if d["kind"] == "RoleBinding"
                and d["roleRef"]["name"] == "openrl-place-gateway"]  # bound to nobody
    docs = template(helm_env, "--set", "gateway.name=callers")
    assert find(docs, "Role", "callers")
    docs = template(helm_env, "--set", "gateway.create=false")
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Role"] == ["open-rl-scheduler"]


def test_template_allowances_reach_the_scheduler(helm_env: dict[str, str],
                                                 defaults: list[Doc]) -> None:
    assert not {"OPEN_RL_TEMPLATE_ALLOW", "OPEN_RL_TEMPLATE_SERVICE_ACCOUNTS"} & set(
        env_of(defaults))
    docs = template(helm_env, "--set", "workerTemplates.serviceAccounts={trainer-sa,sampler-sa}",
                    "--set", "workerTemplates.allow.openrl-template-trainer={hostIPC,capabilities}",
                    "--set", "workerTemplates.allow.rdma={hostNetwork}")
    env = env_of(docs)
    assert env["OPEN_RL_TEMPLATE_SERVICE_ACCOUNTS"] == "trainer-sa,sampler-sa"
    assert env["OPEN_RL_TEMPLATE_ALLOW"] == (
        "openrl-template-trainer=hostIPC,capabilities;rdma=hostNetwork")
    # The scheduler's own parser reads the value as the chart means it.
    assert parse_template_allow(env["OPEN_RL_TEMPLATE_ALLOW"]) == {
        "openrl-template-trainer": frozenset({"hostIPC", "capabilities"}),
        "rdma": frozenset({"hostNetwork"})}
    assert "allow" in refused(helm_env, "--set", "workerTemplates.allow.x={hostEverything}")


def test_optional_parts_can_be_left_out(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "crds.install=false", "--set", "viewer.create=false",
                    "--set", "workerTemplates.create=false",
                    "--set", "podDisruptionBudget.enabled=false")
    kinds = {d["kind"] for d in docs}
    assert "CustomResourceDefinition" not in kinds
    assert "PodDisruptionBudget" not in kinds
    assert "ConfigMap" not in kinds
    assert ("ClusterRole", "openrl-place-viewer") not in {
        (d["kind"], d["metadata"]["name"]) for d in docs}
    crd = find(template(helm_env, "--set", "crds.keep=false"), "CustomResourceDefinition")
    assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


def test_worker_templates_take_the_worker_image(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "workerTemplates.image=reg.local/worker:7")
    for role in ("trainer", "sampler"):
        pod = yaml.safe_load(find(docs, "ConfigMap", f"openrl-template-{role}")["data"]["pod.yaml"])
        assert pod["spec"]["containers"][0]["image"] == "reg.local/worker:7"


def test_placement_knobs(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "nodeSelector.pool=system",
                    "--set", "tolerations[0].key=system", "--set", "tolerations[0].operator=Exists",
                    "--set", "priorityClassName=system-cluster-critical",
                    "--set", "podDisruptionBudget.minAvailable=50%")
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "system", "operator": "Exists"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert find(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == "50%"


def test_on_the_nodes_network(helm_env: dict[str, str]) -> None:
    """What a cluster whose pods cannot reach the API server needs (the local real node)."""
    probe = "{exec: {command: [python3, -c, 'import urllib.request as u; u.urlopen(1)']}}"
    docs = template(helm_env, "--set", "hostNetwork=true", "--set", "dnsPolicy=Default",
                    "--set", "scheduler.httpHost=127.0.0.1", "--set", "scheduler.httpPort=18081",
                    "--set-json", f"probes.liveness={json.dumps(yaml.safe_load(probe))}",
                    "--set-json", f"probes.readiness={json.dumps(yaml.safe_load(probe))}")
    deployment = find(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "Default"
    scheduler = container(docs)
    assert scheduler["args"] == ["--http-address=127.0.0.1:18081"]
    assert scheduler["ports"][0]["containerPort"] == 18081
    assert deployment["spec"]["template"]["metadata"]["annotations"][
        "prometheus.io/port"] == "18081"
    for kind in ("livenessProbe", "readinessProbe"):
        assert scheduler[kind] == yaml.safe_load(probe), kind


def test_monitoring_is_the_same_rules_and_dashboard(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "--set", "monitoring.rules.enabled=true",
                    "--set", "monitoring.rules.labels.release=prometheus",
                    "--set", "monitoring.dashboard.enabled=true")
    rule = find(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"] == yaml.safe_load((MONITORING / "rules.yaml").read_text())
    dashboard = find(docs, "ConfigMap", "openrl-place-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["openrl-place.json"]) == json.loads(
        (MONITORING / "dashboard.json").read_text())


@pytest.mark.parametrize(("value", "named"), [
    ("replicas=-1", "replicas"),
    ("scheduler.retryInterval=soon", "retryInterval"),
    ("device.class=Not_A_Name", "class"),
    ("image.pullPolicy=Sometimes", "pullPolicy"),
    ("namespace.podSecurity.enforce=lax", "enforce"),
    ("namespace.name=Bad_NS", "name"),
    ("nosuchvalue=1", "nosuchvalue"),
    ("scheduler.httpPort=0", "httpPort"),
    ("dnsPolicy=Sometimes", "dnsPolicy"),
    ("kueue.enabled=yes", "enabled"),
    ("kueue.queues.preemption.reclaimWithinCohort=Sometimes", "reclaimWithinCohort"),
    ("kueue.queues.preemption.withinClusterQueue=Any", "withinClusterQueue"),
    ("kueue.queues.teams[0].name=a", "nominalQuota"),  # a team without its quota
    ("kueue.queues.teams[0].nominalQuota=lots", "nominalQuota"),
])
def test_bad_values_are_refused_naming_the_value(helm_env: dict[str, str], value: str,
                                                 named: str) -> None:
    message = refused(helm_env, "--set", value)
    assert "values don't meet the specifications of the schema" in message, message
    assert named in message, message


def test_the_strategy_reaches_the_scheduler_only_when_not_the_default(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert "OPEN_RL_STRATEGY" not in env_of(defaults)
    docs = template(helm_env, "--set", "scheduler.strategy=binpack")
    assert env_of(docs)["OPEN_RL_STRATEGY"] == "binpack"
    assert "strategy" in refused(helm_env, "--set", "scheduler.strategy=pack")


def test_the_move_settings_reach_the_scheduler_only_when_not_the_default(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert not {"OPEN_RL_WEDGE_GRACE", "OPEN_RL_MOVE_LIMIT", "OPEN_RL_MOVE_WINDOW"} & set(
        env_of(defaults))
    docs = template(helm_env, "--set", "scheduler.wedgeGrace=5m", "--set",
                    "scheduler.moveLimit=5", "--set", "scheduler.moveWindow=1h")
    assert {k: v for k, v in env_of(docs).items() if "WEDGE" in k or "MOVE" in k} == {
        "OPEN_RL_WEDGE_GRACE": "5m", "OPEN_RL_MOVE_LIMIT": "5", "OPEN_RL_MOVE_WINDOW": "1h"}
    assert "moveLimit" in refused(helm_env, "--set", "scheduler.moveLimit=0")


def test_rebalance_after_reaches_the_scheduler_only_when_not_the_default(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert "OPEN_RL_REBALANCE_AFTER" not in env_of(defaults)
    assert env_of(template(helm_env, "--set", "scheduler.rebalanceAfter=0"))[
        "OPEN_RL_REBALANCE_AFTER"] == "0"  # moves off
    assert env_of(template(helm_env, "--set", "scheduler.rebalanceAfter=2m"))[
        "OPEN_RL_REBALANCE_AFTER"] == "2m"
    assert "rebalanceAfter" in refused(helm_env, "--set", "scheduler.rebalanceAfter=soon")


def test_drain_timeout_reaches_the_scheduler_only_when_not_the_default(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert "OPEN_RL_DRAIN_TIMEOUT" not in env_of(defaults)
    assert env_of(template(helm_env, "--set", "scheduler.drainTimeout=90s"))[
        "OPEN_RL_DRAIN_TIMEOUT"] == "90s"
    assert "drainTimeout" in refused(helm_env, "--set", "scheduler.drainTimeout=soon")


def test_autoscaling_reaches_the_scheduler_only_when_enabled(
        helm_env: dict[str, str], defaults: list[Doc]) -> None:
    assert "OPEN_RL_AUTOSCALING" not in env_of(defaults)
    docs = template(helm_env, "--set", "scheduler.autoscaling.enabled=true",
                    "--set", "scheduler.autoscaling.pools={8x80Gi:trainer,4x40Gi}")
    assert env_of(docs)["OPEN_RL_AUTOSCALING"] == "true"
    assert env_of(docs)["OPEN_RL_AUTOSCALE_POOLS"] == "8x80Gi:trainer,4x40Gi"
    assert "pools" in refused(helm_env, "--set", "scheduler.autoscaling.pools={80Gi}")


def test_the_scheduler_level_and_every_control_name(helm_env: dict[str, str],
                                                    defaults: list[Doc]) -> None:
    assert "OPEN_RL_TEMPLATE_POD_SECURITY" not in env_of(defaults)
    docs = template(helm_env, "--set", "workerTemplates.podSecurity=restricted",
                    "--set", "workerTemplates.allow.t={sysctls,runAsUser}")
    assert env_of(docs)["OPEN_RL_TEMPLATE_POD_SECURITY"] == "restricted"
    assert "podSecurity" in refused(helm_env, "--set", "workerTemplates.podSecurity=privileged")
    schema = json.loads((CHART / "values.schema.json").read_text())
    allow = schema["properties"]["workerTemplates"]["properties"]["allow"]
    assert set(allow["additionalProperties"]["items"]["enum"]) == ALLOWABLE


def notes(env: dict[str, str], tmp_path: Path, *args: str) -> str:
    """NOTES.txt as `helm install` prints it, rendered offline as an ordinary template
    (not YAML, so helm prints it only under --debug, and fails after printing it)."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "notes-as-template.yaml").write_text(
        (chart / "templates" / "NOTES.txt").read_text())
    return run("helm", "template", RELEASE, str(chart), "--show-only",
               "templates/notes-as-template.yaml", "--debug", *args, env=env,
               check=False).stdout


def test_an_existing_namespace_gets_a_warning_naming_the_labels(helm_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    assert "pod-security.kubernetes.io" not in notes(helm_env, tmp_path)
    text = notes(helm_env, tmp_path / "b", "--namespace", "team", "--set", "namespace.name=",
                 "--set", "namespace.create=false")
    assert "kubectl label namespace team" in text
    for label in ("enforce=baseline", "warn=restricted", "audit=restricted"):
        assert f"pod-security.kubernetes.io/{label}" in text
    assert "holds every worker template to Pod Security baseline itself" in " ".join(
        text.split())
