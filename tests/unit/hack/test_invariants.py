"""hack/lib/invariants.py: a lost node's workers, a node not ready, moves, stale reservations."""

from __future__ import annotations

import datetime as dt

from hack.lib import invariants as inv

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def worker(name: str, **status: object) -> dict:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "status": status}


def test_a_worker_left_on_a_lost_node_is_caught_only_past_the_bound() -> None:
    world = inv.World(workers={"w": worker("w", phase="Running", nodeName="gone")})
    assert inv.stranded(world, T0, 60) == []
    assert inv.stranded(world, T0 + dt.timedelta(seconds=30), 60) == []
    found = inv.stranded(world, T0 + dt.timedelta(seconds=61), 60)
    assert [v.kind for v in found] == ["stranded"] and "gone" in found[0].detail
    # Placed again (Pending with a reason, then elsewhere): nothing, and forgotten.
    world.workers["w"] = worker("w", phase="Pending", reason="NodeLost: ...")
    assert inv.stranded(world, T0 + dt.timedelta(seconds=90), 60) == []
    assert world.stuck == {}


def test_a_worker_on_a_node_not_ready_must_say_so() -> None:
    node = {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "Unknown"}]}}
    assert inv.not_ready(node)
    world = inv.World(nodes={"n": node},
                      workers={"w": worker("w", phase="Running", nodeName="n")})
    inv.stranded(world, T0, 10)
    assert inv.stranded(world, T0 + dt.timedelta(seconds=11), 10)
    world.workers["w"] = worker("w", phase="Running", nodeName="n",
                                reason="NodeNotReady: node n is not ready")
    assert inv.stranded(world, T0 + dt.timedelta(seconds=20), 10) == []


def test_a_move_the_status_records_is_no_violation() -> None:
    world = inv.World()
    world.workers["w"] = worker("w", phase="Running", claimName="old")
    assert inv.continuous(world) == []
    world.workers["w"] = worker("w", phase="Running", claimName="new",
                                moves=[{"claim": "old", "reason": "NodeLost", "node": "n"}])
    assert inv.continuous(world) == []
    world.workers["w"] = worker("w", phase="Running", claimName="third")
    assert [v.kind for v in inv.continuous(world)] == ["moved"]


def test_final_catches_a_worker_still_placed_on_a_lost_node() -> None:
    world = inv.World(workers={"w": worker("w", phase="Running", nodeName="gone",
                                           claimName="c", podName="orw-w")})
    assert any("which is gone" in v.detail for v in inv.final(world))


def test_a_reservation_of_a_pod_already_gone_takes_no_seat() -> None:
    def pod(name: str) -> dict:
        return {"metadata": {"name": name, "uid": f"uid-{name}"},
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
                "status": {"phase": "Running"}}

    claim = {"metadata": {"name": "c", "labels": {"openrl.io/managed": "true"},
                          "annotations": {"openrl.io/sized-for-node": "n"}},
             "status": {"reservedFor": [{"resource": "pods", "name": n, "uid": f"uid-{n}"}
                                        for n in ("a", "b", "gone")]}}
    world = inv.World(claims={"c": claim}, max_seats={"n": 2},
                      pods={"a": pod("a"), "b": pod("b")})
    assert inv.continuous(world) == []  # the claim controller has not dropped it yet
    world.pods["gone"] = {**pod("gone"), "status": {"phase": "Succeeded"}}
    assert [v.detail for v in inv.continuous(world)] == [
        "claim c on n: 3 reservedFor entries > 2 seats"]


def test_a_claim_cut_for_a_live_worker_under_either_name_is_no_orphan() -> None:
    def claim(name: str) -> dict:
        return {"metadata": {"name": name, "creationTimestamp": "2025-12-31T00:00:00Z"}}

    # The worker is mid-move: its status still names the claim it leaves, and the one it
    # moves to (its second name) is referenced by nothing else yet.
    names = ("orw-w-uid-w", "orw-w-uid-w-2", "orw-x-uid-x-2")
    world = inv.World(workers={"w": worker("w", phase="Running", claimName="old")},
                      claims={n: claim(n) for n in names})
    assert inv.orphans(world, T0, 60) == []
    later = inv.orphans(world, T0 + dt.timedelta(seconds=61), 60)
    assert [v.key for v in later] == ["orw-x-uid-x-2"]  # no live worker x: an orphan


def test_a_device_in_two_claims_is_noted_then_caught_only_past_the_bound() -> None:
    """kube-scheduler may give a device twice (a lost answer); the controller must end it."""
    def claim(name: str) -> dict:
        return {"metadata": {"name": name, "labels": {inv.LABEL_MANAGED: "true"}},
                "status": {"allocation": {"devices": {"results": [
                    {"driver": "d", "pool": "n", "device": "gpu-0"}]}}}}

    world = inv.World(claims={"a": claim("a"), "b": claim("b")})
    assert inv.continuous(world) == []  # not at every instant: Kubernetes' own doing
    noted, lasting = inv.given_twice(world, T0, 90)
    assert [v.detail for v in noted] == ["device d/n/gpu-0 in claims a and b"] and not lasting
    assert inv.given_twice(world, T0 + dt.timedelta(seconds=60), 90) == ([], [])
    noted, lasting = inv.given_twice(world, T0 + dt.timedelta(seconds=91), 90)
    assert not noted and [v.kind for v in lasting] == ["device-twice"]
    assert [v.kind for v in inv.final(world)] == ["device-twice"]  # a round's end: never
    del world.claims["b"]  # ended: forgotten
    assert inv.given_twice(world, T0 + dt.timedelta(seconds=100), 90) == ([], [])
    assert world.doubled == {} and inv.final(world) == []
