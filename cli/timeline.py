"""A replay seen over time: what the report draws and what ``compare`` counts.

Everything here is read off a finished replay's log (``cli.eventlog``);
nothing re-decides. The rules:

* The state after a step holds from that step's time until the next step's.
  A scenario without times has a clock that counts events.
* A claim's devices are in use from the moment it is cut (an unallocated
  claim already reserves them) until its last worker leaves. They count for
  the role of the workers on the claim: trainers, samplers, or both when a
  claim holds workers of both roles.
* Waits are counted by ``cli.waits``'s rules: from arrival to seat, or to
  when the worker left or the last event when it never got one.
* A shared claim is one that held two or more workers at some moment. One
  switch on it parks the outgoing worker and restores the incoming one, so it
  moves both workers' memory across the node's host-to-device link (the
  log's link for the node: the bandwidth its turns are played at).
* With node groups, the nodes and GPU-hours are ``cli.fleet_use``'s: a node
  is paid for while it is in the fleet.
* Figures are down-sampled on the time axis only: each interval shows the
  moment within it with the most in use (and the least, as a line), so a
  spike between two samples is never lost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cli.eventlog import (
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    EventLog,
    LeaveStep,
    MoveStep,
    RemoveNodeStep,
    walk,
)
from cli.fleet_use import FIXED, FleetUse, GroupUse, Paying, fleet_of
from cli.replay import Report
from cli.waits import Wait, WaitBook, WaitStats, wait_stats
from placement.simulator.simulation import Placement

__all__ = [
    "FIXED",
    "ROLES",
    "USES",
    "FleetUse",
    "GroupUse",
    "Sampled",
    "SharedClaim",
    "Summary",
    "Timeline",
    "Wait",
    "WaitStats",
    "build_timeline",
    "downsample",
    "fleet_of",
    "timeline_of",
    "wait_stats",
]

ROLES = ("trainer", "sampler")
USES = ("trainer", "sampler", "both")  # whose workers a claim's devices serve


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
    nodes_peak: int | None = None  # with node groups: the most nodes at once
    gpu_hours: float | None = None  # with node groups: every node's device-hours, paid for


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
    fleet: tuple[GroupUse, ...] = ()  # with node groups: each group's, then the fixed nodes'
    nodes_peak: int = 0  # with node groups: the most nodes in the fleet at once

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
            nodes_peak=self.nodes_peak if self.fleet else None,
            gpu_hours=sum(use.gpu_hours for use in self.fleet) if self.fleet else None,
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
        self.book = WaitBook()
        self.capacity = self.start_capacity = sum(link.devices for link in log.nodes)
        self.in_use = dict.fromkeys(USES, 0)
        self.seated = dict.fromkeys(ROLES, 0)
        self.pending = dict.fromkeys(ROLES, 0)
        self.series_capacity: list[int] = []
        self.series_devices: dict[str, list[int]] = {use: [] for use in USES}
        self.series_seats: dict[str, list[int]] = {role: [] for role in ROLES}
        self.series_pending: dict[str, list[int]] = {role: [] for role in ROLES}
        self.paying = Paying(log) if log.groups else None

    def arrive(self, step: ArriveStep, at: float) -> None:
        self.arrivals[step.worker] = step
        self.book.arrived(step, at)
        self.pending[step.role] += 1

    def leave(self, step: LeaveStep, at: float) -> None:
        role = self.arrivals[step.worker].role
        claim_name = self.seat_of.pop(step.worker, None)
        if claim_name is None:
            self.pending[role] -= 1
            self.book.ended(step.worker, None, at)
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
        if self.paying is not None:
            self.paying.joined(step.node, step.group or FIXED, step.link.devices, at)

    def move(self, step: MoveStep, at: float) -> None:
        pass  # read as its worker leaving its claim, then its new seat

    def remove_node(self, step: RemoveNodeStep, at: float) -> None:
        self.capacity -= step.spec.devices
        if self.paying is not None:
            self.paying.left(step.node, at)

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
        if self.book.ended(worker, at, at):
            self.pending[role] -= 1

    def stepped(self, at: float) -> None:
        self.series_capacity.append(self.capacity)
        for use in USES:
            self.series_devices[use].append(self.in_use[use])
        for role in ROLES:
            self.series_seats[role].append(self.seated[role])
            self.series_pending[role].append(self.pending[role])

    def timeline(self, log: EventLog) -> Timeline:
        end = log.clock[-1] if log.steps else 0.0
        waits = self.book.close(end)
        memory = {name: arrival.memory for name, arrival in self.arrivals.items()}
        shared = [
            SharedClaim(name, claim.node, claim.devices,
                        tuple((worker, memory[worker]) for worker in claim.history), claim.most,
                        self.bandwidth[claim.node])
            for name, claim in self.every_claim if claim.most >= 2
        ]
        paying = self.paying
        return Timeline(log.times is not None, log.clock, self.series_capacity,
                        self.series_devices, self.series_seats, self.series_pending,
                        waits, shared, self.start_capacity,
                        paying.uses(log, end) if paying is not None else (),
                        paying.peak if paying is not None else 0)


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
