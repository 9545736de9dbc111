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
* ``fleet_of`` reads only this and the waits (``cli.waits``), for the table
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
    LeaveStep,
    RemoveNodeStep,
    walk,
)
from cli.waits import WaitBook, WaitStats, wait_stats
from placement.simulator.simulation import Placement

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
    without the series and claims (the table and the JSON need only this)."""
    reader = _FleetReader(log)
    walk(log, reader)
    end = log.clock[-1] if log.steps else 0.0
    return FleetUse(reader.paying.uses(log, end), reader.paying.peak,
                    wait_stats(reader.book.close(end)))


class _FleetReader:
    """The log read for ``fleet_of`` (``cli.eventlog``'s reader): nodes in and out, waits."""

    def __init__(self, log: EventLog) -> None:
        self.paying = Paying(log)
        self.book = WaitBook()

    def arrive(self, step: ArriveStep, at: float) -> None:
        self.book.arrived(step, at)

    def leave(self, step: LeaveStep, at: float) -> None:
        if step.claim is None:  # it left waiting
            self.book.ended(step.worker, None, at)

    def allocate(self, step: AllocateStep, at: float) -> None:
        pass

    def add_node(self, step: AddNodeStep, at: float) -> None:
        self.paying.joined(step.node, step.group or FIXED, step.link.devices, at)

    def remove_node(self, step: RemoveNodeStep, at: float) -> None:
        self.paying.left(step.node, at)

    def seat(self, seat: Placement, at: float) -> None:
        self.book.ended(seat.worker, at, at)

    def stepped(self, at: float) -> None:
        pass


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

    def uses(self, log: EventLog, end: float) -> tuple[GroupUse, ...]:
        for group, devices, joined in self.since.values():
            self.device_seconds[group] += devices * (end - joined)
        asked = dict.fromkeys(self.count, 0)
        for step in log.steps:
            if step.__class__ is AskNodeStep:
                asked[step.group] += 1
        return tuple(GroupUse(group, tuple(self.changes[group]),
                              self.device_seconds[group] / 3600, asked[group],
                              self.joins[group], self.leaves[group])
                     for group in self.count
                     if group != FIXED or self.changes[group] != [(0.0, 0)])
