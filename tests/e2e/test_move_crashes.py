"""A move for efficiency, the controller killed at each of its writes: it still converges.

On the first fake GPU node (two seats per claim, every other node disabled),
workers half the node wide: two claims fill it. Each round, a movable worker
joins one of the two claims, the worker alone on the other leaves, and its
devices are free: one of the two sharing is due to move (the older, by the
rule's ranking: the claim's cutter, whose new claim then takes its second
name while the joiner keeps the claim). The controller that decides the
move is started with a crash planted (hack/crashpoint.py) at the first write
of one kind -- the new claim, the status naming the move, the ask to drain,
the old pod's delete, the old claim's booked list, the new pod -- just before
it is sent or just after its answer. Once it is dead, a plain controller
takes over, and the round ends only when:

* every worker is Running, with exactly its own pod, on the claim its status
  names, nobody Failed;
* no claim is left that no worker's status names, once the sweep has run;
* no claim lists on its booked list a worker that is not on it.

Fake nodes run no time-slicer, so the ask to drain is never answered and the
old pod goes after ``--drain-timeout`` (3 s here). ``E2E_MOVE_CRASHES=all``
plants both crashes (before and after) at every write; by default one of
the two per write, by a seeded draw.
"""
# ruff: noqa: F811

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from controller_fixtures import (  # noqa: F401
    Env,
    GpuNode,
    crashed,
    crd,
    gpu_nodes,
    node,
    orw,
    stop_process,
    wide,
)

from hack.crashpoint import launcher

ROOT = Path(__file__).resolve().parents[2]
WRITES = ("create:resourceclaims", "patch:openrlworkers/status", "patch:pods",
          "delete:pods", "patch:resourceclaims", "create:pods")
BOOKED = "openrl.io/booked"
LOG = Path(tempfile.gettempdir()) / "openrl-e2e-move-crash.log"  # the controllers' output


def crash_points() -> list[str]:
    if os.environ.get("E2E_MOVE_CRASHES") == "all":
        return [f"{w}:1:{when}" for w in WRITES for when in ("before", "after")]
    rng = random.Random(int(os.environ.get("E2E_MOVE_CRASH_SEED", "7")))
    return [f"{w}:1:{rng.choice(('before', 'after'))}" for w in WRITES]


def controller(orw: Env, crash_at: str = "", moves: bool = True) -> subprocess.Popen[bytes]:
    """The scheduler as its own process; with ``moves``, due after 4 s of free devices."""
    log = open(LOG, "ab")  # noqa: SIM115 - the process keeps it
    args = [*launcher(crash_at), f"--kubeconfig={orw.cluster.kubeconfig}",
            f"--namespace={orw.namespace}", f"--device-class={orw.cluster.driver}",
            "--retry-interval=2s", "--reclaim-interval=2s", "--reclaim-grace=5s",
            f"--rebalance-after={'4s' if moves else '0'}", "--drain-timeout=3s",
            "--no-leader-elect",
            "--http-address=", "--log-format=text"]
    return subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def running(orw: Env, name: str) -> str:
    return str(orw.wait_phase(name, "Running", timeout=90)["claimName"])


def sound(orw: Env) -> list[str]:
    """What is wrong now (nothing: the round has converged)."""
    problems = []
    workers = {w["metadata"]["name"]: w for w in orw.workers()}
    claims = orw.claims()
    named = set()
    uids = {}
    for name, w in workers.items():
        status = w.get("status") or {}
        uids[w["metadata"]["uid"]] = name
        named.add(status.get("claimName"))
        pod = orw.pod(f"orw-{name}")
        if status.get("phase") != "Running" or status.get("move"):
            problems.append(f"{name}: {status.get('phase')} {status.get('reason')}")
        elif pod is None or pod.metadata.deletion_timestamp or pod.status.phase != "Running":
            problems.append(f"{name}: its pod is not running")
        elif not any(c.resource_claim_name == status["claimName"]
                     for c in pod.spec.resource_claims or []):
            problems.append(f"{name}: its pod is not on claim {status['claimName']}")
    for cname, claim in claims.items():
        if claim["metadata"].get("deletionTimestamp"):
            problems.append(f"claim {cname} still going")
            continue
        if cname not in named:
            problems.append(f"claim {cname}: no worker's status names it")
        for uid in filter(None, ((claim["metadata"].get("annotations") or {}).get(
                BOOKED) or "").split(",")):
            holder = uids.get(uid)
            if holder is not None and (workers[holder].get("status") or {}).get(
                    "claimName") != cname:
                problems.append(f"claim {cname} lists {holder}, which is on another claim")
    return problems


def test_a_move_converges_whichever_write_the_controller_dies_at(orw: Env,
                                                                 node: GpuNode) -> None:
    size = wide(node)
    plain = controller(orw, moves=False)
    try:
        orw.create_worker("a0", size, movable=True)
        orw.create_worker("b0", size, movable=True)
        seated = {"a0": running(orw, "a0"), "b0": running(orw, "b0")}
        rounds: list[str] = []
        for i, point in enumerate(crash_points()):
            joiner = f"j{i}"
            orw.create_worker(joiner, size, movable=True)
            shared = running(orw, joiner)
            assert shared in seated.values(), f"{joiner} cut a claim of its own: {shared}"
            leaver = next(w for w, c in seated.items() if c != shared)
            if i:  # the last round's controller moves: this round's setup needs one that does not
                stop_process(plain)
                plain = controller(orw, moves=False)
            orw.delete_worker(leaver)
            orw.cluster.wait_for(lambda w=leaver: orw.worker(w) is None, timeout=60,
                                 what=f"{leaver} gone")
            stop_process(plain)  # the move is the crashing controller's
            started = time.monotonic()
            crashing = controller(orw, crash_at=point)
            crashed(crashing, point)
            plain = controller(orw)
            # Whatever the crash left, the plain controller carries the move through (or
            # makes it afresh): the round ends with each of the two on a claim of its own.
            orw.cluster.wait_for(
                lambda: not sound(orw) and len({(w.get("status") or {}).get("claimName")
                                                for w in orw.workers()}) == 2,
                timeout=90, interval=1, what=f"convergence after a crash at {point}")
            took = time.monotonic() - started
            rounds.append(f"{point} {took:.0f}s")
            seated = {w["metadata"]["name"]: (w.get("status") or {})["claimName"]
                      for w in orw.workers()}
            assert len(set(seated.values())) == len(seated) == 2, seated
        print("\nmove crashes: " + "; ".join(rounds))
    finally:
        stop_process(plain)
        orw.start()  # cleanup needs a controller to take the finalizers off
