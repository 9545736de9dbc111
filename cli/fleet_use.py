"""The fleet an autoscaler kept: each node group's nodes over time and the GPU-hours paid for.

Read off a finished replay's log (``cli.eventlog``), as ``cli.timeline`` is;
nothing re-decides. Rules:

* With node groups, a node is paid for while it is in the fleet: from the
  start (a fixed node, or a group's ``min``) or the moment it joins, until it
  is removed or the last event. A node asked for is not paid for while it
  boots: it joins when it is up.
* A group's GPU-hours are its nodes' devices times those hours. The fixed
  nodes (no group adds or removes them) are a row of their own, ``FIXED``,
  left out when there never were any.
* A group's nodes over time are (time, nodes in the fleet after), from the
  start, one entry for each moment its count changed; it also counts the
  nodes asked for, those that joined (the ``min`` at the start not counted)
  and those removed.
* ``fleet_of`` reads only this and the waits (``cli.waits``' rules), for the table
  and the JSON; ``cli.timeline`` keeps the same books (``Paying``) alongside
  its series.
"""

from __future__ import annotations

from dataclasses import dataclass

from cli.eventlog import (
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    AskNodeStep,
    EventLog,
    ExpectStep,
    LeaveStep,
    LoseNodeStep,
    MoveStep,
    RemoveNodeStep,
)
from cli.waits import WaitStats, _rank

__all__ = ["FIXED", "FleetUse", "GroupUse", "Paying", "fleet_of"]

FIXED = "(fixed)"  # the row of the nodes no group adds or removes


@dataclass(frozen=True, slots=True)
class GroupUse:
    """A node group's nodes over the run (``FIXED``: the nodes of no group)."""

    group: str
    nodes: tuple[tuple[float, int], ...]  # (time, nodes in the fleet after), from the start
    gpu_hours: float  # its nodes' devices x the hours each was in the fleet
    asked: int  # nodes asked for
    added: int  # nodes that joined (the min at the start not counted)
    removed: int

    @property
    def peak(self) -> int:
        return max(count for _, count in self.nodes)


@dataclass(frozen=True, slots=True)
class FleetUse:
    """A replay with node groups in brief: each group's nodes, the GPU-hours, the waits."""

    groups: tuple[GroupUse, ...]  # each group's, then the fixed nodes'
    nodes_peak: int
    waits: WaitStats

    @property
    def gpu_hours(self) -> float:
        return sum(use.gpu_hours for use in self.groups)


def fleet_of(log: EventLog) -> FleetUse:
    """What ``cli.timeline.timeline_of`` says of the node groups and the waits, read
    without the series and claims (the table and the JSON need only this).

    One loop over the steps, as ``cli.eventlog.walk`` would read them to a reader
    keeping a ``Paying`` and a ``cli.waits.WaitBook``, but keeping of each wait only
    what ``wait_stats`` reads (how long, and whether it ended in a seat), in the
    book's order: on a day of 30,000 events the walk's calls and a ``Wait`` built
    at each arrival and each seat were most of this reading's cost.
    """
    paying = Paying(log)
    asked = dict.fromkeys(paying.count, 0)  # nodes asked for, by group, counted here
    waited: list[float] = []  # one per arrival, in arrival order, as the book's waits
    waiting: dict[str, tuple[int, float]] = {}  # worker -> (its index, its arrival)
    seated = 0
    for step, at in zip(log.steps, log.clock, strict=True):
        if isinstance(step, ArriveStep):
            waiting[step.worker] = (len(waited), at)
            waited.append(at - at)  # a wait not ended yet: arrival to arrival
        elif isinstance(step, LeaveStep):  # a finish too
            if step.claim is None and (entry := waiting.pop(step.worker, None)) is not None:
                waited[entry[0]] = at - entry[1]  # it left waiting
        elif isinstance(step, AskNodeStep):  # counted here, not in a second pass
            asked[step.group] += 1
            continue  # it seats no one
        elif isinstance(step, AddNodeStep):
            paying.joined(step.node, step.group or FIXED, step.link.devices, at)
        elif isinstance(step, RemoveNodeStep):
            paying.left(step.node, at)
            continue
        elif isinstance(step, LoseNodeStep):
            # A moved worker left a claim (no wait ends) and arrives again.
            for moved in step.moved:
                waiting[moved.arrival.worker] = (len(waited), at)
                waited.append(at - at)
            paying.left(step.node, at)
        elif not isinstance(step, AllocateStep | ExpectStep | MoveStep):
            raise TypeError(f"no reading of a {type(step).__name__}")
        for seat in step.placed:
            if (entry := waiting.pop(seat.worker, None)) is not None:
                waited[entry[0]] = at - entry[1]
                seated += 1
    end = log.clock[-1] if log.steps else 0.0
    for index, arrived in waiting.values():  # never seated: waits until the end
        waited[index] = end - arrived
    return FleetUse(paying.uses(log, end, asked), paying.peak,
                    _wait_stats(waited, len(waited) - seated))


def _wait_stats(waited: list[float], unseated: int) -> WaitStats:
    """``cli.waits.wait_stats`` of waits given as their lengths, in the book's order."""
    values = sorted(waited)
    if not values:
        return WaitStats(0, 0, 0.0, 0.0, 0.0)
    return WaitStats(len(values), unseated, _rank(values, 0.5), _rank(values, 0.95),
                     values[-1])


class Paying:
    """Which nodes are in the fleet since when, by group: the nodes over time, GPU-hours."""

    def __init__(self, log: EventLog) -> None:
        self.since: dict[str, tuple[str, int, float]] = {}  # node -> (group, devices, joined)
        self.device_seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.changes: dict[str, list[tuple[float, int]]] = {}
        self.joins: dict[str, int] = {}
        self.leaves: dict[str, int] = {}
        self.total = self.peak = 0
        for group in (*log.groups, FIXED):
            self._group(group)
        for link in log.nodes:
            self.joined(link.name, link.group or FIXED, link.devices, 0.0, start=True)

    def _group(self, group: str) -> None:
        if group not in self.count:
            self.count[group] = self.joins[group] = self.leaves[group] = 0
            self.device_seconds[group] = 0.0
            self.changes[group] = [(0.0, 0)]

    def _moved(self, group: str, by: int, at: float) -> None:
        self.count[group] += by
        self.total += by
        self.peak = max(self.peak, self.total)
        changes = self.changes[group]
        if changes[-1][0] == at:
            changes[-1] = (at, self.count[group])
        else:
            changes.append((at, self.count[group]))

    def joined(self, node: str, group: str, devices: int, at: float, *,
               start: bool = False) -> None:
        self._group(group)
        self.since[node] = (group, devices, at)
        self._moved(group, 1, at)
        if not start:
            self.joins[group] += 1

    def left(self, node: str, at: float) -> None:
        group, devices, joined = self.since.pop(node)
        self.device_seconds[group] += devices * (at - joined)
        self._moved(group, -1, at)
        self.leaves[group] += 1

    def uses(self, log: EventLog, end: float,
             asked: dict[str, int] | None = None) -> tuple[GroupUse, ...]:
        """Each group's use at ``end``; ``asked``: the nodes asked for by group, when the
        caller counted them on its own pass over the steps (else counted here)."""
        for group, devices, joined in self.since.values():
            self.device_seconds[group] += devices * (end - joined)
        if asked is None:
            asked = dict.fromkeys(self.count, 0)
            for step in log.steps:
                if step.__class__ is AskNodeStep:
                    asked[step.group] += 1
        return tuple(GroupUse(group, tuple(self.changes[group]),
                              self.device_seconds[group] / 3600, asked.get(group, 0),
                              self.joins[group], self.leaves[group])
                     for group in self.count
                     if group != FIXED or self.changes[group] != [(0.0, 0)])
