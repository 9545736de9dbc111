"""A scenario's typed values: its nodes, node groups and events, and the scenario itself.

Frozen attrs classes, each field declared with its YAML key and its checks
(``cli.fields``). ``build`` makes one from a mapping, by these rules:

* A key the model does not know is refused, the closest known key suggested.
* An empty value (``hostMemory:``) means the same as leaving the key out; a
  required key left out or empty is refused.
* A field's parser runs first (a quantity to bytes, a list to a tuple), then
  its validators.
* A node gives either ``deviceGroups`` or ``devices`` and ``deviceMemory``,
  each size of device once; the groups fill in the devices in all and the
  smallest memory.

``build_event`` reads one event, a mapping with exactly one key, its kind::

    kind       body                          what it does in the replay
    arrive     name, role, memory, ...       a worker asks for a seat
    leave      the worker's name             it departs: its seat and claim go
    finish     the worker's name             its process completed: as on leave
    allocate   the worker's name             its claim is allocated (deferred DRA)
    loseNode   the node's name               the node is lost: its workers placed again
    addNode    a node's keys                 a node joins the fleet
    expect     worker, and what to check     the worker's state is checked
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import attrs

from cli.fields import (
    LARGEST_COUNT,
    ROLES,
    FieldError,
    check_boolean,
    check_count,
    check_floor,
    check_left_out,
    check_name,
    check_optional_name,
    check_optional_text,
    check_pods,
    check_roles,
    field,
    field_path,
    key_of,
    key_text,
    one_of,
    parse_bandwidth,
    parse_host_memory,
    parse_memory,
    parse_seconds,
    parse_turns,
    to_left_out,
    to_roles,
    unknown_key_message,
)
from cli.show import describe, excerpt
from cli.turnspec import NodeTurns, parse_demand
from placement import Node, Policy, Request, Role
from placement.policy import DEFAULT_POLICY
from placement.quantity import format_quantity
from placement.simulator.autoscaler import NodeGroup
from placement.simulator.simulation import Seating
from placement.turns import TurnSettings

__all__ = [
    "AddNode",
    "Allocate",
    "Arrive",
    "Event",
    "Expect",
    "Finish",
    "Leave",
    "LoseNode",
    "NodeGroupSpec",
    "NodeSpec",
    "Scenario",
    "build",
    "build_event",
]

PHASES = tuple(phase.value for phase in Seating)


@attrs.frozen
class NodeSpec:
    name: str = field("name", check_name)
    devices: int = field("devices", check_count)
    device_memory: int = field("deviceMemory", parse=parse_memory)
    host_memory: int | None = field("hostMemory", parse=parse_host_memory, default=None)
    roles: tuple[str, ...] = field("roles", check_roles, parse=to_roles, default=())
    max_workers_per_claim: int = field("maxWorkersPerClaim", check_count, default=1)
    product: str | None = field("product", check_optional_text, default=None)
    # Pod slots for workers (allocatable pods less the other pods on it); absent: unchecked.
    pods: int | None = field("pods", check_pods, default=None)
    # Only the report reads it: what one switch between two workers on a shared claim costs.
    host_to_device_bandwidth: int | None = field("hostToDeviceBandwidth", parse=parse_bandwidth,
                                                 default=None)
    # Its own turn settings over the scenario's (cli.turnspec); None: the scenario's.
    turns: NodeTurns | None = field("turns", parse=parse_turns,  # noqa: RUF009 (attrs)
                                    default=None)
    # Devices the node publishes that placement does not count, and why (a snapshot of a
    # mixed node says them); never counted in the simulation either.
    left_out: tuple[tuple[int, str], ...] = field("leftOut", check_left_out, parse=to_left_out,
                                                  default=())
    # (devices, memory) per size of a node of mixed devices, read by _with_groups
    # (which fills devices and deviceMemory in); () on a node of one size.
    device_groups: tuple[tuple[int, int], ...] = field("deviceGroups", default=())

    def to_node(self) -> Node:
        if self.device_groups:
            return Node.grouped(self.name, self.device_groups, host_memory=self.host_memory,
                                roles=frozenset(Role(role) for role in self.roles),
                                max_workers_per_claim=self.max_workers_per_claim,
                                product=self.product or "", pods=self.pods)
        return Node(self.name, self.devices, self.device_memory, self.host_memory,
                    frozenset(Role(role) for role in self.roles), self.max_workers_per_claim,
                    self.product or "", self.pods)


@attrs.frozen
class NodeGroupSpec:
    """A top-level ``nodeGroups`` entry: what the simulated autoscaler may add and remove."""

    name: str = field("name", check_name)
    # A node's keys but its name (read by cli.scenario's _groups first).
    template: NodeSpec = field("template")  # noqa: RUF009 (attrs)
    max: int = field("max", check_count)
    boot: float = field("bootTime", parse=parse_seconds)
    idle: float = field("idleTime", parse=parse_seconds)
    min: int = field("min", check_floor, default=0)

    @max.validator
    def _not_below_min(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, int) and isinstance(self.min, int) and value < self.min:
            raise FieldError(key_of(attribute), f"must be at least min ({self.min}), "
                             f"got {describe(value)}")

    def to_group(self) -> NodeGroup:
        return NodeGroup(self.name, self.template.to_node(), self.min, self.max, self.boot,
                         self.idle)


@attrs.frozen
class Arrive:
    kind: ClassVar[str] = "arrive"
    name: str = field("name", check_name)
    role: str = field("role", one_of(*ROLES))
    memory: int = field("memory", parse=parse_memory)
    owner: str | None = field("owner", check_optional_name, default=None)
    # When it wants a turn on a shared claim (cli.turnspec); None: all the time it is placed.
    demand: tuple[tuple[float, float], ...] | None = field("demand", parse=parse_demand,
                                                           default=None)
    # Runs alone: never joins a claim, and no one joins its claim.
    exclusive: bool = field("exclusive", check_boolean, default=False)
    # Exactly this many devices of one node, each holding memory / devices (a
    # tensor-parallel server); never joins a claim. None: as many as its memory needs.
    devices: int | None = field("devices", default=None)
    # It may be stopped and started again elsewhere (with rebalanceAfter), paying
    # ``restart`` seconds each time it is: neither resident nor served meanwhile.
    movable: bool = field("movable", check_boolean, default=False)
    restart: float = field("restart", parse=parse_seconds, default=60.0)

    @devices.validator
    def _whole_devices(self, attribute: attrs.Attribute[Any], value: object) -> None:
        # Named with the worker: the count is the server's own, read beside its name.
        try:
            check_count(self, attribute, value)
        except FieldError as error:
            raise FieldError(error.key, f"worker {excerpt(self.name)}: {error.message}") from None

    def to_request(self) -> Request:
        # No owner: an owner of one, itself (the placement library's rule).
        return Request(self.name, _ROLES[self.role], self.memory, self.owner or "",
                       self.exclusive, self.devices, self.movable)


_ROLES = {role.value: role for role in Role}


@attrs.frozen
class Leave:
    kind: ClassVar[str] = "leave"
    worker: str = field("leave", check_name)


@attrs.frozen
class Finish:
    """The worker's process completed: its seat and claim go as on a departure."""

    kind: ClassVar[str] = "finish"
    worker: str = field("finish", check_name)


@attrs.frozen
class LoseNode:
    """The node is lost (a cloud took it): its workers are placed again on what is left."""

    kind: ClassVar[str] = "loseNode"
    node: str = field("loseNode", check_name)


@attrs.frozen
class Allocate:
    kind: ClassVar[str] = "allocate"
    worker: str = field("allocate", check_name)


@attrs.frozen
class AddNode:
    kind: ClassVar[str] = "addNode"
    node: NodeSpec


@attrs.frozen
class Expect:
    kind: ClassVar[str] = "expect"
    worker: str = field("worker", check_name)
    phase: str | None = field("phase", one_of(*PHASES), default=None)
    node: str | None = field("node", check_optional_name, default=None)
    shares_with: str | None = field("sharesWith", check_optional_name, default=None)
    alone: bool | None = field("alone", check_boolean, default=None)
    reason: str | None = field("reason", check_optional_text, default=None)
    devices: int | None = field("devices", check_count, default=None)

    @shares_with.validator
    def _not_itself(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value == self.worker:
            raise FieldError(key_of(attribute), "names the worker itself")

    def checks(self) -> dict[str, object]:
        """The expectation as written, without the worker and the keys left out."""
        return {key_of(a): getattr(self, a.name) for a in attrs.fields(Expect)[1:]
                if getattr(self, a.name) is not None}


Event = Arrive | Leave | Allocate | AddNode | Expect | Finish | LoseNode


@attrs.frozen
class Scenario:
    dra: str
    nodes: tuple[NodeSpec, ...]
    events: tuple[Event, ...]
    # Seconds since the start, one per event; None when no event says ``at`` (cli.clock).
    times: tuple[float, ...] | None = None
    # The turn policy on every shared claim; None: turns are not played. Playing every
    # switch of a large day costs far more than placing it, so only a scenario that asks
    # (a top-level `turns`, or compare's --set of a turn setting) pays for it.
    turns: TurnSettings | None = None
    # The placement policy for the whole run: `strategy` and `ownerAffinity` at the top.
    policy: Policy = DEFAULT_POLICY
    # What the simulated autoscaler may add and remove (placement.simulator.autoscaler).
    groups: tuple[NodeGroupSpec, ...] = ()
    # Seconds devices stay free (spread) or a node alone (binpack) before a movable
    # worker moves (placement.rebalance); 0: moves off.
    rebalance_after: float = 0.0

    @property
    def deferred(self) -> bool:
        return self.dra == "deferred"


_EVENT_KINDS = ("arrive", "leave", "allocate", "addNode", "expect", "finish", "loseNode")


def build_event(raw: object) -> Event:
    """One event; a FieldError's key is relative to the event (``arrive.memory``)."""
    if type(raw) is not dict or len(raw) != 1:
        message = "must be a mapping with exactly one of the keys " + ", ".join(_EVENT_KINDS)
        if isinstance(raw, dict) and any(raw.get(kind, 0) is None for kind in _EVENT_KINDS):
            message += " (are the event's fields indented under it?)"
        raise FieldError("", message)
    ((kind, body),) = raw.items()
    try:
        if kind == "arrive":
            return build(Arrive, body)
        if kind == "leave":
            return Leave(body)  # `leave: w` has no inner keys: the event is the field
        if kind == "allocate":
            return Allocate(body)
        if kind == "finish":
            return Finish(body)
        if kind == "loseNode":
            return LoseNode(body)
        if kind == "expect":
            return build(Expect, body)
        if kind == "addNode":
            return AddNode(build(NodeSpec, body))
    except FieldError as error:
        raise FieldError(field_path(kind, "" if kind in ("leave", "allocate", "finish", "loseNode")
                                    else error.key),
                         error.message) from None
    raise FieldError(key_text(kind), unknown_key_message(kind, _EVENT_KINDS, "event"))


_Model = TypeVar("_Model")
_schemas: dict[type, dict[str, tuple[str, Callable[[object], object] | None, bool]]] = {}


def _schema(cls: type) -> dict[str, tuple[str, Callable[[object], object] | None, bool]]:
    """YAML key -> (attribute, parser, required), worked out once per model."""
    if cls not in _schemas:
        _schemas[cls] = {
            str(a.metadata["key"]): (a.name, a.metadata["parse"], a.default is attrs.NOTHING)
            for a in attrs.fields(cls)
        }
    return _schemas[cls]


def _with_groups(raw: object) -> object:
    """A node listing ``deviceGroups``: the groups read and its devices and deviceMemory
    (total, smallest) filled in; anything else as it is. Strict: a node gives either
    deviceGroups or devices and deviceMemory, and each size once."""
    if type(raw) is not dict or raw.get("deviceGroups") is None:
        return raw
    name = raw.get("name")
    who = f"node {excerpt(name)}: " if isinstance(name, str) and name else ""
    for key in ("devices", "deviceMemory"):
        if key in raw:
            raise FieldError(key, f"{who}give either deviceGroups or devices and "
                             "deviceMemory, not both")
    value = raw["deviceGroups"]
    if not isinstance(value, list) or not value:
        raise FieldError("deviceGroups", f"{who}must be a list of {{devices, deviceMemory}}, "
                         f"got {describe(value)}")
    groups: list[tuple[int, int]] = []
    for index, entry in enumerate(value):
        at = f"deviceGroups[{index}]"
        if type(entry) is not dict or set(entry) != {"devices", "deviceMemory"}:
            raise FieldError(at, f"{who}must be {{devices: N, deviceMemory: SIZE}}, "
                             f"got {describe(entry)}")
        devices = entry["devices"]
        if (isinstance(devices, bool) or not isinstance(devices, int)
                or not 1 <= devices <= LARGEST_COUNT):
            raise FieldError(f"{at}.devices", f"{who}must be a whole number from 1 to "
                             f"{LARGEST_COUNT:,}, got {describe(devices)}")
        try:
            memory = parse_memory(entry["deviceMemory"])
        except ValueError as error:
            raise FieldError(f"{at}.deviceMemory", f"{who}{error}") from None
        if any(memory == size for _, size in groups):
            raise FieldError(f"{at}.deviceMemory", f"{who}{format_quantity(memory)} is "
                             "listed twice; list each size once")
        groups.append((devices, memory))
    total = sum(devices for devices, _ in groups)
    if total > LARGEST_COUNT:
        raise FieldError("deviceGroups", f"{who}{total:,} devices in all is out of range "
                         f"(at most {LARGEST_COUNT:,})")
    return dict(raw, deviceGroups=tuple(groups), devices=total,
                deviceMemory=min(size for _, size in groups))


def build(cls: type[_Model], raw: object) -> _Model:
    """An instance of the model from a mapping; a FieldError names the bad key."""
    if cls is NodeSpec:
        raw = _with_groups(raw)
    schema = _schema(cls)
    if type(raw) is not dict:
        raise FieldError("", f"must be a mapping with the keys {', '.join(schema)}, "
                         f"got {describe(raw)}")
    kwargs: dict[str, object] = {}
    for key, value in raw.items():
        try:
            attribute, parse, required = schema[key]
        except (KeyError, TypeError):
            raise FieldError(key_text(key), unknown_key_message(key, tuple(schema), "key")
                             ) from None
        if value is None:
            # An empty value (`hostMemory:`) means the same as leaving the key out.
            if required:
                raise FieldError(key, "is required, got nothing")
            continue
        if parse is not None:
            try:
                value = parse(value)
            except ValueError as error:
                raise FieldError(key, str(error)) from None
        kwargs[attribute] = value
    if len(kwargs) < len(schema):
        for key, (attribute, _, required) in schema.items():
            if required and attribute not in kwargs:
                raise FieldError(key, "is required")
    return cls(**kwargs)

