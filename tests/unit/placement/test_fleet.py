"""The books: free devices, reservations, parked load, and the explicit changes."""

from __future__ import annotations

import pytest

from placement import Booking, Claim, Fleet, GiB, Node, PlacementError, Request, Role, decide


def seat(worker: str, memory_gib: int) -> Booking:
    return Booking(worker, worker, memory_gib * GiB)


def test_free_devices_count_allocated_and_sized_against_claims() -> None:
    fleet = Fleet([Node("n", 8, 80 * GiB)], [
        Claim("allocated", "n", 2, bookings=(seat("a", 10),)),
        Claim("sized", "n", 3, allocated=False, bookings=(seat("b", 10),)),
    ])
    assert fleet.free_devices("n") == 3


def test_parked_load_counts_only_shared_allocated_claims() -> None:
    fleet = Fleet([Node("n", 8, 80 * GiB)], [
        Claim("lone", "n", 1, bookings=(seat("a", 60),)),
        Claim("pair", "n", 1, bookings=(seat("b", 30), seat("c", 20))),
    ])
    assert fleet.parked_load("n") == 50 * GiB
    fleet.book("lone", Request("d", Role.TRAINER, 10 * GiB))
    assert fleet.parked_load("n") == 120 * GiB
    fleet.release("b")
    assert fleet.parked_load("n") == 70 * GiB  # pair is lone again: c parks nothing


def test_a_claim_on_an_unknown_node_waits_for_that_node() -> None:
    fleet = Fleet([], [Claim("early", "late", 1, bookings=(seat("a", 10),))])
    fleet.add_node(Node("late", 2, 80 * GiB))
    assert fleet.free_devices("late") == 1


def test_release_keeps_the_claim_and_drop_returns_its_devices() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB)], [Claim("c", "n", 1, bookings=(seat("a", 10),))])
    assert fleet.release("a") == "c"
    assert fleet.free_devices("n") == 0
    fleet.drop_claim("c")
    assert fleet.free_devices("n") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.add_node(Node("n", 1, GiB)), "node n already exists"),
        (lambda f: f.add_claim(Claim("c", "n", 1)), "claim c already exists"),
        (lambda f: f.add_claim(Claim("d", "n", 1, bookings=(seat("a", 1),))),
         "worker a is already on claim c"),
        (lambda f: f.book("nope", Request("x", Role.TRAINER, GiB)), "unknown claim nope"),
        (lambda f: f.release("ghost"), "worker ghost holds no booking"),
        (lambda f: f.drop_claim("c"), "claim c still has workers: a"),
        (lambda f: f.allocate("c"), "claim c is already allocated"),
    ],
)
def test_impossible_changes_are_refused_by_name(change: object, message: str) -> None:
    fleet = Fleet([Node("n", 2, 80 * GiB)], [Claim("c", "n", 1, bookings=(seat("a", 10),))])
    with pytest.raises(PlacementError, match=message):
        change(fleet)  # type: ignore[operator]


def test_allocating_onto_an_unknown_node_is_refused() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB)], [Claim("c", "n", 1, allocated=False)])
    with pytest.raises(PlacementError, match="unknown node elsewhere"):
        fleet.allocate("c", "elsewhere")


def test_snapshots_are_frozen_values() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB)], [Claim("c", "n", 1, bookings=(seat("a", 10),))])
    snapshot = fleet.claim("c")
    fleet.book("c", Request("b", Role.TRAINER, GiB))
    assert snapshot is not None and snapshot.workers == ("a",)
    assert fleet.claims[0].workers == ("a", "b")


def test_a_removed_node_hides_its_claims_until_it_returns_changed() -> None:
    fleet = Fleet([Node("n", 4, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=2),
                   Node("m", 2, 80 * GiB)],
                  [Claim("pair", "n", 1, bookings=(seat("a", 30), seat("b", 20))),
                   Claim("lone", "n", 1, bookings=(seat("c", 10),))])
    assert fleet.remove_node("n").devices == 4
    assert [node.name for node in fleet.nodes] == ["m"]
    assert fleet.claim_of("a") == "pair"  # the books keep the claims and their seats
    request = Request("d", Role.TRAINER, 10 * GiB)
    wider = Node("n", 8, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=2)
    fleet.add_node(wider)
    fresh = Fleet([wider, Node("m", 2, 80 * GiB)], fleet.claims)
    for name in ("n", "m"):
        assert fleet.free_devices(name) == fresh.free_devices(name)
        assert fleet.parked_load(name) == fresh.parked_load(name)
    assert fleet.parked_load("n") == 50 * GiB
    assert decide(request, fleet) == decide(request, fresh)
    with pytest.raises(PlacementError, match="unknown node gone"):
        fleet.remove_node("gone")
