"""The books of a live openrl-place fleet, for hack/smoke.sh and hack/stress.sh.

The shell scripts bring the cluster and the scheduler up; this file does the
part that is clearer in Python: create and delete OpenRLWorkers, wait for the
fleet to settle, read workers, pods, ResourceClaims and ResourceSlices back,
print them as tables and check them against what the scheduler promises.

It talks to the API server as whoever KUBECONFIG names (the admin, in local
mode): it plays the caller that creates workers and the auditor that reads
the result, never the scheduler.

    books inventory                    devices of the driver on the enabled nodes
    books label | unlabel              set / restore the nodes' openrl.io labels
    books controller-env RENDERED      the scheduler's settings from a rendered overlay
    books preflight                    clean up an aborted run's workers, refuse a busy namespace
    books smoke                        the smoke run (devices + 1 workers: spread, then share)
    books stress                       the churn run (workers churned over the seats, books checked)
    books teardown                     delete this run's workers, wait for an empty fleet
    books force-clean                  strip finalizers, delete leftovers (no scheduler)
    books show                         print the books
    books scheduler-metrics FILE       summarize the scheduler's /metrics text

Run as ``python -m hack.lib.books COMMAND`` from the repository root (the
"books" of the lines above). Settings come from the environment (see
hack/lib/common.sh, which exports them).
Exit status: 0 on PASS, 1 on FAIL, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shlex
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from hack.lib import kube
from hack.lib.kube import CLAIMS, NODES, PODS, SLICES, WORKERS, KubeError, Obj, wait_for
from hack.lib.names import (
    API_VERSION,
    FINALIZER,
    KIND,
    LABEL_WORKER,
    MANAGED_SELECTOR,
    NODE_ENABLED,
    NODE_MAX_WORKERS,
    RUN_LABEL,
)
from placement.quantity import QuantityError, format_gib, parse_quantity

OUR_LABELS = (NODE_ENABLED, NODE_MAX_WORKERS)


class SetupError(Exception):
    """The run cannot start: bad settings or a cluster not in the expected state."""


# ------------------------------------------------------------------ settings


@dataclasses.dataclass(frozen=True)
class Settings:
    namespace: str
    driver: str
    nodes: list[str]
    state_dir: Path
    role: str
    memory: str
    owner: str
    maxw: int
    timeout: float
    teardown_timeout: float

    @staticmethod
    def from_env() -> Settings:
        env = os.environ
        nodes = [n for n in env.get("OPENRL_NODES", "").split(",") if n]
        return Settings(
            namespace=env.get("OPENRL_NAMESPACE", "openrl"),
            driver=env.get("OPENRL_DRIVER") or env.get("OPENRL_DEVICE_CLASS", "gpu.example.com"),
            nodes=nodes,
            state_dir=Path(env.get("OPENRL_STATE_DIR", ".")),
            role=env.get("ROLE", "trainer"),
            memory=env.get("MEMORY", "50Gi"),
            owner=env.get("OWNER", ""),
            maxw=int(env.get("MAXW", "2")),
            timeout=float(env.get("SETTLE_TIMEOUT", "300")),
            teardown_timeout=float(env.get("TEARDOWN_TIMEOUT", "180")),
        )


# ---------------------------------------------------------------- quantities

def quantity(value: str | int) -> int:
    """Bytes in a Kubernetes quantity, by the product's own parser."""
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise SetupError(f"not a memory quantity: {e}") from e


# ------------------------------------------------------------------- cluster


class Cluster:
    """The run's view of the cluster: its workers, pods and claims, the driver's slices."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.kube = kube.Kube.connect(namespace=settings.namespace)

    @property
    def requests(self) -> int:
        return self.kube.requests

    def workers(self, selector: str | None = None) -> list[Obj]:
        return self.kube.list(WORKERS, selector=selector)

    def claims(self) -> list[Obj]:
        return self.kube.list(CLAIMS, selector=MANAGED_SELECTOR)

    def pods(self) -> list[Obj]:
        return self.kube.list(PODS, selector=MANAGED_SELECTOR)

    def slices(self) -> list[Obj]:
        return [s for s in self.kube.list(SLICES) if s["spec"].get("driver") == self.s.driver]

    def nodes(self) -> list[Obj]:
        return self.kube.list(NODES)

    def create_worker(self, name: str, run: str) -> None:
        spec: Obj = {
            "role": self.s.role,
            "modelId": "e2e/placeholder-model",
            "memory": self.s.memory,
        }
        if self.s.owner:
            spec["ownerId"] = self.s.owner
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "labels": {RUN_LABEL: run}},
            "spec": spec,
        }
        if self.kube.create(WORKERS, body) is None:
            raise SetupError(f"OpenRLWorker {name} already exists")

    def delete_worker(self, name: str) -> None:
        self.kube.delete(WORKERS, name)

    def snapshot(self, selector: str | None = None) -> Books:
        return Books(self.workers(selector), self.claims(), self.pods(), self.s)


# --------------------------------------------------------------------- books


def name_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def claim_node(claim: Obj) -> str:
    """Where the claim is allocated: the allocation's node selector, else the pool."""
    alloc = claim.get("status", {}).get("allocation") or {}
    for term in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms", []):
        for expr in term.get("matchFields", []) + term.get("matchExpressions", []):
            if expr.get("key") in ("metadata.name", "kubernetes.io/hostname") and expr.get(
                "values"
            ):
                return str(expr["values"][0])
    pools = {r.get("pool") for r in alloc.get("devices", {}).get("results", [])}
    return str(pools.pop()) if len(pools) == 1 else ""


def claim_results(claim: Obj) -> list[Obj]:
    alloc = claim.get("status", {}).get("allocation") or {}
    return list(alloc.get("devices", {}).get("results", []))


class Books:
    """One consistent-enough reading of the fleet: workers, claims, pods."""

    def __init__(self, workers: list[Obj], claims: list[Obj], pods: list[Obj], s: Settings) -> None:
        self.s = s
        self.all_workers = sorted(workers, key=name_of)
        self.live = [w for w in self.all_workers if not terminating(w)]
        self.claims = sorted(claims, key=name_of)
        self.live_claims = [c for c in self.claims if not terminating(c)]
        self.pods = {name_of(p): p for p in pods}

    def status(self, w: Obj) -> Obj:
        st = w.get("status") or {}
        assert isinstance(st, dict)
        return st

    def phase(self, w: Obj) -> str:
        return str(self.status(w).get("phase") or "-")

    def phases(self) -> Counter[str]:
        return Counter(self.phase(w) for w in self.live)

    def by_claim(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for w in self.all_workers:
            claim = self.status(w).get("claimName")
            if claim:
                out[claim].append(name_of(w))
        return out

    def summary(self) -> str:
        ph = self.phases()
        parts = [f"{k}={ph[k]}" for k in ("Running", "Placing", "Pending", "Failed", "-") if ph[k]]
        gone = len(self.all_workers) - len(self.live)
        if gone:
            parts.append(f"terminating={gone}")
        parts.append(f"claims={len(self.live_claims)}")
        if len(self.claims) != len(self.live_claims):
            parts.append(f"terminating-claims={len(self.claims) - len(self.live_claims)}")
        parts.append(f"pods={len(self.pods)}")
        return f"live={len(self.live)} " + " ".join(parts)

    def print(self, out: Any = sys.stdout, pending_detail: bool = True) -> None:
        rows = []
        for w in self.all_workers:
            st = self.status(w)
            rows.append(
                [
                    name_of(w) + (" (deleting)" if terminating(w) else ""),
                    w["spec"].get("role", ""),
                    self.phase(w),
                    str(st.get("deviceCount") or ""),
                    str(st.get("memoryPerDevice") or ""),
                    st.get("claimName") or "",
                    st.get("nodeName") or "",
                    st.get("reason") or "",
                ]
            )
        if not pending_detail:
            # Many identical waits: one line per distinct reason instead.
            waiting = [r for r in rows if r[2] == "Pending"]
            rows = [r for r in rows if r[2] != "Pending"]
        print(f"workers ({len(self.live)} live):", file=out)
        table(["WORKER", "ROLE", "PHASE", "GPUS", "MEMEACH", "CLAIM", "NODE", "REASON"], rows, out)
        if not pending_detail and waiting:
            print(f"pending ({len(waiting)}):", file=out)
            for reason, n in sorted(Counter(r[7] for r in waiting).items()):
                print(f"  {n} x {reason or '(no reason)'}", file=out)
        members = self.by_claim()
        crow = []
        for c in self.claims:
            name = name_of(c)
            devices = (
                ",".join(f"{r.get('pool')}/{r.get('device')}" for r in claim_results(c))
                or "(unallocated)"
            )
            reserved = ",".join(
                r.get("name", "?") for r in c.get("status", {}).get("reservedFor", [])
            )
            crow.append(
                [
                    name + (" (deleting)" if terminating(c) else ""),
                    claim_node(c) or "-",
                    devices,
                    ",".join(members.get(name, [])) or "-",
                    reserved or "-",
                ]
            )
        print(f"claims ({len(self.live_claims)}):", file=out)
        table(["CLAIM", "NODE", "DEVICES", "WORKERS", "RESERVED FOR"], crow, out)


def table(header: list[str], rows: list[list[str]], out: Any) -> None:
    if not rows:
        print("  (none)", file=out)
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for r in [header, *rows]:
        print("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip(), file=out)


# ------------------------------------------------------------------ inventory


@dataclasses.dataclass(frozen=True)
class Inventory:
    devices: dict[str, int]  # node -> devices of the driver
    device_memory: dict[str, int]  # node -> smallest device memory

    @property
    def gpus(self) -> int:
        return sum(self.devices.values())


def inventory(cl: Cluster) -> Inventory:
    """The driver's devices on the selected nodes, latest complete pool generations."""
    pools: dict[str, list[Obj]] = defaultdict(list)
    for sl in cl.slices():
        pools[sl["spec"]["pool"]["name"]].append(sl)
    devices: dict[str, int] = Counter()
    memory: dict[str, int] = {}
    for slices in pools.values():
        gen = max(s["spec"]["pool"]["generation"] for s in slices)
        current = [s for s in slices if s["spec"]["pool"]["generation"] == gen]
        if len(current) != current[0]["spec"]["pool"].get("resourceSliceCount", 1):
            continue  # incomplete generation
        for s in current:
            node = s["spec"].get("nodeName")
            if not node or node not in cl.s.nodes:
                continue
            for dev in s["spec"].get("devices", []):
                cap = (dev.get("capacity") or {}).get("memory")
                if not cap:
                    continue
                devices[node] += 1
                size = quantity(cap["value"])
                memory[node] = min(memory.get(node, size), size)
    return Inventory(dict(devices), memory)


def check_hardware(cl: Cluster, want_gpus: int | None) -> Inventory:
    """The run's arithmetic assumes single-device workers on exactly GPUS devices."""
    if not cl.s.nodes:
        raise SetupError("no nodes selected (OPENRL_NODES is empty)")
    inv = inventory(cl)
    missing = [n for n in cl.s.nodes if not inv.devices.get(n)]
    if missing:
        raise SetupError(
            f"no {cl.s.driver} devices with a memory capacity published for {','.join(missing)}"
        )
    if want_gpus is not None and want_gpus != inv.gpus:
        raise SetupError(
            f"GPUS={want_gpus} but the selected nodes publish {inv.gpus} {cl.s.driver} devices"
            " (leave GPUS unset to use them all, or select nodes with OPENRL_NODES)"
        )
    mem = quantity(cl.s.memory)
    too_big = {n: m for n, m in inv.device_memory.items() if mem > m}
    if too_big:
        raise SetupError(
            f"MEMORY={cl.s.memory} does not fit one device on "
            + ", ".join(f"{n} ({format_gib(m)})" for n, m in sorted(too_big.items()))
            + "; these runs count one device per worker"
        )
    return inv


# ------------------------------------------------------------------ labeling


def label_nodes(cl: Cluster) -> None:
    """Opt the selected nodes in, remembering what their labels were."""
    saved_path = cl.s.state_dir / "node-labels.json"
    saved: dict[str, dict[str, str | None]] = {}
    if saved_path.exists():  # a second label call keeps the first originals
        saved = json.loads(saved_path.read_text())
    for node in cl.s.nodes:
        before = cl.kube.label_node(node, {NODE_ENABLED: "true", NODE_MAX_WORKERS: str(cl.s.maxw)})
        if before is None:
            raise SetupError(f"node {node} does not exist")
        saved.setdefault(node, before)
    saved_path.write_text(json.dumps(saved, indent=1))
    print(f"labelled {','.join(cl.s.nodes)}: {NODE_ENABLED}=true {NODE_MAX_WORKERS}={cl.s.maxw}")


def unlabel_nodes(cl: Cluster) -> None:
    saved_path = cl.s.state_dir / "node-labels.json"
    if not saved_path.exists():
        return
    saved: dict[str, dict[str, str | None]] = json.loads(saved_path.read_text())
    for node, labels in saved.items():
        cl.kube.label_node(node, labels)  # None removes; a node gone has nothing to restore
    saved_path.unlink()
    print(f"restored the openrl.io labels of {','.join(saved)}")


# ---------------------------------------------------------- scheduler config


def controller_env(rendered: Path) -> str:
    """Shell assignments for the scheduler's env and args, read from the overlay.

    Literal env values are taken as they are; OPEN_RL_NAMESPACE and
    OPEN_RL_SERVICE_ACCOUNT (downward-API values in the Deployment) become the
    Deployment's namespace and ServiceAccount. The
    --http-address argument is dropped: the local process picks its own port.
    """
    docs = [d for d in yaml.safe_load_all(rendered.read_text()) if d]
    deps = [d for d in docs if d["kind"] == "Deployment" and name_of(d) == "open-rl-scheduler"]
    if len(deps) != 1:
        raise SetupError(f"{rendered}: want one Deployment open-rl-scheduler, found {len(deps)}")
    dep = deps[0]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    lines = []
    for e in container.get("env", []):
        if "value" in e:
            lines.append(f"export {e['name']}={shlex.quote(str(e['value']))}")
        elif e["name"] == "OPEN_RL_NAMESPACE":
            lines.append(f"export OPEN_RL_NAMESPACE={shlex.quote(dep['metadata']['namespace'])}")
        elif e["name"] == "OPEN_RL_SERVICE_ACCOUNT":
            account = dep["spec"]["template"]["spec"].get("serviceAccountName", "default")
            lines.append(f"export OPEN_RL_SERVICE_ACCOUNT={shlex.quote(account)}")
    args = [a for a in container.get("args", []) if not a.startswith("--http-address")]
    lines.append("CONTROLLER_ARGS=(" + " ".join(shlex.quote(a) for a in args) + ")")
    return "\n".join(lines)


# ------------------------------------------------------------------- waiting


def selector(run: str) -> str:
    return f"{RUN_LABEL}={run}"


def teardown(cl: Cluster, run: str | None, timeout: float) -> list[str]:
    """Delete the run's workers and wait until no worker, worker pod or managed claim is left.

    Returns what is still there on timeout (empty when clean).
    """
    for w in cl.workers(selector(run) if run else RUN_LABEL):
        cl.delete_worker(name_of(w))

    def poll() -> tuple[bool, str]:
        b = cl.snapshot()
        left = len(b.all_workers), len(b.pods), len(b.claims)
        return left == (0, 0, 0), f"workers={left[0]} pods={left[1]} claims={left[2]}"

    done, took, detail = wait_for("an empty fleet (workers, pods, claims)", timeout, poll)
    if done:
        print(f"teardown: no workers, worker pods or managed claims left after {took:.1f}s")
        return []
    return [f"teardown left {detail} after {took:.0f}s"]


def force_clean(cl: Cluster) -> None:
    """Leftovers of this script's runs, removed without the scheduler's help."""
    ours = cl.workers(RUN_LABEL)
    claims = set()
    for w in ours:
        claims.add((w.get("status") or {}).get("claimName"))
        if FINALIZER in (w["metadata"].get("finalizers") or []):
            cl.kube.patch(WORKERS, name_of(w), {"metadata": {"finalizers": None}})
        cl.delete_worker(name_of(w))
    names = {name_of(w) for w in ours}
    for p in cl.pods():
        if p["metadata"].get("labels", {}).get(LABEL_WORKER) in names:
            cl.kube.delete(PODS, name_of(p), grace=0)
    for c in cl.claims():
        if name_of(c) in claims:
            cl.kube.delete(CLAIMS, name_of(c))
    print(f"force-clean: removed {len(ours)} workers and their pods and claims")


def preflight(cl: Cluster) -> None:
    """Tear down an aborted run's workers; refuse to run beside anyone else's."""
    leftovers = cl.workers(RUN_LABEL)
    if leftovers:
        print(f"preflight: {len(leftovers)} workers left by an earlier run; tearing them down")
        problems = teardown(cl, None, cl.s.teardown_timeout)
        if problems:
            raise SetupError("; ".join(problems))
    others = [name_of(w) for w in cl.workers()]
    if others:
        raise SetupError(
            f"namespace {cl.s.namespace} already has OpenRLWorkers ({', '.join(others[:5])}...):"
            " the run counts every claim on the enabled nodes, so it needs them idle"
        )
    busy = [name_of(c) for c in cl.claims()]
    if busy:
        raise SetupError(
            f"managed claims already exist ({', '.join(busy[:5])}); wait for the sweep"
        )


# ---------------------------------------------------------------------- smoke


def check_allocations(cl: Cluster, b: Books, claim_names: Iterable[str]) -> list[str]:
    """Every named claim allocated by the driver, reserved for its workers' pods."""
    problems = []
    claims = {name_of(c): c for c in b.claims}
    members = b.by_claim()
    seen_devices: dict[tuple[str, str], str] = {}
    for name in sorted(claim_names):
        c = claims.get(name)
        if c is None:
            problems.append(f"claim {name} does not exist")
            continue
        results = claim_results(c)
        if not results:
            problems.append(f"claim {name} is not allocated")
            continue
        drivers = {r.get("driver") for r in results}
        if drivers != {cl.s.driver}:
            problems.append(
                f"claim {name} allocated by {sorted(map(str, drivers))}, not {cl.s.driver}"
            )
        for r in results:
            key = (str(r.get("pool")), str(r.get("device")))
            if key in seen_devices:
                problems.append(f"device {key} allocated to {name} and {seen_devices[key]}")
            seen_devices[key] = name
        reserved = {r.get("name") for r in c.get("status", {}).get("reservedFor", [])}
        node = claim_node(c)
        for worker in members.get(name, []):
            w = next(x for x in b.all_workers if name_of(x) == worker)
            pod = b.status(w).get("podName")
            if pod not in reserved:
                problems.append(f"claim {name} is not reserved for {worker}'s pod {pod}")
            p = b.pods.get(pod or "")
            if p is None:
                problems.append(f"worker {worker} has no pod {pod}")
                continue
            if p["spec"].get("nodeName") != node:
                problems.append(
                    f"pod {pod} runs on {p['spec'].get('nodeName')}, claim {name} on {node}"
                )
            if b.status(w).get("nodeName") != node:
                problems.append(
                    f"worker {worker} reports node {b.status(w).get('nodeName')}, claim says {node}"
                )
    return problems


def run_smoke(cl: Cluster, gpus_env: int | None) -> int:
    inv = check_hardware(cl, gpus_env)
    gpus = inv.gpus
    n = gpus + 1
    run = "smoke"
    print(
        f"smoke: {n} {cl.s.role} workers of {cl.s.memory} on {gpus} x {cl.s.driver} devices"
        f" ({', '.join(f'{k}: {v}' for k, v in sorted(inv.devices.items()))}),"
        f" {NODE_MAX_WORKERS}={cl.s.maxw}",
        flush=True,
    )
    for i in range(1, n + 1):
        cl.create_worker(f"smoke-{i:02d}", run)

    def poll() -> tuple[bool, str]:
        b = cl.snapshot(selector(run))
        ph = b.phases()
        return ph["Running"] == n or ph["Failed"] > 0, b.summary()

    _, took, _ = wait_for(f"{n} workers Running", cl.s.timeout, poll)
    b = cl.snapshot(selector(run))
    print(f"\nbooks after {took:.1f}s:")
    b.print()
    problems = []
    ph = b.phases()
    if ph["Running"] != n:
        problems.append(f"{ph['Running']} of {n} workers Running ({b.summary()})")
    for w in b.live:
        if b.phase(w) != "Running":
            problems.append(f"{name_of(w)} is {b.phase(w)}: {b.status(w).get('reason')}")
    claims = {str(b.status(w)["claimName"]) for w in b.live if b.status(w).get("claimName")}
    if len(claims) != gpus:
        problems.append(
            f"workers hold {len(claims)} distinct claims, want {gpus} (spread, then share)"
        )
    sizes = Counter(len(v) for k, v in b.by_claim().items() if k in claims)
    if max(sizes, default=0) > cl.s.maxw:
        problems.append(f"a claim holds more than {cl.s.maxw} workers: {dict(sizes)}")
    if len(b.live_claims) != len(claims):
        extra = sorted({name_of(c) for c in b.live_claims} - claims)
        problems.append(f"managed claims no worker holds: {extra}")
    problems += check_allocations(cl, b, claims)
    print(
        f"\nsmoke: {ph['Running']} of {n} workers Running after {took:.1f}s;"
        f" {len(claims)} distinct claims for {gpus} devices"
        f" (claims by worker count: {dict(sorted(sizes.items()))})"
    )
    problems += teardown(cl, run, cl.s.teardown_timeout)
    return verdict("smoke", problems)


def verdict(what: str, problems: list[str]) -> int:
    """Report the checks; the calling script prints the run's PASS/FAIL line."""
    if problems:
        print(f"\n{what} checks: {len(problems)} failed")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"\n{what} checks: all held")
    return 0


# --------------------------------------------------------------------- stress


def book_problems(b: Books, seats: int, gpus: int) -> list[str]:
    """What stress asserts of a settled fleet."""
    problems = []
    live = len(b.live)
    ph = b.phases()
    want = min(live, seats)
    if ph["Running"] != want:
        problems.append(f"running={ph['Running']}, want min(live={live}, seats={seats})={want}")
    for w in b.live:
        p = b.phase(w)
        if p == "Failed":
            problems.append(f"{name_of(w)} Failed: {b.status(w).get('reason')}")
        elif p != "Running" and (p != "Pending" or not b.status(w).get("reason")):
            problems.append(f"{name_of(w)} is {p} with reason {b.status(w).get('reason')!r}")
    if len(b.live_claims) > gpus:
        problems.append(f"{len(b.live_claims)} claims exceed {gpus} GPUs")
    return problems


def run_stress(cl: Cluster, gpus_env: int | None) -> int:
    env = os.environ
    workers = int(env.get("WORKERS", "24"))
    rounds = int(env.get("ROUNDS", "5"))
    seed = int(env.get("STRESS_SEED", str(random.SystemRandom().randrange(1 << 30))))
    rng = random.Random(seed)
    inv = check_hardware(cl, gpus_env)
    gpus = inv.gpus
    seats = gpus * cl.s.maxw
    run = "stress"
    print(
        f"stress: WORKERS={workers} GPUS={gpus} MAXW={cl.s.maxw} (seats={seats}) ROUNDS={rounds}"
        f" MEMORY={cl.s.memory} ROLE={cl.s.role} STRESS_SEED={seed}",
        flush=True,
    )
    problems: list[str] = []
    serial = 0
    max_claims = 0
    settle_times: list[float] = []
    t_start = time.monotonic()
    for rnd in range(1, rounds + 1):
        b = cl.snapshot(selector(run))
        create = workers - len(b.live)
        for _ in range(create):
            serial += 1
            cl.create_worker(f"stress-{serial:03d}", run)
        print(f"\nround {rnd}: topped up {create} workers to {workers} live", flush=True)
        seen_problems: list[str] = []

        def poll() -> tuple[bool, str]:
            nonlocal max_claims, seen_problems
            b = cl.snapshot(selector(run))
            max_claims = max(max_claims, len(b.live_claims))
            seen_problems = book_problems(b, seats, gpus)
            # Settled: the books hold, and the last round's deletions are done.
            settled = not seen_problems and len(b.all_workers) == len(b.live)
            return settled, b.summary()

        done, took, _ = wait_for(f"round {rnd} to settle", cl.s.timeout, poll)
        settle_times.append(took)
        b = cl.snapshot(selector(run))
        print(f"round {rnd}: {'settled' if done else 'NOT settled'} in {took:.1f}s: {b.summary()}")
        b.print(pending_detail=False)
        if not done:
            problems += [f"round {rnd}: {p}" for p in (seen_problems or ["did not settle"])]
            break
        if max_claims > gpus:
            problems.append(f"round {rnd}: saw {max_claims} claims at once, more than {gpus} GPUs")
            break
        victims = rng.sample([name_of(w) for w in b.live], len(b.live) // 3)
        for v in victims:
            cl.delete_worker(v)
        print(f"round {rnd}: deleted {len(victims)}: {' '.join(sorted(victims))}", flush=True)

    print("\nteardown: deleting every stress worker", flush=True)
    problems += teardown(cl, run, cl.s.teardown_timeout)
    b = cl.snapshot()
    if b.all_workers or b.pods or b.claims:
        problems.append(f"after teardown: {b.summary()}")
    if settle_times:
        print(
            "\nsettle times: "
            + " ".join(f"r{i + 1}={t:.1f}s" for i, t in enumerate(settle_times))
            + f"; the first round settled in {settle_times[0]:.1f}s"
        )
    print(
        f"most claims seen at once: {max_claims} (GPUS={gpus});"
        f" total {time.monotonic() - t_start:.1f}s;"
        f" API requests by this script: {cl.requests}"
    )
    out = cl.s.state_dir / "stress-result.json"
    out.write_text(
        json.dumps(
            {
                "settle_seconds": settle_times,
                "max_claims": max_claims,
                "seed": seed,
                "problems": problems,
            }
        )
    )
    return verdict("stress", problems)


# ------------------------------------------------------------ scheduler side


def scheduler_metrics(text: str) -> str:
    """One paragraph from the scheduler's Prometheus exposition."""
    samples: dict[str, dict[str, float]] = defaultdict(dict)
    for line in text.splitlines():
        m = re.fullmatch(r"(openrl_place_[a-z_]+?)(?:\{(.*)\})? ([0-9.eE+-]+|NaN)", line)
        if m:
            samples[m.group(1)][m.group(2) or ""] = float(m.group(3))

    def total(name: str) -> int:
        return round(sum(samples.get(name, {}).values()))

    def by(name: str, label: str) -> str:
        parts = Counter[str]()
        for labels, value in samples.get(name, {}).items():
            found = re.search(rf'{label}="([^"]*)"', labels)
            parts[found.group(1) if found else "?"] += round(value)
        return ", ".join(f"{k}={v}" for k, v in sorted(parts.items()) if v)

    count = samples.get("openrl_place_reconcile_duration_seconds_count", {}).get("", 0.0)
    seconds = samples.get("openrl_place_reconcile_duration_seconds_sum", {}).get("", 0.0)
    mean = f"{1000 * seconds / count:.1f}ms" if count else "n/a"
    return (
        f"scheduler: {total('openrl_place_reconciles_total')} reconciles"
        f" ({by('openrl_place_reconciles_total', 'result')}), mean {mean};"
        f" decisions: {by('openrl_place_decisions_total', 'outcome')};"
        f" {total('openrl_place_api_requests_total')} API requests"
        f" ({by('openrl_place_api_requests_total', 'verb')})"
    )


# ----------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command",
        choices=[
            "inventory",
            "label",
            "unlabel",
            "controller-env",
            "preflight",
            "smoke",
            "stress",
            "teardown",
            "force-clean",
            "show",
            "scheduler-metrics",
        ],
    )
    parser.add_argument(
        "file",
        nargs="?",
        help="controller-env: the rendered overlay; scheduler-metrics: the /metrics text",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "scheduler-metrics":
            if not args.file:
                raise SetupError("scheduler-metrics needs the /metrics text file")
            print(scheduler_metrics(Path(args.file).read_text()))
            return 0
        if args.command == "controller-env":
            if not args.file:
                raise SetupError("controller-env needs the rendered overlay file")
            print(controller_env(Path(args.file)))
            return 0
        s = Settings.from_env()
        cl = Cluster(s)
        gpus_env = int(os.environ["GPUS"]) if os.environ.get("GPUS") else None
        match args.command:
            case "inventory":
                inv = check_hardware(cl, gpus_env)
                print(inv.gpus)
            case "label":
                label_nodes(cl)
            case "unlabel":
                unlabel_nodes(cl)
            case "preflight":
                preflight(cl)
            case "smoke":
                return run_smoke(cl, gpus_env)
            case "stress":
                return run_stress(cl, gpus_env)
            case "teardown":
                problems = teardown(cl, None, s.teardown_timeout)
                return verdict("teardown", problems) if problems else 0
            case "force-clean":
                force_clean(cl)
            case "show":
                cl.snapshot().print()
        return 0
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KubeError as e:
        print(f"error: API request failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
