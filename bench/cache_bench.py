"""The controller's per-decision cost and memory with its fleet held in memory, no cluster.

For each size (500, 5,000 and 10,000 workers by default) a fresh process
builds what the watches would deliver for a running fleet of that size --
workers with their status, their pods (rendered from the shipped template,
with the status, conditions and managedFields an API server returns), their
allocated claims, the nodes (8 x 80Gi each, one worker per device) and their
ResourceSlices -- feeds it to the controller's cache as a start-up list would,
then times ``DECISIONS`` new workers through the real reconcile path (cache
read, decision, assumption, the planned writes answered at once by an
in-memory stand-in for the API server). It prints, per size:

* the CPU time per decision (``time.process_time``, best of --repeat runs of
  the batch, so the shared machine's noise counts least);
* the resident memory of the process with that fleet cached (VmRSS, after a
  garbage collection), and what the cache added over the empty process.

Targets: per-decision CPU with 10,000 workers at most 1.5x that with 500;
resident memory with 10,000 workers cached at most 200 MB. This is a
measurement, not a test: it exits 0 unless --strict is given and a target is
missed.

    .venv/bin/python bench/cache_bench.py [--sizes 500 5000 10000] [--decisions 200]
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller import kube, naming, render  # noqa: E402
from controller.cache import KINDS, Cache, strip  # noqa: E402
from controller.claims import build_claim  # noqa: E402
from controller.objects import Worker  # noqa: E402
from controller.reconcile import Reconciler  # noqa: E402
from controller.settings import Settings  # noqa: E402
from controller.writes import Writer  # noqa: E402
from placement import NewClaim  # noqa: E402

Obj = dict[str, Any]
RESOURCES = {res.plural: res for res in KINDS}
NAMESPACE = "openrl"
DRIVER = "gpu.example.com"
DEVICES = 8
STAMP = "2026-01-01T00:00:00Z"


class EchoApi:
    """Answers every write at once with the body and a new resourceVersion (no I/O)."""

    namespace = NAMESPACE

    def __init__(self) -> None:
        self._rv = itertools.count(10_000_000)

    def create(self, res: kube.Resource, body: Obj, **_: Any) -> Obj:
        answer = copy.deepcopy(body)
        answer["metadata"].update(resourceVersion=str(next(self._rv)),
                                  uid=f"uid-{answer['metadata']['name']}",
                                  creationTimestamp=STAMP)
        return answer

    def patch(self, res: kube.Resource, name: str, body: Obj, **_: Any) -> Obj:
        return {"metadata": {"name": name, "resourceVersion": str(next(self._rv))}, **body}


def managed_fields(manager: str) -> list[Obj]:
    """What an API server adds to every object: bulky, and never read by the controller."""
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP,
             "fieldsType": "FieldsV1",
             "fieldsV1": {f"f:{k}": {".": {}, **{f"f:{i}": {} for i in range(12)}}
                          for k in ("metadata", "spec", "status")}}]


def node_objs(index: int) -> tuple[Obj, Obj]:
    name = f"gpu-node-{index:05d}"
    node = {
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
    slice_ = {
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
    return node, slice_


def worker_obj(name: str, memory: str = "10Gi") -> Obj:
    return {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}",
                         "resourceVersion": "2", "generation": 1, "creationTimestamp": STAMP,
                         "finalizers": [naming.FINALIZER],
                         "managedFields": managed_fields("caller")},
            "spec": {"role": "trainer", "modelId": "qwen-8b", "memory": memory,
                     "ownerId": f"team-{hash(name) % 7}"}}


PAGE = 500  # what the controller's lists ask for at a time


def running_fleet(workers: int, template: str, room: int) -> Iterator[dict[str, list[Obj]]]:
    """Objects as paged lists would return them, a page at a time: ``workers`` Running on
    one device each, and free nodes with ``room`` devices at least for new workers."""
    nodes = (workers + DEVICES - 1) // DEVICES + (room + DEVICES - 1) // DEVICES
    out: dict[str, list[Obj]] = {r.plural: [] for r in (
        kube.NODES, kube.SLICES, kube.WORKERS, kube.PODS, kube.CLAIMS, kube.CONFIGMAPS)}
    for i in range(nodes):
        node, slice_ = node_objs(i)
        out[kube.NODES.plural].append(node)
        out[kube.SLICES.plural].append(slice_)
    out[kube.CONFIGMAPS.plural].append({
        "metadata": {"name": naming.template_name("trainer"), "namespace": NAMESPACE,
                     "resourceVersion": "1"},
        "data": {naming.DEFAULT_TEMPLATE_KEY: template}})
    yield out
    prepared = None
    out = {r.plural: [] for r in (kube.WORKERS, kube.PODS, kube.CLAIMS)}
    for i in range(workers):
        if i and i % PAGE == 0:
            yield out
            out = {r.plural: [] for r in (kube.WORKERS, kube.PODS, kube.CLAIMS)}
        name = f"w-{i:06d}"
        node = f"gpu-node-{i // DEVICES:05d}"
        obj = worker_obj(name)
        worker = Worker.from_obj(obj)
        claim = build_claim(worker.own_claim, NewClaim(node=node, devices=1,
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
                                         "device": f"gpu-{i % DEVICES}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": worker.pod_name,
                             "uid": f"uid-pod-{name}"}]}
        if prepared is None:
            prepared = render.prepare(template, worker, "template")
        pod = render.stamp(prepared, worker, worker.own_claim, NAMESPACE, node)
        pod["metadata"].update(uid=f"uid-pod-{name}", resourceVersion="4",
                               creationTimestamp=STAMP, managedFields=managed_fields("kubelet"))
        pod["spec"].update(nodeName=node, schedulerName="default-scheduler",
                           tolerations=[{"key": "node.kubernetes.io/not-ready",
                                         "operator": "Exists", "effect": "NoExecute",
                                         "tolerationSeconds": 300}])
        pod["status"] = {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": f"10.1.{i // 250}.{i % 250}",
            "startTime": STAMP, "qosClass": "BestEffort",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": STAMP}
                           for t in ("PodScheduled", "Initialized", "ContainersReady",
                                     "Ready")],
            "containerStatuses": [{"name": "worker", "ready": True, "restartCount": 0,
                                   "image": "registry.example/openrl/worker:latest",
                                   "imageID": "sha256:" + "0" * 64,
                                   "state": {"running": {"startedAt": STAMP}}}]}
        obj["status"] = {"phase": "Running", "claimName": worker.own_claim,
                         "podName": worker.pod_name, "nodeName": node, "deviceCount": 1,
                         "memoryPerDevice": "10Gi", "hostMemoryWhenParked": "10Gi",
                         "observedGeneration": 1,
                         "conditions": [{"type": "Placed", "status": "True",
                                         "reason": "Placed", "message": "placed",
                                         "lastTransitionTime": STAMP}]}
        out[kube.WORKERS.plural].append(obj)
        out[kube.PODS.plural].append(pod)
        out[kube.CLAIMS.plural].append(claim)
    yield out


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one(size: int, decisions: int, repeat: int) -> dict[str, Any]:
    """Measure one size in this process (run once per fresh process)."""
    docs = yaml.safe_load_all((ROOT / "manifests" / "base" / "pod-templates.yaml").read_text())
    text = next(d for d in docs if d["metadata"]["name"] == naming.template_name("trainer"))[
        "data"][naming.DEFAULT_TEMPLATE_KEY]
    gc.collect()
    empty = rss_mb()
    cache = Cache(DRIVER)
    # As the watches list: page by page, each object stripped as its page arrives.
    listed: dict[str, list[Obj]] = {}
    for page in running_fleet(size, text, decisions):
        for plural, objs in page.items():
            res = RESOURCES[plural]
            listed.setdefault(plural, []).extend(strip(res, o) for o in objs)
        del page
    for plural in (kube.SLICES.plural, kube.NODES.plural, kube.CLAIMS.plural,
                   kube.WORKERS.plural, kube.PODS.plural, kube.CONFIGMAPS.plural):
        cache.relist(RESOURCES[plural], listed.pop(plural), "5", stripped=True)
    gc.collect()
    cached = rss_mb()
    api = EchoApi()
    settings = Settings(namespace=NAMESPACE, identity="bench", device_class=DRIVER)
    writer = Writer(api, cache, concurrency=0)  # type: ignore[arg-type]
    reconciler = Reconciler(api, settings, cache=cache, writer=writer)  # type: ignore[arg-type]
    best = float("inf")
    serial = itertools.count()
    versions = itertools.count(100)  # after the list: the watch's events
    for _ in range(repeat):
        batch = [f"new-{next(serial):06d}" for _ in range(decisions)]
        for name in batch:
            obj = worker_obj(name)
            obj["metadata"]["resourceVersion"] = str(next(versions))
            cache.event(kube.WORKERS, "ADDED", obj)
        started = time.process_time()
        for name in batch:
            reconciler.reconcile(name)
        best = min(best, (time.process_time() - started) / decisions)
        placed = sum(1 for name in batch if cache.view.bookings.get(name))
        # Give the devices back (the workers leave), so every batch decides on the same fleet.
        for name in batch:
            gone = str(next(versions) + 20_000_000)  # after every answer of EchoApi
            cache.event(kube.WORKERS, "DELETED", {"metadata": {
                "name": name, "resourceVersion": gone}})
            cache.event(kube.PODS, "DELETED", {"metadata": {
                "name": naming.pod_name(name), "resourceVersion": gone}})
            cache.event(kube.CLAIMS, "DELETED", {"metadata": {
                "name": f"orw-uid-{name}", "resourceVersion": gone}})
    return {"workers": size, "decided": placed,
            "decision_cpu_ms": round(best * 1000, 3),
            "rss_mb": round(cached, 1), "cache_mb": round(cached - empty, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000, 10000])
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.decisions, args.repeat)))
        return 0
    rows = []
    for size in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(size), "--decisions",
                               str(args.decisions), "--repeat", str(args.repeat)],
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    small, large = rows[0], rows[-1]
    ratio = large["decision_cpu_ms"] / max(small["decision_cpu_ms"], 1e-9)
    if args.json:
        print(json.dumps({"sizes": rows, "cpu_ratio": round(ratio, 2)}, indent=2))
    else:
        print(f"{'workers':>8} {'decision CPU':>13} {'RSS':>9} {'cache':>9}")
        for row in rows:
            print(f"{row['workers']:>8} {row['decision_cpu_ms']:>10.3f} ms "
                  f"{row['rss_mb']:>6.1f} MB {row['cache_mb']:>6.1f} MB")
        print(f"per-decision CPU, {large['workers']} vs {small['workers']} workers: "
              f"{ratio:.2f}x (target <= 1.5x); RSS at {large['workers']}: "
              f"{large['rss_mb']:.0f} MB (target <= 200 MB)")
    missed = ratio > 1.5 or large["rss_mb"] > 200
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
