#!/usr/bin/env python3
"""Burst: create many OpenRLWorkers at once and measure the controller.

Runs the controller in this process (no leader election, no HTTP server)
against a cluster (default: $KUBECONFIG, e.g. the local control plane of
hack/cluster.sh), creates WORKERS workers in a fresh namespace as fast as the
API server takes them, and waits until the books settle: every worker Running
or Pending with a reason, and the controller's queue idle. Then it prints

  * reconciles per second (reconciles / time from first create to settled),
  * Kubernetes API requests per placed worker (every request the controller's
    API layer made, watches and leader election excluded, / Running workers),
    with the breakdown by verb and resource,
  * the process's peak resident memory (the controller runs in it).

With --baseline it then measures kube-scheduler alone on the same cluster, in
the same run: as many claims as there were workers, each shaped as the
controller would cut it for that memory (one device request with the same CEL
memory bounds), and as many pods consuming them (rendered from the same
template, with the same role affinity but no node pinned), created directly
and timed until every pod runs. It prints both times and their ratio. The two
sides share the machine, so compare ratios, not absolute times.

With --kueue both it plays two bursts likewise: without Kueue, then with every
worker labelled for one LocalQueue whose ClusterQueue has quota for all of them
(Kueue must be running: hack/kueue.sh up), the controller run with --kueue; it
prints the ratio of their settle times and the extra API requests per worker.

With --autoscaling both it plays two bursts in one run, each in its own
namespace on the same nodes: the controller with autoscaling off, then on,
and prints the ratio of their settle times. With the nodes present a worker
that fits is placed as before, so autoscaling should cost nothing there; a
worker that must wait keeps a standing claim and pod instead of a reason.

The fake GPU nodes are labelled openrl.io/enabled=true and
max-workers-per-claim=MAXW for the run (labels restored afterwards); the
namespace is deleted at the end. Usage:

  KUBECONFIG=.cluster/admin.kubeconfig .venv/bin/python -m hack.burst \\
      [--workers 200] [--memory 10Gi] [--maxw 16] [--baseline] [--json]
      [--autoscaling off|on|both] [--kueue off|on|both]

(from the repository root, as ``make burst`` runs it)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from controller.fleet.claims import build_claim
from controller.fleet.reader import read_slices
from controller.k8s import kube, naming
from controller.k8s.objects import Worker
from controller.loop import Controller
from controller.main import run
from controller.metrics import Metrics
from controller.reconcile import render
from controller.settings import Settings
from hack.lib import kube as testbed
from hack.lib.install import ensure_crd
from hack.lib.kube import CLAIMS, CONFIGMAPS, NAMESPACES, PODS, SLICES, WORKERS
from placement import NewClaim
from placement.quantity import parse_quantity

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident set (VmHWM), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class InProcess:
    """The controller in a thread of this process (the default)."""

    def __init__(self, settings: Settings) -> None:
        self.metrics = Metrics()
        self.api = kube.Kube(kube.load_api_client(None), settings.namespace,
                             hook=self.metrics.api_request)
        self.stop_event = threading.Event()
        holder: list[Controller] = []
        self.thread = threading.Thread(target=run, args=(settings,), daemon=True, kwargs={
            "stop": self.stop_event, "api": self.api, "metrics": self.metrics,
            "started": holder.append})
        self.thread.start()
        while not holder:
            time.sleep(0.05)
        self.controller = holder[0]

    def calls(self) -> Counter[tuple[str, str]]:
        return Counter(self.api.calls)

    def reconciles(self) -> int:
        return self.controller.reconciles

    def due(self) -> list[str]:
        return [k for k in self.controller.queue.due_within(2.0) if not k.startswith("*")]

    def samples(self) -> list[Any]:
        return [s for family in self.metrics.registry.collect() for s in family.samples]

    def rss(self) -> float:
        return peak_rss_mb()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(15)


class Subprocess:
    """``openrl-place controller`` as its own process, read through its /metrics."""

    def __init__(self, settings: Settings, kubeconfig: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "controller", "--namespace", settings.namespace,
                   "--no-leader-elect", "--http-address", f"127.0.0.1:{port}",
                   "--device-class", settings.device_class, "--kubeconfig", kubeconfig,
                   "--log-format", "text", "--log-level", "warning",
                   *(["--autoscaling"] if settings.autoscaling else []),
                   *(["--kueue"] if settings.kueue else [])]
        self.proc = subprocess.Popen(command, cwd=ROOT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)

    def samples(self) -> list[Any]:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    def calls(self) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for sample in self.samples():
            if sample.name == "openrl_place_api_requests_total":
                out[(sample.labels["verb"], sample.labels["resource"])] += int(sample.value)
        return out

    def reconciles(self) -> int:
        return int(sum(s.value for s in self.samples()
                       if s.name == "openrl_place_reconciles_total"))

    def due(self) -> list[str]:
        return []  # not visible from outside: settled is every worker Running or waiting

    def rss(self) -> float:
        return peak_rss_mb(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_all(count: int, create: Any, concurrency: int) -> None:
    """``create(i)`` for every i, ``concurrency`` at a time (a gateway asks in parallel)."""
    if concurrency <= 1:
        for i in range(count):
            create(i)
        return
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(create, range(count)))


def baseline(k: testbed.Kube, namespace: str,
             workers: int, memory: str, driver: str, device_memory: int,
             timeout: float, concurrency: int = 1) -> float:
    """kube-scheduler alone: claims and pods created directly; seconds until all run."""
    bytes_ = parse_quantity(memory)
    shape = NewClaim(node="", devices=1, memory_floor=bytes_, memory_ceiling=device_memory)
    template = yaml.safe_load((k.get(CONFIGMAPS, naming.template_name("trainer"),
                                     namespace=namespace) or {})["data"][
        naming.DEFAULT_TEMPLATE_KEY])
    started = time.monotonic()

    def create(i: int) -> None:
        name = f"base-{i:04d}"
        body = build_claim(f"claim-{name}", shape, namespace=namespace, device_class=driver,
                           driver=driver, worker=name)
        k.create(CLAIMS, body, namespace=namespace)
        worker = Worker.from_obj({"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                                  "metadata": {"name": name, "uid": f"uid-{name}"},
                                  "spec": {"role": "trainer", "modelId": "burst",
                                           "memory": memory}})
        pod = render.stamp(render.prepare(yaml.safe_dump(template), worker, "baseline"),
                           worker, f"claim-{name}", namespace, node="")
        pod["metadata"]["name"] = name
        pod["metadata"]["ownerReferences"] = []
        k.create(PODS, pod, namespace=namespace)

    create_all(workers, create, concurrency)
    while time.monotonic() - started < timeout:
        pods = k.list(PODS, namespace=namespace, selector=naming.MANAGED_SELECTOR)
        running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
                      and p["metadata"]["name"].startswith("base-"))
        if running >= workers:
            break
        time.sleep(0.25)
    return time.monotonic() - started


def delete_all_claims(k: testbed.Kube, namespace: str) -> None:
    """Every claim of the namespace deleted, and gone: DRA deallocates each once its pods
    are gone, which takes minutes for thousands. A burst started before that would find
    their devices held by another namespace's claims, and be measured on a smaller fleet:
    past the bound, it stops with an error instead."""
    def names() -> list[str]:
        return [c["metadata"]["name"] for c in k.list(CLAIMS, namespace=namespace)]

    left = names()
    for name in left:
        k.delete(CLAIMS, name, namespace=namespace)
    bound = max(120.0, 0.3 * len(left))
    done, took, _ = testbed.wait_for("the claims to go", bound,
                                     lambda: (not (now := names()), f"{len(now)} claims left"),
                                     every=1.0)
    if not done:
        raise SystemExit(f"burst: {namespace}'s claims still there after {took:.0f}s; "
                         "the next burst would run on devices they hold")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKERS", 200)))
    parser.add_argument("--memory", default=os.environ.get("MEMORY", "10Gi"))
    parser.add_argument("--maxw", type=int, default=int(os.environ.get("MAXW", 16)))
    parser.add_argument("--driver", default=os.environ.get("OPEN_RL_DEVICE_CLASS",
                                                           "gpu.example.com"))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--baseline", action="store_true",
                        help="then time kube-scheduler alone on equivalent claims and pods")
    parser.add_argument("--subprocess", action="store_true",
                        help="run the controller as its own process (as deployed); its "
                             "figures come from its /metrics, its RSS from /proc")
    parser.add_argument("--create-concurrency", type=int, default=1,
                        help="objects created in parallel, on both sides (default 1)")
    parser.add_argument("--autoscaling", choices=("off", "on", "both"), default="off",
                        help="the controller's autoscaling mode; both: one burst with it off, "
                             "then one with it on, and the ratio of their settle times")
    parser.add_argument("--kueue", choices=("off", "on", "both"), default="off",
                        help="workers queued through Kueue (ample quota); both: one burst "
                             "without, then one with, and the ratio of their settle times")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")

    if args.autoscaling == "both" and args.kueue == "both":
        parser.error("--autoscaling both and --kueue both: compare one at a time")
    choice = {"off": [False], "on": [True], "both": [False, True]}
    kueue = args.kueue != "off"
    modes = ([(mode, kueue) for mode in choice[args.autoscaling]] if args.kueue != "both"
             else [(args.autoscaling == "on", mode) for mode in choice["both"]])
    runs = [burst(args, autoscaling=mode, kueue=queued,
                  baseline_too=args.baseline and i == len(modes) - 1)
            for i, (mode, queued) in enumerate(modes)]
    if len(runs) == 1:
        report(runs[0], args)
        return 0
    what = "kueue" if args.kueue == "both" else "autoscaling"
    ratio = round(runs[1]["settle_seconds"] / max(runs[0]["settle_seconds"], 1e-9), 2)
    extra = round(runs[1]["api_requests_per_placed_worker"]
                  - runs[0]["api_requests_per_placed_worker"], 2)
    if args.json:
        print(json.dumps({"off": runs[0], "on": runs[1], f"{what}_ratio": ratio,
                          "extra_requests_per_worker": extra}, indent=2))
        return 0
    for figures in runs:
        print(f"{what} {'on' if figures[what] else 'off'}:")
        report(figures, args)
    target = "1.15x" if what == "kueue" else "1.1x"
    print(f"settled with {what} on / off, nodes present: {runs[1]['settle_seconds']}s / "
          f"{runs[0]['settle_seconds']}s = {ratio}x (target <= {target}); API requests per "
          f"placed worker {runs[1]['api_requests_per_placed_worker']} / "
          f"{runs[0]['api_requests_per_placed_worker']} ({extra:+} per worker)")
    return 0


KUEUE = "kueue.x-k8s.io"
FLAVORS = testbed.Resource(KUEUE, "v1beta2", "resourceflavors", namespaced=False)
CLUSTER_QUEUES = testbed.Resource(KUEUE, "v1beta2", "clusterqueues", namespaced=False)
LOCAL_QUEUES = testbed.Resource(KUEUE, "v1beta2", "localqueues")


def queue_for(k: testbed.Kube, namespace: str, quota: str) -> None:
    """A flavor, a ClusterQueue with ``quota`` of accelerator memory, and a LocalQueue
    ``burst`` in the namespace (both cluster-wide objects named for it)."""
    try:
        k.create(FLAVORS, {**_kueue_kind("ResourceFlavor"), "metadata": {"name": namespace}})
    except testbed.KubeError as exc:
        raise SystemExit(f"--kueue: no ResourceFlavor could be made ({exc}); is Kueue "
                         "installed and running (hack/kueue.sh up)?") from None
    k.create(CLUSTER_QUEUES, {**_kueue_kind("ClusterQueue"), "metadata": {"name": namespace},
                              "spec": {
        "namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": [naming.ACCELERATOR_MEMORY],
            "flavors": [{"name": namespace, "resources": [
                {"name": naming.ACCELERATOR_MEMORY, "nominalQuota": quota}]}]}]}})
    k.create(LOCAL_QUEUES, {**_kueue_kind("LocalQueue"), "metadata": {"name": "burst"},
                            "spec": {"clusterQueue": namespace}})


def _kueue_kind(kind: str) -> dict[str, str]:
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": kind}


def drop_queue(k: testbed.Kube, namespace: str) -> None:
    for res in (CLUSTER_QUEUES, FLAVORS):
        with contextlib.suppress(testbed.KubeError):  # gone already: what was wanted
            k.delete(res, namespace)


def burst(args: argparse.Namespace, *, autoscaling: bool, kueue: bool,
          baseline_too: bool) -> dict[str, Any]:
    """One burst in a fresh namespace; its figures (and the baseline's, when asked)."""
    namespace = f"burst-{uuid.uuid4().hex[:6]}"
    k = testbed.Kube.connect(namespace=namespace)  # the harness's own requests
    ensure_crd(k)
    k.create(NAMESPACES, {"metadata": {"name": namespace}})
    templates = (ROOT / "manifests" / "base" / "pod-templates.yaml").read_text()
    for doc in yaml.safe_load_all(templates):
        doc["metadata"]["namespace"] = namespace
        k.create(CONFIGMAPS, doc)

    hardware, _, _ = read_slices(k.list(SLICES), args.driver)
    labels: dict[str, str | None] = {naming.NODE_ENABLED: "true",
                                     naming.NODE_MAX_WORKERS: str(args.maxw)}
    saved = {}
    for node in hardware:
        before = k.label_node(node, labels)
        if before is not None:
            saved[node] = before

    if kueue:  # quota for every worker twice over: Kueue admits, it never holds one back
        queue_for(k, namespace, f"{2 * args.workers * parse_quantity(args.memory)}")
    settings = Settings(namespace=namespace, leader_elect=False, http_address="",
                        device_class=args.driver, identity="burst", autoscaling=autoscaling,
                        kueue=kueue)
    subject: InProcess | Subprocess = (
        Subprocess(settings, os.environ.get("KUBECONFIG", "")) if args.subprocess
        else InProcess(settings))
    time.sleep(1.0)  # let the watches list; their start-up is not part of the burst
    calls_before = subject.calls()
    reconciles_before = subject.reconciles()

    figures: dict[str, Any] = {}
    try:
        started = time.monotonic()

        def create(i: int) -> None:
            k.create(WORKERS, {
                "apiVersion": naming.API_VERSION, "kind": naming.KIND,
                "metadata": {"name": f"burst-{i:03d}",
                             **({"labels": {naming.LABEL_QUEUE: "burst"}} if kueue else {})},
                "spec": {"role": "trainer", "modelId": "burst", "memory": args.memory,
                         "ownerId": f"owner-{i % 7}"}})

        create_all(args.workers, create, args.create_concurrency)
        created = time.monotonic()
        phases: Counter[str] = Counter()
        progress_at = started + 10
        placing_since: dict[str, float] = {}  # worker -> first seen Placing, while it is
        longest_placing = 0.0
        while time.monotonic() - started < args.timeout:
            items = k.list(WORKERS)
            phases = Counter((w.get("status") or {}).get("phase", "") for w in items)
            now = time.monotonic()
            for w in items:
                name = w["metadata"]["name"]
                if (w.get("status") or {}).get("phase") == "Placing":
                    longest_placing = max(longest_placing,
                                          now - placing_since.setdefault(name, now))
                else:
                    placing_since.pop(name, None)
            settled = all(
                (w.get("status") or {}).get("phase") == "Running"
                or ((w.get("status") or {}).get("phase") == "Pending"
                    and (w.get("status") or {}).get("reason", "").startswith(
                        ("WaitingForCapacity", "NoCapacity")))
                for w in items)
            # Settled: nothing left to report, and no worker due for a look any time soon
            # (the sweep and the placement-timeout checks are always scheduled).
            busy = subject.due()
            if settled and not busy:
                break
            if progress_at <= time.monotonic():
                progress_at += 10
                print(f"  {time.monotonic() - started:5.0f}s {dict(phases)} "
                      f"due={len(busy)} reconciles={subject.reconciles()}",
                      file=sys.stderr)
            time.sleep(0.25)
        elapsed = time.monotonic() - started
        calls = subject.calls()
        calls.subtract(calls_before)
        calls = Counter({k: v for k, v in calls.items()
                         if v and k[0] != "watch" and k[1] != "leases"})
        reconciles = subject.reconciles() - reconciles_before
        samples = subject.samples()
        busy = sum(s.value for s in samples
                   if s.name == "openrl_place_reconcile_duration_seconds_sum")
        api_seconds: Counter[str] = Counter()
        for sample in samples:
            if sample.name == "openrl_place_api_request_duration_seconds_sum" \
                    and sample.labels["resource"] != "leases":
                api_seconds[f"{sample.labels['verb']} {sample.labels['resource']}"] += \
                    sample.value
        running = phases.get("Running", 0)
        rss = subject.rss()
        by_verb: Counter[str] = Counter()
        for (verb, _res), n in calls.items():
            by_verb[verb] += n
        claims = k.list(CLAIMS)
        items = k.list(WORKERS)
        moved = sum(1 for w in items if (w.get("status") or {}).get("moves"))
        figures = {
            "workers": args.workers, "memory": args.memory, "nodes": len(hardware),
            "devices": sum(h.devices for h in hardware.values()),
            "max_workers_per_claim": args.maxw,
            "create_seconds": round(created - started, 2),
            "settle_seconds": round(elapsed, 2),
            "phases": dict(phases), "claims": len(claims),
            # What the burst cost beyond placing: claims cut and then deleted (standing
            # claims given up, races lost), the longest any worker sat in Placing (polled
            # every quarter second), and workers placed again (moved, wedged).
            "claims_created": calls.get(("create", "resourceclaims"), 0),
            "claims_deleted": calls.get(("delete", "resourceclaims"), 0),
            "longest_placing_seconds": round(longest_placing, 1),
            "workers_placed_again": moved,
            "reconciles": reconciles,
            "reconciles_per_second": round(reconciles / elapsed, 1),
            "reconcile_busy_seconds": round(busy, 1),
            "api_seconds": round(sum(api_seconds.values()), 1),
            "api_requests": sum(calls.values()),
            "api_requests_per_placed_worker": round(sum(calls.values()) / max(1, running), 1),
            "by_call": {f"{verb} {res}": n for (verb, res), n in sorted(calls.items())},
            "per_placed_worker_by_call": {
                f"{verb} {res}": round(n / max(1, running), 2)
                for (verb, res), n in sorted(calls.items())},
            "lists": sum(n for (verb, _), n in calls.items() if verb == "list"),
            "peak_rss_mb": rss,
            "controller": "subprocess" if args.subprocess else "in-process",
            "autoscaling": autoscaling,
            "kueue": kueue,
            "create_concurrency": args.create_concurrency,
            "seconds_by_call": {k: round(v, 2) for k, v in sorted(api_seconds.items())},
        }
    finally:
        for item in k.list(WORKERS):
            k.delete(WORKERS, item["metadata"]["name"])
        testbed.wait_for("the workers to go", 180, lambda: (not k.list(WORKERS), "left"))
        subject.stop()
        if baseline_too and figures:
            # The pipeline's claims go first: their devices are the baseline's.
            delete_all_claims(k, namespace)
            memories = sorted(h.device_memory for h in hardware.values())
            took = baseline(k, namespace, args.workers, args.memory, args.driver,
                            memories[0] if memories else parse_quantity("80Gi"), args.timeout,
                            args.create_concurrency)
            figures["baseline_seconds"] = round(took, 2)
            figures["ratio"] = round(figures["settle_seconds"] / max(took, 1e-9), 2)
            for pod in k.list(PODS):
                k.delete(PODS, pod["metadata"]["name"], grace=0)
            delete_all_claims(k, namespace)
        for item in k.list(WORKERS):
            k.patch(WORKERS, item["metadata"]["name"], {"metadata": {"finalizers": None}})
        # Every device free again before the next burst: a claim of this one still
        # allocated while the next runs is a device held by another namespace's claim,
        # which the next controller rightly leaves out (and, autoscaling on, stands for).
        delete_all_claims(k, namespace)
        k.delete(NAMESPACES, namespace)
        if kueue:
            drop_queue(k, namespace)
        for node, values in saved.items():
            k.label_node(node, values)

    return figures


def report(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """The figures of one burst, as JSON or as text."""
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"burst of {figures['workers']} x {figures['memory']} workers on "
              f"{figures['nodes']} node(s), {figures['devices']} devices, "
              f"max {figures['max_workers_per_claim']} workers per claim")
        print(f"  created in {figures['create_seconds']}s, settled in "
              f"{figures['settle_seconds']}s: {figures['phases']} on {figures['claims']} claims")
        print(f"  reconciles: {figures['reconciles']} "
              f"({figures['reconciles_per_second']}/s; busy {figures['reconcile_busy_seconds']}s,"
              f" of which API {figures['api_seconds']}s)")
        print(f"  API requests: {figures['api_requests']} "
              f"({figures['api_requests_per_placed_worker']} per placed worker; "
              f"{figures['lists']} LISTs after start-up)")
        for call, n in figures["by_call"].items():
            print(f"    {call:<28} {n:>6} {figures['per_placed_worker_by_call'][call]:>6.2f}"
                  f"/worker {figures['seconds_by_call'].get(call, 0):>8.2f}s")
        print(f"  claims created {figures['claims_created']}, deleted "
              f"{figures['claims_deleted']}; longest in Placing "
              f"{figures['longest_placing_seconds']}s; placed again "
              f"{figures['workers_placed_again']}")
        where = ("the controller's process" if args.subprocess
                 else "this process (controller and harness)")
        print(f"  peak RSS of {where}: {figures['peak_rss_mb']} MiB")
        if "baseline_seconds" in figures:
            print(f"  kube-scheduler alone on {figures['workers']} equivalent claims and pods: "
                  f"{figures['baseline_seconds']}s; pipeline / baseline = {figures['ratio']}x")


if __name__ == "__main__":
    sys.exit(main())
