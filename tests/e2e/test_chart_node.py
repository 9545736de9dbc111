"""The Helm chart on the real node (hack/node.sh): the scheduler's own image in its own
pod, installed, leading, upgraded, leading again.

The node's pods reach nothing outside their network namespace, so the chart is
given what manifests/overlays/node gives kustomize -- the host network, the API
server on the machine's loopback, the node selector -- through its values alone,
which is the point: a platform team changes values, never templates. One replica
(two on the host network would share the port); the upgrade changes a timer, so
the pod is replaced and the new one must take the Lease.

Skips, saying why, where the machine cannot run a node.
"""
# The fixtures come from controller_fixtures; importing them makes every test
# parameter a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from controller_fixtures import crd  # noqa: F401
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
# Helm is built from its Go module (hack/gotool.sh) on first use.
pytestmark = pytest.mark.tools
NODE_SH = ROOT / "hack" / "node.sh"
CHART = ROOT / "charts" / "openrl-place"
IMAGE = os.environ.get("NODE_IMAGE", "localhost/openrl-place:dev")
BUILD_TIMEOUT = float(os.environ.get("E2E_NODE_BUILD_TIMEOUT", "2400"))


def node_sh(*args: str, timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(NODE_SH), *args], cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def real_node(cluster: Any) -> Iterator[None]:
    if not NODE_SH.exists():
        pytest.skip("no hack/node.sh in this checkout")
    env = {"KUBECONFIG": cluster.kubeconfig}
    can = node_sh("check", timeout=60, env=env)
    if can.returncode == 4:
        pytest.skip(can.stdout.strip())
    if not cluster.is_local:
        pytest.skip("the real node joins this checkout's own cluster (hack/cluster.sh)")
    started = node_sh("status", timeout=60, env=env).stdout.count("running (pid") == 0
    for step in ("image", "up"):
        proc = node_sh(step, timeout=BUILD_TIMEOUT, env=env)
        assert proc.returncode == 0, f"hack/node.sh {step}:\n{(proc.stdout + proc.stderr)[-6000:]}"
    try:
        yield
    finally:
        if started:
            print(node_sh("down", timeout=300, env=env).stdout[-2000:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            lines = r.read().decode().splitlines()
    except OSError:
        return None
    return next((float(line.split()[1]) for line in lines if line.startswith(name + " ")), None)


def test_install_lead_upgrade_on_the_real_node(cluster: Any, namespace: str, crd: None,
                                              real_node: None, tmp_path: Path) -> None:
    release, sched = f"orp-{namespace.removeprefix('e2e-')}", "orp-node-scheduler"
    port = free_port()
    api_port = urlparse(cluster.api.configuration.host).port

    def probe(path: str, **timing: int) -> dict[str, Any]:
        # The pod listens on the node's loopback, which an HTTP probe (to the pod's IP)
        # cannot reach: the probe runs inside the container instead.
        url = f"http://127.0.0.1:{port}/{path}"
        return {"exec": {"command": ["python3", "-c", "import urllib.request as u; "
                                     f"u.urlopen({url!r}, timeout=3)"]},
                "timeoutSeconds": 5, **timing}
    values = {
        "namespace": {"name": namespace, "create": False},
        "scheduler": {"name": sched, "httpHost": "127.0.0.1", "httpPort": port,
                      "extraEnv": [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                                   {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_port)}]},
        "viewer": {"name": f"{release}-viewer"},
        "image": {"repository": IMAGE.rsplit(":", 1)[0], "tag": IMAGE.rsplit(":", 1)[1],
                  "pullPolicy": "Never"},
        "replicas": 1, "hostNetwork": True, "dnsPolicy": "Default",
        "nodeSelector": {"openrl.io/real-node": "true"},
        "probes": {"liveness": probe("healthz", initialDelaySeconds=10, periodSeconds=10),
                   "readiness": probe("readyz", periodSeconds=5)},
    }
    (tmp_path / "values.yaml").write_text(json.dumps(values))
    helm_bin = subprocess.run([str(ROOT / "hack" / "gotool.sh"), "helm"], capture_output=True,
                              text=True, timeout=2400, check=True).stdout.split()[-1]
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig,
           **{f"HELM_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}}
    transcript: list[str] = []

    def helm(*args: str) -> str:
        proc = subprocess.run([helm_bin, *args, "--namespace", namespace], capture_output=True,
                              text=True, timeout=600, check=False, env=env, cwd=ROOT)
        transcript.append(f"$ helm {' '.join(args)}\n{proc.stdout}{proc.stderr}")
        assert proc.returncode == 0, transcript[-1]
        return proc.stdout

    coord, apps = client.CoordinationV1Api(cluster.api), client.AppsV1Api(cluster.api)

    def pods() -> list[Any]:
        found = cluster.core.list_namespaced_pod(namespace, label_selector=f"app={sched}").items
        return [p for p in found if not p.metadata.deletion_timestamp]

    def wait_ready() -> None:
        def ready() -> bool:
            d = apps.read_namespaced_deployment(sched, namespace)
            return (d.status.ready_replicas == 1 and d.status.updated_replicas == 1
                    and len(pods()) == 1)
        try:
            cluster.wait_for(ready, timeout=300, interval=2, what="the scheduler's pod Ready")
        except AssertionError:
            for pod in pods():
                print(pod.status)
                print(cluster.kubectl("logs", "-n", namespace, pod.metadata.name,
                                      check=False).stdout[-3000:])
            print(cluster.kubectl("get", "events", "-n", namespace, check=False).stdout)
            raise

    def holder() -> str:
        return str(coord.read_namespaced_lease("open-rl-scheduler", namespace).spec
                   .holder_identity or "")

    try:
        helm("install", release, str(CHART), "-f", str(tmp_path / "values.yaml"),
             "--take-ownership", "--wait", "--timeout", "5m")
        # helm --wait counts a 1-replica Deployment with maxUnavailable 1 as ready at
        # once: wait for the pod itself.
        wait_ready()
        first = cluster.wait_for(holder, timeout=120, what="the Lease held")
        cluster.wait_for(lambda: metric(port, "openrl_place_leader") == 1, timeout=120,
                         what="the scheduler's pod says it leads")
        transcript.append(f"revision 1: pod {pods()[0].metadata.name} Ready, Lease held by "
                          f"{first}, openrl_place_leader {metric(port, 'openrl_place_leader')}")

        helm("upgrade", release, str(CHART), "-f", str(tmp_path / "values.yaml"),
             "--set", "scheduler.retryInterval=7s", "--wait", "--timeout", "5m")
        assert "REVISION: 2" in helm("status", release)
        cluster.wait_for(lambda: all(
            {e.name: e.value for e in p.spec.containers[0].env}.get("OPEN_RL_RETRY_INTERVAL")
            == "7s" for p in pods()) or None, timeout=300, what="the old pod replaced")
        wait_ready()
        cluster.wait_for(lambda: holder() not in ("", first) or None, timeout=180,
                         what="the upgraded pod to take the Lease")
        cluster.wait_for(lambda: metric(port, "openrl_place_leader") == 1, timeout=120,
                         what="the upgraded pod says it leads")
        transcript.append(f"revision 2: pod {pods()[0].metadata.name} Ready, Lease held by "
                          f"{holder()}, openrl_place_leader {metric(port, 'openrl_place_leader')}")
        assert "superseded" in helm("history", release)
        helm("uninstall", release, "--wait")
    finally:
        subprocess.run([helm_bin, "uninstall", release, "--namespace", namespace, "--wait",
                        "--ignore-not-found"], capture_output=True, timeout=300, env=env,
                       check=False)
        print("\n\n".join(transcript))
