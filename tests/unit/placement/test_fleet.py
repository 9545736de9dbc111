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


def test_parked_load_counts_every_worker_on_a_node_that_may_share() -> None:
    fleet = Fleet([Node("n", 8, 80 * GiB, max_workers_per_claim=2)], [
        Claim("lone", "n", 1, bookings=(seat("a", 60),)),
        Claim("pair", "n", 1, bookings=(seat("b", 30), seat("c", 20))),
        Claim("sized", "n", 1, allocated=False, bookings=(seat("e", 5),)),
    ])
    assert fleet.parked_load("n") == 115 * GiB  # the sized claim's worker will run there
    fleet.book("lone", Request("d", Role.TRAINER, 10 * GiB))
    assert fleet.parked_load("n") == 125 * GiB
    fleet.unbook("b")
    assert fleet.parked_load("n") == 95 * GiB  # c, lone again, still counts
    fleet.allocate("sized")
    assert fleet.parked_load("n") == 95 * GiB


def test_parked_load_on_a_node_that_never_shares_counts_only_shared_allocated_claims() -> None:
    # A node relabelled to one worker per claim keeps the pair the cluster shared.
    fleet = Fleet([Node("n", 8, 80 * GiB)], [
        Claim("lone", "n", 1, bookings=(seat("a", 60),)),
        Claim("pair", "n", 1, bookings=(seat("b", 30), seat("c", 20))),
        Claim("sized", "n", 2, allocated=False, bookings=(seat("d", 30), seat("e", 20))),
    ])
    assert fleet.parked_load("n") == 50 * GiB
    fleet.unbook("b")
    assert fleet.parked_load("n") == 0  # pair is lone again: c parks nothing
    fleet.allocate("sized")
    assert fleet.parked_load("n") == 50 * GiB


def test_allocation_elsewhere_moves_what_the_claim_parks() -> None:
    sharing = {"host_memory": 100 * GiB, "max_workers_per_claim": 2}
    fleet = Fleet([Node("n", 2, 80 * GiB, **sharing), Node("m", 2, 80 * GiB, **sharing)],
                  [Claim("sized", "n", 1, allocated=False, bookings=(seat("a", 60),))])
    assert (fleet.parked_load("n"), fleet.parked_load("m")) == (60 * GiB, 0)
    fleet.allocate("sized", node="m")
    assert (fleet.parked_load("n"), fleet.parked_load("m")) == (0, 60 * GiB)
    fresh = Fleet(fleet.nodes, fleet.claims)
    assert fleet.index.describe() == fresh.index.describe()


def test_a_claim_on_an_unknown_node_waits_for_that_node() -> None:
    fleet = Fleet([], [Claim("early", "late", 1, bookings=(seat("a", 10),))])
    fleet.add_node(Node("late", 2, 80 * GiB))
    assert fleet.free_devices("late") == 1


def test_release_keeps_the_claim_and_drop_returns_its_devices() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB)], [Claim("c", "n", 1, bookings=(seat("a", 10),))])
    assert fleet.unbook("a") == "c"
    assert fleet.free_devices("n") == 0
    fleet.remove_claim("c")
    assert fleet.free_devices("n") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.add_node(Node("n", 1, GiB)), "node n already exists"),
        (lambda f: f.add_claim(Claim("c", "n", 1)), "claim c already exists"),
        (lambda f: f.add_claim(Claim("d", "n", 1, bookings=(seat("a", 1),))),
         "worker a is already on claim c"),
        (lambda f: f.book("nope", Request("x", Role.TRAINER, GiB)), "unknown claim nope"),
        (lambda f: f.unbook("ghost"), "worker ghost holds no booking"),
        (lambda f: f.remove_claim("c"), "claim c still has workers: a"),
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
        fleet.allocate("c", node="elsewhere")


def test_snapshots_are_frozen_values() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB, max_workers_per_claim=2)],
                  [Claim("c", "n", 1, bookings=(seat("a", 10),))])
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
    assert fleet.parked_load("n") == 60 * GiB  # every worker: it may share
    assert decide(request, fleet) == decide(request, fresh)
    with pytest.raises(PlacementError, match="unknown node gone"):
        fleet.remove_node("gone")


def trainer(name: str, memory_gib: int) -> Request:
    return Request(name, Role.TRAINER, memory_gib * GiB)


def books() -> Fleet:
    """One 2 x 24Gi trainer node with 40Gi of host memory and two seats per claim."""
    node = Node("n", 2, 24 * GiB, 40 * GiB, frozenset({Role.TRAINER}), max_workers_per_claim=2)
    return Fleet([node], [Claim("c", "n", 1, bookings=(seat("a", 20),)),
                          Claim("pending", "n", 1, allocated=False)])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.cut("x", "ghost", 1, trainer("x", 1)), "unknown node ghost"),
        (lambda f: f.cut("x", "n", 1, Request("x", Role.SAMPLER, GiB)),
         "node n does not accept sampler workers"),
        (lambda f: f.cut("x", "n", 2, trainer("x", 1)), "node n has 0 free device"),
        (lambda f: f.cut("c", "n", 1, trainer("x", 1)), "claim c already exists"),
        (lambda f: f.cut("x", "n", 1.0, trainer("x", 1)), "devices must be an int >= 1"),
        (lambda f: f.cut("x", "n", 1, trainer("a", 1)), "worker a is already on claim c"),
        (lambda f: f.book("pending", trainer("x", 1)),
         "cannot join claim pending: the claim is allocated does not hold"),
        (lambda f: f.book("c", Request("x", Role.SAMPLER, GiB)),
         "worker x cannot join claim c: its node accepts the role does not hold"),
        (lambda f: f.book("c", trainer("x", 25)),
         "the worker fits the claim's devices by itself does not hold"),
        (lambda f: f.book("c", trainer("x", 24)),
         "the node's host memory holds the parked load after the join does not hold"),
        (lambda f: f.add_claim(Claim("wide", "n", 3)), "claim wide holds 3 devices, node n has 2"),
        (lambda f: f.allocate("pending", node="ghost"), "unknown node ghost"),
        (lambda f: f.remove_node("ghost"), "unknown node ghost"),
        (lambda f: f.replace_node(Node("ghost", 1, GiB)), "unknown node ghost"),
    ],
)
def test_a_change_that_would_break_the_books_is_refused_and_changes_nothing(
        change: object, message: str) -> None:
    fleet = books()
    before = (fleet.nodes, fleet.claims, fleet.free_devices("n"), fleet.parked_load("n"))
    with pytest.raises(PlacementError, match=message):
        change(fleet)  # type: ignore[operator]
    assert (fleet.nodes, fleet.claims, fleet.free_devices("n"), fleet.parked_load("n")) == before


def test_a_join_that_fits_is_carried_out() -> None:
    fleet = books()
    fleet.book("c", trainer("b", 24 - 20 + 10))  # parks 20 + 14 = 34Gi of 40Gi
    assert fleet.parked_load("n") == 34 * GiB
    with pytest.raises(PlacementError, match="the claim has a free seat does not hold"):
        fleet.book("c", trainer("x", 1))


def test_an_observed_booking_is_recorded_even_past_the_limits() -> None:
    fleet = books()
    fleet.book("c", trainer("b", 24), observed=True)
    fleet.book("c", trainer("d", 24), observed=True)  # a third worker on a two-seat claim
    assert fleet.parked_load("n") == 68 * GiB  # over the host's 40Gi: the cluster says so
    with pytest.raises(PlacementError, match="worker b is already on claim c"):
        fleet.book("pending", trainer("b", 1), observed=True)


def test_a_removed_node_takes_its_claims_out_of_sight_until_it_is_back() -> None:
    fleet = books()
    fleet.remove_node("n")
    assert fleet.node("n") is None
    assert fleet.claim("c") is not None and fleet.claim_of("a") == "c"
    fleet.add_node(Node("n", 2, 24 * GiB, 40 * GiB, max_workers_per_claim=2))
    assert fleet.free_devices("n") == 0


def test_replacing_a_node_keeps_its_claims_and_applies_its_new_policy() -> None:
    fleet = books()
    fleet.replace_node(Node("n", 2, 24 * GiB, 40 * GiB, frozenset({Role.SAMPLER}), 2))
    with pytest.raises(PlacementError, match="its node accepts the role does not hold"):
        fleet.book("c", trainer("b", 1))
    fleet.book("c", Request("s", Role.SAMPLER, GiB))
    assert fleet.claim("c").workers == ("a", "s")  # type: ignore[union-attr]


def test_a_node_too_narrow_for_its_claims_is_refused_and_the_old_one_kept() -> None:
    fleet = Fleet([Node("n", 2, 24 * GiB)], [Claim("wide", "n", 2)])
    with pytest.raises(PlacementError, match="claim wide holds 2 devices, node n has 1"):
        fleet.replace_node(Node("n", 1, 24 * GiB))
    assert fleet.node("n") == Node("n", 2, 24 * GiB)
    fleet.remove_claim("wide")
    assert fleet.free_devices("n") == 2


def test_a_snapshot_is_kept_until_its_claim_changes() -> None:
    claim = Claim("c", "n", 1, bookings=(seat("b", 10), seat("a", 10)))
    fleet = Fleet([Node("n", 2, 80 * GiB, max_workers_per_claim=3)], [claim])
    assert fleet.claim("c") is fleet.claim("c")
    assert fleet.claim("c") == claim
    fleet.book("c", Request("d", Role.TRAINER, GiB))
    assert fleet.claim("c").workers == ("a", "b", "d")  # type: ignore[union-attr]
    fleet.unbook("a")
    assert fleet.claim("c").workers == ("b", "d")  # type: ignore[union-attr]
    fleet.cut("e", "n", 1, Request("e", Role.TRAINER, GiB), allocated=False)
    fleet.allocate("e")
    assert fleet.claim("e").allocated  # type: ignore[union-attr]


def test_a_node_at_its_pod_limit_refuses_a_new_claim_and_a_join_by_name() -> None:
    fleet = Fleet([Node("n", 4, 80 * GiB, max_workers_per_claim=4, pods=2)])
    fleet.cut("c", "n", 1, trainer("a", 10))
    fleet.book("c", trainer("b", 10))
    assert (fleet.workers_on_node("n"), fleet.has_pod_slot("n")) == (2, False)
    with pytest.raises(PlacementError, match=r"claim d: node n is at its pod limit \(2 pods\)"):
        fleet.cut("d", "n", 1, trainer("d", 10))
    with pytest.raises(PlacementError, match="its node has a pod slot free does not hold"):
        fleet.book("c", trainer("e", 10))
    fleet.unbook("b")  # a pod slot again: the join is allowed once more
    fleet.book("c", trainer("e", 10))


def test_workers_follow_their_claim_to_the_node_dra_allocates_it_on() -> None:
    fleet = Fleet([Node("a", 1, 80 * GiB, pods=1), Node("b", 1, 80 * GiB, pods=1)])
    fleet.cut("c", "a", 1, trainer("w", 10), allocated=False)
    assert fleet.has_pod_slot("b")
    fleet.allocate("c", node="b")
    assert (fleet.has_pod_slot("a"), fleet.has_pod_slot("b")) == (True, False)
