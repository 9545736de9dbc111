"""Autoscaled GPU pools on the local control plane, with Karpenter as the autoscaler.

Karpenter (hack/karpenter.sh: built from its Go module, DRA-aware, the KWOK
cloud provider with a gpu-8x80gi instance type) adds fake GPU nodes that
hack/fakenodes/adopt.py plays; the controller runs with autoscaling on, in a
device class of its own (so the session's fixed fake nodes never count): the
pool starts from zero nodes.

Short by default; OPENRL_E2E_AUTOSCALING_LONG=1 doubles the waves. ``make
test`` builds Karpenter as the session starts (``hack/karpenter.sh build``:
10-20 minutes cold, from the Go module proxy); with
OPENRL_E2E_KARPENTER_BUILD=0 and no hack/bin/karpenter the module skips,
saying so.

Checked at every step (``Books``): no device allocated to two claims, never
two live claims cut for one worker, no worker Failed; at the end, no standing
claim left behind.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_fixtures import TEMPLATES, Env, crd, run_script  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "karpenter.sh"
BINARY = REPO / "hack" / "bin" / "karpenter"
DRIVER = "gpu-autoscaled.example.com"
AUTOSCALED = "openrl.io/autoscaled=true"
LONG = os.environ.get("OPENRL_E2E_AUTOSCALING_LONG") == "1"
SCALE = 2 if LONG else 1


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return run_script(SCRIPT, *args, timeout=timeout)


@pytest.fixture(scope="module")
def karpenter(cluster: Any) -> Iterator[None]:
    if not BINARY.exists():
        if os.environ.get("OPENRL_E2E_KARPENTER_BUILD") != "1":
            pytest.skip("hack/bin/karpenter is not built: run `hack/karpenter.sh build` (10-20 "
                        "min cold, needs the Go module proxy), or set "
                        "OPENRL_E2E_KARPENTER_BUILD=1 to build it here")
        built = _script("build", timeout=3600)
        if built.returncode != 0:
            pytest.skip(f"Karpenter could not be built here: {built.stderr[-1500:]}")
    up = _script("up", timeout=300)
    if up.returncode != 0:
        _script("down", timeout=180)
        pytest.fail(f"hack/karpenter.sh up failed:\n{up.stderr[-3000:]}", pytrace=False)
    try:
        yield
    finally:
        _script("down", timeout=180)


# The NodePool's consolidateAfter (hack/karpenter.sh): nothing is consolidated sooner.
CONSOLIDATE_AFTER = 15


def _karpenter_count(histogram: str, labels: str) -> float:
    """The sum of a Karpenter histogram's ``_count`` over the series whose labels hold
    ``labels`` (its /metrics; 0 while it does not answer)."""
    port = os.environ.get("KARPENTER_METRICS_PORT", "18080")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0
    total = 0.0
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        if name == f"{histogram}_count" and labels in rest.partition("}")[0]:
            total += float(rest.rpartition(" ")[2])
    return total


def _karpenter_passes(env: Env, histogram: str, labels: str, times: int, what: str) -> None:
    """Wait until Karpenter has made ``times`` more passes of ``what`` from now: it looked
    (and, the books then show, changed nothing), where a fixed pause proves nothing."""
    since = _karpenter_count(histogram, labels)
    env.cluster.wait_for(lambda: _karpenter_count(histogram, labels) >= since + times,
                         timeout=120, interval=0.5, what=f"{times} more {what} passes")


class Books:
    """What must hold at every step, and what the autoscaler did (nodes seen)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.nodes_seen: set[str] = set()

    def nodes(self) -> list[Any]:
        return [n for n in self.env.core.list_node(label_selector=AUTOSCALED).items
                if not n.metadata.deletion_timestamp]

    def check(self) -> None:
        self.nodes_seen |= {n.metadata.name for n in self.nodes()}
        claims = self.env.claims()
        held: dict[tuple[str, str], str] = {}
        cut: dict[str, list[str]] = {}
        for name, claim in claims.items():
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                device = (result["pool"], result["device"])
                assert device not in held, f"{device} allocated to {held[device]} and {name}"
                held[device] = name
            if not claim["metadata"].get("deletionTimestamp"):
                worker = (claim["metadata"].get("annotations") or {}).get("openrl.io/worker", "")
                cut.setdefault(worker, []).append(name)
        two = {w: c for w, c in cut.items() if len(c) > 1}
        assert not two, f"two live claims for one worker: {two}"
        failed = {w["metadata"]["name"]: w["status"].get("reason")
                  for w in self.env.workers()
                  if (w.get("status") or {}).get("phase") == "Failed"}
        assert not failed, f"failed workers: {failed}"

    def wait_running(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            phases = {w["metadata"]["name"]: (w.get("status") or {}).get("phase")
                      for w in self.env.workers()}
            waiting = sorted(n for n in names if phases.get(n) != "Running")
            if not waiting:
                return
            assert time.monotonic() < deadline, (
                f"not Running after {timeout:.0f}s: {waiting[:8]} "
                f"({[self.env.status(n).get('reason') for n in waiting[:3]]}); their pods: "
                f"{[self.pod_state(n) for n in waiting[:3]]}; devices held: "
                f"{self.held_devices()}")
            time.sleep(2)

    def pod_state(self, worker: str) -> str:
        """What a stuck worker's pod says (node, phase, conditions), for the failure."""
        pod = self.env.pod(f"orw-{worker}")
        if pod is None:
            return f"{worker}: no pod"
        conditions = [f"{c.type}={c.status} {c.reason or ''} {c.message or ''}".strip()
                      for c in pod.status.conditions or []]
        return (f"{pod.metadata.name} on {pod.spec.node_name or '-'} {pod.status.phase}"
                f"{' deleting' if pod.metadata.deletion_timestamp else ''}: {conditions}")

    def held_devices(self) -> dict[str, list[str]]:
        """Every allocated claim in the cluster by node (namespace/name), for a failure:
        whose claims hold a node's devices when a pinned pod cannot get them."""
        out: dict[str, list[str]] = {}
        claims = self.env.custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceclaims")["items"]
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                meta = claim["metadata"]
                out.setdefault(result["pool"], []).append(
                    f"{meta['namespace']}/{meta['name']}:{result['device']}"
                    f"{' deleting' if meta.get('deletionTimestamp') else ''}")
        return out

    def wait_no_standing(self, timeout: float = 60) -> None:
        """Every standing claim left unallocated is gone: each worker placed elsewhere has
        its standing claim deleted by a reconcile of its own, which may come a moment after
        the worker is Running (seen in a cold run: one of 24, still there when the last
        worker ran). A claim still there after ``timeout`` is a leak."""
        left: list[str] = []

        def gone() -> bool:
            left[:] = self.standing_left()
            return not left
        started = time.monotonic()
        try:
            self.env.cluster.wait_for(gone, timeout=timeout, interval=0.5,
                                      what="standing claims gone")
        except AssertionError:
            raise AssertionError(f"standing claims left after {timeout:.0f}s: {left}") from None
        print(f"standing claims all gone {time.monotonic() - started:.1f}s after the check")

    def standing_left(self) -> list[str]:
        return [name for name, claim in self.env.claims().items()
                if (claim["metadata"].get("labels") or {}).get("openrl.io/standing") == "true"
                and not (claim.get("status") or {}).get("allocation")]


class Clock:
    """When each worker, standing pod, node and slice was first seen (polled every 0.25s).

    A worker placed on a node added for it spends its wait in three hands: ours
    (the worker's standing pod written, then once the node is usable the claim
    allocated, the worker placed and its pod started: kube-scheduler and the
    fake kubelet are in this part too), the autoscaler's (standing pod to the
    Node object) and the node's boot (Node object to Ready with its devices
    published). Ours is the total less the other two.
    """

    def __init__(self, env: Env) -> None:
        self.env = env
        self.created: dict[str, float] = {}
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def create(self, name: str, memory: str) -> None:
        self.created[name] = time.monotonic()
        self.env.create_worker(name, memory)

    def _first(self, key: str, now: float) -> None:
        self.seen.setdefault(key, now)

    def _poll(self) -> None:
        while not self.stop.wait(0.25):
            now = time.monotonic()
            for worker in self.env.workers():
                if (worker.get("status") or {}).get("phase") == "Running":
                    self._first(f"running/{worker['metadata']['name']}", now)
            for pod in self.env.core.list_namespaced_pod(self.env.namespace).items:
                self._first(f"pod/{pod.metadata.name}", now)
            for node in self.env.core.list_node(label_selector=AUTOSCALED).items:
                self._first(f"node/{node.metadata.name}", now)
                if any(c.type == "Ready" and c.status == "True"
                       for c in node.status.conditions or []):
                    self._first(f"ready/{node.metadata.name}", now)
            slices = self.env.custom.list_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices")["items"]
            for item in slices:
                if item["spec"].get("driver") == DRIVER and item["spec"].get("nodeName"):
                    self._first(f"slice/{item['spec']['nodeName']}", now)

    def shares(self) -> list[tuple[str, float, float, float, float]]:
        """(worker, total, ours, autoscaler, boot) for each worker Running on a node added
        after it was created."""
        self.stop.set()
        self.thread.join(5)
        out = []
        for name, created in sorted(self.created.items()):
            node = self.env.status(name).get("nodeName", "")
            seen = self.seen.get(f"node/{node}")
            running = self.seen.get(f"running/{name}")
            standing = self.seen.get(f"pod/orw-{name}")
            if not (seen and running and standing) or seen < created:
                continue
            usable = max(self.seen.get(f"ready/{node}", seen), self.seen.get(f"slice/{node}", seen))
            total, boot = running - created, usable - seen
            autoscaler = max(0.0, seen - standing)
            out.append((name, total, total - autoscaler - boot, autoscaler, boot))
        return out


def _print_shares(strategy: str, shares: list[tuple[str, float, float, float, float]]) -> None:
    for name, total, ours, autoscaler, boot in shares:
        print(f"[{strategy}]   {name}: created -> Running {total:5.1f}s = ours {ours:4.1f}s + "
              f"autoscaler {autoscaler:4.1f}s + node boot {boot:4.1f}s")
    if shares:
        print(f"[{strategy}] created -> Running on a new node, {len(shares)} workers: median "
              f"{statistics.median(s[1] for s in shares):.1f}s, of which ours (the scheduler's "
              f"share, target <= 5s) median {statistics.median(s[2] for s in shares):.1f}s")


@pytest.fixture
def auto(cluster: Any, namespace: str, crd: None, karpenter: None) -> Iterator[Env]:  # noqa: F811
    text = TEMPLATES.read_text().replace("namespace: openrl", f"namespace: {namespace}")
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=text)
    env = Env(cluster, namespace)
    # From zero: nodes an earlier test left empty go first (the pool removes empty nodes).
    _wait_nodes(Books(env), 0, timeout=240)
    try:
        yield env
    finally:
        env.cleanup()


def _start(env: Env, **settings: Any) -> None:
    env.start(device_class=DRIVER, autoscaling=True, retry_interval="2s", wedge_grace="20s",
              **settings)


def _writes(env: Env) -> Counter[str]:
    """The API writes the namespace's controller made (Events included), by verb and resource."""
    made: Counter[str] = Counter()
    for metric in env.controllers[-1].metrics.api_requests.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels["verb"] in WRITE_VERBS:
                made[f"{sample.labels['verb']} {sample.labels['resource']}"] += int(sample.value)
    return made


def _per_worker(made: Counter[str], workers: int) -> str:
    """Writes per worker, then each verb and resource's share, largest first."""
    parts = ", ".join(f"{key} {count / workers:.1f}" for key, count in made.most_common())
    return f"{made.total() / workers:.1f} ({parts})"


WRITE_VERBS = ("create", "patch", "update", "delete")


def _wait_nodes(books: Books, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(books.nodes()) != count:
        books.check()
        assert time.monotonic() < deadline, (
            f"{len(books.nodes())} autoscaled nodes after {timeout:.0f}s, want {count}")
        time.sleep(2)


@pytest.mark.parametrize(("strategy", "second_wave_nodes"), [("binpack", 0), ("spread", 1)])
def test_from_zero_two_waves(auto: Env, strategy: str, second_wave_nodes: int) -> None:
    books = Books(auto)
    _start(auto, strategy=strategy)
    first = [f"w{i:02d}" for i in range(20 * SCALE)]
    t0 = time.monotonic()
    clock = Clock(auto)
    for name in first:
        clock.create(name, "50Gi")
    books.wait_running(first, timeout=300 * SCALE)
    _print_shares(strategy, clock.shares())
    added = len(books.nodes_seen)
    print(f"\n[{strategy}] wave 1: {len(first)} workers of 50Gi from zero on 8 x 80Gi nodes, "
          f"max 4 per claim: Running in {time.monotonic() - t0:.0f}s, 0 Failed, "
          f"nodes added = {added}, API writes per Running worker = "
          f"{_per_worker(_writes(auto), len(first))}")
    assert added == 3 * SCALE
    second = [f"x{i:02d}" for i in range(12 * SCALE)]
    before = set(books.nodes_seen)
    for name in second:
        auto.create_worker(name, "50Gi")
    books.wait_running(first + second, timeout=300 * SCALE)
    more = len(books.nodes_seen - before)
    print(f"[{strategy}] wave 2: {len(second)} more: nodes added = {more}, API writes per "
          f"Running worker (both waves) = {_per_worker(_writes(auto), len(first + second))}")
    assert more == second_wave_nodes * SCALE
    books.wait_no_standing()
    # A node running a worker is never drained: the pool consolidates only empty nodes
    # (consolidationPolicy WhenEmpty), so past its 15s every node hosting a worker stays.
    hosting = {auto.status(n).get("nodeName") for n in first + second}
    # Past the pool's consolidateAfter (its rule, a fixed delay), Karpenter's disruption
    # controller looks at the empty-node method twice: then every hosting node has been
    # judged and kept.
    time.sleep(CONSOLIDATE_AFTER)
    _karpenter_passes(auto, "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
                      'reason="empty"', times=2, what="empty-node consolidation")
    books.check()
    assert hosting <= {n.metadata.name for n in books.nodes()}
    # Scale-down: the workers gone, every node is empty and goes.
    for item in auto.workers():
        auto.delete_worker(item["metadata"]["name"])
    auto.cluster.wait_for(lambda: not auto.workers(), timeout=120, what="workers gone")
    _wait_nodes(books, 0, timeout=180)
    print(f"[{strategy}] scale-down: every empty node removed ({len(books.nodes_seen)} seen)")


def test_a_declared_pool_that_cannot_fit_is_no_capacity_at_once(auto: Env) -> None:
    _start(auto, autoscale_pools="8x80Gi")
    auto.create_worker("huge", "700Gi")
    status = auto.cluster.wait_for(lambda: (s := auto.status("huge")).get("reason") and s,
                                   timeout=30, what="a reason")
    assert status["reason"].startswith("NoCapacity: no declared autoscaled pool fits it")
    assert auto.pod("orw-huge") is None and auto.claims() == {}


def test_undeclared_a_worker_waits_for_a_node_and_says_so(auto: Env) -> None:
    books = Books(auto)
    _start(auto)
    auto.create_worker("huge", "700Gi")  # no instance type holds it: nothing is added
    status = auto.cluster.wait_for(lambda: (s := auto.status("huge")).get("reason") and s,
                                   timeout=30, what="a reason")
    assert status["phase"] == "Pending"
    assert "waiting for a node to be added" in status["reason"]
    assert auto.pod("orw-huge") is not None
    # Karpenter has looked at the standing pod and found nothing to add, twice.
    _karpenter_passes(auto, "karpenter_scheduler_scheduling_duration_seconds", "", times=2,
                      what="provisioning")
    books.check()
    assert books.nodes_seen == set() and auto.status("huge")["phase"] == "Pending"


def test_books_hold_when_a_worker_leaves_a_standing_claim(auto: Env) -> None:
    """binpack: workers standing while the first node comes up move onto its claims."""
    books = Books(auto)
    _start(auto, strategy="binpack")
    names = [f"b{i}" for i in range(6)]
    for name in names:
        auto.create_worker(name, "50Gi")
    books.wait_running(names, timeout=300)
    claims = {auto.status(n)["claimName"] for n in names}
    assert len(claims) < len(names) or len(books.nodes_seen) >= 1
    books.wait_no_standing()


def test_binpack_packs_two_lone_movable_workers_and_the_emptied_node_goes(auto: Env) -> None:
    """Binpack with moves (rebalanceAfter 10s): a wave of movable workers over several
    nodes; then all leave but two, each alone on its node. One joins the other's claim
    (its pod stopped at once: nobody to take turns with), and Karpenter removes the node
    it emptied."""
    books = Books(auto)
    _start(auto, strategy="binpack", rebalance_after="0")  # the wave lands as it would
    wave = [f"m{i:02d}" for i in range(24)]  # more than one node can park: two nodes at least
    for name in wave:
        auto.create_worker(name, "50Gi", movable=True)
    books.wait_running(wave, timeout=300)
    on = {name: auto.status(name)["nodeName"] for name in wave}
    assert len(set(on.values())) >= 2, f"the wave fit on one node: {on}"
    first = wave[0]
    second = next(n for n in wave if on[n] != on[first])
    keep = {first, second}
    auto.stop()
    _start(auto, strategy="binpack", rebalance_after="10s", drain_timeout="5s")
    for name in wave:
        if name not in keep:
            auto.delete_worker(name)
    auto.cluster.wait_for(lambda: {w["metadata"]["name"] for w in auto.workers()} == keep,
                          timeout=120, what="the wave gone but two")
    t0 = time.monotonic()

    def packed() -> bool:
        books.check()
        statuses = {n: auto.status(n) for n in keep}
        return (len({s.get("claimName") for s in statuses.values()}) == 1
                and all(s.get("phase") == "Running" for s in statuses.values()))
    auto.cluster.wait_for(packed, timeout=120, interval=2, what="the two packed on one claim")
    took = time.monotonic() - t0
    mover = next(n for n in keep if auto.status(n).get("moves"))
    emptied = on[mover]
    assert auto.status(mover)["moves"][-1]["reason"] == "EmptiesNode"
    _wait_gone = time.monotonic()
    auto.cluster.wait_for(lambda: emptied not in {n.metadata.name for n in books.nodes()},
                          timeout=180, interval=2, what=f"node {emptied} removed")
    print(f"\n[binpack moves] {mover} joined the other's claim {took:.0f}s after the wave "
          f"left (rebalanceAfter 10s); node {emptied} removed "
          f"{time.monotonic() - _wait_gone:.0f}s later (consolidateAfter "
          f"{CONSOLIDATE_AFTER}s)")
    books.check()
