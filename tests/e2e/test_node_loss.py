"""A node lost the way a cloud loses one, on the real control plane.

Each test plays its own corner of the cluster through ``hack/replay.py``'s
``Stage`` (its own DRA driver, namespace, fake nodes and a controller in this
process). A node is lost as a cloud loses it: its kubelet stops (the fake node
is no longer played) and its Node object is deleted (its slice goes with it).
Kubernetes then collects the node's pods; the controller places each worker of
that node again (controller/reconcile/moves.py). ``NODE_LOSS_ROUNDS`` (1) repeats the
room-left case with fresh nodes, for a longer run.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cli.scenario import Arrive, NodeSpec
from controller.store.work import SWEEP
from hack.lib import kube as testbed
from hack.replay import Stage

GiB = 1 << 30
ROUNDS = int(os.environ.get("NODE_LOSS_ROUNDS", "1"))
# Kubernetes collects a deleted node's pods after its own quarantine (40s in
# kube-controller-manager), so a move takes that long at least.
MOVE_TIMEOUT = 240.0


@pytest.fixture
def stage(cluster: Any) -> Iterator[Stage]:
    tag = f"nl{uuid.uuid4().hex[:6]}"
    played = Stage(cluster.kubeconfig, tag)
    try:
        yield played
    finally:
        played.close()


def _workers(stage: Stage) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["name"]: w for w in stage.admin.list(testbed.WORKERS)}


def _wait(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _settled(stage: Stage) -> bool:
    """Nothing but the sweep due within a second, and no write in flight."""
    controller = stage.controller
    assert controller is not None
    due = [key for key in controller.queue.due_within(1.0) if key != SWEEP]
    return not due and not controller.writer.in_flight()


def _running(stage: Stage, names: list[str]) -> dict[str, dict[str, Any]]:
    def all_running() -> dict[str, dict[str, Any]] | None:
        now = _workers(stage)
        ok = all((now.get(n, {}).get("status") or {}).get("phase") == "Running"
                 for n in names)
        return {n: now[n] for n in names} if ok else None
    return _wait(f"{names} Running", all_running, MOVE_TIMEOUT)


def _pod_uid(stage: Stage, worker: str) -> str:
    pod = stage.admin.get(testbed.PODS, f"orw-{worker}")
    return str(pod["metadata"]["uid"]) if pod else ""


def _arrive(stage: Stage, names: list[str]) -> None:
    for name in names:
        stage.arrive(Arrive(name=name, role="trainer", memory=40 * GiB))


def _lose(stage: Stage, node: str) -> float:
    """The kubelet stops and the Node object is deleted; the moment it was."""
    stage.fake.remove(node)
    return time.monotonic()


def _moves_timed(stage: Stage, lost: str, movers: list[str], started: float
                 ) -> dict[str, tuple[float, float]]:
    """Per mover: (node deleted -> pod gone, pod gone -> Running elsewhere), in s.

    The pod is gone when Kubernetes has deleted its object (or a new pod of the
    same name, another uid, already stands); the span after that is the
    controller's and the scheduler's share of a move, the span before it is
    Kubernetes' wait before collecting a deleted node's pods.
    """
    uids = {n: _pod_uid(stage, n) for n in movers}
    gone: dict[str, float] = {}
    running: dict[str, float] = {}
    deadline = started + MOVE_TIMEOUT
    while len(running) < len(movers):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: gone {gone}, Running {running}")
        for n in movers:
            if n not in gone and _pod_uid(stage, n) != uids[n]:
                gone[n] = time.monotonic()
        now = _workers(stage)
        for n in gone.keys() - running.keys():
            status = now.get(n, {}).get("status") or {}
            if status.get("phase") == "Running" and status.get("nodeName") != lost:
                running[n] = time.monotonic()
        time.sleep(0.2)
    return {n: (gone[n] - started, running[n] - gone[n]) for n in movers}


def test_lost_node_with_room_left_places_its_workers_again(stage: Stage) -> None:
    names = ["w1", "w2", "w3", "w4"]
    stage.open(tuple(NodeSpec(name=n, devices=2, device_memory=80 * GiB,
                              max_workers_per_claim=2) for n in ("a", "b")))
    for round_ in range(ROUNDS):
        if round_:
            stage.add_node(NodeSpec(name=f"r{round_}", devices=2, device_memory=80 * GiB,
                                    max_workers_per_claim=2))
        if not round_:
            _arrive(stage, names)
        placed = _running(stage, names)
        nodes = {n: placed[n]["status"]["nodeName"] for n in names}
        lost = nodes["w2"]
        movers = sorted(n for n in names if nodes[n] == lost)
        stayers = sorted(set(names) - set(movers))
        pods = {n: _pod_uid(stage, n) for n in stayers}
        started = _lose(stage, lost)
        spans = _moves_timed(stage, lost, movers, started)

        def reason_named(lost: str = lost, movers: list[str] = movers) -> bool:
            now = _workers(stage)
            return all(lost in ((now[n].get("status") or {}).get("reason") or "")
                       or (now[n].get("status") or {}).get("moves") for n in movers)
        _wait("the lost node named", reason_named, MOVE_TIMEOUT)
        after = _running(stage, names)
        took = time.monotonic() - started
        print(f"round {round_}: node {lost} deleted -> {movers} Running again in {took:.1f}s")
        for n in movers:
            print(f"  {n}: node deleted -> pod gone {spans[n][0]:.1f} s, "
                  f"pod gone -> Running {spans[n][1]:.1f} s (the scheduler's share)")
        print(f"  median: node deleted -> pod gone "
              f"{statistics.median(s[0] for s in spans.values()):.1f} s, pod gone -> "
              f"Running {statistics.median(s[1] for s in spans.values()):.1f} s")
        for n in movers:
            status = after[n]["status"]
            assert status["nodeName"] != lost
            assert status["moves"][-1]["node"] == lost
            assert status["moves"][-1]["reason"] == "NodeLost"
        for n in stayers:
            assert after[n]["status"]["nodeName"] == nodes[n]
            assert not after[n]["status"].get("moves"), after[n]["status"]
            assert _pod_uid(stage, n) == pods[n], f"{n} restarted"
        assert not any((w.get("status") or {}).get("phase") == "Failed"
                       for w in _workers(stage).values())


def test_lost_node_without_room_leaves_its_workers_waiting_never_failed(
        stage: Stage) -> None:
    stage.open(tuple(NodeSpec(name=n, devices=1, device_memory=80 * GiB)
                     for n in ("a", "b")))
    _arrive(stage, ["w1", "w2"])
    placed = _running(stage, ["w1", "w2"])
    lost = placed["w2"]["status"]["nodeName"]
    mover = "w2" if lost == placed["w2"]["status"]["nodeName"] else "w1"
    stayer = "w1" if mover == "w2" else "w2"
    pod = _pod_uid(stage, stayer)
    started = _lose(stage, lost)

    def waiting() -> dict[str, Any] | None:
        status = _workers(stage)[mover].get("status") or {}
        gone = stage.admin.get(testbed.PODS, f"orw-{mover}") is None
        ok = (status.get("phase") == "Pending" and lost in (status.get("reason") or "")
              and "to be placed again" in (status.get("reason") or "") and gone)
        return status if ok else None
    status = _wait("the lost node's worker waiting", waiting, MOVE_TIMEOUT)
    print(f"node {lost} deleted -> {mover} Pending in {time.monotonic() - started:.1f}s: "
          f"{status['reason']}")
    # Instead of a pause: the controller has finished with the loss (nothing of it queued,
    # no write in flight), so what the workers say now is what it decided.
    _wait("the controller to finish with the lost node", lambda: _settled(stage), 60)
    now = _workers(stage)
    assert all((w.get("status") or {}).get("phase") != "Failed" for w in now.values())
    assert now[mover]["status"]["phase"] == "Pending"
    assert now[stayer]["status"]["phase"] == "Running"
    assert _pod_uid(stage, stayer) == pod
