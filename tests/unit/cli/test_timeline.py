"""The replay over time: devices, seats and pending workers after each event; waits; switches."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from bench.generate import generate
from cli.render_json import to_document
from cli.replay import replay
from cli.scenario import build_scenario, load_scenario
from cli.timeline import ROLES, USES, Timeline, downsample, wait_stats
from cli.timeline import timeline_of as read_timeline

# A dev box: 2 x 24Gi, 94Gi of host memory, four workers per claim.
BOX = """
nodes:
  - {name: box, devices: 2, deviceMemory: 24Gi, hostMemory: 94Gi, maxWorkersPerClaim: 4,
     hostToDeviceBandwidth: 20GB/s}
events:
"""


def timeline_of(*events: str) -> Timeline:
    scenario = load_scenario(textwrap.dedent(BOX) + "".join(f"  - {e}\n" for e in events))
    return read_timeline(replay(scenario).log)


def test_devices_seats_and_pending_follow_arrivals_and_departures() -> None:
    t = timeline_of(
        "{at: 0, arrive: {name: t1, role: trainer, memory: 20Gi}}",    # claim-t1
        "{at: 1m, arrive: {name: s1, role: sampler, memory: 20Gi}}",   # claim-s1
        "{at: 2m, arrive: {name: t2, role: trainer, memory: 20Gi}}",   # joins claim-s1 (name)
        "{at: 3m, arrive: {name: big, role: trainer, memory: 48Gi}}",  # waits: no free devices
        "{at: 10m, leave: s1}",   # claim-s1 keeps t2: now a trainer claim
        "{at: 20m, leave: t2}",   # released; big needs both devices, t1 still holds one
        "{at: 30m, leave: t1}",   # both devices free: big is placed on a two-device claim
    )
    assert t.timed and list(t.times) == [0, 60, 120, 180, 600, 1200, 1800]
    assert t.devices["trainer"] == [1, 1, 1, 1, 2, 1, 2]
    assert t.devices["sampler"] == [0, 1, 0, 0, 0, 0, 0]
    assert t.devices["both"] == [0, 0, 1, 1, 0, 0, 0]
    assert t.seats["trainer"] == [1, 1, 2, 2, 2, 1, 1]
    assert t.seats["sampler"] == [0, 1, 1, 1, 0, 0, 0]
    assert t.pending["trainer"] == [0, 0, 0, 1, 1, 1, 0]
    assert t.capacity == [2] * 7
    big = next(wait for wait in t.waits if wait.worker == "big")
    assert (big.arrived, big.placed, big.waited) == (180, 1800, 1620)


def test_a_worker_that_never_gets_a_seat_waits_until_it_leaves_or_the_end() -> None:
    t = timeline_of(
        "{at: 0, arrive: {name: huge, role: trainer, memory: 200Gi}}",
        "{at: 1h, arrive: {name: also, role: trainer, memory: 200Gi}}",
        "{at: 2h, leave: huge}",
        "{at: 5h, arrive: {name: small, role: sampler, memory: 1Gi}}",
    )
    waits = {wait.worker: wait for wait in t.waits}
    assert waits["huge"].placed is None and waits["huge"].waited == 7200
    assert waits["also"].placed is None and waits["also"].waited == 4 * 3600
    assert waits["small"].waited == 0
    stats = wait_stats(t.waits)
    assert (stats.count, stats.unseated, stats.median, stats.longest) == (3, 2, 7200, 14400)
    summary = t.summary()
    assert (summary.placed, summary.pending) == (1, 1)


def test_idle_devices_are_integrated_over_time() -> None:
    t = timeline_of(
        "{at: 1h, arrive: {name: a, role: trainer, memory: 10Gi}}",
        "{at: 3h, leave: a}",
    )
    # 2 devices idle for the first hour, 1 for the next two, then the scenario ends.
    assert t.idle() == 2 * 1 + 1 * 2


def test_without_times_the_clock_counts_events() -> None:
    t = timeline_of(
        "arrive: {name: a, role: trainer, memory: 48Gi}",
        "arrive: {name: b, role: trainer, memory: 48Gi}",
        "arrive: {name: c, role: trainer, memory: 10Gi}",
        "leave: a",
    )
    assert not t.timed and list(t.times) == [0, 1, 2, 3]
    b = next(wait for wait in t.waits if wait.worker == "b")
    assert (b.arrived, b.placed, b.waited) == (1, 3, 2)
    assert t.idle() == 0 + 0 + 0 + 0  # a, then b, hold both devices throughout


def test_a_shared_claim_prices_one_switch_from_its_workers_memory() -> None:
    t = timeline_of(
        "arrive: {name: a, role: trainer, memory: 20Gi}",
        "arrive: {name: b, role: trainer, memory: 20Gi}",
        "arrive: {name: c, role: sampler, memory: 10Gi}",   # joins a's claim
        "arrive: {name: d, role: sampler, memory: 16Gi}",   # joins b's claim
        "arrive: {name: e, role: sampler, memory: 14Gi}",   # joins a's claim
    )
    shared = {claim.claim: claim for claim in t.shared}
    assert set(shared) == {"claim-a", "claim-b"}
    a = shared["claim-a"]
    assert [worker for worker, _ in a.workers] == ["a", "c", "e"] and a.most == 3
    assert a.bandwidth == 20 * 10**9
    cheapest, dearest = a.switch_seconds
    assert cheapest == (10 + 14) * 2**30 / (20 * 10**9)
    assert dearest == (20 + 14) * 2**30 / (20 * 10**9)


def test_down_sampling_keeps_every_peak() -> None:
    times = list(range(10_000))
    # A single-event spike of 50 among ones: it must survive 100 intervals.
    busy = [1] * 10_000
    busy[4_321] = 50
    sampled = downsample(times, {"trainer": busy}, [60] * 10_000, points=100)
    assert len(sampled.times) == 100
    assert max(sampled.stacks["trainer"]) == 50
    assert min(sampled.low) == 1
    assert sampled.times[43] == 4_321


def test_down_sampling_leaves_short_series_alone() -> None:
    sampled = downsample([0, 5, 5, 9], {"a": [1, 2, 3, 0], "b": [0, 0, 1, 1]}, [4] * 4)
    assert sampled.times == [0, 5, 5, 9]
    assert sampled.stacks == {"a": [1, 2, 3, 0], "b": [0, 0, 1, 1]}
    assert sampled.low == [1, 2, 4, 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_counters_end_where_the_replay_ends(seed: int) -> None:
    # A generated day under contention, one event a minute.
    document = generate(nodes=6, events=600, seed=seed, live=70)
    for minute, event in enumerate(document["events"]):
        event["at"] = minute * 60
    scenario = build_scenario(document)
    report = replay(scenario)
    t = read_timeline(report.log)
    by_role = Counter(str(state.role) for state in report.workers if state.claim is not None)
    waiting = Counter(str(state.role) for state in report.workers if state.claim is None)
    assert {role: t.seats[role][-1] for role in ROLES} == {r: by_role[r] for r in ROLES}
    assert {role: t.pending[role][-1] for role in ROLES} == {r: waiting[r] for r in ROLES}
    assert sum(t.devices[use][-1] for use in USES) == sum(c.devices for c in report.claims)
    assert t.capacity[-1] == sum(summary.node.devices for summary in report.nodes)
    for step in range(len(t.times)):
        assert sum(t.devices[use][step] for use in USES) <= t.capacity[step]
    # The waits agree with the JSON document's, worker by worker.
    workers = to_document(report)["workers"]
    last_wait = {wait.worker: wait for wait in t.waits}
    for name, worker in workers.items():
        assert last_wait[name].waited == worker["waited"]
        assert last_wait[name].placed == worker["placedAt"]
