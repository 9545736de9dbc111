"""A scenario file, read and checked: the simulator's input as typed values.

Reading is strict on purpose. A scenario is a claim about a fleet, so a
misspelt key, a "10Gb", a duplicate name or a YAML ``no`` where a name was
meant must stop the run with one message naming where it is (the event
index and the field), never be guessed around.

Checks that need the replay's state (leaving a worker that is not there,
allocating a pending worker) happen in :mod:`cli.replay`; everything that can
be known from the text alone is checked here, before anything runs.

The document's own keys (what each part holds is :mod:`cli.model`'s, and how
each value is checked :mod:`cli.fields`'s)::

    key            rule
    dra            instant (the default) or deferred
    nodes          a list of nodes, each name once
    events         a list of events; an event's ``at`` is a duration or seconds,
                   never before the previous event's; an event without one
                   happens with the previous; no ``at`` anywhere: no clock
    turns          the turn settings on every shared claim (cli.turnspec); left
                   out, turns are not played
    strategy       spread (the default) or binpack
    ownerAffinity  true (the default) or false, or on or off
    nodeGroups     a list of node groups, each name once, only with times; no
                   other node takes a name of a group's nodes (<group>-<number>)
    rebalanceAfter a duration (0, the default: moves off): how long devices stay
                   free (spread), or a node holds one worker (binpack), before a
                   movable worker moves; only with times and instant allocation
    anything else  refused, the closest key suggested

A node's own turns must make a policy over the scenario's settings
(``check_node_turns``; ``compare`` checks again under each variant's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import attrs

from cli.clock import format_duration, parse_duration
from cli.document import ScenarioError, parse_document
from cli.fields import FieldError, field_path, key_text, parse_seconds, unknown_key_message
from cli.model import (
    AddNode,
    Allocate,
    Arrive,
    Event,
    Expect,
    Finish,
    Leave,
    LoseNode,
    NodeGroupSpec,
    NodeSpec,
    Scenario,
    build,
    build_event,
)
from cli.show import EXCERPT, describe, excerpt
from cli.turnspec import parse_settings
from placement import Policy, Strategy
from placement.turns import TurnSettings

__all__ = [
    "STRATEGIES",
    "SWITCH",
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
    "ScenarioError",
    "build_scenario",
    "check_node_turns",
    "load_scenario",
]

DRA_MODES = ("instant", "deferred")
STRATEGIES = tuple(strategy.value for strategy in Strategy)
# ownerAffinity: true/false, or on/off as compare's --set spells it.
SWITCH = {True: True, False: False, "on": True, "off": False}

_SCENARIO_KEYS = ("dra", "nodes", "events", "turns", "strategy", "ownerAffinity",
                  "nodeGroups", "rebalanceAfter")


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
            events.append(build_event(raw))
        except FieldError as error:
            # The path is spelt out only for the bad event, not for the tens of
            # thousands of good ones.
            raise ScenarioError(field_path(f"events[{index}]", error.key), error.message) from None
        times.append(now)
    try:
        turns = None if "turns" not in document else parse_settings(
            {} if document["turns"] is None else document["turns"])
    except ValueError as error:
        raise ScenarioError("turns", str(error)) from None
    groups = _groups(document, nodes, events, timed)
    check_node_turns(nodes, events, turns or TurnSettings(), groups)
    return Scenario(dra, nodes, tuple(events), tuple(times) if timed else None, turns,
                    _policy(document), groups, _rebalance_after(document, dra, timed))


def _rebalance_after(document: Mapping[str, object], dra: str, timed: bool) -> float:
    """``rebalanceAfter``: seconds, 0 when absent; ScenarioError when it cannot apply."""
    if "rebalanceAfter" not in document:
        return 0.0
    try:
        seconds = parse_seconds(document["rebalanceAfter"])
    except ValueError as error:
        raise ScenarioError("rebalanceAfter", str(error)) from None
    if seconds > 0 and not timed:
        raise ScenarioError("rebalanceAfter", "moves need a clock: give the events times "
                            "with `at` (a move is due once devices have stayed free that long)")
    if seconds > 0 and dra == "deferred":
        raise ScenarioError("rebalanceAfter", "moves need dra: instant (a move takes its "
                            "new seat at once, before it gives the old one back)")
    return seconds


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
                    raise FieldError("template.name", "a group names its nodes itself "
                                     "(<group>-1, <group>-2, ...): leave name out")
                if type(template) is not dict:
                    raise FieldError("template", "must be a mapping of a node's keys but its "
                                     f"name, got {describe(template)}")
                try:
                    body = build(NodeSpec, {"name": "template", **template})
                except FieldError as error:
                    raise FieldError(field_path("template", error.key), error.message) from None
                raw = {**raw, "template": body}
            elif type(raw) is dict:
                raise FieldError("template", "is required (the keys of a node, but its name)")
            group = build(NodeGroupSpec, raw)
        except FieldError as error:
            raise ScenarioError(field_path(where, error.key), named + error.message) from None
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
        node: NodeSpec = _at(where, build, NodeSpec, raw)
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
        raise FieldError("at", f"must be a duration such as 90s, 12m or 1h30m, or seconds, "
                         f"got {describe(value)}")
    try:
        seconds = parse_duration(value)
    except ValueError as error:
        raise FieldError("at", str(error)) from None
    except OverflowError:  # an int too large for a float
        raise FieldError("at", f"is out of range, got {describe(value)}") from None
    if seconds < previous:
        raise FieldError("at", f"{format_duration(seconds)} is earlier than the previous "
                         f"event's time ({format_duration(previous)}, events[{index - 1}]); "
                         "times never go back")
    return seconds


_Model = TypeVar("_Model")


def _at(where: str, make: Callable[..., _Model], *args: object) -> _Model:
    try:
        return make(*args)
    except FieldError as error:
        raise ScenarioError(field_path(where, error.key), error.message) from None


def _list(document: Mapping[str, object], key: str) -> list[object]:
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(key, f"must be a list, got {describe(value)}")
    return value


def _reject_unknown(raw: Mapping[object, object], known: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in known:
            text = key_text(key)
            raise ScenarioError(f"{where}.{text}" if where else text,
                                unknown_key_message(key, known, "key"))

