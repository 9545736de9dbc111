"""The replay's record: one typed log of what happened, read by every output.

The replay (``cli.replay``) writes it once; the table, the JSON document, the
timeline, the turns played and the report page are each read off it, none off
another's reading. Rules:

* One step per scenario event, in order, each at its time (``EventLog.clock``:
  seconds since the start, or the event's index when the scenario gives no
  times).
* Every step lists under ``placed`` the workers it seated, the event's own
  worker first, then the pending workers the change let in (an expectation
  seats no one).
* An arrival carries what its worker asked for: role, memory, owner (itself
  when it names none) and when it wants a turn.
* A node, in the fleet at the start or added by a step, carries its *link*:
  what moving memory between host and device costs on it (its own
  ``turns.hostToDeviceBandwidth``, else its ``hostToDeviceBandwidth``, else
  ``DEFAULT_BANDWIDTH``), and its own turn settings. Every figure that prices
  a switch reads this one link.
* ``walk`` is the one reading of the steps in order: it hands each step, then
  each seat the step made, to a reader, so no reader repeats the dispatch.
* With node groups (``placement.simulator.autoscaler``) the autoscaler's doings
  are steps too, between the scenario's, each at its own time: a node asked
  for (``AskNodeStep``, which changes nothing yet), a group's node joining
  (an ``AddNodeStep`` naming its ``group``) and an idle one removed
  (``RemoveNodeStep``). A node's link names its group; a fixed node's none.
* A worker that finishes is a ``FinishStep``: a departure, read as one.
* A move (``MoveStep``, with ``rebalanceAfter``) is a step at its own time,
  between the scenario's: ``walk`` hands the reader the worker leaving its
  old claim, then tells it of the move (``move``), then the seats the move
  made (its new one first), so a reader that only counts seats needs nothing
  more.
* A lost node is a ``LoseNodeStep``: each of its workers (oldest first) leaves
  its claim and is pending again, as its arrival said, then the node leaves
  the fleet, then the seats the step made follow as any step's do. ``walk``
  hands a reader exactly those calls, so no reader needs a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from placement.model import Node
from placement.simulator.simulation import Placement
from placement.turns import TurnSettings

__all__ = [
    "DEFAULT_BANDWIDTH",
    "AddNodeStep",
    "AllocateStep",
    "ArriveStep",
    "AskNodeStep",
    "EventLog",
    "ExpectStep",
    "FinishStep",
    "LeaveStep",
    "LoseNodeStep",
    "MoveStep",
    "MovedWorker",
    "NodeLink",
    "Reader",
    "RemoveNodeStep",
    "Step",
    "walk",
]

DEFAULT_BANDWIDTH = 25 * 10**9  # bytes per second: 25GB/s, a PCIe 4.0 x16 link in practice


@dataclass(frozen=True, slots=True)
class NodeLink:
    """A node as switches on its claims see it."""

    name: str
    devices: int
    bandwidth: int  # host-to-device bytes per second: what one switch's copying costs
    turns: TurnSettings | None  # its own turn settings (over the scenario's); None: theirs
    group: str | None = None  # the node group it belongs to; None: a fixed node


# Arrivals and departures are nearly every step of a large replay: named tuples (as
# immutable), because building a frozen dataclass costs three times as much and showed
# as 3% of a replay's instructions.
class ArriveStep(NamedTuple):
    worker: str
    placed: tuple[Placement, ...]
    reason: str | None  # why the arriving worker waits; None once it is placed
    role: str
    memory: int
    owner: str
    demand: tuple[tuple[float, float], ...] | None  # when it wants a turn; None: always
    exclusive: bool = False  # it runs alone
    devices: int | None = None  # the exact device count it names; None: none
    movable: bool = False  # it may be moved (rebalanceAfter)
    restart: float = 60.0  # seconds a move costs it: neither resident nor served


class LeaveStep(NamedTuple):
    worker: str
    claim: str | None  # the claim it left; None when it left while pending
    released: bool  # its claim had no one left and returned its devices
    placed: tuple[Placement, ...]


class FinishStep(LeaveStep):
    """A worker whose process completed: it leaves as a departure does."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class MovedWorker:
    """A worker a lost node held: the claim it left, and why it waits if it does."""

    worker: str
    claim: str
    released: bool  # the last of its claim to go: the claim went with it
    arrival: ArriveStep  # what it asked for, as it arrived
    reason: str | None  # why it waits; None once placed again


@dataclass(frozen=True, slots=True)
class LoseNodeStep:
    """A node lost with its claims; its workers placed again (``placed``) or waiting."""

    node: str
    spec: Node
    moved: tuple[MovedWorker, ...]
    placed: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class MoveStep:
    """A movable worker moved at a turn's boundary: it leaves ``claim``, takes ``placed[0]``."""

    worker: str
    claim: str  # the claim it left
    node: str  # the node it left
    released: bool  # it was the last there: the claim went
    placed: tuple[Placement, ...]  # its new seat, then the waiting workers the move let in
    reason: str  # OwnDevices (spread) or EmptiesNode (binpack)
    detail: str  # from where to where, and why
    restart: float  # seconds it is neither resident nor served after the move


@dataclass(frozen=True, slots=True)
class AllocateStep:
    worker: str
    claim: str
    node: str
    placed: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class AddNodeStep:
    node: str
    placed: tuple[Placement, ...]
    link: NodeLink
    group: str | None = None  # the autoscaler added it to this group; None: the scenario did
    spec: Node | None = None  # the node, when a group's (its row may be gone at the end)


@dataclass(frozen=True, slots=True)
class AskNodeStep:
    """The autoscaler asks a group for a node, for the oldest worker nothing could seat."""

    group: str
    node: str
    worker: str
    ready: float  # when it joins the fleet

    @property
    def placed(self) -> tuple[Placement, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class RemoveNodeStep:
    """A group's node that held nothing for its idle time leaves the fleet."""

    node: str
    group: str
    spec: Node

    @property
    def placed(self) -> tuple[Placement, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class ExpectStep:
    worker: str
    expected: dict[str, object]
    failure: str | None  # what was expected and what was seen; None when it held

    @property
    def passed(self) -> bool:
        return self.failure is None

    @property
    def placed(self) -> tuple[Placement, ...]:
        return ()


Step = (ArriveStep | LeaveStep | AllocateStep | AddNodeStep | ExpectStep | AskNodeStep
        | RemoveNodeStep | LoseNodeStep | MoveStep)


@dataclass(frozen=True, slots=True)
class EventLog:
    steps: tuple[Step, ...]
    times: tuple[float, ...] | None  # one per step; None when the scenario gives no times
    nodes: tuple[NodeLink, ...]  # the fleet at the start, in the scenario's order
    settings: TurnSettings | None  # the scenario's turn settings; None: no turns played
    groups: tuple[str, ...] = ()  # the scenario's node groups, by name, in its order

    @property
    def clock(self) -> tuple[float, ...] | range:
        """Each step's time: seconds, or without times the step's index (waits count events)."""
        return self.times if self.times is not None else range(len(self.steps))


class Reader(Protocol):
    """What ``walk`` hands a reader: each step by its kind, each seat, each step's end."""

    def arrive(self, step: ArriveStep, at: float) -> None: ...
    def leave(self, step: LeaveStep, at: float) -> None: ...
    def allocate(self, step: AllocateStep, at: float) -> None: ...
    def add_node(self, step: AddNodeStep, at: float) -> None: ...
    def remove_node(self, step: RemoveNodeStep, at: float) -> None: ...
    def move(self, step: MoveStep, at: float) -> None: ...
    def seat(self, seat: Placement, at: float) -> None: ...
    def stepped(self, at: float) -> None: ...


def walk(log: EventLog, reader: Reader) -> None:
    """The steps in order: the step, then each seat it made, then the step's end."""
    def lose(step: LoseNodeStep, at: float) -> None:
        for moved in step.moved:
            reader.leave(LeaveStep(moved.worker, moved.claim, moved.released, ()), at)
            reader.arrive(moved.arrival, at)
        reader.remove_node(RemoveNodeStep(step.node, "", step.spec), at)

    def move(step: MoveStep, at: float) -> None:
        reader.leave(LeaveStep(step.worker, step.claim, step.released, ()), at)
        reader.move(step, at)

    kinds: dict[type, Callable[[Any, float], None]] = {
        ArriveStep: reader.arrive, LeaveStep: reader.leave, AllocateStep: reader.allocate,
        AddNodeStep: reader.add_node, ExpectStep: _nothing, AskNodeStep: _nothing,
        RemoveNodeStep: reader.remove_node, FinishStep: reader.leave, LoseNodeStep: lose,
        MoveStep: move}
    seat, stepped = reader.seat, reader.stepped
    for step, at in zip(log.steps, log.clock, strict=True):
        kinds[step.__class__](step, at)
        for placed in step.placed:
            seat(placed, at)
        stepped(at)


def _nothing(step: ExpectStep | AskNodeStep, at: float) -> None:
    """An expectation changes nothing, nor does asking for a node."""
