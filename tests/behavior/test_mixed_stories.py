"""Nodes whose devices differ in memory, told as arrivals and departures.

The hardware: a node of four 80Gi and four 48Gi devices. Each size is a
device group; a claim takes all its devices from one group, the tightest
that holds the worker by itself, so big devices stay for big workers.
"""

from __future__ import annotations

from placement import Fleet, GiB, NewClaim, Node, decide
from placement.simulator.simulation import Simulation
from tests.behavior.conftest import FFT_8B, LORA, node_of, trainer


def mixed_node(name: str = "mixed") -> Node:
    return Node.grouped(name, ((4, 80 * GiB), (4, 48 * GiB)), host_memory=1024 * GiB,
                        max_workers_per_claim=2)


def test_a_60gi_worker_gets_one_80gi_device_not_two_48gi_ones() -> None:
    decision = decide(trainer("fft", FFT_8B), Fleet((mixed_node(),)))
    # Read as eight 48Gi devices, it took two; the 80Gi group holds it on one. The floor
    # sits above 48Gi, so DRA can hand out nothing but an 80Gi device.
    assert decision == NewClaim("mixed", 1, FFT_8B, 80 * GiB)


def test_a_20gi_worker_gets_a_48gi_device_and_the_80gi_ones_wait_for_the_big() -> None:
    sim = Simulation((mixed_node(),))
    for i in range(4):
        sim.arrive(trainer(f"small-{i}", 20 * GiB))
    # The four small ones fill the 48Gi group...
    assert sim.fleet.free_by_group("mixed") == (0, 4)
    decision = decide(trainer("small-4", 20 * GiB), sim.fleet)
    assert isinstance(decision, NewClaim) and decision.memory_ceiling == 80 * GiB
    # ...and four 60Gi workers still find an 80Gi device each.
    for i in range(4):
        sim.arrive(trainer(f"big-{i}", FFT_8B))
        assert sim.state(f"big-{i}").devices == 1
    assert sim.fleet.free_by_group("mixed") == (0, 0)


def test_groups_rank_across_the_fleet_as_plain_nodes_do() -> None:
    plain = Node("plain-80", devices=2, device_memory=80 * GiB, host_memory=1024 * GiB)
    sim = Simulation((plain, mixed_node()))
    sim.arrive(trainer("lora", LORA))
    assert node_of(sim, "lora") == "mixed"  # its 48Gi group is the tightest fit anywhere
    sim.arrive(trainer("fft", FFT_8B))
    # 80Gi is 80Gi: the fewest free left after placing decides, as between plain nodes.
    assert node_of(sim, "fft") == "plain-80"
    assert sim.fleet.free_by_group("mixed") == (3, 4)


def test_a_worker_too_big_for_one_group_spans_devices_of_one_size_only() -> None:
    sim = Simulation((mixed_node(),))
    sim.arrive(trainer("wide", 150 * GiB))
    # Two 80Gi devices beat four 48Gi ones (fewest devices); never 80Gi and 48Gi mixed.
    assert sim.state("wide").devices == 2
    assert sim.fleet.free_by_group("mixed") == (4, 2)
    sim.arrive(trainer("wider", 300 * GiB))  # four 80Gi would do, only two are left
    assert sim.state("wider").phase == "Pending"


def test_a_joiner_fits_the_claim_s_own_group_not_the_node_s_smallest() -> None:
    sim = Simulation((Node.grouped("mixed", ((1, 80 * GiB), (1, 48 * GiB)),
                                   host_memory=1024 * GiB, max_workers_per_claim=2),))
    sim.arrive(trainer("a", FFT_8B))
    sim.arrive(trainer("b", 20 * GiB))
    sim.arrive(trainer("c", FFT_8B))  # no device free: it shares the 80Gi claim
    assert sim.state("c").claim == sim.state("a").claim


def test_a_mixed_node_at_its_pod_limit_is_named_once() -> None:
    full = Node.grouped("mixed", ((1, 80 * GiB), (1, 48 * GiB)), pods=1)
    sim = Simulation((full, Node("plain", 1, 80 * GiB, pods=1)))
    sim.arrive(trainer("a", LORA))
    sim.arrive(trainer("b", LORA))
    sim.arrive(trainer("c", LORA))  # both nodes at their one pod: it waits
    reason = str(sim.state("c").reason)
    assert "mixed is at its pod limit (1 pod), and 1 other node it fits at theirs" in reason
