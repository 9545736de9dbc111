from __future__ import annotations

import pytest

from placement import GiB, Node, PlacementError, Request, Role
from placement.simulator.simulation import Simulation


def t(name: str, memory_gib: int = 10) -> Request:
    return Request(name, Role.TRAINER, memory_gib * GiB)


def test_a_claim_is_named_after_its_worker_and_released_with_its_last_worker() -> None:
    sim = Simulation((Node("n", 4, 80 * GiB, max_workers_per_claim=2),))
    sim.arrive(t("w"))
    sim.arrive(t("x"))
    sim.arrive(t("y"))
    sim.leave("w")  # w was alone on it: the claim is released at once
    assert not sim.fleet.has_claim("claim-w")
    sim.arrive(t("w"))
    assert sim.state("w").claim == "claim-w"


def test_a_claim_name_still_taken_gets_a_numbered_suffix() -> None:
    sim = Simulation((Node("n", 1, 80 * GiB, max_workers_per_claim=2),
                      Node("m", 1, 80 * GiB, max_workers_per_claim=2)))
    sim.arrive(t("a"))
    sim.arrive(t("b"))
    sim.arrive(t("c"))  # shares claim-a
    sim.leave("a")  # claim-a lives on with c
    sim.leave("b")  # claim-b released, node m free
    sim.arrive(t("a"))  # cuts a new claim on m: claim-a is still taken
    assert sim.state("a").claim == "claim-a-2"


def test_pending_workers_are_retried_oldest_first_after_a_departure() -> None:
    sim = Simulation((Node("n", 1, 80 * GiB),))
    sim.arrive(t("holder"))
    sim.arrive(t("older", 20))
    sim.arrive(t("younger", 10))
    placed = sim.leave("holder")
    assert [p.worker for p in placed] == ["older"]
    assert placed[0].retried
    assert sim.state("younger").phase == "Pending"


def test_a_leaving_pending_worker_changes_nothing() -> None:
    sim = Simulation((Node("n", 1, 80 * GiB),))
    sim.arrive(t("holder"))
    sim.arrive(t("waiting"))
    assert sim.leave("waiting") == []
    assert "waiting" not in sim
    assert sim.pending_count() == 0


def test_deferred_claims_wait_for_allocate_and_then_wake_pending_workers() -> None:
    sim = Simulation((Node("n", 1, 80 * GiB, max_workers_per_claim=2),), deferred_allocation=True)
    sim.arrive(t("first"))
    sim.arrive(t("second"))
    assert sim.state("second").phase == "Pending"
    claim, placed = sim.allocate("first")
    assert claim == "claim-first"
    assert [p.worker for p in placed] == ["second"]


def test_adding_a_node_wakes_pending_workers() -> None:
    sim = Simulation()
    sim.arrive(t("w"))
    assert sim.state("w").phase == "Pending"
    placed = sim.add_node(Node("late", 1, 80 * GiB))
    assert [p.node for p in placed] == ["late"]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda s: s.leave("ghost"), "worker ghost is not here"),
        (lambda s: s.allocate("ghost"), "worker ghost is not here"),
        (lambda s: s.arrive(t("here")), "worker here is already here"),
        (lambda s: s.allocate("here"), "claim claim-here is already allocated"),
        (lambda s: s.add_node(Node("n", 1, GiB)), "node n already exists"),
    ],
)
def test_impossible_events_are_refused_by_name(action: object, message: str) -> None:
    sim = Simulation((Node("n", 1, 80 * GiB),))
    sim.arrive(t("here"))
    with pytest.raises(PlacementError, match=message):
        action(sim)  # type: ignore[operator]


def test_workers_naming_different_counts_wait_apart_so_one_failing_bounds_no_other() -> None:
    # On 4 x 40Gi: 50Gi over 1 never fits, 60Gi over 4 does. Were they one queue, the
    # smaller one failing first would rule out the larger.
    sim = Simulation((Node("n", 4, 40 * GiB),))
    sim.arrive(Request("holder", Role.TRAINER, 10 * GiB, devices=4))
    sim.arrive(Request("one", Role.TRAINER, 50 * GiB, devices=1))
    sim.arrive(Request("four", Role.TRAINER, 60 * GiB, devices=4))
    assert sim.pending_count() == 2
    placed = sim.leave("holder")
    assert [seat.worker for seat in placed] == ["four"] and placed[0].devices == 4
    assert sim.state("one").reason is not None and sim.state("one").reason.never
    sim.leave("one")  # a pending worker naming a count leaves its own queue
    assert sim.pending_count() == 0
