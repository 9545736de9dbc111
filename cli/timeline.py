"""A replay seen over time: what the report draws and what ``compare`` counts.

Everything here is read off a finished replay's log (``cli.eventlog``);
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
  moves both workers' memory across the node's host-to-device link (the
  log's link for the node: the bandwidth its turns are played at).
* Figures are down-sampled on the time axis only: each interval shows the
  moment within it with the most in use (and the least, as a line), so a
  spike between two samples is never lost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cli.eventlog import AddNodeStep, AllocateStep, ArriveStep, EventLog, LeaveStep, walk
from cli.replay import Report
from placement.simulator.simulation import Placement

__all__ = [
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
    "timeline_of",
    "wait_stats",
]

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
    bandwidth: int  # the node's host-to-device bytes per second (its link in the log)

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


def timeline_of(log: EventLog) -> Timeline:
    """The replay's log walked once, keeping the fleet's counters after each step."""
    counters = _Counters(log)
    walk(log, counters)
    return counters.timeline(log)


def build_timeline(scenario: object, report: Report) -> Timeline:
    """``timeline_of(report.log)``, in the form ``compare`` calls: the scenario is not read
    (the log carries all of it)."""
    return timeline_of(report.log)


class _Counters:
    """The log read over time (``cli.eventlog``'s reader): the series, waits and claims."""

    def __init__(self, log: EventLog) -> None:
        self.bandwidth = {link.name: link.bandwidth for link in log.nodes}
        self.arrivals: dict[str, ArriveStep] = {}
        self.seat_of: dict[str, str] = {}  # worker -> claim
        self.claims: dict[str, _Claim] = {}
        self.every_claim: list[tuple[str, _Claim]] = []
        self.waits: list[Wait] = []
        self.waiting: dict[str, int] = {}  # worker -> its index in ``waits`` while unseated
        self.capacity = self.start_capacity = sum(link.devices for link in log.nodes)
        self.in_use = dict.fromkeys(USES, 0)
        self.seated = dict.fromkeys(ROLES, 0)
        self.pending = dict.fromkeys(ROLES, 0)
        self.series_capacity: list[int] = []
        self.series_devices: dict[str, list[int]] = {use: [] for use in USES}
        self.series_seats: dict[str, list[int]] = {role: [] for role in ROLES}
        self.series_pending: dict[str, list[int]] = {role: [] for role in ROLES}

    def arrive(self, step: ArriveStep, at: float) -> None:
        self.arrivals[step.worker] = step
        self.waiting[step.worker] = len(self.waits)
        self.waits.append(Wait(step.worker, step.owner, step.role, at, None, at))
        self.pending[step.role] += 1

    def leave(self, step: LeaveStep, at: float) -> None:
        role = self.arrivals[step.worker].role
        claim_name = self.seat_of.pop(step.worker, None)
        if claim_name is None:
            self.pending[role] -= 1
            self._waited(self.waiting.pop(step.worker), None, at)
            return
        claim = self.claims[claim_name]
        self.in_use[claim.use] -= claim.devices
        claim.roles[role] -= 1
        self.seated[role] -= 1
        if step.released:
            del self.claims[claim_name]
        else:
            self.in_use[claim.use] += claim.devices

    def allocate(self, step: AllocateStep, at: float) -> None:
        pass  # an unallocated claim already reserves its devices

    def add_node(self, step: AddNodeStep, at: float) -> None:
        self.bandwidth[step.node] = step.link.bandwidth
        self.capacity += step.link.devices

    def seat(self, seat: Placement, at: float) -> None:
        worker = seat.worker
        role = self.arrivals[worker].role
        if seat.new_claim:
            claim = self.claims[seat.claim] = _Claim(seat.node, seat.devices)
            self.every_claim.append((seat.claim, claim))
        else:
            claim = self.claims[seat.claim]
            self.in_use[claim.use] -= claim.devices
        claim.roles[role] += 1
        claim.history.append(worker)
        claim.most = max(claim.most, claim.roles["trainer"] + claim.roles["sampler"])
        self.in_use[claim.use] += claim.devices
        self.seat_of[worker] = seat.claim
        self.seated[role] += 1
        index = self.waiting.pop(worker, None)
        if index is not None:
            self.pending[role] -= 1
            self._waited(index, at, at)

    def stepped(self, at: float) -> None:
        self.series_capacity.append(self.capacity)
        for use in USES:
            self.series_devices[use].append(self.in_use[use])
        for role in ROLES:
            self.series_seats[role].append(self.seated[role])
            self.series_pending[role].append(self.pending[role])

    def _waited(self, index: int, placed: float | None, until: float) -> None:
        wait = self.waits[index]
        self.waits[index] = Wait(wait.worker, wait.owner, wait.role, wait.arrived, placed, until)

    def timeline(self, log: EventLog) -> Timeline:
        end = log.clock[-1] if log.steps else 0.0
        for index in self.waiting.values():
            self._waited(index, None, end)
        memory = {name: arrival.memory for name, arrival in self.arrivals.items()}
        shared = [
            SharedClaim(name, claim.node, claim.devices,
                        tuple((worker, memory[worker]) for worker in claim.history), claim.most,
                        self.bandwidth[claim.node])
            for name, claim in self.every_claim if claim.most >= 2
        ]
        return Timeline(log.times is not None, log.clock, self.series_capacity,
                        self.series_devices, self.series_seats, self.series_pending,
                        self.waits, shared, self.start_capacity)


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
