"""The Helm chart on the local control plane: install, upgrade, the scheduler leading
under the rights the chart grants, uninstall.

The fake-GPU control plane has no container runtime, so the chart's Deployment is
installed at zero replicas and the scheduler runs here as a local process holding a
token of the chart's ServiceAccount, with the settings the chart rendered into the
Deployment (the same arrangement hack/smoke.sh uses for the kustomize overlay). So
what it proves is the chart's own: its RBAC is enough to take the Lease, watch,
place a worker and write its status. The release gets its own namespace and its own
scheduler name; the CRD, shared with the rest of the suite, is taken over
(``--take-ownership``) and, by ``crds.keep``, left in place at uninstall.
"""
# The fixtures come from controller_fixtures; importing them makes every test
# parameter a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_fixtures import crd, gpu_nodes  # noqa: F401
from kubernetes import client
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[2]
# Helm is built from its Go module (hack/gotool.sh) on first use.
pytestmark = pytest.mark.tools

CHART = ROOT / "charts" / "openrl-place"
CRD = "openrlworkers.openrl.io"


class Release:
    def __init__(self, cluster: Any, namespace: str, home: Path) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.name = f"orp-{namespace.removeprefix('e2e-')}"
        self.scheduler = f"{self.name}-scheduler"
        self.env = {"KUBECONFIG": cluster.kubeconfig,
                    **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG",
                                                                        "DATA")}}
        self.values = [
            "--set", f"namespace.name={namespace}", "--set", "namespace.create=false",
            "--set", f"scheduler.name={self.scheduler}",
            "--set", f"viewer.name={self.name}-viewer",
            "--set", "replicas=0", "--set", f"device.class={cluster.driver}",
            "--set", "scheduler.retryInterval=3s", "--set", "scheduler.reclaimInterval=2s",
        ]
        self.transcript: list[str] = []

    def helm(self, *args: str, check: bool = True) -> str:
        # hack/gotool.sh builds Helm from its Go module the first time (tests/tools.py
        # does the same for the unit tests, which this directory cannot import).
        built = subprocess.run([str(ROOT / "hack" / "gotool.sh"), "helm"], capture_output=True,
                               text=True, timeout=2400, check=True).stdout.split()[-1]
        proc = subprocess.run([built, *args, "--namespace", self.namespace],
                              capture_output=True, text=True, timeout=300, check=False,
                              cwd=ROOT, env={**os.environ, **self.env})
        self.transcript.append(f"$ helm {' '.join(args)}\n{proc.stdout}{proc.stderr}")
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}{proc.stderr}")
        return proc.stdout


@pytest.fixture
def release(cluster: Any, namespace: str, crd: None, tmp_path: Path) -> Iterator[Release]:
    rel = Release(cluster, namespace, tmp_path)
    try:
        yield rel
    finally:
        rel.helm("uninstall", rel.name, "--wait", "--ignore-not-found", check=False)
        print("\n\n".join(rel.transcript))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_kubeconfig(cluster: Any, namespace: str, account: str, path: Path) -> Path:
    token = cluster.kubectl("create", "token", account, "-n", namespace,
                            "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    (entry,) = admin["clusters"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [entry],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": entry["name"], "user": account,
                                                    "namespace": namespace}}],
        "current-context": account,
    }))
    path.chmod(0o600)
    return path


def deployment_env(cluster: Any, namespace: str, name: str) -> dict[str, str]:
    """The scheduler's settings as the chart rendered them into its Deployment."""
    dep = client.AppsV1Api(cluster.api).read_namespaced_deployment(name, namespace)
    (container,) = dep.spec.template.spec.containers
    env = {}
    for var in container.env:
        if var.value is not None:
            env[var.name] = var.value
        elif var.value_from and var.value_from.field_ref:
            field = var.value_from.field_ref.field_path
            env[var.name] = {"metadata.namespace": namespace,
                             "spec.serviceAccountName": name}[field]
    return env


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_install_lead_upgrade_uninstall(cluster: Any, release: Release, gpu_nodes: Any,
                                        tmp_path: Path) -> None:
    ns, sched = release.namespace, release.scheduler
    core, rbac = cluster.core, client.RbacAuthorizationV1Api(cluster.api)
    apps = client.AppsV1Api(cluster.api)

    # ---- install
    release.helm("install", release.name, str(CHART), *release.values, "--take-ownership",
                 "--wait", "--timeout", "2m")
    status = release.helm("status", release.name)
    assert "STATUS: deployed" in status and "REVISION: 1" in status
    assert core.read_namespaced_service_account(sched, ns)
    role = rbac.read_namespaced_role(sched, ns)
    assert [r.resource_names for r in role.rules if r.resource_names] == [["open-rl-scheduler"]]
    assert rbac.read_cluster_role_binding(sched).subjects[0].namespace == ns
    # Every namespace's claims read (the devices they hold), never written there
    assert {verb for rule in rbac.read_cluster_role(sched).rules
            if "resourceclaims" in rule.resources for verb in rule.verbs} == {"list", "watch"}
    assert apps.read_namespaced_deployment(sched, ns).spec.replicas == 0
    for role_name in ("trainer", "sampler"):
        assert core.read_namespaced_config_map(f"openrl-template-{role_name}", ns)
    definition = client.ApiextensionsV1Api(cluster.api).read_custom_resource_definition(CRD)
    assert definition.metadata.annotations["helm.sh/resource-policy"] == "keep"
    assert definition.metadata.annotations["meta.helm.sh/release-name"] == release.name

    # ---- the scheduler leads, and places a worker, as the chart's ServiceAccount
    env = deployment_env(cluster, ns, sched)
    assert env["OPEN_RL_LEADER_ELECT"] == "true" and env["OPEN_RL_RETRY_INTERVAL"] == "3s"
    kubeconfig = token_kubeconfig(cluster, ns, sched, tmp_path / "scheduler.kubeconfig")
    port = free_port()
    log = (tmp_path / "scheduler.log").open("w")
    scheduler = subprocess.Popen(
        [str(Path(sys.executable).parent / "openrl-place"), "controller",
         f"--kubeconfig={kubeconfig}", f"--http-address=127.0.0.1:{port}"],
        env={**os.environ, **env},
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    custom = client.CustomObjectsApi(cluster.api)
    try:
        cluster.wait_for(
            lambda: client.CoordinationV1Api(cluster.api).read_namespaced_lease(
                env["OPEN_RL_LEASE_NAME"], ns).spec.holder_identity,
            timeout=60, what="the Lease to be held")
        cluster.wait_for(lambda: metric(port, "openrl_place_leader") == 1, timeout=60,
                         what="openrl_place_leader 1")
        custom.create_namespaced_custom_object("openrl.io", "v1alpha1", ns, "openrlworkers", {
            "apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
            "metadata": {"name": "w1"},
            "spec": {"role": "trainer", "modelId": "qwen-8b", "memory": "10Gi"}})
        placed = cluster.wait_for(
            lambda: (custom.get_namespaced_custom_object_status(
                "openrl.io", "v1alpha1", ns, "openrlworkers", "w1").get("status") or {}
            ).get("phase") in ("Placing", "Running") or None,
            timeout=90, what="w1 placed")
        assert placed
        cluster.wait_for(
            lambda: metric(port, 'openrl_place_wait_for_seat_seconds_count{role="trainer"}'),
            timeout=30, what="the seat wait observed")

        # ---- upgrade: new values reach the objects; the release keeps its history
        release.helm("upgrade", release.name, str(CHART), *release.values,
                     "--set", "scheduler.retryInterval=7s",
                     "--set", "commonLabels.stage=upgraded", "--wait", "--timeout", "2m")
        assert "REVISION: 2" in release.helm("status", release.name)
        assert deployment_env(cluster, ns, sched)["OPEN_RL_RETRY_INTERVAL"] == "7s"
        assert core.read_namespaced_service_account(sched, ns).metadata.labels["stage"] == \
            "upgraded"
        history = release.helm("history", release.name)
        assert "superseded" in history and "deployed" in history
        assert metric(port, "openrl_place_leader") == 1  # the rights held through it

        custom.delete_namespaced_custom_object("openrl.io", "v1alpha1", ns, "openrlworkers",
                                               "w1")

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object("openrl.io", "v1alpha1", ns,
                                                    "openrlworkers", "w1")
            except ApiException as e:
                return e.status == 404
            return False

        cluster.wait_for(gone, timeout=90, what="w1 released by its finalizer")
    finally:
        scheduler.terminate()
        try:
            scheduler.wait(30)
        except subprocess.TimeoutExpired:
            scheduler.kill()
        log.close()
        print((tmp_path / "scheduler.log").read_text()[-4000:])

    # ---- uninstall: the release's objects go, the CRD stays
    release.helm("uninstall", release.name, "--wait")
    for read in (lambda: core.read_namespaced_service_account(sched, ns),
                 lambda: rbac.read_cluster_role(sched),
                 lambda: apps.read_namespaced_deployment(sched, ns)):
        with pytest.raises(ApiException) as err:
            read()
        assert err.value.status == 404
    assert client.ApiextensionsV1Api(cluster.api).read_custom_resource_definition(CRD)
