"""Every ranking tie-break, the reservation rules and the reason texts, one at a time."""

from __future__ import annotations

import pytest

from placement import (
    Booking,
    Claim,
    Fleet,
    GiB,
    JoinClaim,
    NewClaim,
    Node,
    PlacementError,
    Reason,
    Request,
    Role,
    Wait,
    WaitKind,
    decide,
)

TRAINER = Role.TRAINER


def ask(memory_gib: float, role: Role = TRAINER) -> Request:
    return Request("asker", role, int(memory_gib * GiB))


def exclusive(memory_gib: int) -> Request:
    return Request("asker", TRAINER, memory_gib * GiB, exclusive=True)


def seat(worker: str, memory_gib: int) -> Booking:
    return Booking(worker, worker, memory_gib * GiB)


# -------------------------------------------------------------- spread ranking


def test_spread_prefers_fewest_devices_needed() -> None:
    fleet = Fleet([Node("aa-small", 4, 24 * GiB), Node("zz-big", 1, 80 * GiB)])
    assert decide(ask(40), fleet) == NewClaim("zz-big", 1, 40 * GiB, 80 * GiB)


def test_spread_then_prefers_the_smallest_device_that_fits() -> None:
    fleet = Fleet([Node("a-80", 1, 80 * GiB), Node("b-40", 1, 40 * GiB)])
    assert decide(ask(30), fleet) == NewClaim("b-40", 1, 30 * GiB, 40 * GiB)


def test_spread_then_packs_onto_the_node_left_with_fewest_free_devices() -> None:
    fleet = Fleet(
        [Node("a-empty", 8, 80 * GiB), Node("b-busy", 8, 80 * GiB)],
        [Claim("existing", "b-busy", 6, bookings=(seat("x", 10),))],
    )
    decision = decide(ask(10), fleet)
    assert isinstance(decision, NewClaim) and decision.node == "b-busy"


def test_spread_finally_breaks_ties_by_node_name() -> None:
    fleet = Fleet([Node("node-b", 1, 80 * GiB), Node("node-a", 1, 80 * GiB)])
    decision = decide(ask(10), fleet)
    assert isinstance(decision, NewClaim) and decision.node == "node-a"


def test_a_new_claim_is_bounded_by_the_share_and_the_device_it_was_priced_against() -> None:
    fleet = Fleet([Node("n", 4, 24 * GiB)])
    assert decide(ask(60), fleet) == NewClaim("n", 3, 20 * GiB, 24 * GiB)


def test_spread_ignores_host_memory_because_a_lone_worker_parks_nothing() -> None:
    fleet = Fleet([Node("n", 1, 80 * GiB, host_memory=1 * GiB)])
    assert isinstance(decide(ask(60), fleet), NewClaim)


# --------------------------------------------------------------- share ranking


def full_nodes(*nodes: Node) -> list[Claim]:
    """One lone-worker claim filling each node, so only sharing is left."""
    return [
        Claim(f"claim-{n.name}", n.name, n.devices, bookings=(seat(f"on-{n.name}", 10),))
        for n in nodes
    ]


def test_share_prefers_fewest_workers_then_claim_name() -> None:
    node = Node("n", 3, 80 * GiB, max_workers_per_claim=4)
    claims = [
        Claim("claim-a", "n", 1, bookings=(seat("a1", 10), seat("a2", 10))),
        Claim("claim-c", "n", 1, bookings=(seat("c1", 10),)),
        Claim("claim-b", "n", 1, bookings=(seat("b1", 10),)),
    ]
    assert decide(ask(10), Fleet([node], claims)) == JoinClaim("claim-b", "n", 1, 10 * GiB)


def test_share_only_when_no_pool_is_free() -> None:
    node = Node("n", 2, 80 * GiB, max_workers_per_claim=4)
    claims = [Claim("claim-a", "n", 1, bookings=(seat("a1", 10),))]
    assert isinstance(decide(ask(10), Fleet([node], claims)), NewClaim)


def test_a_joiner_must_fit_the_claims_devices_by_itself() -> None:
    node = Node("n", 2, 24 * GiB, max_workers_per_claim=4)
    claims = [Claim("narrow", "n", 1, bookings=(seat("a", 10),)),
              Claim("wide", "n", 1, bookings=(seat("b", 10),))]
    decision = decide(ask(30), Fleet([node], claims))
    assert isinstance(decision, Wait)
    wide = [Claim("wide", "n", 2, bookings=(seat("b", 10),))]
    assert decide(ask(30), Fleet([node], wide)) == JoinClaim("wide", "n", 2, 15 * GiB)


def test_a_claim_at_its_nodes_seat_limit_is_not_joined() -> None:
    node = Node("n", 1, 80 * GiB, max_workers_per_claim=2)
    claims = [Claim("c", "n", 1, bookings=(seat("a", 10), seat("b", 10)))]
    decision = decide(ask(10), Fleet([node], claims))
    assert isinstance(decision, Wait)
    assert "full at 2 workers" in str(decision.reason)


def test_a_lone_worker_counts_against_host_memory_on_a_node_that_may_share() -> None:
    # 94Gi host: the 60Gi lone worker is counted already (it may be joined and park at
    # any moment); a joiner of 40Gi would make 100Gi, one of 34Gi exactly 94Gi.
    node = Node("n", 1, 80 * GiB, host_memory=94 * GiB, max_workers_per_claim=4)
    claims = [Claim("c", "n", 1, bookings=(seat("a", 60),))]
    assert Fleet([node], claims).parked_load("n") == 60 * GiB
    assert isinstance(decide(ask(40), Fleet([node], claims)), Wait)
    assert isinstance(decide(ask(34), Fleet([node], claims)), JoinClaim)


def test_parked_load_counts_every_worker_on_a_node_that_may_share() -> None:
    node = Node("n", 2, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=4)
    claims = [
        Claim("c1", "n", 1, bookings=(seat("a", 30), seat("b", 30))),
        Claim("c2", "n", 1, bookings=(seat("c", 30),)),  # lone, counted all the same
    ]
    fleet = Fleet([node], claims)
    assert fleet.parked_load("n") == 90 * GiB
    # 10Gi more fits either claim: c2, where the joiner gets half the turns, not a third.
    assert decide(ask(10), fleet) == JoinClaim("c2", "n", 1, 10 * GiB)
    waits = decide(ask(20), fleet)
    assert isinstance(waits, Wait)
    assert "host memory: parking it on 2 claims" in str(waits.reason)


def test_a_new_claim_waits_for_host_memory_on_a_node_that_may_share() -> None:
    # Two devices, one free; the lone 70Gi worker leaves 30Gi of the 100Gi budget.
    node = Node("n", 2, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=2)
    fleet = Fleet([node], [Claim("c", "n", 1, bookings=(seat("a", 70),))])
    assert decide(ask(30), fleet) == NewClaim("n", 1, 30 * GiB, 80 * GiB)
    waits = decide(exclusive(40), fleet)
    assert isinstance(waits, Wait)
    assert str(waits.reason) == (
        "WaitingForCapacity: exclusive: it shares no claim and waits for devices of its "
        "own; host memory: n has the devices free but can park 30Gi more of its 100Gi, not "
        "40Gi (a node that may share claims counts every worker on it)")
    with pytest.raises(PlacementError, match="may share claims and can park"):
        fleet.cut("new", "n", 1, exclusive(40))


def test_a_node_that_never_shares_checks_no_host_memory_for_a_new_claim() -> None:
    node = Node("n", 2, 80 * GiB, host_memory=10 * GiB)
    fleet = Fleet([node], [Claim("c", "n", 1, bookings=(seat("a", 70),))])
    assert fleet.parked_load("n") == 0
    assert decide(ask(60), fleet) == NewClaim("n", 1, 60 * GiB, 80 * GiB)


def test_an_empty_allocated_claim_is_the_first_seat_under_contention() -> None:
    node = Node("n", 2, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=2)
    claims = [Claim("busy", "n", 1, bookings=(seat("a", 30),)), Claim("orphan", "n", 1)]
    assert decide(ask(30), Fleet([node], claims)) == JoinClaim("orphan", "n", 1, 30 * GiB)


# --------------------------------------------------------------- reservations


def test_an_unallocated_claim_reserves_the_pool_it_was_sized_against() -> None:
    node = Node("n", 1, 80 * GiB, max_workers_per_claim=4)
    claims = [Claim("sized", "n", 1, allocated=False, bookings=(seat("a", 10),))]
    fleet = Fleet([node], claims)
    assert fleet.free_devices("n") == 0
    decision = decide(ask(10), fleet)
    assert isinstance(decision, Wait)
    assert str(decision.reason) == (
        "WaitingForCapacity: no node has 1 free device of 80Gi for 10Gi; "
        "1 claim not yet allocated"
    )


def test_allocation_elsewhere_moves_the_reservation() -> None:
    fleet = Fleet([Node("a", 1, 80 * GiB), Node("b", 1, 80 * GiB)],
                  [Claim("c", "a", 1, allocated=False, bookings=(seat("w", 10),))])
    fleet.allocate("c", node="b")
    assert (fleet.free_devices("a"), fleet.free_devices("b")) == (1, 0)


# --------------------------------------------------------------------- reasons


def test_reason_when_no_node_accepts_the_role() -> None:
    fleet = Fleet([Node("t", 1, 80 * GiB, roles=frozenset({Role.TRAINER}))])
    decision = decide(ask(10, Role.SAMPLER), fleet)
    assert isinstance(decision, Wait)
    assert decision.reason.kind is WaitKind.NO_CAPACITY
    assert str(decision.reason) == "NoCapacity: no enabled node accepts sampler workers"


def test_reason_when_the_fleet_is_empty() -> None:
    decision = decide(ask(10), Fleet())
    assert isinstance(decision, Wait)
    assert str(decision.reason) == "NoCapacity: no enabled node accepts trainer workers"


def test_reason_when_no_node_could_ever_hold_it_names_the_need_and_the_largest_pool() -> None:
    fleet = Fleet([Node("small", 2, 24 * GiB), Node("smaller", 1, 40 * GiB)])
    decision = decide(ask(60), fleet)
    assert isinstance(decision, Wait)
    assert str(decision.reason) == (
        "NoCapacity: needs 60Gi of accelerator memory on one node; "
        "the largest trainer pool offers 2 x 24Gi"
    )


def test_reason_when_busy_with_sharing_off() -> None:
    node = Node("n", 1, 80 * GiB)
    decision = decide(ask(10), Fleet([node], full_nodes(node)))
    assert isinstance(decision, Wait)
    assert str(decision.reason) == (
        "WaitingForCapacity: no node has 1 free device of 80Gi for 10Gi; "
        "claims it fits are full at 1 worker"
    )


def test_reason_when_host_memory_blocks() -> None:
    node = Node("n", 1, 80 * GiB, host_memory=50 * GiB, max_workers_per_claim=4)
    decision = decide(ask(60), Fleet([node], full_nodes(node)))
    assert isinstance(decision, Wait)
    assert decision.reason.kind is WaitKind.WAITING_FOR_CAPACITY
    assert "host memory" in decision.reason.detail


def test_reason_counts_only_the_open_seats_it_fits_as_blocked_by_host_memory() -> None:
    roomy = Node("roomy", 3, 80 * GiB, host_memory=50 * GiB, max_workers_per_claim=4)
    narrow = Node("narrow", 2, 24 * GiB, max_workers_per_claim=4)
    claims = [Claim(f"{node.name}-{i}", node.name, 1, bookings=(seat(f"{node.name}-w{i}", 10),))
              for node in (roomy, narrow) for i in range(node.devices)]
    decision = decide(ask(60), Fleet([roomy, narrow], claims))
    assert isinstance(decision, Wait)
    assert str(decision.reason) == (
        "WaitingForCapacity: no node has 1 free device of 80Gi for 60Gi; "
        "host memory: parking it on 3 claims with a free seat would exceed the node's "
        "host memory"
    )


def test_reason_when_the_only_claims_are_too_narrow() -> None:
    node = Node("n", 2, 24 * GiB, max_workers_per_claim=4)
    claims = [Claim("a", "n", 1, bookings=(seat("a", 10),)),
              Claim("b", "n", 1, bookings=(seat("b", 10),))]
    decision = decide(ask(30), Fleet([node], claims))
    assert isinstance(decision, Wait)
    assert str(decision.reason) == (
        "WaitingForCapacity: no node has 2 free devices of 24Gi for 30Gi; "
        "no allocated claim it fits"
    )


def test_name_and_owner_never_change_the_decision() -> None:
    fleet = Fleet([Node("a", 1, 80 * GiB), Node("b", 2, 80 * GiB)])
    first = decide(Request("zzz", TRAINER, 10 * GiB, "qwen"), fleet)
    assert decide(Request("aaa", TRAINER, 10 * GiB, "llama"), fleet) == first


# ------------------------------------------------------------------- pod slots


def test_nodes_at_their_pod_limit_are_named_first_and_counted() -> None:
    fleet = Fleet(
        [Node(name, 2, 80 * GiB, host_memory=GiB, max_workers_per_claim=4, pods=1)
         for name in ("n-b", "n-a", "n-c")],
        [Claim(f"c-{name}", name, 1, bookings=(seat(f"w-{name}", 10),))
         for name in ("n-a", "n-b", "n-c")],
    )
    decision = decide(ask(10), fleet)
    # Free devices and free seats everywhere, tight host memory too: the pods block first,
    # and the claims they block are not blamed on host memory.
    assert decision == Wait(Reason(
        WaitKind.WAITING_FOR_CAPACITY,
        "n-a is at its pod limit (1 pod), and 2 other nodes it fits at theirs"))


def test_a_node_with_pod_slots_left_is_still_told_apart() -> None:
    fleet = Fleet([Node("crowded", 2, 80 * GiB, pods=0), Node("busy", 1, 80 * GiB)],
                  [Claim("c", "busy", 1, bookings=(seat("x", 10),))])
    decision = decide(ask(10), fleet)
    assert decision == Wait(Reason(
        WaitKind.WAITING_FOR_CAPACITY,
        "crowded is at its pod limit (0 pods); no other node has 1 free device of 80Gi for "
        "10Gi; claims it fits are full at 1 worker"))


# ------------------------------------------------------------ exact device counts


def exact(memory_gib: float, devices: int) -> Request:
    return Request("asker", TRAINER, int(memory_gib * GiB), devices=devices)


def test_a_worker_naming_its_devices_gets_that_many_each_bounded_below_by_its_share() -> None:
    fleet = Fleet([Node("n", 8, 80 * GiB)])
    assert decide(exact(100, 4), fleet) == NewClaim("n", 4, 25 * GiB, 80 * GiB)
    assert decide(ask(100), fleet) == NewClaim("n", 2, 50 * GiB, 80 * GiB)  # absent: as today


def test_a_named_count_passes_over_devices_too_small_for_its_share() -> None:
    # 100Gi over 2 is 50Gi: the 48Gi group is passed over although it has 2 free.
    fleet = Fleet([Node.grouped("mixed", [(4, 48 * GiB), (2, 80 * GiB)])])
    assert decide(exact(100, 2), fleet) == NewClaim("mixed", 2, 50 * GiB, 80 * GiB)
    assert decide(exact(100, 4), fleet) == NewClaim("mixed", 4, 25 * GiB, 48 * GiB)


def test_a_worker_naming_its_devices_never_joins_even_a_claim_of_that_width() -> None:
    node = Node("n", 4, 80 * GiB, max_workers_per_claim=4)
    fleet = Fleet([node], [Claim("c", "n", 4, bookings=(seat("x", 10),))])
    decision = decide(exact(100, 4), fleet)
    assert isinstance(decision, Wait) and not decision.reason.never
    assert str(decision.reason) == (
        "WaitingForCapacity: devices: 4: it joins no claim and waits for devices of its own; "
        "no node has 4 free devices of 80Gi for 100Gi")
    assert isinstance(decide(ask(100), fleet), JoinClaim)  # one that names none joins


def test_a_count_no_node_has_waits_for_ever_and_says_so() -> None:
    fleet = Fleet([Node("n", 8, 80 * GiB)])
    assert decide(exact(100, 9), fleet) == Wait(Reason(
        WaitKind.NO_CAPACITY, "devices: 9: no trainer node has 9 devices of at least 11.11Gi "
        "(100Gi over 9); the largest trainer pool offers 8 x 80Gi"))
