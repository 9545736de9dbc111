"""The move rule's records and choices, one at a time."""

from __future__ import annotations

from placement import GiB, Node, Request, Role
from placement.fleet import Fleet
from placement.rebalance import (
    AloneSince,
    FreeSince,
    Move,
    MoveLimit,
    MoveReason,
    shape_of,
    spread_move,
)


def test_free_since_stamps_each_level_when_it_was_reached() -> None:
    free = FreeSince()
    assert free.observe("a", 1, 10.0)
    assert free.observe("a", 3, 20.0)
    assert (free.level("a", 1), free.level("a", 2), free.level("a", 3)) == (10.0, 20.0, 20.0)
    assert not free.observe("a", 2, 30.0)  # a drop forgets the level above
    assert free.level("a", 3) is None and free.level("a", 2) == 20.0
    assert free.observe("a", 3, 40.0) and free.level("a", 3) == 40.0
    assert free.oldest() == 10.0


def test_free_since_oldest_skips_nodes_that_filled_or_went() -> None:
    free = FreeSince()
    free.observe("a", 1, 1.0)
    free.observe("b", 1, 2.0)
    free.observe("a", 0, 3.0)
    assert free.oldest() == 2.0
    free.forget("b")
    assert free.oldest() is None
    free.observe("a", 2, 5.0)
    assert free.oldest() == 5.0 and dict(free.free_nodes()) == {"a": 2}


def test_alone_since_starts_once_and_ends_with_company() -> None:
    alone = AloneSince()
    assert alone.observe("n", 1, 1.0)
    assert not alone.observe("n", 1, 2.0)
    assert alone.since("n") == 1.0
    alone.observe("n", 2, 3.0)
    assert alone.since("n") is None


def test_the_move_limit_counts_moves_inside_its_window() -> None:
    limit = MoveLimit(limit=2, window=100.0, apart=0.0)
    assert limit.allows([], 0.0)
    assert not limit.allows([10.0, 50.0], 60.0)
    assert limit.allows([10.0, 50.0], 111.0)


def test_moves_for_efficiency_are_an_hour_apart() -> None:
    limit = MoveLimit()
    assert not limit.allows([100.0], 3000.0)
    assert limit.allows([100.0], 3700.0)


def _shared_fleet() -> tuple[Fleet, dict[str, Request]]:
    fleet = Fleet((Node("a", 2, 80 * GiB, max_workers_per_claim=2),))
    requests = {name: Request(name, Role.SAMPLER, 40 * GiB, movable=True)
                for name in ("w1", "w2")}
    fleet.cut("c1", "a", 1, requests["w1"])
    fleet.book("c1", requests["w2"])
    return fleet, requests


def test_spread_says_when_the_freed_devices_will_be_old_enough() -> None:
    fleet, requests = _shared_fleet()
    free = FreeSince()
    free.observe("a", fleet.free_devices("a"), 100.0)
    sharing = {(Role.SAMPLER, 40 * GiB, None): ["w1", "w2"]}
    order = {"w1": 0, "w2": 1}
    early = spread_move(fleet, sharing, requests, free, now=150.0, after=120.0,
                        may_move=lambda _: True, age=order.__getitem__)
    assert early == 220.0
    move = spread_move(fleet, sharing, requests, free, now=220.0, after=120.0,
                       may_move=lambda _: True, age=order.__getitem__)
    assert isinstance(move, Move) and move.worker == "w1" and move.round == 2
    assert move.reason is MoveReason.OWN_DEVICES and move.seat.node == "a"
    assert "1/2 of the turns" in move.describe()
    held = spread_move(fleet, sharing, requests, free, now=220.0, after=120.0,
                       may_move=lambda worker: worker != "w1", age=order.__getitem__)
    assert isinstance(held, Move) and held.worker == "w2"


def test_moves_off_never_move() -> None:
    fleet, requests = _shared_fleet()
    free = FreeSince()
    free.observe("a", 1, 0.0)
    assert spread_move(fleet, {(Role.SAMPLER, 40 * GiB, None): ["w1"]}, requests, free, now=1e6,
                       after=0.0, may_move=lambda _: True, age=lambda _: 0) is None


def test_a_worker_naming_its_device_count_moves_to_that_many_devices() -> None:
    """Two movable samplers of one role and memory share a claim of two devices, one of
    them asking exactly two: each is of its own shape, so each is offered the devices it
    would get as a newcomer (two for the one that names two, one for the other)."""
    fleet = Fleet((Node("a", 4, 80 * GiB, max_workers_per_claim=2),))
    requests = {"w1": Request("w1", Role.SAMPLER, 40 * GiB, movable=True, devices=2),
                "w2": Request("w2", Role.SAMPLER, 40 * GiB, movable=True)}
    fleet.cut("c1", "a", 2, requests["w1"])
    fleet.book("c1", requests["w2"], observed=True)
    free = FreeSince()
    free.observe("a", fleet.free_devices("a"), 0.0)
    sharing = {shape_of(requests[w]): [w] for w in ("w1", "w2")}
    assert len(sharing) == 2  # the device count is part of the shape
    widths = {}
    for mover in ("w1", "w2"):
        move = spread_move(fleet, sharing, requests, free, now=200.0, after=120.0,
                           may_move=lambda worker, m=mover: worker == m, age=lambda _: 0)
        assert isinstance(move, Move) and move.worker == mover
        widths[mover] = move.seat.devices
    assert widths == {"w1": 2, "w2": 1}
