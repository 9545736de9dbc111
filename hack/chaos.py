"""make chaos: churn workers while faults are injected; invariants checked all along.

Run by hack/chaos.sh, which sets up the cluster, the manifests and the nodes,
and hands over a kubeconfig with the scheduler's ServiceAccount token
(``CHAOS_SA_KUBECONFIG``). Here:

* the scheduler runs as its own process(es), as that ServiceAccount;
* a checker keeps a copy of the namespace (workers, pods, claims) and the
  nodes from watches and checks hack/lib/invariants.py on every change, plus a
  full read every few seconds (orphaned claims too). A violation the watches
  show is recorded once a fresh read confirms it: the watches are separate
  streams, and one may run ahead of another (a new pod seen before an old
  one's deletion);
* each round tops the fleet up to ``CHAOS_WORKERS`` workers (10Gi and 50Gi
  trainers), deletes a random quarter, injects one fault from the menu, and
  waits until the fleet converges (every worker Running or Pending with a
  reason, status agreeing with pod, claim and node);
* at the end a table per fault: times injected, violations seen only in
  passing and still there at the end of its round, the slowest convergence;
  the last line is ``chaos: PASS ...`` or ``chaos: FAIL ...``.

Faults: kill -9 at random; kill -9 exactly before/after the k-th write of a
kind (planted by hack/crashpoint.py's launcher); API server and etcd killed
and restarted; two replicas with the leader killed, SIGTERMed, or stopped
(SIGSTOP) past its lease and resumed; a move for efficiency with the
scheduler killed before or after its ask to drain (every worker is movable;
that round alone has moves on, due after 5 s); and under its feet: a pod deleted, a
claim deleted, the node disabled, its seats per claim lowered, a slice
deleted, the template removed or garbled (each undone before the round
converges). Node faults act on nodes this run plays itself
(``CHAOS_SPARE_NODES``, 2, fake nodes of 2 x 80Gi from hack/fakenodes, beside
the cluster's): a node lost (its kubelet stops and its Node object is
deleted; a fresh node joins in its place once the round is checked) and a
node not ready (its kubelet stops until the node controller marks it so,
then resumes). Besides the invariants, every worker of a lost node must be
placed again or wait with a reason, and every worker of a node not ready
must say so, within ``CHAOS_MOVE_BOUND`` seconds (150: Kubernetes collects a
deleted node's pods after 40s). ``CHAOS_FAULTS=lost,ready`` keeps only the
faults whose names hold one of those words.

``CHAOS_SELF_TEST=1`` plants each kind of violation as admin (no scheduler
running) and checks each is caught, so a quiet checker means something.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.crashpoint import launcher
from hack.fakenodes import fakenodes
from hack.lib import invariants as inv
from hack.lib import kube
from hack.lib.kube import CLAIMS, CONFIGMAPS, NODES, PODS, SLICES, WORKERS, KubeError, Obj
from hack.lib.names import (
    API_VERSION,
    FAKE_NODE_LABEL,
    GROUP,
    KIND,
    LABEL_MANAGED,
    NAMESPACE,
    NODE_ENABLED,
    NODE_MAX_WORKERS,
    PLURAL,
    RUN_LABEL,
    SIZED_FOR,
    VERSION,
    pod_name,
    template_name,
)

ROOT = Path(__file__).resolve().parents[1]
NS = os.environ.get("OPENRL_NAMESPACE", NAMESPACE)
TEMPLATE = template_name("trainer")
MAXW = int(os.environ.get("MAXW", "2"))
# How long the ``move`` fault waits for its replica to reach the crash point.
MOVE_WAIT = 60.0
MOVE_BOUND = float(os.environ.get("CHAOS_MOVE_BOUND", "150"))
# How long one device may stay in two claims' allocations (kube-scheduler's doing, when
# the answer to its allocation write is lost) before the controller has ended it.
CONFLICT_BOUND = float(os.environ.get("CHAOS_CONFLICT_BOUND", "90"))
SPARE = fakenodes.Profile(devices=2, device_memory="80Gi", product="Chaos GPU 80GB",
                          host_memory="1Ti", cpu="64")


def seconds(text: str, default: float) -> float:
    text = (text or "").strip()
    if not text:
        return default
    total, number = 0.0, ""
    for unit in text.replace("ms", "u"):
        if unit.isdigit() or unit == ".":
            number += unit
        else:
            total += float(number or 0) * {"h": 3600, "m": 60, "s": 1, "u": 0.001}[unit]
            number = ""
    return total + float(number or 0)


# ------------------------------------------------------------------ the API


class Api(kube.Kube):
    """The run's namespace as the admin sees it (the checker reads, the faults write)."""

    def __init__(self) -> None:
        super().__init__(kube.api_client(), NS, timeout=20)

    def workers(self) -> list[Obj]:
        return self.list(WORKERS)

    def claims(self) -> list[Obj]:
        return self.list(CLAIMS)

    def pods(self) -> list[Obj]:
        return self.list(PODS)

    def nodes(self) -> list[Obj]:
        return self.list(NODES)

    def pod(self, name: str) -> Obj | None:
        return self.get(PODS, name)

    def create_worker(self, name: str, memory: str, movable: bool = False) -> None:
        body = {"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": name, "labels": {RUN_LABEL: "chaos"}},
                "spec": {"role": "trainer", "modelId": "chaos/model", "memory": memory,
                         **({"movable": True} if movable else {})}}
        self.create(WORKERS, body)

    def delete_worker(self, name: str) -> None:
        with contextlib.suppress(KubeError):  # the API server may be down on purpose
            self.delete(WORKERS, name)


# --------------------------------------------------------------- the checker


class Checker:
    """A watch-fed copy of the world, checked on every change."""

    def __init__(self, api: Api, older_than: float) -> None:
        self.api = api
        self.world = inv.World()
        self.lock = threading.Lock()
        self.older_than = older_than
        self.seen: dict[tuple[str, str], inv.Violation] = {}  # everything ever seen
        self.stop = threading.Event()
        self.events = 0
        self.conflicts = 0  # devices kube-scheduler gave two claims (the controller ends it)

    def start(self) -> None:
        self.full_read()
        feeds = [
            (self.api.custom.list_namespaced_custom_object, (GROUP, VERSION, NS, PLURAL),
             self._worker),
            (self.api.core.list_namespaced_pod, (NS,), self._pod),
            (self.api.custom.list_namespaced_custom_object,
             (CLAIMS.group, CLAIMS.version, NS, CLAIMS.plural), self._claim),
            (self.api.core.list_node, (), self._node),
        ]
        for call, args, handle in feeds:
            threading.Thread(target=self._watch, args=(call, args, handle), daemon=True).start()
        threading.Thread(target=self._periodic, daemon=True).start()

    def _watch(self, call: Callable[..., Any], args: tuple[Any, ...],
               handle: Callable[[str, Obj], None]) -> None:
        version = ""  # carried across reconnects, so no change falls into a gap
        while not self.stop.is_set():
            try:
                kw = {"resource_version": version} if version else {}
                for kind, obj in self.api.watch(call, *args, timeout_seconds=60,
                                                _request_timeout=90, **kw):
                    if not isinstance(obj, dict) or "metadata" not in obj:
                        continue
                    version = str(obj["metadata"].get("resourceVersion") or version)
                    with self.lock:
                        self.events += 1
                        handle(kind, obj)
                        found = inv.continuous(self.world)
                    self._confirm(found)
                    if self.stop.is_set():
                        return
            except Exception:  # the API server may be down on purpose; or 410: look again
                version = ""
                time.sleep(1)

    def _confirm(self, found: list[inv.Violation]) -> None:
        """Record what a fresh read confirms: the watches are separate streams, and one
        may run ahead of another (a new pod seen before an old one's deletion)."""
        new = [v for v in found if (v.kind, v.key) not in self.seen]
        if not new:
            return
        with contextlib.suppress(Exception):
            workers, pods, claims = self.api.workers(), self.api.pods(), self.api.claims()
            with self.lock:
                fresh = inv.World(
                    workers={w["metadata"]["name"]: w for w in workers},
                    pods={p["metadata"]["name"]: p for p in pods},
                    nodes=dict(self.world.nodes), max_seats=dict(self.world.max_seats),
                    placed=dict(self.world.placed),
                    deleted_claims=set(self.world.deleted_claims))
                for c in claims:
                    fresh.seen_claim(c)
                again = {(v.kind, v.key) for v in inv.continuous(fresh)}
                self._record([v for v in new if (v.kind, v.key) in again])

    def _worker(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.world.workers.pop(name, None)
            pod = self.api.pod(pod_name(name))
            self._record(inv.worker_gone(self.world, obj, pod))
        else:
            self.world.workers[name] = obj

    def _pod(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            self.world.pods.pop(obj["metadata"]["name"], None)
        else:
            self.world.pods[obj["metadata"]["name"]] = obj

    def _claim(self, kind: str, obj: Obj) -> None:
        self.world.seen_claim(obj, gone=kind == "DELETED")

    def _node(self, kind: str, obj: Obj) -> None:
        if kind != "DELETED":
            self.world.seen_node(obj)
        else:
            self.world.nodes.pop(obj["metadata"]["name"], None)

    def full_read(self) -> None:
        workers, pods, claims, nodes = (self.api.workers(), self.api.pods(), self.api.claims(),
                                        self.api.nodes())
        with self.lock:
            self.world.workers = {w["metadata"]["name"]: w for w in workers}
            self.world.pods = {p["metadata"]["name"]: p for p in pods}
            for gone in set(self.world.claims) - {c["metadata"]["name"] for c in claims}:
                self.world.deleted_claims.add(gone)
            self.world.claims = {}
            for c in claims:
                self.world.seen_claim(c)
            self.world.nodes = {}
            for n in nodes:
                self.world.seen_node(n)
            found = inv.continuous(self.world)
            found += inv.orphans(self.world, dt.datetime.now(dt.UTC), self.older_than)
            found += inv.stranded(self.world, dt.datetime.now(dt.UTC), MOVE_BOUND)
            noted, lasting = inv.given_twice(self.world, dt.datetime.now(dt.UTC),
                                             CONFLICT_BOUND)
            for v in noted:
                self.conflicts += 1
                print(f"  noted: {v.detail} (kube-scheduler's allocation; the controller "
                      f"must end it within {CONFLICT_BOUND:.0f}s)", flush=True)
            self._record(found + lasting)

    def _periodic(self) -> None:
        while not self.stop.wait(5.0):
            with contextlib.suppress(Exception):
                self.full_read()

    def _record(self, found: list[inv.Violation]) -> None:
        for v in found:
            if (v.kind, v.key) not in self.seen:
                self.seen[(v.kind, v.key)] = v
                print(f"  violation: {v.kind}: {v.detail}", flush=True)

    def settled(self) -> list[inv.Violation]:
        self.full_read()
        with self.lock:
            return inv.final(self.world) + [v for v in inv.continuous(self.world)]


# ------------------------------------------------------------- the scheduler


class Scheduler:
    """openrl-place controller processes, as the ServiceAccount, each with its own log."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: dict[int, int] = {}  # pid -> its /metrics port
        self.started = 0

    def start(self, crash_at: str = "", moves: bool = False) -> subprocess.Popen[bytes]:
        """One replica; with ``moves``, moves for efficiency due after 5 s (the ``move``
        fault's; every other replica has them off, so the oversubscribed rounds stay as
        they were). A moving worker's old pod goes 5 s after the ask to drain at most:
        these nodes run no time-slicer to answer it."""
        kubeconfig = os.environ["CHAOS_SA_KUBECONFIG"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "KUBECONFIG": kubeconfig,
               "OPEN_RL_REBALANCE_AFTER": "5s" if moves else "0", "OPEN_RL_DRAIN_TIMEOUT": "5s"}
        self.started += 1
        log = open(self.state / f"controller-{self.started}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [*launcher(crash_at), f"--kubeconfig={kubeconfig}",
             f"--http-address=127.0.0.1:{port}"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        self.ports[proc.pid] = port
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        self.procs = [p for p in self.procs if p.poll() is None]
        return self.procs

    def leader(self) -> subprocess.Popen[bytes] | None:
        """The replica whose /metrics say it leads."""
        import urllib.request

        for p in self.alive():
            with contextlib.suppress(Exception):
                url = f"http://127.0.0.1:{self.ports[p.pid]}/metrics"
                text = urllib.request.urlopen(url, timeout=3).read().decode()
                if "\nopenrl_place_leader 1.0" in text:
                    return p
        return None

    def ensure(self, count: int = 1) -> None:
        """Keep ``count`` replicas running (a Deployment's job)."""
        for proc in list(self.procs):
            if proc.poll() is not None:
                self.procs.remove(proc)
        while len(self.alive()) < count:
            self.start()

    def stop_all(self) -> None:
        for p in self.alive():
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


# ------------------------------------------------------------------- faults


class SpareNodes:
    """Nodes the run plays itself (hack/fakenodes), so that it can lose one."""

    def __init__(self) -> None:
        driver = os.environ.get("OPENRL_DRIVER", "gpu.example.com")
        self.fake = fakenodes.FakeNodes(None, [], SPARE, driver, {})
        self.serial = 0

    def start(self, count: int) -> None:
        k = self.fake.api()
        self.fake.kubelet_version = k.version()
        self.fake.ensure_device_class(k)
        for _ in range(count):
            self.add()
        for loop in (self.fake.heartbeat_loop, self.fake.kubelet_loop):
            threading.Thread(target=loop, daemon=True).start()

    def add(self) -> str:
        self.serial += 1
        name = f"chaos-spare-{os.getpid()}-{self.serial}"
        self.fake.add(name, SPARE, {NODE_ENABLED: "true", NODE_MAX_WORKERS: str(MAXW),
                                    FAKE_NODE_LABEL: "chaos"})
        return name

    def played(self) -> list[str]:
        return list(self.fake.names)

    def silence(self, name: str) -> None:
        """Its kubelet stops: no heartbeat, no pod handled; the Node object stays."""
        if name in self.fake.names:
            self.fake.names.remove(name)

    def resume(self, name: str) -> None:
        if name not in self.fake.names:
            self.fake.names.append(name)
        self.fake.resync(name)  # what was bound to it meanwhile starts now

    def close(self) -> None:
        self.fake.stop.set()
        for name in list(self.fake.names):
            with contextlib.suppress(Exception):
                self.fake.remove(name)


class Faults:
    def __init__(self, api: Api, sched: Scheduler, rng: random.Random, nodes: list[str],
                 spare: SpareNodes | None = None) -> None:
        self.api, self.sched, self.rng, self.nodes = api, sched, rng, nodes
        self.spare = spare
        self.undo: list[Callable[[], object]] = []
        self.after_round: list[Callable[[], object]] = []
        self.found: list[inv.Violation] = []  # what a fault's own checks saw
        self.saved_template: Obj = {}

    def menu(self) -> dict[str, Callable[[], None]]:
        kinds = {"claim": "create:resourceclaims", "pod": "create:pods",
                 "status": "patch:openrlworkers/status", "finalizer": "patch:openrlworkers",
                 "event": "create:events"}
        out: dict[str, Callable[[], None]] = {"kill -9 at random": self.kill_random}
        for kind, spec in kinds.items():
            for when in ("before", "after"):
                out[f"kill -9 {when} {kind} write"] = functools.partial(
                    self.crash_at, spec, when)
        run = Path(os.environ.get("CLUSTER_RUN_DIR", "/nonexistent"))
        if (run / "apiserver.pid").is_file():  # the local control plane: ours to restart
            out["apiserver kill/restart"] = lambda: self.restart_component("apiserver")
            out["etcd kill/restart"] = lambda: self.restart_component("etcd")
        out.update({
            "leader kill -9": lambda: self.leader_signal(signal.SIGKILL),
            "leader SIGTERM": lambda: self.leader_signal(signal.SIGTERM),
            "leader SIGSTOP/SIGCONT": self.leader_pause,
            "pod deleted": self.delete_pod,
            "claim deleted": self.delete_claim,
            "node disabled": self.disable_node,
            "cap lowered": self.lower_cap,
            "slice deleted": self.delete_slice,
            "template removed": lambda: self.template(remove=True),
            "template garbled": lambda: self.template(remove=False),
        })
        for when in ("before", "after"):
            out[f"move: kill -9 {when} the drain ask"] = functools.partial(self.move, when)
        if self.spare is not None:
            out["node lost"] = self.lose_node
            out["node NotReady"] = self.node_not_ready
        return out

    def later(self, after: float) -> None:
        """Undo the round's fault after ``after`` seconds (under-the-feet changes)."""
        time.sleep(after)
        while self.undo:
            with contextlib.suppress(Exception):
                self.undo.pop()()

    def kill_random(self) -> None:
        time.sleep(self.rng.uniform(0.5, 4.0))
        for p in self.sched.alive()[:1]:
            p.kill()

    def crash_at(self, spec: str, when: str) -> None:
        verb, res = spec.split(":")
        self.sched.stop_all()
        self.sched.start(crash_at=f"{verb}:{res}:{self.rng.randint(1, 6)}:{when}")

    def move(self, when: str) -> None:
        """A move for efficiency with the scheduler killed at its ask to drain (the only pod
        patch it makes): nobody may wait (every worker not Running goes) and devices free
        under the workers taking turns (every worker alone on its claim goes, or one shared
        claim's where all are shared), so a worker on a shared claim (every worker here is
        movable) is moved to devices of its own once they stay free 5 s."""
        deadline = time.monotonic() + MOVE_WAIT  # the round's new workers placed first
        while time.monotonic() < deadline and any(
                (w.get("status") or {}).get("phase") not in ("Running", "Pending")
                for w in self.api.workers()):
            time.sleep(1)
        self.sched.stop_all()
        workers = [w for w in self.api.workers() if not w["metadata"].get("deletionTimestamp")]
        on: dict[str, list[str]] = defaultdict(list)  # claim -> its Running workers
        for w in workers:
            status = w.get("status") or {}
            if status.get("phase") == "Running" and status.get("claimName"):
                on[str(status["claimName"])].append(w["metadata"]["name"])
        shared = [names for names in on.values() if len(names) > 1]
        # Keep the shared claims (a worker on one is due to move), but the last one whole
        # where every claim is shared (its devices are what frees): the rest goes.
        keep = {n for names in (shared[:-1] if len(shared) == len(on) else shared)
                for n in names}
        for w in workers:
            if w["metadata"]["name"] not in keep:
                self.api.delete_worker(w["metadata"]["name"])
        proc = self.sched.start(crash_at=f"patch:pods:1:{when}", moves=True)
        # The move is due 5 s after the devices free, decided within 1.25 s of that.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(MOVE_WAIT)
        reached = proc.poll() == -signal.SIGKILL
        print(f"  the move's crash point was {'reached' if reached else 'not reached'} "
              "(a plain replica takes over)", flush=True)
        self.sched.stop_all()  # moves stay off in the rounds after this one

    def restart_component(self, name: str) -> None:
        run = Path(os.environ["CLUSTER_RUN_DIR"])
        pid = int((run / f"{name}.pid").read_text())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        env = dict(line.split(b"=", 1) for line in
                   Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in line)
        os.kill(pid, signal.SIGKILL)
        time.sleep(self.rng.uniform(2.0, 5.0))
        logs = run.parent / "logs" / f"{name}.log"
        with open(logs, "ab") as log:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=log,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        (run / f"{name}.pid").write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                self.api.core.list_namespace(_request_timeout=3)
                return
            time.sleep(1)

    def leader_signal(self, sig: int) -> None:
        self.sched.ensure(2)
        time.sleep(3)
        leader = self.sched.leader()
        if leader is not None:
            leader.send_signal(sig)

    def leader_pause(self) -> None:
        self.sched.ensure(2)
        time.sleep(3)
        leader = self.sched.leader()
        if leader is None:
            return
        leader.send_signal(signal.SIGSTOP)
        time.sleep(20)  # past the lease: the standby takes over and places workers
        leader.send_signal(signal.SIGCONT)

    def _pick(self, items: list[Obj]) -> Obj | None:
        return self.rng.choice(items) if items else None

    def delete_pod(self) -> None:
        pod = self._pick([p for p in self.api.pods()
                          if p["metadata"]["name"].startswith(pod_name(""))])
        if pod is not None:
            with contextlib.suppress(KubeError):
                self.api.delete(PODS, pod["metadata"]["name"])

    def delete_claim(self) -> None:
        claim = self._pick(self.api.claims())
        if claim is None:
            return
        with contextlib.suppress(KubeError):
            self.api.delete(CLAIMS, claim["metadata"]["name"])
        # Its workers keep running on it; an operator would delete their pods next.
        time.sleep(3)
        for pod in self.api.pods():
            if inv.pod_claim(pod) == claim["metadata"]["name"]:
                with contextlib.suppress(KubeError):
                    self.api.delete(PODS, pod["metadata"]["name"])

    def disable_node(self) -> None:
        node = self.rng.choice(self.nodes)
        self.api.label_node(node, {NODE_ENABLED: "false"})
        self.undo.append(lambda: self.api.label_node(node, {NODE_ENABLED: "true"}))

    def lower_cap(self) -> None:
        node = self.rng.choice(self.nodes)
        self.api.label_node(node, {NODE_MAX_WORKERS: "1"})
        self.undo.append(lambda: self.api.label_node(node, {NODE_MAX_WORKERS: str(MAXW)}))

    def delete_slice(self) -> None:
        slices = self.api.list(SLICES)
        ours = [s for s in slices if (s.get("spec") or {}).get("nodeName") in self.nodes]
        item = self._pick(ours)
        if item is not None:
            with contextlib.suppress(KubeError):
                self.api.delete(SLICES, item["metadata"]["name"])

    def _busiest_spare(self) -> tuple[str, list[Obj]]:
        """The spare node holding the most workers (a fault there tells the most)."""
        assert self.spare is not None
        workers = self.api.workers()
        held = {n: [w for w in workers if (w.get("status") or {}).get("nodeName") == n]
                for n in self.spare.played()}
        name = max(sorted(held), key=lambda n: len(held[n]))
        return name, held[name]

    def lose_node(self) -> None:
        """A cloud takes a machine: its kubelet stops, its Node object is deleted. A fresh
        node joins once the round's workers have been checked (``after_round``)."""
        assert self.spare is not None
        name, held = self._busiest_spare()
        self.spare.silence(name)
        with contextlib.suppress(KubeError):
            self.api.delete(NODES, name)
        lost_at = time.monotonic()
        print(f"  lost node {name} with {len(held)} workers", flush=True)
        self.after_round.append(functools.partial(self._moved_report, name, held, lost_at))
        self.after_round.append(self.spare.add)

    def _moved_report(self, node: str, held: list[Obj], lost_at: float) -> None:
        """Each worker of the lost node Running elsewhere, or Pending with a reason, within
        the bound: how long until then."""
        uids = {w["metadata"]["uid"] for w in held}
        deadline = lost_at + MOVE_BOUND
        while True:
            now = [w for w in self.api.workers() if w["metadata"]["uid"] in uids]
            running = [w for w in now if (w.get("status") or {}).get("phase") == "Running"
                       and w["status"].get("nodeName") != node]
            waiting = [w for w in now if (w.get("status") or {}).get("phase") == "Pending"
                       and node in str(w["status"].get("reason") or "")]
            if len(running) == len(now) or time.monotonic() > deadline:
                break
            time.sleep(1)
        took = time.monotonic() - lost_at
        print(f"  {len(running)}/{len(now)} workers of {node} Running again elsewhere, "
              f"{len(waiting)} waiting naming it, {took:.1f}s after the loss", flush=True)
        for w in now:
            if w not in running and w not in waiting:
                self.found.append(inv.Violation(
                    "stranded", w["metadata"]["uid"],
                    f"worker {w['metadata']['name']} of lost node {node} neither Running "
                    f"again nor waiting naming it after {MOVE_BOUND:.0f}s: "
                    f"{(w.get('status') or {}).get('reason')}"))

    def node_not_ready(self) -> None:
        """A kubelet goes silent until the node controller marks its node not ready; the
        workers there must say so (and nothing of theirs may be deleted); then it
        comes back."""
        assert self.spare is not None
        name, held = self._busiest_spare()
        self.spare.silence(name)
        # Listed once its kubelet is silent: a pod already being deleted, or finished,
        # may still go (its kubelet finished that deletion as it went silent; the API
        # server removes a finished pod at once), so only the pods alive and not being
        # deleted at that moment must stay.
        pods = {p["metadata"]["uid"]: p["metadata"]["name"] for p in self.api.pods()
                if (p.get("spec") or {}).get("nodeName") == name
                and not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            node = self.api.get(NODES, name)
            if node is None or inv.not_ready(node):
                break
            time.sleep(2)
        print(f"  node {name} not ready, {len(held)} workers and {len(pods)} pods on it",
              flush=True)
        time.sleep(min(MOVE_BOUND, 30.0))  # long enough for its workers to say so
        saying = [w for w in self.api.workers()
                  if str((w.get("status") or {}).get("reason") or "").startswith("NodeNotReady")]
        left = {p["metadata"]["uid"] for p in self.api.pods()}
        print(f"  {len(saying)} workers say NodeNotReady; {len(set(pods) - left)} of its "
              "pods deleted meanwhile", flush=True)
        for uid in set(pods) - left:
            self.found.append(inv.Violation("forced", uid, f"pod {pods[uid]} on not-ready "
                                            f"node {name} went while the node was down"))
        self.spare.resume(name)

    def template(self, remove: bool) -> None:
        cm = self.api.get(CONFIGMAPS, TEMPLATE)
        if cm is None:
            return
        saved = dict(cm.get("data") or {})
        patch: dict[str, str | None] = {"pod.yaml": None} if remove else {
            "pod.yaml": "apiVersion: v1\nkind: Pod\nspec: {nodeName: somewhere}\n"}
        self.api.patch(CONFIGMAPS, TEMPLATE, {"data": patch})
        self.delete_pod()  # a pod gone while the template is unusable
        self.undo.append(lambda: self.api.patch(CONFIGMAPS, TEMPLATE, {"data": saved}))


# --------------------------------------------------------------------- runs


def converge(checker: Checker, sched: Scheduler, replicas: int, timeout: float,
             started: float) -> tuple[float | None, list[inv.Violation]]:
    """Seconds from ``started`` (the fault) until the fleet is settled and sound."""
    last: list[inv.Violation] = []
    while time.monotonic() - started < timeout:
        sched.ensure(replicas)
        with contextlib.suppress(Exception):
            last = checker.settled()
            if not last:
                return time.monotonic() - started, []
        time.sleep(2)
    return None, last


def explain_unsettled(world: inv.World, left: list[inv.Violation]) -> list[str]:
    """For each worker a round left unsettled, what its pod and node say in the world the
    verdict was read from: whether kube-scheduler shelved the pod, the kubelet never
    started it, or the controller never noticed that it runs (a failed round must say
    which)."""
    lines = []
    for name in sorted({v.key for v in left if v.kind == "final"}):
        pod = world.pods.get(pod_name(name))
        if pod is None:
            lines.append(f"    {name}: no pod")
            continue
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        scheduled: Obj = next((c for c in status.get("conditions") or []
                               if c.get("type") == "PodScheduled"), {})
        node = spec.get("nodeName") or ""
        ready = "" if not node else (
            " (node gone)" if node not in world.nodes else
            " (node not ready)" if inv.not_ready(world.nodes[node]) else " (node ready)")
        lines.append(f"    {name}: pod {pod['metadata']['name']} {status.get('phase')} on "
                     f"{node or 'no node'}{ready}; PodScheduled {scheduled.get('status')} "
                     f"{scheduled.get('reason') or ''} "
                     f"{scheduled.get('message') or ''}".rstrip())
    return lines


def run() -> int:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 30))
    rounds = int(os.environ.get("CHAOS_ROUNDS", "8"))
    # Longer than the controller's slowest heal, its wedge grace (120 s by default): a pod
    # kube-scheduler shelves (an event it missed while the API server restarted, say) is
    # placed again only after that grace, and the round must leave the time to see it.
    settle = float(os.environ.get("CHAOS_SETTLE", "180"))
    state = Path(os.environ.get("OPENRL_STATE_DIR", "."))
    rng = random.Random(seed)
    api = Api()
    nodes = [n for n in os.environ.get("OPENRL_NODES", "").split(",") if n]
    devices = int(os.environ.get("GPUS") or 0) or 8 * len(nodes)
    seats = devices * MAXW
    target = int(os.environ.get("CHAOS_WORKERS") or min(200, 3 * seats))
    grace = seconds(os.environ.get("OPEN_RL_RECLAIM_GRACE", ""), 120)
    interval = seconds(os.environ.get("OPEN_RL_RECLAIM_INTERVAL", ""), 60)
    print(f"chaos: seed {seed}, {rounds} rounds, {target} workers over {seats} seats "
          f"({devices} devices x {MAXW}), nodes {','.join(nodes)}", flush=True)
    # The sweep's grace and interval, a lease takeover (15s) and slack.
    checker = Checker(api, older_than=grace + interval + 45)
    spare = SpareNodes()
    spare.start(int(os.environ.get("CHAOS_SPARE_NODES", "2")))
    checker.start()
    sched = Scheduler(state)
    faults = Faults(api, sched, rng, nodes, spare)
    menu = faults.menu()
    wanted = [w for w in os.environ.get("CHAOS_FAULTS", "").split(",") if w.strip()]
    order = [f for f in menu if not wanted or any(w.strip() in f for w in wanted)]
    rng.shuffle(order)
    table: dict[str, dict[str, Any]] = defaultdict(lambda: {"n": 0, "transient": 0, "final": 0,
                                                            "converge": []})
    serial = 0
    sched.ensure(1)
    try:
        for index in range(rounds):
            fault = order[index % len(order)]
            replicas = 2 if fault.startswith("leader") else 1
            before = set(checker.seen)
            live = [w["metadata"]["name"] for w in api.workers()
                    if not w["metadata"].get("deletionTimestamp")]
            for name in rng.sample(live, len(live) // 4):
                api.delete_worker(name)
            for _ in range(target - len(live) + len(live) // 4):
                serial += 1
                api.create_worker(f"w{serial:04d}", rng.choice(["10Gi", "50Gi"]), movable=True)
            print(f"round {index + 1}/{rounds}: {fault}", flush=True)
            injected = time.monotonic()
            menu[fault]()
            faults.later(rng.uniform(3.0, 8.0))
            took, left = converge(checker, sched, replicas, settle, injected)
            row = table[fault]
            row["n"] += 1
            new = set(checker.seen) - before
            final_keys = {(v.kind, v.key) for v in left}
            row["final"] += len(final_keys)
            row["transient"] += len(new - final_keys)
            row["converge"].append(took)
            while faults.after_round:
                with contextlib.suppress(Exception):
                    faults.after_round.pop(0)()
            checker._record(faults.found)
            row["final"] += len(faults.found)
            faults.found.clear()
            for v in left:
                print(f"  not converged: {v.kind}: {v.detail}", flush=True)
            if left:
                with contextlib.suppress(Exception), checker.lock:
                    for line in explain_unsettled(checker.world, left):
                        print(line, flush=True)
            print(f"  converged in {took:.1f}s" if took is not None else "  did not converge",
                  flush=True)
            sched.ensure(1)
    finally:
        teardown(api, sched, checker)
        spare.close()
    print()
    print(f"{'fault':32} {'times':>5} {'transient':>9} {'final':>5} {'converge max':>12}")
    failed = False
    for fault in order:
        if fault not in table:
            continue
        row = table[fault]
        times = [t for t in row["converge"] if t is not None]
        worst = "never" if len(times) < len(row["converge"]) else f"{max(times):.1f}s"
        failed |= bool(row["transient"] or row["final"]) or worst == "never"
        print(f"{fault:32} {row['n']:>5} {row['transient']:>9} {row['final']:>5} {worst:>12}")
    total = sum(r["n"] for r in table.values())
    verdict = "FAIL" if failed or checker.seen else "PASS"
    print(f"chaos: {verdict} (seed {seed}, {total} faults in {rounds} rounds, "
          f"{len(checker.seen)} violations, {checker.events} watch events checked, "
          f"{checker.conflicts} device(s) kube-scheduler gave two claims)")
    return 1 if verdict == "FAIL" else 0


def teardown(api: Api, sched: Scheduler, checker: Checker) -> None:
    sched.ensure(1)
    for w in api.workers():
        api.delete_worker(w["metadata"]["name"])
    deadline = time.monotonic() + 180
    while (api.workers() or api.claims()) and time.monotonic() < deadline:
        sched.ensure(1)  # the sweep takes the claims once they are past their grace
        time.sleep(2)
    sched.stop_all()
    checker.stop.set()


# ---------------------------------------------------------------- self-test


def self_test() -> int:
    """Plant each kind of violation as admin; every kind must be caught."""
    api = Api()
    nodes = [n for n in os.environ.get("OPENRL_NODES", "").split(",") if n]
    node = nodes[0]
    checker = Checker(api, older_than=0)
    world = checker.world
    api.create_worker("planted-a", "10Gi")
    api.create_worker("planted-b", "10Gi")
    a = next(w for w in api.workers() if w["metadata"]["name"] == "planted-a")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "planted-claim", "labels": {LABEL_MANAGED: "true"},
                          "annotations": {SIZED_FOR: node}},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": os.environ.get("OPENRL_DRIVER", "gpu.example.com"),
                 "count": 1}}]}}}
    api.create(CLAIMS, claim)
    uid_a = a["metadata"]["uid"]
    for i in range(MAXW + 1):  # more pods on one claim than it has seats
        api.create(PODS, {"metadata": {
            "name": f"planted-{i}", "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": KIND,
                 "name": "planted-a", "uid": uid_a}]},
            "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "none"}],
                     "resourceClaims": [{"name": "gpu",
                                         "resourceClaimName": "planted-claim"}]}})
    checker.full_read()
    with checker.lock:
        # Placed on one claim, then on another that was never deleted: moved.
        a = world.workers["planted-a"]
        a["status"] = {"phase": "Running", "claimName": "planted-claim"}
        inv.continuous(world)
        a["status"] = {"phase": "Running", "claimName": "planted-other"}
        checker._record(inv.continuous(world))
        # Two claims holding the same device; a node's parked memory overfilled.
        twin = json.loads(json.dumps(world.claims["planted-claim"]))
        twin["metadata"]["name"] = "planted-twin"
        result = {"driver": "d", "pool": node, "device": "gpu-0"}
        for c in (world.claims["planted-claim"], twin):
            c.setdefault("status", {})["allocation"] = {"devices": {"results": [result]}}
        world.claims["planted-twin"] = twin
        b = world.workers["planted-b"]
        b["spec"]["memory"] = "100Ti"
        b["status"] = {"phase": "Running", "claimName": "planted-other"}
        world.claims["planted-other"] = {**twin, "metadata": {**twin["metadata"],
                                                              "name": "planted-other"},
                                         "status": {}}
        checker._record(inv.continuous(world))
        now = dt.datetime.now(dt.UTC)
        inv.given_twice(world, now, 1)  # seen: noted, not yet a violation
        checker._record(inv.given_twice(world, now + dt.timedelta(seconds=2), 1)[1])
        # A worker gone while its pod exists; a claim nobody references; a Running lie.
        checker._record(inv.worker_gone(world, a, api.pod("planted-0")))
        world.claims["planted-lone"] = {**world.claims["planted-claim"], "metadata": {
            **world.claims["planted-claim"]["metadata"], "name": "planted-lone"}}
        world.pods.clear()
        checker._record(inv.orphans(world, dt.datetime.now(dt.UTC), 0))
        checker._record(inv.final(world))
        # A worker left Running on a node that is gone, past the bound.
        b["status"] = {"phase": "Running", "claimName": "planted-other",
                       "nodeName": "planted-gone-node"}
        now = dt.datetime.now(dt.UTC)
        inv.stranded(world, now, 1)
        checker._record(inv.stranded(world, now + dt.timedelta(seconds=2), 1))
    for i in range(MAXW + 1):
        api.delete(PODS, f"planted-{i}", grace=0)
    api.delete(CLAIMS, "planted-claim")
    for name in ("planted-a", "planted-b"):
        api.delete_worker(name)
    kinds = {"seats", "device-twice", "host-memory", "moved", "pod-outlived-worker",
             "orphan-claim", "final", "stranded"}
    caught = {kind for kind, _ in checker.seen}
    missed = sorted(kinds - caught)
    print(f"chaos self-test: {'FAIL' if missed else 'PASS'} "
          f"(caught {', '.join(sorted(caught & kinds))}"
          f"{'; missed ' + ', '.join(missed) if missed else ''})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(self_test() if os.environ.get("CHAOS_SELF_TEST") == "1" else run())
