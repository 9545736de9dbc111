"""Moves, told as arrivals and departures on the scenario's clock.

A movable worker that shares a claim moves to devices of its own once they
have stayed free long enough (spread); a movable worker alone on an
autoscaled node moves onto a seat elsewhere so the node can go (binpack).
Waiting workers always come first, and nothing moves before its time.
"""

from __future__ import annotations

from placement import GiB, Policy, Request, Role, Strategy
from placement.rebalance import MoveReason
from placement.simulator.autoscaler import AutoscaledSimulation, NodeGroup
from placement.simulator.mover import MoveSettings
from placement.simulator.simulation import Simulation
from tests.behavior.conftest import claim_of, node_of, prod_node

TWO_MINUTES = MoveSettings(120.0)


def movable(name: str, memory: int = 40 * GiB, owner: str = "") -> Request:
    return Request(name, Role.SAMPLER, memory, owner, movable=True)


def crowded() -> Simulation:
    """Three one-device nodes, four movable samplers: two of them share node c's claim."""
    sim = Simulation((prod_node("a"), prod_node("b"), prod_node("c")), moves=TWO_MINUTES)
    for name in ("s1", "s2", "s3", "s4"):
        sim.arrive(movable(name))
    return sim


def test_a_sharing_worker_moves_to_a_freed_device_once_it_stayed_free() -> None:
    sim = crowded()
    shared = claim_of(sim, "s4")
    assert shared == claim_of(sim, "s1")  # s4 found no free device and joined s1's claim
    sim.advance(60.0)
    sim.leave("s2")  # node b's device is free from one minute in
    sim.advance(170.0)
    assert sim.take_moves() == []  # 110 seconds free: not yet
    sim.advance(181.0)
    (made,) = sim.take_moves()
    assert made.at == 180.0 and made.reason is MoveReason.OWN_DEVICES
    assert made.worker == "s1"  # of two equal claim-mates, the older moves
    assert node_of(sim, "s1") == "b" and made.placed.new_claim
    assert claim_of(sim, "s4") == shared  # the other stays, alone now, on the old claim


def test_a_waiting_worker_takes_a_freed_device_before_any_move() -> None:
    sim = Simulation((prod_node("a", max_workers=1), prod_node("b", max_workers=1)),
                     moves=TWO_MINUTES)
    sim.arrive(movable("s1"))
    sim.arrive(movable("s2"))
    sim.arrive(movable("late"))  # no seat anywhere: one worker per claim
    sim.advance(10.0)
    sim.leave("s1")
    assert node_of(sim, "late") == "a"  # at once, not after two minutes
    sim.advance(600.0)
    assert sim.take_moves() == []


def test_a_worker_not_marked_movable_stays_put() -> None:
    sim = Simulation((prod_node("a"), prod_node("b"), prod_node("c")), moves=TWO_MINUTES)
    for name in ("s1", "s2", "s3", "s4"):
        sim.arrive(Request(name, Role.SAMPLER, 40 * GiB))
    sim.advance(10.0)
    sim.leave("s2")
    sim.advance(3600.0)
    assert sim.take_moves() == []


def test_the_most_contended_claim_moves_first() -> None:
    # Node a's two devices: claim-p holds p, q and r (a third of the turns each), claim-s
    # holds s and t (a half each). A device that comes and stays free goes to claim-p's.
    node = prod_node("a", max_workers=3, devices=2, host_memory=None)
    sim = Simulation((node,), moves=TWO_MINUTES)
    for name in ("p", "s", "q", "t", "r"):
        sim.arrive(movable(name))
    assert claim_of(sim, "r") == claim_of(sim, "q") == "claim-p"
    assert claim_of(sim, "t") == "claim-s"
    sim.advance(5.0)
    sim.add_node(prod_node("b"))
    sim.advance(200.0)
    (made,) = sim.take_moves()
    assert made.at == 125.0 and made.claim == "claim-p" and made.worker == "p"
    assert node_of(sim, "p") == "b"


def test_no_worker_moves_more_often_than_the_move_limit() -> None:
    sim = crowded()
    sim.advance(1.0)
    sim.leave("s2")
    sim.advance(200.0)
    assert len(sim.take_moves()) == 1
    assert sim.mover is not None and sim.mover.moved == {"s1": [121.0]}


def test_binpack_empties_a_lone_workers_node_so_its_group_can_remove_it() -> None:
    group = NodeGroup("pool", prod_node("template", max_workers=2), min=0, max=4, boot=60.0,
                      idle=300.0)
    sim = AutoscaledSimulation((), [group], policy=Policy(Strategy.BINPACK),
                               moves=TWO_MINUTES)
    sim.arrive(movable("s1"))
    sim.advance(60.0)  # pool-1 comes up for s1
    sim.arrive(movable("s2"))  # joins s1's claim (binpack)
    sim.arrive(movable("s3"))  # a second node for s3
    sim.advance(120.0)
    assert node_of(sim, "s3") == "pool-2"
    sim.leave("s2")  # a seat frees beside s1: s3 alone on pool-2 can take it
    sim.advance(400.0)
    made = sim.take_moves()
    assert [m.worker for m in made] == ["s3"] or [m.worker for m in made] == ["s1"]
    assert made[0].reason is MoveReason.EMPTIES_NODE and made[0].released
    assert claim_of(sim, "s1") == claim_of(sim, "s3")
    sim.advance(1000.0)
    removed = [c for c in sim.take_changes() if type(c).__name__ == "NodeDown"]
    assert len(removed) == 1  # the node emptied went after its idle time


def test_a_lone_worker_moves_once_a_seat_frees_elsewhere_later() -> None:
    group = NodeGroup("pool", prod_node("template", max_workers=2), min=0, max=4, boot=60.0,
                      idle=300.0)
    sim = AutoscaledSimulation((), [group], policy=Policy(Strategy.BINPACK),
                               moves=TWO_MINUTES)
    sim.arrive(movable("s1"))
    sim.advance(60.0)
    sim.arrive(movable("s2"))  # s1's claim is full at two
    sim.arrive(movable("s3"))  # so s3 gets a node of its own
    sim.advance(120.0)
    assert node_of(sim, "s3") == "pool-2"
    sim.advance(600.0)
    assert sim.take_moves() == []  # alone long enough, but no seat anywhere else
    sim.leave("s2")  # now there is one
    sim.advance(601.0)
    (made,) = sim.take_moves()
    assert made.worker == "s3" and made.at == 600.0 and node_of(sim, "s3") == "pool-1"
