"""What would seat a waiting worker: each story ends with one worker waiting, and asks."""

from __future__ import annotations

from unittest import mock

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from placement import Booking, Claim, Fleet, GiB, Node, PlacementError, Request, Role, remedy
from placement.decide import find_seat
from placement.remedy import changes, diagnose, smallest_change, smallest_changes
from placement.simulator.simulation import Simulation
from tests.strategies import requests
from tests.unit.placement.test_properties import fleets

TRAINER = Role.TRAINER
SAMPLER = Role.SAMPLER


def _sim(*nodes: Node) -> Simulation:
    return Simulation(nodes)


def _arrive(sim: Simulation, name: str, gib: int, role: Role = TRAINER) -> Request:
    request = Request(name, role, gib * GiB)
    sim.arrive(request)
    return request


def test_a_worker_waiting_for_a_free_device_is_told_how_many() -> None:
    sim = _sim(Node("gpu-1", 2, 80 * GiB, host_memory=100 * GiB, roles=frozenset({TRAINER})))
    _arrive(sim, "a", 60)
    _arrive(sim, "b", 60)
    late = _arrive(sim, "late", 60)
    # Sharing would need 120Gi parked: more seats would not do; a device would.
    change = smallest_change(late, sim.fleet)
    assert change is not None
    assert (change.kind, change.node, change.amount) == ("freeDevices", "gpu-1", 1)
    assert change.text == "1 more free 80Gi device on gpu-1 (a trainer node)"


def test_full_claims_suggest_one_more_seat_per_claim() -> None:
    sim = _sim(Node("gpu-7", 1, 80 * GiB, host_memory=1024 * GiB, max_workers_per_claim=2))
    _arrive(sim, "a", 30)
    _arrive(sim, "b", 30)
    late = _arrive(sim, "late", 30)
    diagnosis = diagnose(late, sim.fleet)
    assert diagnosis.reason is not None and "full at 2" in diagnosis.reason.detail
    assert diagnosis.change is not None
    assert diagnosis.change.text == "max-workers-per-claim 3 on gpu-7"
    # A label is smaller than hardware, but a free device would do too.
    assert [c.kind for c in diagnosis.alternatives] == ["maxWorkersPerClaim", "freeDevices"]
    (verdict,) = diagnosis.nodes
    assert [c.verdict for c in verdict.claims] == ["full"]
    assert "1 full" in verdict.summary


def test_host_memory_names_the_bytes_missing() -> None:
    sim = _sim(Node("gpu-2", 1, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=4))
    _arrive(sim, "a", 40)
    _arrive(sim, "b", 40)  # parks 80Gi of 100Gi
    late = _arrive(sim, "late", 32)  # 112Gi would be parked
    diagnosis = diagnose(late, sim.fleet)
    assert diagnosis.reason is not None and "host memory" in diagnosis.reason.detail
    (verdict,) = diagnosis.nodes
    assert [c.verdict for c in verdict.claims] == ["host memory"]
    assert diagnosis.change is not None
    assert diagnosis.change.text == "12Gi more host memory on gpu-2"
    assert diagnosis.change.amount == 12 * GiB


def test_no_capacity_gets_no_remedy_within_the_hardware() -> None:
    sim = _sim(Node("box", 2, 24 * GiB, host_memory=94 * GiB))
    late = _arrive(sim, "fft", 60)
    diagnosis = diagnose(late, sim.fleet)
    assert diagnosis.reason is not None and diagnosis.reason.never
    assert diagnosis.change is None
    (verdict,) = diagnosis.nodes
    assert "can never hold it" in verdict.summary


def test_a_role_label_is_offered_when_only_the_policy_hides_the_hardware() -> None:
    sim = _sim(Node("t", 1, 80 * GiB, roles=frozenset({TRAINER})))
    late = _arrive(sim, "s", 10, SAMPLER)
    change = smallest_change(late, sim.fleet)
    assert change is not None and (change.kind, change.node) == ("role", "t")
    assert "refuses sampler" in diagnose(late, sim.fleet).nodes[0].summary


def test_an_unallocated_claim_is_the_remedy_when_its_allocation_would_open_a_seat() -> None:
    sim = Simulation((Node("g", 1, 80 * GiB, max_workers_per_claim=2),),
                     deferred_allocation=True)
    _arrive(sim, "a", 30)
    late = _arrive(sim, "late", 30)
    change = smallest_change(late, sim.fleet)
    assert change is not None and change.kind == "allocation" and change.claim == "claim-a"


def test_the_caller_fleet_is_left_as_it_was() -> None:
    sim = _sim(Node("gpu-2", 1, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=4),
               Node("t", 1, 80 * GiB, roles=frozenset({SAMPLER})))
    _arrive(sim, "a", 40)
    _arrive(sim, "b", 40)
    _arrive(sim, "z", 10, SAMPLER)
    late = _arrive(sim, "late", 32)
    before = (sim.fleet.nodes, sim.fleet.claims)
    diagnose(late, sim.fleet)
    assert (sim.fleet.nodes, sim.fleet.claims) == before


def test_every_change_offered_does_seat_the_worker() -> None:
    sim = _sim(Node("gpu-2", 1, 80 * GiB, host_memory=100 * GiB, max_workers_per_claim=2),
               Node("gpu-3", 2, 80 * GiB, host_memory=100 * GiB))
    for i in range(4):
        _arrive(sim, f"w{i}", 40)
    late = _arrive(sim, "late", 40)
    change = smallest_change(late, sim.fleet)
    assert change is not None
    assert find_seat(late, sim.fleet) is None


def test_a_node_at_its_pod_limit_is_told_to_free_pods_or_raise_the_limit() -> None:
    sim = _sim(Node("gpu-0", 8, 80 * GiB, max_workers_per_claim=16, pods=3))
    for name in ("a", "b", "c"):
        _arrive(sim, name, 5)
    late = _arrive(sim, "late", 5)
    diagnosis = diagnose(late, sim.fleet)
    assert str(diagnosis.reason) == "WaitingForCapacity: gpu-0 is at its pod limit (3 pods)"
    assert diagnosis.change is not None
    assert (diagnosis.change.kind, diagnosis.change.amount) == ("podsFreed", 1)
    assert diagnosis.change.text == "1 pod freed on gpu-0 (workers leaving, or other pods gone)"
    # More devices would not help: the node runs no more pods either way.
    assert [(c.kind, c.amount) for c in diagnosis.alternatives] == [("podsFreed", 1),
                                                                     ("podLimit", 4)]
    assert diagnosis.alternatives[1].text == "a pod limit of 4 for workers on gpu-0 (now 3 pods)"
    (verdict,) = diagnosis.nodes
    assert (verdict.pods, verdict.workers) == (3, 3)
    assert verdict.summary.endswith("at its pod limit (3 pods, 3 of them workers)")
    assert {c.verdict for c in verdict.claims} == {"pod limit"}


def test_no_seat_is_suggested_past_the_256_consumers_a_claim_lists() -> None:
    sim = _sim(Node("gpu-0", 1, 80 * GiB, max_workers_per_claim=256))
    for i in range(256):
        _arrive(sim, f"w{i}", 1)
    late = _arrive(sim, "late", 1)
    diagnosis = diagnose(late, sim.fleet)
    assert [c.kind for c in diagnosis.alternatives] == ["freeDevices"]


def test_an_exclusive_worker_is_offered_devices_never_a_seat() -> None:
    sim = _sim(Node("gpu-7", 1, 80 * GiB, host_memory=1024 * GiB, max_workers_per_claim=2))
    _arrive(sim, "a", 30)
    solo = Request("solo", TRAINER, 30 * GiB, exclusive=True)
    sim.arrive(solo)
    diagnosis = diagnose(solo, sim.fleet)
    # claim-a has a free seat, but the worker runs alone: only a device seats it.
    assert [change.kind for change in diagnosis.alternatives] == ["freeDevices"]
    (node,) = diagnosis.nodes
    assert node.summary.endswith("runs alone (exclusive): waits for free devices")
    assert [claim.verdict for claim in node.claims] == ["exclusive"]


def test_no_change_opens_the_claim_of_an_exclusive_worker() -> None:
    sim = _sim(Node("gpu-7", 1, 80 * GiB, host_memory=1024 * GiB, max_workers_per_claim=2))
    sim.arrive(Request("solo", TRAINER, 30 * GiB, exclusive=True))
    late = _arrive(sim, "late", 30)
    diagnosis = diagnose(late, sim.fleet)
    assert diagnosis.reason is not None
    assert "1 claim it fits holds an exclusive worker" in diagnosis.reason.detail
    assert [change.kind for change in diagnosis.alternatives] == ["freeDevices"]
    assert diagnosis.nodes[0].claims[0].detail == "an exclusive worker is on it: no one joins it"


def test_a_worker_seated_now_is_told_where_and_why() -> None:
    sim = _sim(Node("gpu-a", 1, 80 * GiB, max_workers_per_claim=4),
               Node("gpu-b", 1, 80 * GiB, max_workers_per_claim=4))
    sim.arrive(Request("a-train", TRAINER, 10 * GiB, "alpha"))
    sim.arrive(Request("b-train", TRAINER, 10 * GiB, "beta"))
    diagnosis = diagnose(Request("b-sample", SAMPLER, 10 * GiB, "beta"), sim.fleet)
    assert diagnosis.reason is None
    assert diagnosis.seat_text == "joins claim-b-train: same owner, other role"
    alone = diagnose(Request("x", SAMPLER, 10 * GiB), sim.fleet)
    assert alone.seat_text == "joins claim-a-train: no free devices (contention)"


# A node of four 80Gi and four 48Gi devices: a claim takes all its devices from one
# group, so what a waiting worker needs is read group by group.


def _mixed(groups: tuple[tuple[int, int], ...] = ((4, 80), (4, 48)),
           seats: int = 1) -> Node:
    return Node.grouped("mixed", tuple((count, gib * GiB) for count, gib in groups),
                        host_memory=1024 * GiB, max_workers_per_claim=seats)


def test_a_worker_only_the_big_group_holds_is_told_to_wait_for_80gi_devices() -> None:
    sim = _sim(_mixed())
    _arrive(sim, "other", 150)  # two of the four 80Gi devices
    fft = _arrive(sim, "fft", 300)  # four 80Gi would hold it; four 48Gi never could
    diagnosis = diagnose(fft, sim.fleet)
    # Read as eight 48Gi devices, seven of them free, "a new claim fits" and the only
    # remedy was a ninth 48Gi device, a node that could not exist.
    assert diagnosis.change is not None
    assert (diagnosis.change.kind, diagnosis.change.amount) == ("freeDevices", 2)
    assert diagnosis.change.text == "2 more free 80Gi devices on mixed (a node for both roles)"
    (verdict,) = diagnosis.nodes
    assert verdict.summary == ("4 x 80Gi + 4 x 48Gi, 2 + 4 free; needs 4 of 80Gi; "
                               "claims: 1 too small")
    assert (verdict.needed, verdict.could_hold) == (4, True)
    assert (verdict.device_groups, verdict.free_by_group) == (((4, 48 * GiB), (4, 80 * GiB)),
                                                              (4, 2))


def test_a_claim_on_the_big_group_is_judged_by_its_own_devices() -> None:
    sim = _sim(_mixed(((1, 80), (1, 48))))
    _arrive(sim, "a", 60)  # the 80Gi device
    _arrive(sim, "b", 20)  # the 48Gi device
    late = _arrive(sim, "late", 60)
    diagnosis = diagnose(late, sim.fleet)
    # claim-a's device is 80Gi: a 60Gi joiner fits it, the claim is only full.
    claims = {claim.claim: claim.verdict for claim in diagnosis.nodes[0].claims}
    assert claims == {"claim-a": "full", "claim-b": "too small"}
    assert diagnosis.nodes[0].claims[1].detail == "60Gi per device would not fit 1 x 48Gi"
    assert diagnosis.change is not None
    assert diagnosis.change.text == "max-workers-per-claim 2 on mixed"
    assert [(c.kind, c.amount, c.text.split(" on ")[0]) for c in diagnosis.alternatives] == [
        ("maxWorkersPerClaim", 2, "max-workers-per-claim 2"),
        ("freeDevices", 1, "1 more free 80Gi device")]


def test_the_tightest_group_is_offered_first_when_either_would_do() -> None:
    sim = _sim(_mixed(((1, 80), (1, 48))))
    _arrive(sim, "big", 60)
    _arrive(sim, "small", 20)
    late = _arrive(sim, "late", 20)  # one device of either size holds it
    devices = [c for c in diagnose(late, sim.fleet).alternatives if c.kind == "freeDevices"]
    assert [c.text for c in devices] == ["1 more free 48Gi device on mixed (a node for both roles)"]


def test_no_group_of_a_mixed_node_holding_it_is_never() -> None:
    # 200Gi: three 80Gi or five 48Gi; the node has one and four. Five devices in all
    # would be five 48Gi ones, but a claim never mixes sizes.
    sim = _sim(_mixed(((1, 80), (4, 48))))
    late = _arrive(sim, "wide", 200)
    diagnosis = diagnose(late, sim.fleet)
    assert diagnosis.reason is not None and diagnosis.reason.never
    assert diagnosis.change is None
    (verdict,) = diagnosis.nodes
    assert not verdict.could_hold
    assert verdict.summary == ("1 x 80Gi + 4 x 48Gi; can never hold it: needs 3 devices of "
                               "80Gi or 5 devices of 48Gi, all of one size, on one node")


def test_a_mixed_node_names_each_group_a_worker_could_take() -> None:
    sim = _sim(_mixed())
    diagnosis = diagnose(Request("fft", TRAINER, 60 * GiB), sim.fleet)
    assert diagnosis.nodes[0].summary == ("4 x 80Gi + 4 x 48Gi, 4 + 4 free; "
                                          "needs 1 of 80Gi or 2 of 48Gi: a new claim fits")
    assert diagnosis.seat_text == "new claim on mixed: free devices (spread)"


def _books(fleet: tuple[list[Node], list[Claim]]) -> Fleet:
    """The generated nodes and claims as a fleet; a pair the fleet refuses is not a case."""
    try:
        return Fleet(*fleet)
    except PlacementError:
        assume(False)
        raise


@settings(max_examples=200, deadline=None)
@given(fleets(), st.lists(requests(), min_size=1, max_size=4), st.booleans())
def test_many_answers_at_once_are_each_answer_alone(fleet: tuple[list[Node], list[Claim]],
                                                   asked: list[Request], lend: bool) -> None:
    # smallest_changes shares one trial fleet (the caller's own when lent) across the
    # requests; smallest_change, one request on a fresh copy, is the plain reading.
    books = _books(fleet)
    before = (books.nodes, books.claims)
    alone = tuple(smallest_change(request, books) for request in asked)
    assert smallest_changes(asked, books, lend=lend) == alone
    assert (books.nodes, books.claims) == before


def test_a_label_is_offered_where_only_a_claim_wider_than_its_group_holds_the_worker() -> None:
    # A cluster can report a claim wider than its device group: six 48Gi devices cannot
    # hold a 300Gi worker, but a share of it fits the seven of this claim, so labelling
    # the node for trainers seats it by a join.
    node = Node.grouped("mixed", ((6, 48 * GiB), (2, 80 * GiB)), roles=frozenset({SAMPLER}),
                        max_workers_per_claim=2)
    wide = Claim("wide", "mixed", 7, allocated=True, bookings=(Booking("s", "o", 10 * GiB),),
                 device_memory=48 * GiB)
    found = changes(Request("t", TRAINER, 300 * GiB), Fleet((node,), (wide,)))
    assert [(change.kind, change.node) for change in found] == [("role", "mixed")]


@settings(max_examples=300, deadline=None)
@given(fleets(), requests())
def test_a_label_is_tried_only_where_the_worker_could_be_held(
        fleet: tuple[list[Node], list[Claim]], request: Request) -> None:
    # The plain reading: every node of another role is labelled and tried. The filter
    # (devices wide enough, or a claim whose devices its share fits) leaves out only
    # nodes where find_seat could not seat it; odd claims (wider than their group on a
    # mixed node) included.
    books = _books(fleet)
    filtered = changes(request, books)
    with mock.patch.object(remedy, "_fits_devices", lambda *_: True):
        plain = changes(request, books)
    assert filtered == plain


def test_a_worker_naming_its_devices_is_offered_devices_never_a_seat() -> None:
    node = Node("n", 8, 80 * GiB, max_workers_per_claim=4)
    fleet = Fleet([node], [Claim("c", "n", 6, bookings=(Booking("x", "x", 10 * GiB),))])
    request = Request("tp", Role.TRAINER, 100 * GiB, devices=4)
    found = diagnose(request, fleet)
    (verdict,) = found.nodes
    assert verdict.needed == 4
    assert verdict.summary == "8 x 80Gi, 2 free; needs 4; joins no claim (devices): waits for " \
        "free devices"
    assert [(c.claim, c.verdict) for c in verdict.claims] == [("c", "own devices")]
    assert found.change is not None and found.change.kind == "freeDevices"
    assert found.change.amount == 2
    assert [change.kind for change in found.alternatives] == ["freeDevices"]


def test_a_node_too_narrow_for_a_named_count_can_never_hold_it() -> None:
    fleet = Fleet([Node("n", 2, 80 * GiB)])
    found = diagnose(Request("tp", Role.TRAINER, 100 * GiB, devices=4), fleet)
    assert found.nodes[0].summary == (
        "2 x 80Gi; can never hold it: needs 4 devices of at least 25Gi on one node (devices: 4)")
    assert found.change is None and found.reason is not None and found.reason.never
