"""Worker create to container Running on the real node: the pipeline vs a plain claim + pod.

Needs the real node of hack/node.sh with the Deployment of manifests/overlays/node
running on it (`make node-bench` brings both up). Alternates, ROUNDS times:

* pipeline: create one OpenRLWorker; the in-cluster scheduler cuts its
  ResourceClaim and creates its pod, kube-scheduler binds it, the kubelet has
  the DRA plugin prepare the claim and starts the container;
* plain: create the same ResourceClaim (the shape the controller would cut)
  and the same pod (rendered from the same template) directly, so only
  kube-scheduler and the kubelet act.

Each time runs from the first create to the moment a pod watch sees the
worker's container running; the worker (or claim and pod) is then deleted and
its device given back before the next round. Prints the median of each side,
every sample, and the ratio pipeline / plain. Both sides share the machine in
the same run, so the ratio is the figure; the absolute times follow the load.

  KUBECONFIG=.cluster/admin.kubeconfig .venv/bin/python bench/node_bench.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.fleet.claims import build_claim
from controller.k8s import naming
from controller.k8s.objects import Worker
from controller.reconcile import render
from placement import NewClaim
from placement.quantity import parse_quantity

NS = "openrl"
NODE = os.environ.get("NODE_NAME", "localhost")


class Running:
    """Pod name -> the monotonic time a watch first saw all its containers running."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()
        self.stop = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        while not self.stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(self.core.list_namespaced_pod, NS, timeout_seconds=60):
                    pod = event["object"]
                    statuses = pod.status.container_statuses or []
                    if statuses and all(s.state and s.state.running for s in statuses):
                        with self.cond:
                            self.seen.setdefault(pod.metadata.name, time.monotonic())
                            self.cond.notify_all()
                    if self.stop.is_set():
                        return
            except Exception:  # a dropped watch: open another
                time.sleep(0.2)

    def wait(self, match: Any, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for name, at in self.seen.items():
                    if match(name):
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no running container")
                self.cond.wait(left)


def gone(check: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while check():
        if time.monotonic() > deadline:
            raise TimeoutError("objects not gone")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("NODE_BENCH_ROUNDS", "8")))
    parser.add_argument("--memory", default="10Gi")
    parser.add_argument("--driver", default="gpu.example.com")
    args = parser.parse_args()

    api = config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    every = custom.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    slices = [s for s in every if s["spec"].get("nodeName") == NODE]
    if not slices:
        print(f"node_bench: no ResourceSlice on {NODE}: run hack/node.sh up (make node-bench)")
        return 2
    device_memory = parse_quantity(slices[0]["spec"]["devices"][0]["capacity"]["memory"]["value"])
    template = yaml.safe_dump(yaml.safe_load(core.read_namespaced_config_map(
        naming.template_name("trainer"), NS).data[naming.DEFAULT_TEMPLATE_KEY]))
    shape = NewClaim(node="", devices=1, memory_floor=parse_quantity(args.memory),
                     memory_ceiling=device_memory)
    running = Running(core)
    time.sleep(1)  # the watch's first list

    def pipeline(i: int) -> float:
        name = f"bench-p{i}"
        body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND, "metadata": {"name": name},
                "spec": {"role": "trainer", "modelId": "bench", "memory": args.memory}}
        t0 = time.monotonic()
        orw = (naming.GROUP, naming.VERSION, NS, naming.PLURAL)
        custom.create_namespaced_custom_object(*orw, body)
        at = running.wait(lambda pod: pod.endswith(f"-{name}") or pod == name)
        custom.delete_namespaced_custom_object(*orw, name)
        gone(lambda: any(w["metadata"]["name"] == name
                         for w in custom.list_namespaced_custom_object(*orw)["items"]))
        gone(lambda: custom.list_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims")["items"])
        return at - t0

    def plain(i: int) -> float:
        name = f"bench-b{i}"
        claim = build_claim(f"claim-{name}", shape, namespace=NS, device_class=args.driver,
                            driver=args.driver, worker=name)
        worker = Worker.from_obj({"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                                  "metadata": {"name": name, "uid": f"uid-{name}"},
                                  "spec": {"role": "trainer", "modelId": "bench",
                                           "memory": args.memory}})
        pod = render.stamp(render.prepare(template, worker, "bench"), worker, f"claim-{name}", NS,
                           node="")
        pod["metadata"]["name"] = name
        pod["metadata"]["ownerReferences"] = []
        # Not the scheduler's: its sweep must leave these alone.
        pod["metadata"].get("labels", {}).pop(naming.LABEL_MANAGED, None)
        claim["metadata"].get("labels", {}).pop(naming.LABEL_MANAGED, None)
        t0 = time.monotonic()
        custom.create_namespaced_custom_object("resource.k8s.io", "v1", NS, "resourceclaims", claim)
        core.create_namespaced_pod(NS, pod)
        at = running.wait(lambda p: p == name)
        core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
        custom.delete_namespaced_custom_object("resource.k8s.io", "v1", NS, "resourceclaims",
                                               f"claim-{name}")
        gone(lambda: any(p.metadata.name == name for p in core.list_namespaced_pod(NS).items))
        gone(lambda: custom.list_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaims")["items"])
        return at - t0

    samples: dict[str, list[float]] = {"pipeline": [], "plain": []}
    for i in range(args.rounds):
        samples["pipeline"].append(pipeline(i))
        samples["plain"].append(plain(i))
    running.stop.set()
    med = {k: statistics.median(v) for k, v in samples.items()}
    for k, v in samples.items():
        print(f"{k:9s} median {med[k]:.2f}s  samples {' '.join(f'{x:.2f}' for x in v)}")
    print(f"node_bench: worker create -> container Running on {NODE}, {args.rounds} rounds: "
          f"pipeline {med['pipeline']:.2f}s, plain claim + pod {med['plain']:.2f}s, "
          f"ratio {med['pipeline'] / med['plain']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
