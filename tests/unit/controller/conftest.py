"""Shared fixtures for the controller's unit tests: a fake API and a small cluster."""

from __future__ import annotations

from typing import Any

import pytest

from controller.k8s import kube, naming
from controller.reconcile.reconciler import Reconciler
from controller.settings import Settings
from controller.store.cache import Cache
from tests.unit.controller.fake_kube import FakeKube

DRIVER = "gpu.example.com"

TEMPLATE = """\
apiVersion: v1
kind: Pod
metadata:
  labels:
    app: worker
spec:
  restartPolicy: Never
  containers:
    - name: worker
      image: registry.example/worker:1
      args: ["--role=trainer"]
      env:
        - name: LOG_LEVEL
          value: info
"""


def slice_obj(node: str, devices: int = 8, memory: str = "80Gi", *, generation: int = 1,
              count: int = 1, pool: str | None = None, name: str | None = None,
              driver: str = DRIVER, memories: list[str] | None = None) -> dict[str, Any]:
    memories = memories or [memory] * devices
    return {
        "metadata": {"name": name or f"{node}-{driver}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"productName": {"string": "Example GPU"}},
                 "capacity": {"memory": {"value": m}}}
                for i, m in enumerate(memories)
            ],
        },
    }


def node_obj(name: str, *, labels: dict[str, str] | None = None,
             memory: str | None = "1Ti", enabled: bool = True) -> dict[str, Any]:
    all_labels = {"openrl.io/enabled": "true"} if enabled else {}
    all_labels.update(labels or {})
    status = {"allocatable": {"memory": memory}} if memory is not None else {}
    return {"metadata": {"name": name, "labels": all_labels}, "status": status}


def worker_obj(name: str, memory: str | int = "50Gi", role: str = "trainer",
               **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "openrl.io/v1alpha1",
        "kind": "OpenRLWorker",
        "metadata": {"name": name},
        "spec": {"role": role, "modelId": "qwen-8b", "memory": memory, **spec},
    }


def template_cm(role: str = "trainer", text: str = TEMPLATE, name: str | None = None,
                key: str = "pod.yaml") -> dict[str, Any]:
    return {"metadata": {"name": name or f"openrl-template-{role}",
                         "labels": {"openrl.io/pod-template": "true"}}, "data": {key: text}}


class Cluster:
    """A fake API with nodes, slices and templates, and a reconciler bound to it."""

    def __init__(self, *, nodes: int = 1, devices: int = 8, memory: str = "80Gi",
                 node_labels: dict[str, str] | None = None, **settings: Any) -> None:
        self.api = FakeKube()
        for i in range(nodes):
            name = f"node-{i}"
            self.api.put(kube.NODES, node_obj(name, labels=node_labels))
            self.api.put(kube.SLICES, slice_obj(name, devices, memory))
        for role in ("trainer", "sampler"):
            self.api.put(kube.CONFIGMAPS, template_cm(role))
        self.settings = Settings(namespace="openrl", identity="test", **settings)
        self.cache = Cache(self.settings.device_driver)
        self.reconciler = Reconciler(self.api, self.settings, cache=self.cache,  # type: ignore[arg-type]
                                     now=self.api.clock)

    def sync(self) -> None:
        """The watches catch up: the cache lists what the fake API holds (no call counted)."""
        sync_cache(self.cache, self.api)

    def add_worker(self, name: str, memory: str | int = "50Gi", role: str = "trainer",
                   **spec: Any) -> dict[str, Any]:
        return self.api.put(kube.WORKERS, worker_obj(name, memory, role, **spec))

    def reconcile(self, name: str) -> Any:
        self.sync()
        return self.reconciler(name)

    def worker(self, name: str) -> dict[str, Any]:
        found = self.api.obj(kube.WORKERS, name)
        assert found is not None, f"worker {name} is gone"
        return found

    def status(self, name: str) -> dict[str, Any]:
        return self.worker(name).get("status") or {}

    def place(self, name: str, memory: str | int = "50Gi", role: str = "trainer",
              **spec: Any) -> dict[str, Any]:
        self.add_worker(name, memory, role, **spec)
        self.reconcile(name)
        return self.status(name)

    def allocate_and_run(self, name: str) -> None:
        """DRA allocates the worker's claim on its sized-for node; the pod runs there."""
        status = self.status(name)
        claim = self.api.obj(kube.CLAIMS, status["claimName"])
        assert claim is not None
        node = claim["metadata"]["annotations"]["openrl.io/sized-for-node"]
        if "allocation" not in (claim.get("status") or {}):
            self.api.allocate(status["claimName"], node)
        self.api.run_pod(status["podName"], node)
        self.reconcile(name)


def sync_cache(cache: Cache, api: FakeKube) -> None:
    """What the watches would list: managed pods and claims, the driver's slices, the rest."""
    for res in (kube.SLICES, kube.NODES, kube.CLAIMS, kube.WORKERS, kube.PODS,
                kube.CONFIGMAPS, kube.NODE_PODS,  # every namespace's pods: the rule picks
                kube.WORKLOADS, kube.PRIORITY_CLASSES):
        items = api.all(res)
        if res in (kube.PODS, kube.CLAIMS):
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(
                naming.LABEL_MANAGED) == "true"]
        if res == kube.SLICES:
            items = [o for o in items if o["spec"].get("driver") == DRIVER]
        cache.relist(res, items)


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()
