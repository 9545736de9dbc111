"""A replay seen over time: what the report draws and what ``compare`` counts.

Everything here is read off a finished replay (the scenario and its steps);
nothing re-decides. The rules:

* The state after a step holds from that step's time until the next step's.
  A scenario without times has a clock that counts events.
* A claim's devices are in use from the moment it is cut (an unallocated
  claim already reserves them) until its last worker leaves. They count for
  the role of the workers on the claim: trainers, samplers, or both when a
  claim holds workers of both roles.
* A worker's wait runs from its arrival to its seat. A worker that never got
  one waited until it left or until the last event: its wait is a lower
  bound, counted all the same (leaving it out would flatter a fleet that
  keeps workers waiting).
* A shared claim is one that held two or more workers at some moment. One
  switch on it parks the outgoing worker and restores the incoming one, so it
  moves both workers' memory across the node's host-to-device link.
* Figures are down-sampled on the time axis only: each interval shows the
  moment within it with the most in use (and the least, as a line), so a
  spike between two samples is never lost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cli.replay import AddNodeStep, ArriveStep, ExpectStep, LeaveStep, Report
from cli.scenario import AddNode, Arrive, NodeSpec, Scenario

__all__ = [
    "DEFAULT_BANDWIDTH",
    "ROLES",
    "USES",
    "Sampled",
    "SharedClaim",
    "Summary",
    "Timeline",
    "Wait",
    "WaitStats",
    "build_timeline",
    "downsample",
    "wait_stats",
]

DEFAULT_BANDWIDTH = 25 * 10**9  # bytes per second: 25GB/s, a PCIe 4.0 x16 link in practice
ROLES = ("trainer", "sampler")
USES = ("trainer", "sampler", "both")  # whose workers a claim's devices serve


@dataclass(frozen=True, slots=True)
class Wait:
    worker: str
    owner: str
    role: str
    arrived: float
    placed: float | None  # None: never got a seat
    until: float  # the seat, or when it left still waiting, or the last event

    @property
    def waited(self) -> float:
        return self.until - self.arrived


@dataclass(frozen=True, slots=True)
class SharedClaim:
    claim: str
    node: str
    devices: int
    workers: tuple[tuple[str, int], ...]  # every worker it ever held, with its memory, in order
    most: int  # the most workers it held at once
    bandwidth: int  # the node's host-to-device bytes per second

    @property
    def switch_seconds(self) -> tuple[float, float]:
        """The cheapest and the dearest switch between two of its workers."""
        sizes = sorted(memory for _, memory in self.workers)
        return (sizes[0] + sizes[1]) / self.bandwidth, (sizes[-1] + sizes[-2]) / self.bandwidth


@dataclass(frozen=True, slots=True)
class WaitStats:
    count: int
    unseated: int  # of which never got a seat
    median: float
    p95: float
    longest: float


@dataclass(frozen=True, slots=True)
class Sampled:
    """Series on a down-sampled time axis: each point is its interval's busiest moment."""

    times: list[float]
    stacks: dict[str, list[int]]
    low: list[int]  # the least in use, all stacks together, within each interval
    capacity: list[int]


@dataclass(frozen=True, slots=True)
class Summary:
    """One replay in a row: what ``compare`` prints per variant."""

    placed: int
    pending: int  # at the end
    waits: WaitStats
    seats_peak: int
    idle: float  # device-hours idle (device-events without times)


@dataclass(frozen=True, slots=True)
class Timeline:
    timed: bool
    times: Sequence[float]  # one per step
    capacity: list[int]  # devices in the fleet after each step
    devices: dict[str, list[int]]  # by USES
    seats: dict[str, list[int]]  # by ROLES
    pending: dict[str, list[int]]  # by ROLES
    waits: list[Wait]
    shared: list[SharedClaim]
    start_capacity: int

    @property
    def end(self) -> float:
        return self.times[-1] if self.times else 0.0

    def summary(self) -> Summary:
        seats = [sum(values) for values in zip(*self.seats.values(), strict=True)]
        return Summary(
            placed=sum(1 for wait in self.waits if wait.placed is not None),
            pending=sum(values[-1] for values in self.pending.values()) if self.times else 0,
            waits=wait_stats(self.waits),
            seats_peak=max(seats, default=0),
            idle=self.idle(),
        )

    def idle(self) -> float:
        """Devices left idle over the scenario: device-hours, or device-events without times."""
        in_use = [sum(values) for values in zip(*self.devices.values(), strict=True)]
        if not self.timed:
            return float(sum(c - u for c, u in zip(self.capacity, in_use, strict=True)))
        total = self.start_capacity * (self.times[0] if self.times else 0.0)
        for i in range(len(self.times) - 1):
            total += (self.capacity[i] - in_use[i]) * (self.times[i + 1] - self.times[i])
        return total / 3600


def wait_stats(waits: Sequence[Wait]) -> WaitStats:
    values = sorted(wait.waited for wait in waits)
    unseated = sum(1 for wait in waits if wait.placed is None)
    if not values:
        return WaitStats(0, 0, 0.0, 0.0, 0.0)
    return WaitStats(len(values), unseated, _rank(values, 0.5), _rank(values, 0.95), values[-1])


def _rank(ordered: list[float], q: float) -> float:
    # Nearest rank: a wait some worker really had, never an interpolation between two.
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# ------------------------------------------------------------------ building


class _Claim:
    __slots__ = ("devices", "history", "most", "node", "roles")

    def __init__(self, node: str, devices: int) -> None:
        self.node = node
        self.devices = devices
        self.roles = {"trainer": 0, "sampler": 0}
        self.history: list[str] = []
        self.most = 0

    @property
    def use(self) -> str:
        trainers, samplers = self.roles["trainer"], self.roles["sampler"]
        return "both" if trainers and samplers else "trainer" if trainers else "sampler"


def build_timeline(scenario: Scenario, report: Report) -> Timeline:
    """Walk the replay's steps once, keeping the fleet's counters after each."""
    specs: dict[str, NodeSpec] = {spec.name: spec for spec in scenario.nodes}
    requests: dict[str, Arrive] = {}
    arrived: dict[str, float] = {}
    seat_of: dict[str, str] = {}  # worker -> claim
    claims: dict[str, _Claim] = {}
    every_claim: list[tuple[str, _Claim]] = []
    waits: list[Wait] = []
    waiting: dict[str, int] = {}  # worker -> its index in ``waits`` while it has no seat
    capacity = sum(spec.devices for spec in scenario.nodes)
    start_capacity = capacity
    in_use = dict.fromkeys(USES, 0)
    seated = dict.fromkeys(ROLES, 0)
    pending = dict.fromkeys(ROLES, 0)
    series_capacity: list[int] = []
    series_devices: dict[str, list[int]] = {use: [] for use in USES}
    series_seats: dict[str, list[int]] = {role: [] for role in ROLES}
    series_pending: dict[str, list[int]] = {role: [] for role in ROLES}

    def take_seat(worker: str, claim_name: str, node: str, devices: int, new: bool,
                  at: float) -> None:
        role = requests[worker].role
        if new:
            claim = claims[claim_name] = _Claim(node, devices)
            every_claim.append((claim_name, claim))
        else:
            claim = claims[claim_name]
            in_use[claim.use] -= claim.devices
        claim.roles[role] += 1
        claim.history.append(worker)
        claim.most = max(claim.most, claim.roles["trainer"] + claim.roles["sampler"])
        in_use[claim.use] += claim.devices
        seat_of[worker] = claim_name
        seated[role] += 1
        index = waiting.pop(worker, None)
        if index is not None:
            pending[role] -= 1
            wait = waits[index]
            waits[index] = Wait(wait.worker, wait.owner, wait.role, wait.arrived, at, at)

    for step, event, at in zip(report.steps, scenario.events, report.clock, strict=True):
        if isinstance(step, ArriveStep):
            assert isinstance(event, Arrive)
            requests[step.worker] = event
            arrived[step.worker] = at
            waiting[step.worker] = len(waits)
            waits.append(Wait(step.worker, event.owner or step.worker, event.role, at, None, at))
            pending[event.role] += 1
        elif isinstance(step, LeaveStep):
            role = requests[step.worker].role
            claim_name = seat_of.pop(step.worker, None)
            if claim_name is None:
                index = waiting.pop(step.worker)
                pending[role] -= 1
                wait = waits[index]
                waits[index] = Wait(wait.worker, wait.owner, wait.role, wait.arrived, None, at)
            else:
                claim = claims[claim_name]
                in_use[claim.use] -= claim.devices
                claim.roles[role] -= 1
                seated[role] -= 1
                if step.released:
                    del claims[claim_name]
                else:
                    in_use[claim.use] += claim.devices
        elif isinstance(step, AddNodeStep):
            assert isinstance(event, AddNode)
            specs[event.node.name] = event.node
            capacity += event.node.devices
        if not isinstance(step, ExpectStep):
            for seat in step.placed:
                take_seat(seat.worker, seat.claim, seat.node, seat.devices, seat.new_claim, at)
        series_capacity.append(capacity)
        for use in USES:
            series_devices[use].append(in_use[use])
        for role in ROLES:
            series_seats[role].append(seated[role])
            series_pending[role].append(pending[role])

    end = report.clock[-1] if report.steps else 0.0
    for index in waiting.values():
        wait = waits[index]
        waits[index] = Wait(wait.worker, wait.owner, wait.role, wait.arrived, None, end)
    memory = {name: event.memory for name, event in requests.items()}
    shared = [
        SharedClaim(name, claim.node, claim.devices,
                    tuple((worker, memory[worker]) for worker in claim.history), claim.most,
                    specs[claim.node].host_to_device_bandwidth or DEFAULT_BANDWIDTH)
        for name, claim in every_claim if claim.most >= 2
    ]
    return Timeline(report.times is not None, report.clock, series_capacity, series_devices,
                    series_seats, series_pending, waits, shared, start_capacity)


# -------------------------------------------------------------- down-sampling


def downsample(times: Sequence[float], stacks: dict[str, list[int]], capacity: list[int],
               points: int = 600) -> Sampled:
    """At most ``points`` intervals over [first, last time]; see the module's rule."""
    if not times:
        return Sampled([], {key: [] for key in stacks}, [], [])
    keys = list(stacks)
    columns = [stacks[key] for key in keys]
    totals = [sum(values) for values in zip(*columns, strict=True)]
    start, end = times[0], times[-1]
    span = end - start
    if len(times) <= points or span <= 0:
        return Sampled(list(times), {key: list(stacks[key]) for key in keys}, totals,
                       list(capacity))
    width = span / points
    out_times: list[float] = []
    out_stacks: dict[str, list[int]] = {key: [] for key in keys}
    low: list[int] = []
    out_capacity: list[int] = []
    i, n = 0, len(times)
    for bucket in range(points):
        edge = start + width * (bucket + 1) if bucket < points - 1 else math.inf
        if i >= n or times[i] >= edge:
            continue  # nothing happened in this interval: the line carries the last state
        best = lowest = i
        while i < n and times[i] < edge:
            if totals[i] > totals[best]:
                best = i
            if totals[i] < totals[lowest]:
                lowest = i
            i += 1
        out_times.append(times[best])
        for key, column in zip(keys, columns, strict=True):
            out_stacks[key].append(column[best])
        low.append(totals[lowest])
        out_capacity.append(max(capacity[lowest], capacity[best]))
    return Sampled(out_times, out_stacks, low, out_capacity)
