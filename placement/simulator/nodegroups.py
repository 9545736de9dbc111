"""Node groups, what the autoscaler reports, and the records it keeps of them.

The values a caller sees: ``NodeGroup`` (a scenario's group: template, min,
max, boot and idle seconds) and the ``Change`` values the autoscaler reports
(``NodeAsked``, ``NodeUp``, ``NodeDown``). The rest is the autoscaler's own
state (``placement.simulator.autoscaler`` has the rules), one record per thing:

    record          one per                    holds
    --------------  -------------------------  ------------------------------------
    ``GroupState``  node group                 its nodes up and coming, the last
                                               number given, idle nodes kept at
                                               its floor, what its template seats
    ``Coming``      node asked for, not up     its group, when it joins, its plan
                                               and the workers counted on it
    ``Joins``       node asked for             the clock's event: it comes up
    ``IdleEnds``    idle spell of a group's    the clock's event: it goes (if still
                    node                       the one in force for that node)
    ``Due``         event scheduled            (at, seq, event): the clock's heap
                                               entry, ties in the order scheduled
    ``Blocked``     run                        waiting workers every fitting group
                                               is full for, by shape, oldest first

Every node a group made is known by its record (the autoscaler keeps each
node's ``GroupState``): no name is read back for its group or number.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from typing import NamedTuple

from placement.fleet import Fleet
from placement.model import Node, PlacementError, Role
from placement.simulator.simulation import Placement

__all__ = ["Blocked", "Change", "Coming", "Due", "GroupState", "IdleEnds", "Joins",
           "NodeAsked", "NodeDown", "NodeGroup", "NodeUp", "Shape"]


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    template: Node  # its name is not used: the group's nodes are <name>-1, <name>-2, ...
    min: int
    max: int
    boot: float  # seconds from asked for to in the fleet
    idle: float  # seconds holding no claim before it is removed

    def __post_init__(self) -> None:
        if not isinstance(self.template, Node):
            raise PlacementError(f"group {self.name}: template must be a Node")
        if not 0 <= self.min <= self.max or self.max < 1:
            raise PlacementError(f"group {self.name}: needs 0 <= min <= max and max >= 1, "
                                 f"got min {self.min}, max {self.max}")
        if self.boot < 0 or self.idle < 0:
            raise PlacementError(f"group {self.name}: boot and idle must be >= 0 seconds")

    def node(self, number: int) -> Node:
        return dataclasses.replace(self.template, name=f"{self.name}-{number}")


@dataclass(frozen=True, slots=True)
class NodeAsked:
    at: float
    group: str
    node: str
    worker: str  # the oldest waiting worker no node seated nor was coming for
    ready: float  # when it joins the fleet


@dataclass(frozen=True, slots=True)
class NodeUp:
    at: float
    group: str
    node: Node
    placed: tuple[Placement, ...]  # pending workers it seated as it joined


@dataclass(frozen=True, slots=True)
class NodeDown:
    at: float
    group: str
    node: Node


Change = NodeAsked | NodeUp | NodeDown

# What a blocked worker's consideration reads of it: role, memory, exclusive, its owner
# where owner affinity ranks a plan's claims for it ("" elsewhere), and the device count
# it names (None: as its memory needs).
Shape = tuple[Role, int, bool, str, int | None]


@dataclass(slots=True, eq=False)
class GroupState:
    """A node group as the run stands: its nodes up and coming, and what it remembers."""

    spec: NodeGroup
    up: int  # its nodes in the fleet
    serial: int  # the last number given to one of its nodes
    coming: int = 0  # asked for, not up yet
    kept: list[IdleEnds] = field(default_factory=list)  # idle nodes kept at the floor
    # Whether its template seats a worker of (role, memory, devices named).
    fits: dict[tuple[Role, int, int | None], bool] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.up + self.coming >= self.spec.max


class Coming:
    """A node on its way: its group, when it joins, and the plan of what it would seat."""

    __slots__ = ("group", "node", "plan", "ready", "workers")

    def __init__(self, group: GroupState, node: Node, ready: float) -> None:
        self.group = group
        self.node = node
        self.ready = ready
        self.plan = Fleet((node,))
        self.workers: dict[str, None] = {}  # counted on it, in the order they were


@dataclass(frozen=True, slots=True, eq=False)
class Joins:
    coming: Coming


@dataclass(frozen=True, slots=True, eq=False)
class IdleEnds:
    """A group's node idle long enough to go; ``_idle`` names the one in force per node."""

    node: str
    group: GroupState


class Due(NamedTuple):
    at: float
    seq: int  # the order scheduled: unique, so the heap never compares events
    event: Joins | IdleEnds


class Blocked:
    """Waiting workers every fitting group is full for, with their shape and arrival, and
    each shape's of them as (arrival, worker), oldest first."""

    __slots__ = ("queues", "workers")

    def __init__(self) -> None:
        self.workers: dict[str, tuple[Shape, int]] = {}
        self.queues: dict[Shape, list[tuple[int, str]]] = {}

    def add(self, worker: str, shape: Shape, arrival: int) -> None:
        self.workers[worker] = shape, arrival
        insort(self.queues.setdefault(shape, []), (arrival, worker))

    def remove(self, worker: str) -> None:
        shape, arrival = self.workers.pop(worker)
        queue = self.queues[shape]
        del queue[bisect_left(queue, (arrival, worker))]
        if not queue:
            del self.queues[shape]

    def after(self, shape: Shape, arrival: int) -> tuple[int, str] | None:
        """``shape``'s oldest blocked worker that arrived after ``arrival``, if any."""
        queue = self.queues.get(shape)
        if queue is None:
            return None
        at = bisect_right(queue, arrival, key=_arrival_of)
        return queue[at] if at < len(queue) else None


def _arrival_of(entry: tuple[int, str]) -> int:
    return entry[0]
