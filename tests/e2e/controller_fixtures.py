"""Fixtures for the controller's e2e tests: the CRD, enabled nodes, a controller in a thread.

``crd`` (session): applies manifests/base/crd.yaml and waits until it is
established. ``gpu_nodes`` (session): the fake GPU nodes labelled
``openrl.io/enabled=true`` and ``openrl.io/max-workers-per-claim=1`` (their
labels restored afterwards), with what the driver publishes for each.
``run_script`` runs a harness script of hack/; ``stop_process`` ends a controller
a crash test started as its own process; ``crashed`` waits for one started with
a crash planted to die at it.
``orw`` (function): a namespace with the default pod templates and a helper
that starts the controller in-process on it (no leader election, no HTTP) and,
at teardown, deletes every worker and waits for the controller to let them go
before stopping it -- otherwise the finalizer would hold the namespace's
deletion forever.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.fleet.reader import read_slices
from controller.k8s import kube
from controller.loop import Controller
from controller.main import run
from controller.metrics import PREFIX, Metrics
from controller.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "manifests" / "base" / "crd.yaml"
TEMPLATES = ROOT / "manifests" / "base" / "pod-templates.yaml"
GiB = 1 << 30
ENABLED = {"openrl.io/enabled": "true", "openrl.io/max-workers-per-claim": "1"}


@pytest.fixture(scope="session")
def crd(cluster: Any) -> None:
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/openrlworkers.openrl.io")


@dataclasses.dataclass
class GpuNode:
    name: str
    devices: int
    device_memory: int


@pytest.fixture(scope="session")
def gpu_nodes(cluster: Any) -> Iterator[list[GpuNode]]:
    custom = client.CustomObjectsApi(cluster.api)
    slices = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")
    hardware, _, _ = read_slices(slices["items"], cluster.driver)
    core = cluster.core
    saved: dict[str, dict[str, str | None]] = {}
    nodes = []
    for name in sorted(hardware):
        labels = core.read_node(name).metadata.labels or {}
        saved[name] = {k: labels.get(k) for k in ENABLED}
        core.patch_node(name, {"metadata": {"labels": ENABLED}})
        nodes.append(GpuNode(name, hardware[name].devices, hardware[name].device_memory))
    assert nodes, f"no ResourceSlices of {cluster.driver}: is the fake driver running?"
    try:
        yield nodes
    finally:
        for name, labels in saved.items():
            core.patch_node(name, {"metadata": {"labels": labels}})


class Env:
    """One namespace, its controller, and shortcuts for the test."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(cluster.api)
        self.core = cluster.core
        self.threads: list[tuple[threading.Thread, threading.Event]] = []
        self.controllers: list[Controller] = []
        self.metrics: list[Metrics] = []
        self.processed: dict[str, int] = {}  # queue key -> reconciles finished

    # ----------------------------------------------------------- controller

    def start(self, **overrides: Any) -> Controller:
        values: dict[str, Any] = {
            "namespace": self.namespace, "leader_elect": False, "http_address": "",
            "retry_interval": "3s", "reclaim_interval": "2s", "reclaim_grace": "10s",
            "device_class": self.cluster.driver, "identity": f"e2e-{self.namespace}",
        }
        values.update(overrides)
        settings = Settings(**values)
        metrics = Metrics()
        self.metrics.append(metrics)
        api = kube.Kube(kube.load_api_client(self.cluster.kubeconfig), self.namespace,
                        hook=metrics.api_request)
        stop = threading.Event()
        ready = threading.Event()

        def started(controller: Controller) -> None:
            self.controllers.append(controller)
            process = controller.process

            def counted(key: str) -> Any:  # every reconcile of a key, for ``looked``
                result = process(key)
                self.processed[key] = self.processed.get(key, 0) + 1
                return result
            controller.process = counted  # type: ignore[method-assign]
            ready.set()

        thread = threading.Thread(
            target=run, args=(settings,),
            kwargs={"stop": stop, "api": api, "metrics": metrics, "started": started},
            name=f"controller-{self.namespace}", daemon=True)
        thread.start()
        assert ready.wait(30), "the controller did not start"
        self.threads.append((thread, stop))
        return self.controllers[-1]

    def stop(self) -> None:
        for thread, stop in self.threads:
            stop.set()
            thread.join(15)
        self.threads.clear()

    # --------------------------------------------------- what the controller did

    def decisions(self, outcome: str) -> float:
        """Placement decisions of this outcome by the controllers this test started."""
        return sum(m.registry.get_sample_value(f"{PREFIX}_decisions_total",
                                               {"outcome": outcome}) or 0.0
                   for m in self.metrics)

    def declined(self, times: int, outcome: str = "waiting_for_capacity",
                 timeout: float = 90) -> None:
        """Wait until the controllers have decided ``times`` more placements ``outcome``
        from now: the proof that they looked again and declined. A fixed pause in its
        place passes whether or not anything looked (a stalled controller, a slow one)."""
        since = self.decisions(outcome)
        self.cluster.wait_for(lambda: self.decisions(outcome) >= since + times,
                              timeout=timeout, interval=0.2,
                              what=f"{times} more {outcome} decisions")

    def looked(self, worker: str, times: int = 1, timeout: float = 60) -> None:
        """Wait until the controllers have reconciled ``worker`` ``times`` more times from
        now, whatever they concluded (a reason that is not a placement decision)."""
        since = self.processed.get(worker, 0)
        self.cluster.wait_for(lambda: self.processed.get(worker, 0) >= since + times,
                              timeout=timeout, interval=0.2,
                              what=f"{times} more reconciles of {worker}")

    # -------------------------------------------------------------- objects

    def create_worker(self, name: str, memory: str = "10Gi", role: str = "trainer",
                      **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
                "metadata": {"name": name},
                "spec": {"role": role, "modelId": "e2e-model", "memory": memory, **spec}}
        return self.custom.create_namespaced_custom_object(
            "openrl.io", "v1alpha1", self.namespace, "openrlworkers", body)

    def worker(self, name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(
                "openrl.io", "v1alpha1", self.namespace, "openrlworkers", name)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    def status(self, name: str) -> dict[str, Any]:
        found = self.worker(name)
        return (found or {}).get("status") or {}

    def delete_worker(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            "openrl.io", "v1alpha1", self.namespace, "openrlworkers", name)

    def workers(self) -> list[dict[str, Any]]:
        return self.custom.list_namespaced_custom_object(
            "openrl.io", "v1alpha1", self.namespace, "openrlworkers")["items"]

    def claims(self) -> dict[str, dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(
            "resource.k8s.io", "v1", self.namespace, "resourceclaims")["items"]
        return {c["metadata"]["name"]: c for c in items}

    def pod(self, name: str) -> Any:
        try:
            return self.core.read_namespaced_pod(name, self.namespace)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    def wait_phase(self, name: str, phase: str, timeout: float = 90) -> dict[str, Any]:
        return self.cluster.wait_for(
            lambda: (s := self.status(name)).get("phase") == phase and s,
            timeout=timeout, what=f"worker {name} {phase}")

    def hold_pod(self, name: str) -> None:
        """Keep a pod around after deletion (a finalizer of the test's own)."""
        self.core.patch_namespaced_pod(name, self.namespace,
                                       {"metadata": {"finalizers": ["e2e.openrl.io/hold"]}})

    def release_pod(self, name: str) -> None:
        try:
            self.core.patch_namespaced_pod(name, self.namespace,
                                           {"metadata": {"finalizers": None}})
        except client.ApiException as e:
            if e.status != 404:
                raise

    def cleanup(self) -> None:
        for pod in self.core.list_namespaced_pod(self.namespace).items:
            if pod.metadata.finalizers:
                self.release_pod(pod.metadata.name)
        for item in self.workers():
            if not item["metadata"].get("deletionTimestamp"):
                self.delete_worker(item["metadata"]["name"])
        deadline = time.monotonic() + 60
        while self.workers() and time.monotonic() < deadline and self.threads:
            time.sleep(0.5)
        self.stop()
        for item in self.workers():  # the controller could not finish: never wedge the namespace
            self.custom.patch_namespaced_custom_object(
                "openrl.io", "v1alpha1", self.namespace, "openrlworkers",
                item["metadata"]["name"], {"metadata": {"finalizers": None}})
        # Give the devices back now rather than whenever the namespace finishes deleting:
        # the next test (or smoke run) sees the same nodes.
        for name in self.claims():
            try:
                self.custom.delete_namespaced_custom_object(
                    "resource.k8s.io", "v1", self.namespace, "resourceclaims", name)
            except client.ApiException as e:
                if e.status != 404:
                    raise
        deadline = time.monotonic() + 30
        while self.claims() and time.monotonic() < deadline:
            time.sleep(0.5)


def run_script(script: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """One of hack/'s harness scripts (hack/karpenter.sh build, hack/kueue.sh up, ...),
    its output kept for the failure message, never stopping the test itself."""
    return subprocess.run([str(script), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """A controller started as its own process (the crash tests'): SIGTERM, then SIGKILL
    if it has not gone in 15 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def crashed(proc: subprocess.Popen[bytes], point: str, timeout: float = 60) -> None:
    """Wait for a controller started with a crash planted at ``point`` to die there."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        stop_process(proc)
        raise AssertionError(f"the controller never reached {point}") from None


@pytest.fixture
def orw(cluster: Any, namespace: str, crd: None, gpu_nodes: list[GpuNode]) -> Iterator[Env]:
    text = TEMPLATES.read_text().replace("namespace: openrl", f"namespace: {namespace}")
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=text)
    logging.getLogger("openrl").setLevel(logging.INFO)
    env = Env(cluster, namespace)
    try:
        yield env
    finally:
        env.cleanup()


@pytest.fixture
def node(orw: Env, gpu_nodes: list[GpuNode]) -> Iterator[GpuNode]:
    """The first node, enabled with two seats per claim; every other node disabled."""
    first, *rest = gpu_nodes
    changed = {first.name: {"openrl.io/max-workers-per-claim": "2"},
               **{n.name: {"openrl.io/enabled": "false"} for n in rest}}
    for name, labels in changed.items():
        orw.core.patch_node(name, {"metadata": {"labels": labels}})
    try:
        yield first
    finally:
        for name, labels in changed.items():
            back = {k: ("1" if k.endswith("max-workers-per-claim") else "true") for k in labels}
            orw.core.patch_node(name, {"metadata": {"labels": back}})


def wide(node: GpuNode) -> str:
    """Half the node's devices, exactly: two such claims fill it."""
    return f"{((node.devices // 2 - 1) * node.device_memory + GiB) // GiB}Gi"
