"""A scenario file, read and checked: the simulator's input as typed values.

Reading is strict on purpose. A scenario is a claim about a fleet, so a
misspelt key, a "10Gb", a duplicate name or a YAML ``no`` where a name was
meant must stop the run with one message naming where it is (the event
index and the field), never be guessed around.

Checks that need the replay's state (leaving a worker that is not there,
allocating a pending worker) happen in :mod:`cli.replay`; everything that can
be known from the text alone is checked here, before anything runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from cli.clock import format_duration, parse_duration
from cli.document import ScenarioError, parse_document
from cli.show import EXCERPT, LongNumber, describe, excerpt, number_digits, printable
from cli.turnspec import NodeTurns, parse_demand, parse_node_turns, parse_settings
from placement import Node, Policy, Request, Role, Strategy
from placement.policy import DEFAULT_POLICY
from placement.quantity import LONGEST as LONGEST_QUANTITY
from placement.quantity import format_quantity, parse_quantity
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
    "Scenario",
    "ScenarioError",
    "build_scenario",
    "check_node_turns",
    "load_scenario",
]

PHASES = tuple(phase.value for phase in Seating)
ROLES = tuple(role.value for role in Role)
DRA_MODES = ("instant", "deferred")
STRATEGIES = tuple(strategy.value for strategy in Strategy)
# ownerAffinity: true/false, or on/off as compare's --set spells it.
SWITCH = {True: True, False: False, "on": True, "off": False}


class _FieldError(ValueError):
    """Raised by a validator; the builder turns it into a ScenarioError at the right path."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


# ------------------------------------------------------------------ validators
# Each names the field by its YAML spelling (kept in the attribute's metadata),
# so an error points at what the author wrote, not at a Python name.


def _key(attribute: attrs.Attribute[Any]) -> str:
    return str(attribute.metadata.get("key", attribute.name))


def _name(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        quote = isinstance(value, bool | int | float | LongNumber)
        raise _FieldError(_key(attribute), f"must be a name (a string), got {describe(value)}"
                          + ("; quote it" if quote else ""))
    if not value:
        raise _FieldError(_key(attribute), "must not be empty")
    _unicode(attribute, value)


def _unicode(attribute: attrs.Attribute[Any], value: str) -> None:
    # A JSON escape can spell half of a surrogate pair, which is no character
    # at all: no terminal can print it and no Kubernetes name can hold it.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _FieldError(_key(attribute), f"{excerpt(value)} is not valid Unicode text "
                              "(it holds half of a surrogate pair)") from None


def _optional_name(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _name(instance, attribute, value)


def _optional_text(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _FieldError(_key(attribute), f"must be non-empty text, got {describe(value)}")
    if value is not None:
        _unicode(attribute, value)


def _count(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, LongNumber) or (isinstance(value, int) and value > _LARGEST_COUNT):
        raise _FieldError(_key(attribute), f"is out of range, got {describe(value)} "
                          f"(at most {_LARGEST_COUNT:,})")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldError(_key(attribute), f"must be a whole number, got {describe(value)}")
    if value < 1:
        raise _FieldError(_key(attribute), f"must be at least 1, got {describe(value)}")


def _pods(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # Zero is a real answer: a node whose pod slots other pods take all runs no worker.
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise _FieldError(_key(attribute), f"must be at least 0, got {describe(value)}")
    if value != 0:
        _count(_instance, attribute, value)


# Counts are devices on a node or workers on a claim: a billion is already absurd,
# and a bound keeps every figure the table prints short.
_LARGEST_COUNT = 10**9


def _one_of(*choices: str) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in choices:
            raise _FieldError(_key(attribute), f"{describe(value)} is not one of "
                              + ", ".join(choices))
    return check


def _boolean(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise _FieldError(_key(attribute), f"must be true or false, got {describe(value)}")


def _roles(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple):
        raise _FieldError(_key(attribute), f"must be a list of roles, got {describe(value)}")
    for role in value:
        if role not in ROLES:
            raise _FieldError(_key(attribute),
                              f"{describe(role)} is not a role ({', '.join(ROLES)})")


def _left_out(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple):
        raise _FieldError(_key(attribute), "must be a list of {devices, reason}, got "
                          f"{describe(value)}")
    for entry in value:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise _FieldError(_key(attribute), "each entry must be {devices: N, reason: "
                              f"text}}, got {describe(entry)}")
        count, reason = entry
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise _FieldError(_key(attribute), f"devices must be a whole number >= 1, got "
                              f"{describe(count)}")
        if not isinstance(reason, str) or not reason:
            raise _FieldError(_key(attribute), f"reason must be non-empty text, got "
                              f"{describe(reason)}")


def _to_left_out(value: object) -> object:
    # Each {devices, reason} becomes a pair (hashable); anything else is left for the validator.
    if not isinstance(value, list):
        return value
    return tuple((e.get("devices"), e.get("reason")) if isinstance(e, dict)
                 and set(e) == {"devices", "reason"} else e for e in value)


def _to_roles(value: object) -> object:
    # Lists become tuples so the model stays hashable; anything else is left for the validator.
    return tuple(value) if isinstance(value, list) else value


def _memory(value: object) -> int:
    return _size(value)


def _host_memory(value: object) -> int:
    # Zero is a real answer here: a node that can park nothing never shares.
    return _size(value, allow_zero=True)


def _size(value: object, *, allow_zero: bool = False) -> int:
    return parse_quantity(_quantity_text(value), allow_zero=allow_zero)


def _quantity_text(value: object) -> str | int:
    """``value`` if it can be a quantity; a ValueError saying why not otherwise.

    A size has at most as many digits as a quantity has characters: more than
    any real size needs (and such a size still prints exactly), few enough
    that every step stays cheap.
    """
    if isinstance(value, str):
        return value  # the parser bounds its length
    if isinstance(value, LongNumber) or (isinstance(value, int)
                                         and number_digits(value) > LONGEST_QUANTITY):
        raise ValueError(f"is out of range, got {describe(value)} "
                         f"(at most {LONGEST_QUANTITY} digits)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a Kubernetes quantity such as \"10Gi\", got "
                         f"{describe(value)}")
    return value


def _bandwidth(value: object) -> int:
    # Bytes per second, written as a quantity with an optional "/s": 25GB/s, 32Gi/s, 25G.
    text = _quantity_text(value)
    if isinstance(text, str):
        text = text.strip().removesuffix("/s").replace("iB", "i").replace("B", "")
    try:
        return parse_quantity(text)
    except ValueError:
        raise ValueError(f"{describe(value)} is not a bandwidth such as 25GB/s or "
                         "32Gi/s") from None


def _node_turns(value: object) -> NodeTurns:
    return parse_node_turns(value, _bandwidth)


def _field(key: str, *validators: Any, parse: Callable[[object], object] | None = None,
           **kwargs: Any) -> Any:
    # One validator is passed bare: attrs wraps a list in a combinator that
    # costs as much again per instance, and there are tens of thousands of events.
    validator = validators[0] if len(validators) == 1 else list(validators) or None
    return attrs.field(validator=validator, metadata={"key": key, "parse": parse}, **kwargs)


# ---------------------------------------------------------------------- models


@attrs.frozen
class NodeSpec:
    name: str = _field("name", _name)
    devices: int = _field("devices", _count)
    device_memory: int = _field("deviceMemory", parse=_memory)
    host_memory: int | None = _field("hostMemory", parse=_host_memory, default=None)
    roles: tuple[str, ...] = _field("roles", _roles, parse=_to_roles, default=())
    max_workers_per_claim: int = _field("maxWorkersPerClaim", _count, default=1)
    product: str | None = _field("product", _optional_text, default=None)
    # Pod slots for workers (allocatable pods less the other pods on it); absent: unchecked.
    pods: int | None = _field("pods", _pods, default=None)
    # Only the report reads it: what one switch between two workers on a shared claim costs.
    host_to_device_bandwidth: int | None = _field("hostToDeviceBandwidth", parse=_bandwidth,
                                                  default=None)
    # Its own turn settings over the scenario's (cli.turnspec); None: the scenario's.
    turns: NodeTurns | None = _field("turns", parse=_node_turns,  # noqa: RUF009 (attrs)
                                     default=None)
    # Devices the node publishes that placement does not count, and why (a snapshot of a
    # mixed node says them); never counted in the simulation either.
    left_out: tuple[tuple[int, str], ...] = _field("leftOut", _left_out, parse=_to_left_out,
                                                   default=())
    # (devices, memory) per size of a node of mixed devices, read by _with_groups
    # (which fills devices and deviceMemory in); () on a node of one size.
    device_groups: tuple[tuple[int, int], ...] = _field("deviceGroups", default=())

    def to_node(self) -> Node:
        if self.device_groups:
            return Node.grouped(self.name, self.device_groups, host_memory=self.host_memory,
                                roles=frozenset(Role(role) for role in self.roles),
                                max_workers_per_claim=self.max_workers_per_claim,
                                product=self.product or "", pods=self.pods)
        return Node(self.name, self.devices, self.device_memory, self.host_memory,
                    frozenset(Role(role) for role in self.roles), self.max_workers_per_claim,
                    self.product or "", self.pods)


def _seconds(value: object) -> float:
    """A duration as ``at`` reads it: ``90s``, ``5m``, ``1h30m``, or seconds."""
    if (isinstance(value, str) and len(value) > EXCERPT) or not isinstance(
            value, str | int | float):
        raise ValueError(f"must be a duration such as 90s, 5m or 1h30m, or seconds, "
                         f"got {describe(value)}")
    try:
        return parse_duration(value)
    except OverflowError:
        raise ValueError(f"is out of range, got {describe(value)}") from None


def _floor(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # A group may shrink to nothing: zero is a floor.
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        if value < 0:
            raise _FieldError(_key(attribute), f"must be at least 0, got {describe(value)}")
        return
    _count(_instance, attribute, value)


@attrs.frozen
class NodeGroupSpec:
    """A top-level ``nodeGroups`` entry: what the simulated autoscaler may add and remove."""

    name: str = _field("name", _name)
    # A node's keys but its name (read by _groups first).
    template: NodeSpec = _field("template")  # noqa: RUF009 (attrs)
    max: int = _field("max", _count)
    boot: float = _field("bootTime", parse=_seconds)
    idle: float = _field("idleTime", parse=_seconds)
    min: int = _field("min", _floor, default=0)

    @max.validator
    def _not_below_min(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, int) and isinstance(self.min, int) and value < self.min:
            raise _FieldError(_key(attribute), f"must be at least min ({self.min}), "
                              f"got {describe(value)}")

    def to_group(self) -> NodeGroup:
        return NodeGroup(self.name, self.template.to_node(), self.min, self.max, self.boot,
                         self.idle)


@attrs.frozen
class Arrive:
    kind: ClassVar[str] = "arrive"
    name: str = _field("name", _name)
    role: str = _field("role", _one_of(*ROLES))
    memory: int = _field("memory", parse=_memory)
    owner: str | None = _field("owner", _optional_name, default=None)
    # When it wants a turn on a shared claim (cli.turnspec); None: all the time it is placed.
    demand: tuple[tuple[float, float], ...] | None = _field("demand", parse=parse_demand,
                                                            default=None)
    # Runs alone: never joins a claim, and no one joins its claim.
    exclusive: bool = _field("exclusive", _boolean, default=False)

    def to_request(self) -> Request:
        # No owner: an owner of one, itself (the placement library's rule).
        return Request(self.name, _ROLES[self.role], self.memory, self.owner or "",
                       self.exclusive)


_ROLES = {role.value: role for role in Role}


@attrs.frozen
class Leave:
    kind: ClassVar[str] = "leave"
    worker: str = _field("leave", _name)


@attrs.frozen
class Finish:
    """The worker's process completed: its seat and claim go as on a departure."""

    kind: ClassVar[str] = "finish"
    worker: str = _field("finish", _name)


@attrs.frozen
class LoseNode:
    """The node is lost (a cloud took it): its workers are placed again on what is left."""

    kind: ClassVar[str] = "loseNode"
    node: str = _field("loseNode", _name)


@attrs.frozen
class Allocate:
    kind: ClassVar[str] = "allocate"
    worker: str = _field("allocate", _name)


@attrs.frozen
class AddNode:
    kind: ClassVar[str] = "addNode"
    node: NodeSpec


@attrs.frozen
class Expect:
    kind: ClassVar[str] = "expect"
    worker: str = _field("worker", _name)
    phase: str | None = _field("phase", _one_of(*PHASES), default=None)
    node: str | None = _field("node", _optional_name, default=None)
    shares_with: str | None = _field("sharesWith", _optional_name, default=None)
    alone: bool | None = _field("alone", _boolean, default=None)
    reason: str | None = _field("reason", _optional_text, default=None)
    devices: int | None = _field("devices", _count, default=None)

    @shares_with.validator
    def _not_itself(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value == self.worker:
            raise _FieldError(_key(attribute), "names the worker itself")

    def checks(self) -> dict[str, object]:
        """The expectation as written, without the worker and the keys left out."""
        return {_key(a): getattr(self, a.name) for a in attrs.fields(Expect)[1:]
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

    @property
    def deferred(self) -> bool:
        return self.dra == "deferred"


# --------------------------------------------------------------------- reading

_SCENARIO_KEYS = ("dra", "nodes", "events", "turns", "strategy", "ownerAffinity",
                  "nodeGroups")
_EVENT_KINDS = ("arrive", "leave", "allocate", "addNode", "expect", "finish", "loseNode")


def load_scenario(text: str, *, kind: str = "") -> Scenario:
    """Parse and check a scenario document; raise ScenarioError naming the bad field.

    ``kind`` is ``json`` or ``yaml`` when the file's name says which, else empty.
    """
    return build_scenario(parse_document(text, kind=kind))


def build_scenario(document: object) -> Scenario:
    if document is None:
        raise ScenarioError("", "the scenario is empty (expected the keys dra, nodes, events)")
    if not isinstance(document, dict):
        raise ScenarioError("", f"must be a mapping with the keys dra, nodes, events, "
                            f"got {describe(document)}")
    _reject_unknown(document, _SCENARIO_KEYS, "")
    dra = document.get("dra", "instant")
    if dra not in DRA_MODES:
        raise ScenarioError("dra", f"{describe(dra)} is not one of instant, deferred")
    nodes = tuple(_node(f"nodes[{i}]", raw) for i, raw in enumerate(_list(document, "nodes")))
    seen: dict[str, int] = {}
    for index, node in enumerate(nodes):
        if node.name in seen:
            raise ScenarioError(f"nodes[{index}].name",
                                f"duplicate node {excerpt(node.name)} "
                                f"(first at nodes[{seen[node.name]}])")
        seen[node.name] = index
    events: list[Event] = []
    times: list[float] = []
    now, timed = 0.0, False
    for index, raw in enumerate(_list(document, "events")):
        try:
            if type(raw) is dict and "at" in raw:
                raw, at = {k: v for k, v in raw.items() if k != "at"}, raw["at"]
                now, timed = _time(at, now, index), True
            events.append(_event(raw))
        except _FieldError as error:
            # The path is spelt out only for the bad event, not for the tens of
            # thousands of good ones.
            raise ScenarioError(_path(f"events[{index}]", error.key), error.message) from None
        times.append(now)
    try:
        turns = None if "turns" not in document else parse_settings(
            {} if document["turns"] is None else document["turns"])
    except ValueError as error:
        raise ScenarioError("turns", str(error)) from None
    groups = _groups(document, nodes, events, timed)
    check_node_turns(nodes, events, turns or TurnSettings(), groups)
    return Scenario(dra, nodes, tuple(events), tuple(times) if timed else None, turns,
                    _policy(document), groups)


def _groups(document: Mapping[str, object], nodes: tuple[NodeSpec, ...],
            events: Sequence[Event], timed: bool) -> tuple[NodeGroupSpec, ...]:
    """``nodeGroups``, each checked; ScenarioError naming the group and the field."""
    groups: list[NodeGroupSpec] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(_list(document, "nodeGroups")):
        where = f"nodeGroups[{index}]"
        name = raw.get("name") if type(raw) is dict else None
        named = f"group {excerpt(name)}: " if isinstance(name, str) else ""
        try:
            if type(raw) is dict and "template" in raw:
                template = raw["template"]
                if type(template) is dict and "name" in template:
                    raise _FieldError("template.name", "a group names its nodes itself "
                                      "(<group>-1, <group>-2, ...): leave name out")
                if type(template) is not dict:
                    raise _FieldError("template", "must be a mapping of a node's keys but its "
                                      f"name, got {describe(template)}")
                try:
                    body = _build(NodeSpec, {"name": "template", **template})
                except _FieldError as error:
                    raise _FieldError(_path("template", error.key), error.message) from None
                raw = {**raw, "template": body}
            elif type(raw) is dict:
                raise _FieldError("template", "is required (the keys of a node, but its name)")
            group = _build(NodeGroupSpec, raw)
        except _FieldError as error:
            raise ScenarioError(_path(where, error.key), named + error.message) from None
        if group.name in seen:
            raise ScenarioError(f"{where}.name", f"duplicate group {excerpt(group.name)} "
                                f"(first at nodeGroups[{seen[group.name]}])")
        seen[group.name] = index
        groups.append(group)
    if groups and not timed:
        raise ScenarioError("nodeGroups", "node groups need a clock: give the events times "
                            "with `at` (a node comes up bootTime after it is asked for and "
                            "goes after idleTime)")
    # A group's nodes are <group>-<number>: no other node may take such a name.
    added = [(f"events[{i}].addNode.name", e.node.name) for i, e in enumerate(events)
             if isinstance(e, AddNode)]
    for where, name in [(f"nodes[{i}].name", n.name) for i, n in enumerate(nodes)] + added:
        base, dash, digits = name.rpartition("-")
        if dash and digits.isascii() and digits.isdigit() and base in seen:
            raise ScenarioError(where, f"node {excerpt(name)} takes a name of group "
                                f"{excerpt(base)}'s nodes (nodeGroups[{seen[base]}] names "
                                f"them {base}-1, {base}-2, ...)")
    return tuple(groups)


def _policy(document: Mapping[str, object]) -> Policy:
    strategy = document.get("strategy", Strategy.SPREAD.value)
    if strategy not in STRATEGIES:
        raise ScenarioError("strategy", f"{describe(strategy)} is not one of "
                            + ", ".join(STRATEGIES))
    affinity = document.get("ownerAffinity", True)
    if type(affinity) not in (bool, str) or affinity not in SWITCH:
        raise ScenarioError("ownerAffinity", f"must be true or false (on or off), "
                            f"got {describe(affinity)}")
    return Policy(Strategy(strategy), SWITCH[affinity])


def _node(where: str, raw: object) -> NodeSpec:
    try:
        node: NodeSpec = _at(where, _build, NodeSpec, raw)
    except ScenarioError as error:
        name = raw.get("name") if type(raw) is dict else None
        if not error.where.startswith(f"{where}.turns") or not isinstance(name, str):
            raise
        # Its turns are the node's own: say which node, not only where it sits in the file.
        raise ScenarioError(error.where, f"node {excerpt(name)}: {error.message}") from None
    return node


def check_node_turns(nodes: tuple[NodeSpec, ...], events: Sequence[Event],
                     settings: TurnSettings, groups: Sequence[NodeGroupSpec] = ()) -> None:
    """Every node's own turns over ``settings`` make a policy; ScenarioError naming the node
    otherwise (``compare`` checks again under each variant's settings)."""
    specs = [(f"nodes[{i}]", spec) for i, spec in enumerate(nodes)]
    specs += [(f"events[{i}].addNode", event.node) for i, event in enumerate(events)
              if isinstance(event, AddNode)]
    specs += [(f"nodeGroups[{i}].template", attrs.evolve(group.template, name=group.name))
              for i, group in enumerate(groups)]
    for where, spec in specs:
        if spec.turns is None:
            continue
        try:
            spec.turns.settings(settings)
        except ValueError as error:
            raise ScenarioError(f"{where}.turns", f"node {excerpt(spec.name)}: {error}") from None


def _time(value: object, previous: float, index: int) -> float:
    too_long = isinstance(value, str) and len(value) > EXCERPT
    if too_long or not isinstance(value, str | int | float):
        raise _FieldError("at", f"must be a duration such as 90s, 12m or 1h30m, or seconds, "
                          f"got {describe(value)}")
    try:
        seconds = parse_duration(value)
    except ValueError as error:
        raise _FieldError("at", str(error)) from None
    except OverflowError:  # an int too large for a float
        raise _FieldError("at", f"is out of range, got {describe(value)}") from None
    if seconds < previous:
        raise _FieldError("at", f"{format_duration(seconds)} is earlier than the previous "
                          f"event's time ({format_duration(previous)}, events[{index - 1}]); "
                          "times never go back")
    return seconds


def _at(where: str, build: Callable[..., _Model], *args: object) -> _Model:
    try:
        return build(*args)
    except _FieldError as error:
        raise ScenarioError(_path(where, error.key), error.message) from None


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if key else where


def _list(document: Mapping[str, object], key: str) -> list[object]:
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(key, f"must be a list, got {describe(value)}")
    return value


def _event(raw: object) -> Event:
    """One event; a _FieldError's key is relative to the event (``arrive.memory``)."""
    if type(raw) is not dict or len(raw) != 1:
        message = "must be a mapping with exactly one of the keys " + ", ".join(_EVENT_KINDS)
        if isinstance(raw, dict) and any(raw.get(kind, 0) is None for kind in _EVENT_KINDS):
            message += " (are the event's fields indented under it?)"
        raise _FieldError("", message)
    ((kind, body),) = raw.items()
    try:
        if kind == "arrive":
            return _build(Arrive, body)
        if kind == "leave":
            return Leave(body)  # `leave: w` has no inner keys: the event is the field
        if kind == "allocate":
            return Allocate(body)
        if kind == "finish":
            return Finish(body)
        if kind == "loseNode":
            return LoseNode(body)
        if kind == "expect":
            return _build(Expect, body)
        if kind == "addNode":
            return AddNode(_build(NodeSpec, body))
    except _FieldError as error:
        raise _FieldError(_path(kind, "" if kind in ("leave", "allocate", "finish", "loseNode")
                                else error.key),
                          error.message) from None
    raise _FieldError(_key_text(kind), _unknown_key_message(kind, _EVENT_KINDS, "event"))


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
            raise _FieldError(key, f"{who}give either deviceGroups or devices and "
                              "deviceMemory, not both")
    value = raw["deviceGroups"]
    if not isinstance(value, list) or not value:
        raise _FieldError("deviceGroups", f"{who}must be a list of {{devices, deviceMemory}}, "
                          f"got {describe(value)}")
    groups: list[tuple[int, int]] = []
    for index, entry in enumerate(value):
        at = f"deviceGroups[{index}]"
        if type(entry) is not dict or set(entry) != {"devices", "deviceMemory"}:
            raise _FieldError(at, f"{who}must be {{devices: N, deviceMemory: SIZE}}, "
                              f"got {describe(entry)}")
        devices = entry["devices"]
        if (isinstance(devices, bool) or not isinstance(devices, int)
                or not 1 <= devices <= _LARGEST_COUNT):
            raise _FieldError(f"{at}.devices", f"{who}must be a whole number from 1 to "
                              f"{_LARGEST_COUNT:,}, got {describe(devices)}")
        try:
            memory = _memory(entry["deviceMemory"])
        except ValueError as error:
            raise _FieldError(f"{at}.deviceMemory", f"{who}{error}") from None
        if any(memory == size for _, size in groups):
            raise _FieldError(f"{at}.deviceMemory", f"{who}{format_quantity(memory)} is "
                              "listed twice; list each size once")
        groups.append((devices, memory))
    total = sum(devices for devices, _ in groups)
    if total > _LARGEST_COUNT:
        raise _FieldError("deviceGroups", f"{who}{total:,} devices in all is out of range "
                          f"(at most {_LARGEST_COUNT:,})")
    return dict(raw, deviceGroups=tuple(groups), devices=total,
                deviceMemory=min(size for _, size in groups))


def _build(cls: type[_Model], raw: object) -> _Model:
    """An instance of the model from a mapping; a _FieldError names the bad key."""
    if cls is NodeSpec:
        raw = _with_groups(raw)
    schema = _schema(cls)
    if type(raw) is not dict:
        raise _FieldError("", f"must be a mapping with the keys {', '.join(schema)}, "
                          f"got {describe(raw)}")
    kwargs: dict[str, object] = {}
    for key, value in raw.items():
        try:
            attribute, parse, required = schema[key]
        except (KeyError, TypeError):
            raise _FieldError(_key_text(key), _unknown_key_message(key, tuple(schema), "key")
                              ) from None
        if value is None:
            # An empty value (`hostMemory:`) means the same as leaving the key out.
            if required:
                raise _FieldError(key, "is required, got nothing")
            continue
        if parse is not None:
            try:
                value = parse(value)
            except ValueError as error:
                raise _FieldError(key, str(error)) from None
        kwargs[attribute] = value
    if len(kwargs) < len(schema):
        for key, (attribute, _, required) in schema.items():
            if required and attribute not in kwargs:
                raise _FieldError(key, "is required")
    return cls(**kwargs)


def _reject_unknown(raw: Mapping[object, object], known: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in known:
            text = _key_text(key)
            raise ScenarioError(f"{where}.{text}" if where else text,
                                _unknown_key_message(key, known, "key"))


def _unknown_key_message(key: object, known: tuple[str, ...], what: str) -> str:
    close = (difflib.get_close_matches(key, known, n=1)
             if isinstance(key, str) and len(key) <= EXCERPT else [])
    hint = f'; did you mean "{close[0]}"?' if close else f" (expected one of {', '.join(known)})"
    return f"unknown {what}{hint}"


def _key_text(key: object) -> str:
    """A key as a path shows it: as written when it is short text, else described."""
    if isinstance(key, str) and len(key) <= EXCERPT:
        return printable(key)
    return f"<{describe(key)}>"
