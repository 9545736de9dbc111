"""A running fleet as the API server would list it, a page at a time, with no cluster.

Rules:

* Object ``i`` of each kind is made from ``i`` alone: worker ``w-000042``, its
  pod (rendered from the shipped template, then given the status, conditions,
  tolerations and managedFields an API server returns), its claim (allocated,
  reserved for the pod) and, every eight workers, a node (8 x 80Gi, one
  worker per device) with its ResourceSlice, and three pods that are not
  workers (a DaemonSet's, in kube-system: what a list of every namespace's
  unmanaged bound pods returns). So a page of any kind is made without
  making the others, and nothing but the page being served is held.
* ``PagedApi`` stands where the Kubernetes client's ``ApiClient`` would:
  ``controller.k8s.kube.Kube`` sends it its requests unchanged and gets back a
  page's JSON bytes, cut at the ``limit`` it asked for and continued by the
  ``continue`` token it is handed, as the API server pages a list. A watch
  opens and stays silent until ``close``.
* Making and encoding a page is the server's work, not the controller's: the
  CPU it takes (per thread) is summed in ``made_cpu``, for the benchmark to
  take off what it measures.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

Obj = dict[str, Any]
NAMESPACE = "openrl"
DRIVER = "gpu.example.com"
DEVICES = 8
STAMP = "2026-01-01T00:00:00Z"
LISTED_AT = "5"  # the lists' resourceVersion; every object listed is older
SYSTEM_PODS = 3  # per node: pods that are not workers, each taking one of its pod slots


def managed_fields(manager: str) -> list[Obj]:
    """What an API server adds to every object: bulky, and never read by the controller."""
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP,
             "fieldsType": "FieldsV1",
             "fieldsV1": {f"f:{k}": {".": {}, **{f"f:{i}": {} for i in range(12)}}
                          for k in ("metadata", "spec", "status")}}]


def node_name(index: int) -> str:
    return f"gpu-node-{index:05d}"


def node_obj(index: int) -> Obj:
    name = node_name(index)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": STAMP,
                     "labels": {"openrl.io/enabled": "true",
                                "openrl.io/max-workers-per-claim": "1",
                                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "node.kubernetes.io/instance-type": "gpu-8x80"},
                     "managedFields": managed_fields("kubelet")},
        "status": {"allocatable": {"memory": "1Ti", "cpu": "96", "pods": "110"},
                   "capacity": {"memory": "1Ti", "cpu": "96", "pods": "110"},
                   "conditions": [{"type": t, "status": "False", "lastHeartbeatTime": STAMP,
                                   "reason": "KubeletHasSufficient", "message": "ok"}
                                  for t in ("MemoryPressure", "DiskPressure", "PIDPressure")],
                   "nodeInfo": {"kubeletVersion": "v1.34.0", "osImage": "fake"}},
    }


def slice_obj(index: int) -> Obj:
    name = node_name(index)
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{DRIVER}", "uid": f"uid-slice-{name}",
                     "resourceVersion": "1", "creationTimestamp": STAMP,
                     "managedFields": managed_fields("driver")},
        "spec": {"driver": DRIVER, "nodeName": name,
                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{d}",
                              "attributes": {"productName": {"string": "Example GPU"},
                                             "uuid": {"string": f"GPU-{name}-{d}"}},
                              "capacity": {"memory": {"value": "80Gi"}}}
                             for d in range(DEVICES)]},
    }


def system_pod(index: int) -> Obj:
    """The ``index``-th pod that is not a worker: ``SYSTEM_PODS`` per node, in kube-system."""
    node = node_name(index // SYSTEM_PODS)
    name = f"ds-{index % SYSTEM_PODS}-{node}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-{name}",
                         "resourceVersion": "1", "creationTimestamp": STAMP,
                         "labels": {"app": f"ds-{index % SYSTEM_PODS}"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": f"ds-{index % SYSTEM_PODS}",
                                              "uid": "uid-ds", "controller": True}],
                         "managedFields": managed_fields("kubelet")},
            "spec": {"nodeName": node, "containers": [{"name": "agent",
                                                       "image": "registry.example/agent:1"}]},
            "status": {"phase": "Running", "hostIP": "10.0.0.1", "startTime": STAMP}}


def worker_name(index: int) -> str:
    return f"w-{index:06d}"


def worker_obj(name: str, memory: str = "10Gi", finalizer: str = "openrl.io/worker") -> Obj:
    """A new worker, as the gateway creates it (the benchmark's decisions use it too)."""
    return {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}",
                         "resourceVersion": "2", "generation": 1, "creationTimestamp": STAMP,
                         "finalizers": [finalizer],
                         "managedFields": managed_fields("caller")},
            "spec": {"role": "trainer", "modelId": "qwen-8b", "memory": memory,
                     "ownerId": _owner(name)}}


@functools.cache
def _controller() -> Any:
    """The controller's modules, imported once (from whichever tree is on sys.path)."""
    from controller.fleet.claims import build_claim
    from controller.k8s import naming
    from controller.k8s.objects import Worker
    from controller.reconcile import render
    from placement import NewClaim

    docs = yaml.safe_load_all((ROOT / "manifests" / "base" / "pod-templates.yaml").read_text())
    text = next(d for d in docs if d["metadata"]["name"] == naming.template_name("trainer"))[
        "data"][naming.DEFAULT_TEMPLATE_KEY]
    return naming, render, build_claim, Worker, NewClaim, text


@functools.cache
def _prepared() -> Any:
    _, render, _, worker_cls, _, text = _controller()
    return render.prepare(text, worker_cls.from_obj(worker_obj("w-000000")), "template")


def running_worker(index: int) -> Obj:
    naming, _, _, worker_cls, _, _ = _controller()
    name = worker_name(index)
    obj = worker_obj(name, finalizer=naming.FINALIZER)
    worker = worker_cls.from_obj(obj)
    obj["status"] = {"phase": "Running", "claimName": worker.own_claim,
                     "podName": worker.pod_name, "nodeName": node_name(index // DEVICES),
                     "deviceCount": 1, "memoryPerDevice": "10Gi",
                     "hostMemoryWhenParked": "10Gi", "observedGeneration": 1,
                     "conditions": [{"type": "Placed", "status": "True", "reason": "Placed",
                                     "message": "placed", "lastTransitionTime": STAMP}]}
    return obj


def claim_obj(index: int) -> Obj:
    _, _, build_claim, worker_cls, new_claim, _ = _controller()
    name, node = worker_name(index), node_name(index // DEVICES)
    worker = worker_cls.from_obj(worker_obj(name))
    claim: Obj = build_claim(worker.own_claim, new_claim(node=node, devices=1,
                                                         memory_floor=10 << 30,
                                                         memory_ceiling=80 << 30),
                             namespace=NAMESPACE, device_class=DRIVER, driver=DRIVER,
                             worker=name)
    claim["metadata"].update(uid=f"uid-claim-{name}", resourceVersion="3",
                             creationTimestamp=STAMP,
                             managedFields=managed_fields("openrl-place"))
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                                     "device": f"gpu-{index % DEVICES}"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": worker.pod_name,
                         "uid": f"uid-pod-{name}"}]}
    return claim


def pod_obj(index: int) -> Obj:
    _, render, _, worker_cls, _, _ = _controller()
    name, node = worker_name(index), node_name(index // DEVICES)
    worker = worker_cls.from_obj(worker_obj(name))
    pod: Obj = render.stamp(_prepared(), worker, worker.own_claim, NAMESPACE, node)
    pod["metadata"].update(uid=f"uid-pod-{name}", resourceVersion="4",
                           creationTimestamp=STAMP, managedFields=managed_fields("kubelet"))
    pod["spec"].update(nodeName=node, schedulerName="default-scheduler",
                       tolerations=[{"key": "node.kubernetes.io/not-ready",
                                     "operator": "Exists", "effect": "NoExecute",
                                     "tolerationSeconds": 300}])
    pod["status"] = {
        "phase": "Running", "hostIP": "10.0.0.1",
        "podIP": f"10.1.{index // 250 % 250}.{index % 250}",
        "startTime": STAMP, "qosClass": "BestEffort",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": STAMP}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{"name": "worker", "ready": True, "restartCount": 0,
                               "image": "registry.example/openrl/worker:latest",
                               "imageID": "sha256:" + "0" * 64,
                               "state": {"running": {"startedAt": STAMP}}}]}
    return pod


def template_config_maps() -> list[Obj]:
    naming, _, _, _, _, _ = _controller()
    docs = yaml.safe_load_all((ROOT / "manifests" / "base" / "pod-templates.yaml").read_text())
    out = []
    for doc in docs:
        if doc and doc.get("kind") == "ConfigMap":
            doc["metadata"].update(namespace=NAMESPACE, resourceVersion="1", uid="uid-cm-"
                                   + doc["metadata"]["name"])
            out.append(doc)
    assert any(d["metadata"]["name"] == naming.template_name("trainer") for d in out)
    return out


class Fleet:
    """How many of each kind a fleet of ``workers`` has (plus free nodes for ``room``), and
    each object's JSON text.

    An object's text is its kind's first object's text with the names that differ
    put in (``text`` equals ``json.dumps(make(...))``, which the unit test checks): a
    benchmark of 100,000 workers must not spend minutes making its input.
    """

    def __init__(self, workers: int, room: int) -> None:
        self.workers = workers
        self.nodes = (workers + DEVICES - 1) // DEVICES + (room + DEVICES - 1) // DEVICES
        self.config_maps = template_config_maps()
        self._first: dict[str, str] = {}

    def count(self, plural: str) -> int:
        if plural in _PER_WORKER:
            return self.workers
        if plural in _PER_NODE:
            return self.nodes
        if plural == "configmaps":
            return len(self.config_maps)
        if plural == NODE_PODS:
            return self.nodes * SYSTEM_PODS
        return 0

    def make(self, plural: str, index: int) -> Obj:
        if plural == NODE_PODS:
            return system_pod(index)
        maker = {**_PER_WORKER, **_PER_NODE}.get(plural)
        return maker(index) if maker is not None else self.config_maps[index]

    def text(self, plural: str, index: int) -> str:
        if plural not in _PER_WORKER and plural not in _PER_NODE:
            return _dumps(self.make(plural, index))
        if plural not in self._first:
            self._first[plural] = _dumps(self.make(plural, 0))
        text = self._first[plural]
        if index == 0:
            return text
        if plural in _PER_NODE:
            return text.replace(node_name(0), node_name(index))
        name = worker_name(index)
        return (text.replace(worker_name(0), name)
                .replace(node_name(0), node_name(index // DEVICES))
                .replace('"device":"gpu-0"', f'"device":"gpu-{index % DEVICES}"')
                .replace('"podIP":"10.1.0.0"',
                         f'"podIP":"10.1.{index // 250 % 250}.{index % 250}"')
                .replace(f'"{_owner(worker_name(0))}"', f'"{_owner(name)}"'))


def _owner(name: str) -> str:
    return f"team-{sum(map(ord, name)) % 7}"


def _dumps(obj: Obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


_PER_WORKER = {"openrlworkers": running_worker, "pods": pod_obj, "resourceclaims": claim_obj}
_PER_NODE = {"nodes": node_obj, "resourceslices": slice_obj}
# Every namespace's pods (/api/v1/pods), as the server answers the controller's selection
# of them: bound, unfinished, not managed -- the workers' own never among them.
NODE_PODS = "every namespace's pods"


_LIST_KINDS = {"openrlworkers": ("openrl.io/v1alpha1", "OpenRLWorkerList"),
               "pods": ("v1", "PodList"), "resourceclaims": ("resource.k8s.io/v1",
                                                             "ResourceClaimList"),
               "resourceslices": ("resource.k8s.io/v1", "ResourceSliceList"),
               "nodes": ("v1", "NodeList"), "configmaps": ("v1", "ConfigMapList")}


class _Response:
    def __init__(self, data: bytes, closed: threading.Event) -> None:
        self.status = 200
        self.data = data
        self._closed = closed

    @property
    def response(self) -> _Response:
        # Not an attribute: a response holding itself would be a cycle, its page freed only
        # by the cyclic collector (the client's own responses are freed as soon as dropped).
        return self

    def read(self) -> bytes:
        return self.data

    def stream(self, **_: Any) -> Iterator[bytes]:  # a watch: nothing happens until close
        self._closed.wait()
        return iter(())

    def release_conn(self) -> None:
        pass


class PagedApi:
    """The ``ApiClient`` surface ``controller.k8s.kube.Kube`` uses, serving ``fleet`` in pages."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.closed = threading.Event()
        self.made_cpu = 0.0  # seconds spent making and encoding pages (the server's work)
        self.pages = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        self.closed.set()

    def param_serialize(self, *, method: str, resource_path: str,
                        query_params: list[tuple[str, str]] | None = None,
                        **_: Any) -> tuple[str, str, dict[str, str], Any, None]:
        return method, resource_path, dict(query_params or ()), None, None

    def call_api(self, method: str, url: str, *, header_params: dict[str, str],
                 **_: Any) -> _Response:
        query = header_params  # param_serialize passed the query where headers would go
        if method != "GET":
            raise NotImplementedError(f"{method} {url}: the bench only lists and watches")
        if query.get("watch") == "true":
            return _Response(b"", self.closed)
        started = time.thread_time()
        plural = NODE_PODS if url == "/api/v1/pods" else url.rsplit("/", 1)[-1]
        total = self.fleet.count(plural)
        first = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or total
        last = min(total, first + limit)
        api_version, kind = _LIST_KINDS.get(plural, ("v1", "List"))
        metadata: Obj = {"resourceVersion": LISTED_AT}
        if last < total:
            metadata.update({"continue": str(last), "remainingItemCount": total - last})
        head = _dumps({"apiVersion": api_version, "kind": kind, "metadata": metadata})
        data = (head[:-1] + ',"items":[' + ",".join(
            self.fleet.text(plural, i) for i in range(first, last)) + "]}").encode()
        with self._lock:
            self.made_cpu += time.thread_time() - started
            self.pages += 1
        return _Response(data, self.closed)
