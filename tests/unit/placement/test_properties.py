"""Invariants of the decision and the simulator, on random fleets and event sequences.

The fast, indexed implementation is checked against ``tests/reference.py``,
a plain transcription of the rules.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from placement import (
    Booking,
    Claim,
    Fleet,
    JoinClaim,
    NewClaim,
    Node,
    Policy,
    Request,
    Role,
    Strategy,
    Wait,
    decide,
)
from placement.simulator import pending
from placement.simulator.simulation import Simulation
from tests.reference import (
    RefClaim,
    ReferenceSimulation,
    accepts,
    free_in_group,
    needed,
    pod_slot_free,
    reference_decide,
    reference_join,
)
from tests.strategies import Event, events, exclusive, node_lists, owners, policies, requests


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[Node], list[Claim]]:
    """Any fleet the cluster might report, including odd ones (empty or over-full claims)."""
    node_list = draw(node_lists())
    claims = []
    for i in range(draw(st.integers(min_value=0, max_value=8))):
        node = draw(st.sampled_from(node_list))
        workers = draw(st.integers(min_value=0, max_value=3))
        bookings = tuple(
            Booking(f"c{i}-w{j}", draw(owners) or "o",
                    draw(st.integers(min_value=1, max_value=100 << 30)), draw(exclusive),
                    draw(st.sampled_from([None, *Role])))  # None: a reader that cannot tell
            for j in range(workers)
        )
        claims.append(Claim(
            name=f"claim-{draw(st.integers(min_value=0, max_value=99)):02d}-{i}",
            node=node.name,
            devices=draw(st.integers(min_value=1, max_value=node.devices)),
            allocated=draw(st.booleans()),
            bookings=bookings,
            # On a mixed node: one of its groups, or none named (its smallest).
            device_memory=draw(st.sampled_from([0, *(m for _, m in node.device_groups)])),
        ))
    return node_list, claims


def as_reference(claims: list[Claim]) -> list[RefClaim]:
    return [
        RefClaim(c.name, c.node, c.devices, c.allocated,
                 {b.worker: b.parked_memory for b in c.bookings},
                 {b.worker: b.owner for b in c.bookings},
                 {b.worker for b in c.bookings if b.exclusive}, c.device_memory,
                 {b.worker: b.role for b in c.bookings})
        for c in claims
    ]


def to_expected(decision: NewClaim | JoinClaim | None) -> object:
    return decision if decision is not None else "wait"


def to_actual(decision: object) -> object:
    return "wait" if isinstance(decision, Wait) else decision


@settings(max_examples=400)
@given(fleets(), requests(), policies)
def test_decide_agrees_with_the_plain_transcription(fleet: tuple, request: Request,
                                                    policy: Policy) -> None:
    node_list, claims = fleet
    expected = reference_decide(request, node_list, as_reference(claims), policy)
    assert to_actual(decide(request, Fleet(node_list, claims), policy)) == to_expected(expected)


@settings(max_examples=200)
@given(fleets(), requests(), policies, st.randoms(use_true_random=False))
def test_permuted_inputs_give_identical_decisions(
    fleet: tuple, request: Request, policy: Policy, rnd: object
) -> None:
    node_list, claims = fleet
    first = decide(request, Fleet(node_list, claims), policy)
    shuffled_nodes, shuffled_claims = list(node_list), list(claims)
    rnd.shuffle(shuffled_nodes)  # type: ignore[attr-defined]
    rnd.shuffle(shuffled_claims)  # type: ignore[attr-defined]
    assert decide(request, Fleet(shuffled_nodes, shuffled_claims), policy) == first


@settings(max_examples=300)
@given(fleets(), requests(), policies)
def test_the_policy_chooses_a_seat_never_whether_there_is_one(
    fleet: tuple, request: Request, policy: Policy
) -> None:
    node_list, claims = fleet
    waits = isinstance(decide(request, Fleet(node_list, claims), policy), Wait)
    assert waits == isinstance(decide(request, Fleet(node_list, claims)), Wait)


@settings(max_examples=300)
@given(fleets(), requests())
def test_an_exclusive_worker_never_joins_and_no_one_joins_its_claim(
    fleet: tuple, request: Request
) -> None:
    node_list, claims = fleet
    for policy in (Policy(Strategy.SPREAD), Policy(Strategy.BINPACK)):
        decision = decide(request, Fleet(node_list, claims), policy)
        if isinstance(decision, JoinClaim):
            assert not request.exclusive
            joined = next(c for c in claims if c.name == decision.claim)
            assert not joined.exclusive


@settings(max_examples=300)
@given(fleets(), requests(), policies)
def test_a_worker_naming_its_devices_gets_exactly_them_and_never_joins(
    fleet: tuple, request: Request, policy: Policy
) -> None:
    node_list, claims = fleet
    decision = decide(request, Fleet(node_list, claims), policy)
    if request.devices is None:
        return
    assert not isinstance(decision, JoinClaim)
    if isinstance(decision, NewClaim):
        assert decision.devices == request.devices
        share = -(-request.memory // request.devices)
        assert share <= decision.memory_floor <= decision.memory_ceiling


@settings(max_examples=300)
@given(fleets(), requests(), st.booleans())
def test_binpack_cuts_a_claim_only_when_none_can_seat_the_worker(
    fleet: tuple, request: Request, affinity: bool
) -> None:
    node_list, claims = fleet
    policy = Policy(Strategy.BINPACK, affinity)
    decision = decide(request, Fleet(node_list, claims), policy)
    if isinstance(decision, NewClaim) and request.joins:
        assert reference_join(request, node_list, as_reference(claims), policy) is None


@settings(max_examples=300)
@given(fleets(), requests())
def test_no_join_while_a_free_pool_exists(fleet: tuple, request: Request) -> None:
    node_list, claims = fleet
    decision = decide(request, Fleet(node_list, claims))  # spread, the default
    if isinstance(decision, JoinClaim):
        reference = as_reference(claims)
        for node in node_list:
            # A node at its pod limit has no free pool, whatever its devices.
            if accepts(node, request.role) and pod_slot_free(node, reference):
                for _count, size in node.groups:  # nor has any of its device groups
                    assert free_in_group(node, size, reference) < needed(request.memory, size)


def pick(present: list[str], index: int) -> str | None:
    return present[index % len(present)] if present else None


def apply(sim: Simulation, ref: ReferenceSimulation | None, event: Event) -> None:
    present = list(sim.workers())
    if event.kind == "arrive":
        assert event.request is not None
        sim.arrive(event.request)
        if ref:
            ref.arrive(event.request)
    elif event.kind == "add_node":
        assert event.node is not None
        sim.add_node(event.node)
        if ref:
            ref.add_node(event.node)
    elif event.kind == "leave":
        worker = pick(present, event.index)
        if worker is not None:
            sim.leave(worker)
            if ref:
                ref.leave(worker)
    elif event.kind == "allocate":
        waiting = [w for w in present if sim.state(w).phase == "Placing"]
        worker = pick(waiting, event.index)
        if worker is not None:
            sim.allocate(worker)
            if ref:
                ref.allocate(worker)


def books(sim: Simulation) -> dict[str, tuple[str, str, int, bool, int] | None]:
    out: dict[str, tuple[str, str, int, bool, int] | None] = {}
    for worker in sim.workers():
        name = sim.fleet.claim_of(worker)
        claim = sim.fleet.claim(name) if name else None
        out[worker] = None if claim is None else (
            claim.name, claim.node, claim.devices, claim.allocated, claim.device_memory)
    return out


@settings(max_examples=300, deadline=None)
@given(node_lists(), events(), st.booleans(), policies)
def test_simulation_agrees_with_the_plain_transcription(
    node_list: list[Node], script: list[Event], deferred: bool, policy: Policy
) -> None:
    sim = Simulation(tuple(node_list), deferred_allocation=deferred, policy=policy)
    ref = ReferenceSimulation(node_list, deferred=deferred, policy=policy)
    for event in script:
        apply(sim, ref, event)
        assert books(sim) == ref.books()


@settings(max_examples=150, deadline=None)
@given(node_lists(max_size=3), events(max_size=120), st.booleans(), policies)
def test_many_pending_classes_agree_with_the_plain_transcription(
    node_list: list[Node], script: list[Event], deferred: bool, policy: Policy
) -> None:
    # Blocks of two classes in the pending index, and long scripts: many classes
    # wait at once, so the index's splits and its tree are on the path.
    with mock.patch.object(pending, "BLOCK", 2):
        sim = Simulation(tuple(node_list), deferred_allocation=deferred, policy=policy)
        ref = ReferenceSimulation(node_list, deferred=deferred, policy=policy)
        for event in script:
            apply(sim, ref, event)
            assert books(sim) == ref.books()


def checked(claim: Claim) -> Claim:
    """The claim built through ``Claim`` and ``Booking``'s checks, bookings in reverse
    (the snapshot builds it without them, its bookings already in order)."""
    return Claim(claim.name, claim.node, claim.devices, allocated=claim.allocated,
                 device_memory=claim.device_memory,
                 bookings=tuple(Booking(b.worker, b.owner, b.parked_memory, b.exclusive,
                                        b.role) for b in reversed(claim.bookings)))


def check_books(sim: Simulation) -> None:
    fleet = sim.fleet
    for claim in fleet.claims:  # the books' snapshots are the checked values
        assert claim == checked(claim) and claim.bookings == checked(claim).bookings
        assert all(type(b.role) is Role for b in claim.bookings)
    for node in fleet.nodes:
        on_node = [c for c in fleet.claims if c.node == node.name]
        # No device promised twice: allocated and reserved claims fit the node together.
        assert sum(c.devices for c in on_node) <= node.devices
        # No claim above its node's seats.
        assert all(len(c.bookings) <= node.max_workers_per_claim for c in on_node)
        # Every worker that may be parked at once fits in host memory: on a node that
        # may share, every worker on it, alone on its claim or not.
        parks = sum(sum(b.parked_memory for b in c.bookings) for c in on_node
                    if node.max_workers_per_claim > 1 or (c.parked_memory and c.allocated))
        assert fleet.parked_load(node.name) == parks
        if node.host_memory is not None:
            assert parks <= node.host_memory
        # No group's device promised twice either, on a mixed node.
        for count, size in node.groups:
            assert sum(c.devices for c in on_node
                       if node.group_memory(c.device_memory) == size) <= count
        for claim in on_node:
            assert all(-(-b.parked_memory // claim.devices)
                       <= node.group_memory(claim.device_memory) for b in claim.bookings)
            assert claim.allocated or len(claim.bookings) == 1
            # An exclusive worker is alone on its claim.
            assert not claim.exclusive or len(claim.bookings) == 1


@settings(max_examples=300, deadline=None)
@given(node_lists(), events(), st.booleans(), policies)
def test_books_hold_after_every_event(
    node_list: list[Node], script: list[Event], deferred: bool, policy: Policy
) -> None:
    sim = Simulation(tuple(node_list), deferred_allocation=deferred, policy=policy)
    for event in script:
        apply(sim, None, event)
        check_books(sim)


@settings(max_examples=300, deadline=None)
@given(node_lists(), events(), st.booleans())
def test_a_departure_never_moves_another_placed_worker(
    node_list: list[Node], script: list[Event], deferred: bool
) -> None:
    sim = Simulation(tuple(node_list), deferred_allocation=deferred)
    for event in script:
        before = books(sim)
        apply(sim, None, event)
        after = books(sim)
        for worker, seat in before.items():
            if seat is not None and worker in after:
                claim, node, devices, _, _ = seat
                assert after[worker] is not None
                assert after[worker][:3] == (claim, node, devices)  # type: ignore[index]


@settings(max_examples=150, deadline=None)
@given(node_lists(), events(), policies, st.randoms(use_true_random=False))
def test_node_order_does_not_change_the_outcome(
    node_list: list[Node], script: list[Event], policy: Policy, rnd: object
) -> None:
    shuffled = list(node_list)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    first = Simulation(tuple(node_list), policy=policy)
    second = Simulation(tuple(shuffled), policy=policy)
    for event in script:
        apply(first, None, event)
        apply(second, None, event)
    assert books(first) == books(second)
