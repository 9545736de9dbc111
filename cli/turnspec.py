"""The scenario's turn keys: the policy's settings and a worker's demand, read strictly.

``turns: {quantum: 2m, minResident: 10s, yieldGrace: 30s}`` at the top of a
scenario sets the turn policy on every shared claim (each key optional, the
policy's defaults otherwise). A node's own ``turns`` (the same keys and
``hostToDeviceBandwidth``) overrides them on that node's claims, key by
key; the bandwidth, when given there, is what its switches cost in the
turns played (the node's own ``hostToDeviceBandwidth`` otherwise).
``demand: [{from: 0, to: 10m}, {from: 1h}]`` on an arrival says when that
worker wants a turn: windows of scenario time, in order, not overlapping,
``to`` left out for "until it leaves". Without ``demand`` a worker wants a
turn all the time it is placed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from cli.clock import parse_duration
from cli.show import describe
from placement.turns import TurnSettings

__all__ = ["SETTING_KEYS", "NodeTurns", "parse_demand", "parse_node_turns", "parse_settings"]

SETTING_KEYS = {"quantum": "quantum", "minResident": "min_resident", "yieldGrace": "yield_grace"}
BANDWIDTH_KEY = "hostToDeviceBandwidth"


@dataclass(frozen=True, slots=True)
class NodeTurns:
    """A node's own turn settings: what it changes of the scenario's, key by key."""

    changes: tuple[tuple[str, float], ...]  # (TurnSettings field, seconds)
    bandwidth: int | None = None  # bytes per second for its switches

    def settings(self, base: TurnSettings) -> TurnSettings:
        """``base`` with this node's changes; ValueError (in the scenario's words) if the
        two together are no policy (a minResident past the quantum, say)."""
        return settings_with(base, dict(self.changes))


def parse_node_turns(value: object, bandwidth: Callable[[object], int]) -> NodeTurns:
    """A node's ``turns`` mapping; ``bandwidth`` reads a ``hostToDeviceBandwidth``."""
    keys = [*SETTING_KEYS, BANDWIDTH_KEY]
    if type(value) is not dict:
        raise ValueError(f"must be a mapping with the keys {', '.join(keys)}, "
                         f"got {describe(value)}")
    changes: dict[str, float] = {}
    link = None
    for key, raw in value.items():
        if key == BANDWIDTH_KEY:
            try:
                link = bandwidth(raw)
            except ValueError as error:
                raise ValueError(f"{key}: {error}") from None
        elif key in SETTING_KEYS:
            changes[SETTING_KEYS[key]] = _seconds(raw, key)
        else:
            raise ValueError(f"unknown key {describe(key)} (expected one of {', '.join(keys)})")
    # Whether they make a policy depends on the scenario's settings: checked against them.
    return NodeTurns(tuple(sorted(changes.items())), link)


def _seconds(value: object, key: str) -> float:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"{key} must be a duration such as 30s or 2m, got {describe(value)}")
    try:
        return parse_duration(value)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"{key}: {error}") from None


def parse_settings(value: object) -> TurnSettings:
    """A ``turns`` mapping; ValueError naming the bad key otherwise."""
    if type(value) is not dict:
        raise ValueError(f"must be a mapping with the keys {', '.join(SETTING_KEYS)}, "
                         f"got {describe(value)}")
    changes: dict[str, float] = {}
    for key, raw in value.items():
        if key not in SETTING_KEYS:
            raise ValueError(f"unknown key {describe(key)} (expected one of "
                             f"{', '.join(SETTING_KEYS)})")
        changes[SETTING_KEYS[key]] = _seconds(raw, key)
    return settings_with(TurnSettings(), changes)


def settings_with(base: TurnSettings, changes: dict[str, float]) -> TurnSettings:
    """``base`` with ``changes``; the policy's own checks worded with the scenario's keys."""
    merged = {name: changes.get(name, getattr(base, name)) for name in SETTING_KEYS.values()}
    try:
        return TurnSettings(**merged)
    except ValueError as error:
        text = str(error)
        for key, name in SETTING_KEYS.items():
            text = text.replace(name, key)
        raise ValueError(text) from None


def parse_demand(value: object) -> tuple[tuple[float, float], ...]:
    """A ``demand`` list of ``{from, to}`` windows, in seconds since the start."""
    if not isinstance(value, list):
        raise ValueError(f"must be a list of windows such as {{from: 0, to: 10m}}, "
                         f"got {describe(value)}")
    windows: list[tuple[float, float]] = []
    for index, raw in enumerate(value):
        if type(raw) is not dict or "from" not in raw or set(raw) - {"from", "to"}:
            raise ValueError(f"[{index}] must be a mapping with from (and optionally to), "
                             f"got {describe(raw)}")
        start = _seconds(raw["from"], f"[{index}].from")
        end = _seconds(raw["to"], f"[{index}].to") if raw.get("to") is not None else math.inf
        if end <= start:
            raise ValueError(f"[{index}] ends before it starts")
        if windows and start < windows[-1][1]:
            raise ValueError(f"[{index}] starts before the window before it ends "
                             "(windows in order, not overlapping)")
        windows.append((start, end))
    return tuple(windows)
