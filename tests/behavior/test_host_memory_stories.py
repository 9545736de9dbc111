"""Host memory on nodes that may share claims: every worker there counts, a lone one too.

A lone worker parks nothing today, but on a node that may share claims it
can be joined at any moment and then parks its whole estimate; and its pod
asks the node for that memory from the start. So on such a node the parking
budget holds every worker booked there, and a new claim waits for host
memory as a join does. A node that never shares is not checked for it.
"""

from __future__ import annotations

from placement import GiB, Node, Request, Role, WaitKind
from placement.remedy import diagnose
from placement.simulator.simulation import Seating, Simulation
from tests.behavior.conftest import FFT_8B, claim_of, node_of, trainer


def two_gpu_box(max_workers: int) -> Node:
    """Two 80Gi devices on a host with a 100Gi parking budget."""
    return Node("box", devices=2, device_memory=80 * GiB, host_memory=100 * GiB,
                max_workers_per_claim=max_workers, product="H100 80GB")


def test_a_lone_worker_holds_its_estimate_so_a_second_claim_waits_for_host_memory() -> None:
    sim = Simulation((two_gpu_box(max_workers=2),))
    sim.arrive(trainer("first", FFT_8B))
    sim.arrive(trainer("second", FFT_8B))
    # A device is free, but first's 60Gi is counted although it is alone: 120Gi > 100Gi.
    waiting = sim.state("second")
    assert waiting.phase is Seating.PENDING
    assert waiting.reason is not None and waiting.reason.kind is WaitKind.WAITING_FOR_CAPACITY
    assert str(waiting.reason).startswith(
        "WaitingForCapacity: host memory: box has the devices free but can park 40Gi more of "
        "its 100Gi, not 60Gi")
    assert sim.fleet.parked_load("box") == FFT_8B

    # A smaller worker still gets the free device: 60Gi + 40Gi is the whole budget.
    sim.arrive(trainer("small", 40 * GiB))
    assert sim.state("small").phase is Seating.PLACED
    assert claim_of(sim, "small") not in (claim_of(sim, "first"), None)

    # The first leaving gives its host memory back, and the waiting worker takes the device.
    sim.leave("first")
    assert sim.state("second").phase is Seating.PLACED
    assert node_of(sim, "second") == "box"


def test_the_smallest_remedy_for_a_new_claim_short_of_host_memory_is_more_of_it() -> None:
    sim = Simulation((two_gpu_box(max_workers=2),))
    sim.arrive(trainer("first", FFT_8B))
    diagnosis = diagnose(trainer("second", FFT_8B), sim.fleet)
    assert diagnosis.change is not None
    assert (diagnosis.change.kind, diagnosis.change.amount) == ("hostMemory", 20 * GiB)
    [box] = diagnosis.nodes
    assert "the devices are free, but host memory can park 40Gi more of 100Gi" in box.summary


def test_a_claim_not_yet_allocated_counts_on_the_node_it_was_sized_against() -> None:
    # Its worker's pod will run there: two such claims would promise the host twice.
    sim = Simulation((two_gpu_box(max_workers=2),), deferred_allocation=True)
    sim.arrive(trainer("first", FFT_8B))
    assert sim.state("first").phase is Seating.PLACING
    sim.arrive(trainer("second", FFT_8B))
    assert sim.state("second").phase is Seating.PENDING
    assert "host memory" in str(sim.state("second").reason)


def test_an_exclusive_worker_counts_too() -> None:
    # Its pod asks the node for its estimate like any worker's on a node that may share.
    sim = Simulation((two_gpu_box(max_workers=2),))
    sim.arrive(Request("alone", Role.TRAINER, FFT_8B, exclusive=True))
    sim.arrive(trainer("next", FFT_8B))
    assert sim.state("next").phase is Seating.PENDING
    assert "host memory" in str(sim.state("next").reason)


def test_a_node_that_never_shares_is_not_checked_for_host_memory() -> None:
    # One worker per claim: nobody is ever parked, so 120Gi of estimates on a 100Gi host
    # is fine, and nothing counts against the budget.
    sim = Simulation((two_gpu_box(max_workers=1),))
    sim.arrive(trainer("first", FFT_8B))
    sim.arrive(trainer("second", FFT_8B))
    assert [sim.state(w).phase for w in ("first", "second")] == [Seating.PLACED] * 2
    assert claim_of(sim, "first") != claim_of(sim, "second")
    assert sim.fleet.parked_load("box") == 0
