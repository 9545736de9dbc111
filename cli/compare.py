"""``openrl-place compare``: one scenario under several node policies, side by side.

``--set KEY=V1,V2,...`` names one node key (``maxWorkersPerClaim``,
``hostMemory``, ``devices`` or ``pods``) and the values to try. Each value makes a
variant: the scenario with that key set on every node ``--nodes`` selects
(a shell-style pattern on node names, every node by default), nodes added
later by ``addNode`` included. Each variant is replayed in full and
summarised in one row (see ``cli.timeline`` for what the columns count).
``--set`` given again with another key crosses them: a variant per
combination (a turn setting beside a node key, say, to see the turn wait and
the switching under each ``maxWorkersPerClaim``). The placement policy's two
keys are the scenario's too, like the turn settings: ``strategy=spread,binpack``
and ``ownerAffinity=on,off``. A node key applies to the templates of the
node groups ``--nodes`` selects too (by the group's name or its nodes'), and
with node groups each row adds the most nodes at once and the GPU-hours
paid for (``cli.timeline``). ``rebalanceAfter=0,2m,5m`` varies moves (0: off);
whenever it is set, each row adds the devices left free while workers shared
(stranded device-hours), the moves made, the most moves of one worker within
an hour, and the median over workers that shared of their served share
through their whole stay (alone counts as served, a move's restart as
wanted and not served).

Variants are independent replays, so with several variants and several cores
they run in separate processes; the scenario is parsed once, before.
Expectations are not verdicts here: a scenario's ``expect`` lines were
written for one policy, and a variant that breaks them is the point of the
comparison, not an error.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import json
import math
import multiprocessing
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from cli.clock import format_duration, parse_duration
from cli.eventlog import MoveStep
from cli.options import fail, file_kind, install_hint, read_file, report_suffix
from cli.render_table import columns
from cli.replay import Report, replay
from cli.scenario import (
    STRATEGIES,
    SWITCH,
    AddNode,
    NodeSpec,
    Scenario,
    ScenarioError,
    check_node_turns,
    load_scenario,
)
from cli.timeline import Summary, Timeline, build_timeline
from cli.turns import NO_CLOCK, TurnSummary
from cli.turnspec import SETTING_KEYS, settings_with
from placement.quantity import parse_quantity
from placement.turns import TurnSettings

__all__ = ["KEYS", "MOVE_KEY", "POLICY_KEYS", "MoveSummary", "Variant", "command", "crossed",
           "run_variants", "variants_of"]


def _integer(text: str, least: int) -> int:
    if not text.isdecimal() and not (text[:1] == "-" and text[1:].isdecimal()):
        raise ValueError("is not a whole number")
    value = int(text)
    if value < least:
        raise ValueError(f"must be at least {least}")
    return value


def _whole(text: str) -> int:
    return _integer(text, 1)


def _pods(text: str) -> int:
    return _integer(text, 0)


def _host_memory(text: str) -> int:
    try:
        return parse_quantity(text, allow_zero=True)
    except ValueError:
        raise ValueError("is not a size such as 94Gi") from None


# The node keys a variant may set: the YAML key -> (NodeSpec attribute, parser).
KEYS: dict[str, tuple[str, Callable[[str], int]]] = {
    "maxWorkersPerClaim": ("max_workers_per_claim", _whole),
    "hostMemory": ("host_memory", _host_memory),
    "devices": ("devices", _whole),
    "pods": ("pods", _pods),
}


# The placement policy's keys, the scenario's own (not a node's): key -> the values.
POLICY_KEYS: dict[str, tuple[str, ...]] = {"strategy": STRATEGIES, "ownerAffinity": ("on", "off")}
MOVE_KEY = "rebalanceAfter"  # the scenario's moves: a duration, 0 for off
SCENARIO_KEYS = (*SETTING_KEYS, *POLICY_KEYS, MOVE_KEY)


@attrs.frozen
class Variant:
    label: str  # KEY=VALUE as written
    summary: Summary
    timeline: Timeline | None  # kept only when a report is drawn
    turns: TurnSummary | None = None  # None: the scenario has no clock, no turns played
    devices_peak: int = 0  # the most devices claims held at once
    moves: MoveSummary | None = None  # None: moves were not asked about


@attrs.frozen
class MoveSummary:
    """A variant's moves, and what they were for."""

    stranded_hours: float  # device-hours free while a worker sharing a claim could use them
    moves: int
    most_in_an_hour: int  # the most moves of one worker within any hour
    placed_share: float | None  # median over workers that shared (``WorkerTurns.placed_share``)


def variants_of(scenario: Scenario, key: str, values: list[str],
                pattern: str) -> list[tuple[str, Scenario]]:
    """One scenario per value; ValueError naming the bad value or an empty selection."""
    if key in SETTING_KEYS:
        return _turn_variants(scenario, key, values, pattern)
    if key in POLICY_KEYS:
        return _policy_variants(scenario, key, values, pattern)
    if key == MOVE_KEY:
        return _move_variants(scenario, values, pattern)
    attribute, parse = KEYS[key]
    names = [spec.name for spec in scenario.nodes] + [
        event.node.name for event in scenario.events if isinstance(event, AddNode)]
    if not any(fnmatch.fnmatchcase(name, pattern) for name in names) and not any(
            _selects(pattern, group.name) for group in scenario.groups):
        raise ValueError(f'--nodes "{pattern}" matches no node (the nodes: '
                         f"{', '.join(names) if len(names) <= 10 else f'{len(names)} of them'})")
    out = []
    for text in values:
        try:
            value = parse(text)
        except ValueError as error:
            raise ValueError(f"--set {key}={','.join(values)}: {text!r} {error}") from None

        def apply(spec: NodeSpec, value: int = value) -> NodeSpec:
            if not fnmatch.fnmatchcase(spec.name, pattern):
                return spec
            changes: dict[str, Any] = {attribute: value}
            return attrs.evolve(spec, **changes)

        events = tuple(AddNode(apply(event.node)) if isinstance(event, AddNode) else event
                       for event in scenario.events)
        setting: dict[str, Any] = {attribute: value}
        groups = tuple(attrs.evolve(group, template=attrs.evolve(group.template, **setting))
                       if _selects(pattern, group.name) else group
                       for group in scenario.groups)
        out.append((f"{key}={text}", attrs.evolve(
            scenario, nodes=tuple(apply(spec) for spec in scenario.nodes), events=events,
            groups=groups)))
    return out


def _selects(pattern: str, group: str) -> bool:
    """Whether ``--nodes`` picks a group's template: by its nodes' names (``<group>-1``, ...)
    or the group's own."""
    return fnmatch.fnmatchcase(group, pattern) or fnmatch.fnmatchcase(f"{group}-1", pattern)


def crossed(scenario: Scenario, sets: list[tuple[str, list[str]]],
            pattern: str) -> list[tuple[str, Scenario]]:
    """Every combination of the keys' values, the first key varying slowest."""
    out = [("", scenario)]
    for key, values in sets:
        # Turn settings and the policy are the scenario's: --nodes picks nodes for the
        # node keys beside them.
        where = "*" if key in SCENARIO_KEYS and len(sets) > 1 else pattern
        out = [(f"{label}, {more}" if label else more, varied)
               for label, base in out for more, varied in variants_of(base, key, values, where)]
    return out


def _turn_variants(scenario: Scenario, key: str, values: list[str],
                   pattern: str) -> list[tuple[str, Scenario]]:
    """One scenario per value of a turn setting (the scenario's, so every node's)."""
    if pattern != "*":
        raise ValueError(f"--set {key}: the turn settings are the scenario's, for every node; "
                         "--nodes does not apply")
    out = []
    for text in values:
        try:
            settings = settings_with(scenario.turns or TurnSettings(),
                                     {SETTING_KEYS[key]: parse_duration(text)})
            check_node_turns(scenario.nodes, scenario.events, settings, scenario.groups)
        except ValueError as error:  # a ScenarioError too: a node's own turns against it
            raise ValueError(f'--set {key}: "{text}": {error}') from None
        out.append((f"{key}={text}", attrs.evolve(scenario, turns=settings)))
    return out


def _policy_variants(scenario: Scenario, key: str, values: list[str],
                     pattern: str) -> list[tuple[str, Scenario]]:
    """One scenario per value of a policy key (the scenario's, so the whole run's)."""
    if pattern != "*":
        raise ValueError(f"--set {key}: the placement policy is the scenario's, for every "
                         "node; --nodes does not apply")
    out = []
    for text in values:
        if text not in POLICY_KEYS[key]:
            raise ValueError(f'--set {key}: "{text}" is not one of '
                             f"{', '.join(POLICY_KEYS[key])}")
        change: dict[str, Any] = ({"strategy": text} if key == "strategy"
                                  else {"owner_affinity": SWITCH[text]})
        out.append((f"{key}={text}",
                    attrs.evolve(scenario, policy=dataclasses.replace(scenario.policy,
                                                                      **change))))
    return out


def _move_variants(scenario: Scenario, values: list[str],
                   pattern: str) -> list[tuple[str, Scenario]]:
    """One scenario per ``rebalanceAfter`` (the scenario's, so the whole run's)."""
    if pattern != "*":
        raise ValueError(f"--set {MOVE_KEY}: moves are the scenario's, for every node; "
                         "--nodes does not apply")
    if scenario.times is None:
        raise ValueError(f"--set {MOVE_KEY}: moves need a clock, and no event in this "
                         "scenario says `at`")
    if scenario.deferred:
        raise ValueError(f"--set {MOVE_KEY}: moves need dra: instant")
    out = []
    for text in values:
        try:
            seconds = parse_duration(text)
        except ValueError as error:
            raise ValueError(f'--set {MOVE_KEY}: "{text}" {error}') from None
        out.append((f"{MOVE_KEY}={text}", attrs.evolve(scenario, rebalance_after=seconds)))
    return out


def run_variants(variants: list[tuple[str, Scenario]], *, keep_timelines: bool,
                 processes: int | None = None, measure: bool = False) -> list[Variant]:
    """Replay every variant, in parallel when there are several and cores to spare."""
    jobs = processes if processes is not None else min(len(variants), os.cpu_count() or 1)
    if jobs <= 1:
        results = [_run(label, scenario, keep_timelines, measure)
                   for label, scenario in variants]
    else:
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            futures = [pool.submit(_run, label, scenario, keep_timelines, measure)
                       for label, scenario in variants]
            results = [future.result() for future in futures]
    for result in results:
        if isinstance(result, str):
            raise ValueError(result)
    return [result for result in results if isinstance(result, Variant)]


def _run(label: str, scenario: Scenario, keep_timeline: bool,
         measure: bool = False) -> Variant | str:
    """The variant, or what stops it from replaying (as text: it crosses processes)."""
    try:
        report = replay(scenario, idle_allocations=True, measure_stranded=measure)
    except ScenarioError as error:
        return f"with {label}: {error}"
    moves = _moves(report) if measure else None
    timeline = build_timeline(scenario, report)
    summary = timeline.summary()
    turns = (report.turns.summary() if report.turns is not None and report.turns.note is None
             else None)
    devices = max((sum(step) for step in zip(*timeline.devices.values(), strict=True)),
                  default=0)
    if not keep_timeline:
        return Variant(label, summary, None, turns, devices, moves)
    # The side-by-side figures read only the counters over time: ship back no more.
    return Variant(label, summary, dataclasses.replace(timeline, waits=[], shared=[]), turns,
                   devices, moves)


def _moves(report: Report) -> MoveSummary:
    """The moves of one replay, read off its log and turns."""
    when: dict[str, list[float]] = {}
    for step, at in zip(report.steps, report.clock, strict=True):
        if isinstance(step, MoveStep):
            when.setdefault(step.worker, []).append(at)
    most = 0
    for times in when.values():
        start = 0
        for end, at in enumerate(times):
            while at - times[start] >= 3600:
                start += 1
            most = max(most, end - start + 1)
    shares = sorted(share for w in (report.turns.workers if report.turns is not None else ())
                    if (share := w.placed_share) is not None)
    return MoveSummary((report.stranded or 0.0) / 3600, sum(len(t) for t in when.values()),
                       most, shares[max(0, math.ceil(len(shares) / 2) - 1)] if shares else None)


# ------------------------------------------------------------------- command


@click.command(short_help="Replay one scenario under several node policies, side by side.")
@click.argument("file", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--set", "settings", required=True, multiple=True, metavar="KEY=V1,V2[,...]",
              help=f"the node key to vary ({', '.join(KEYS)}), turn setting "
                   f"({', '.join(SETTING_KEYS)}) or policy key ({', '.join(POLICY_KEYS)}) "
                   "and the values to try; given again with another key, every "
                   "combination is a variant")
@click.option("--nodes", "pattern", default="*", show_default=True, metavar="PATTERN",
              help="which nodes get the value: a shell-style pattern on node names")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="table for people, json for scripts")
@click.option("--report", "report_path", type=report_suffix(".html", ".htm"),
              help="also write one self-contained HTML page drawing the variants side by side")
def command(file: Path, settings: tuple[str, ...], pattern: str, output: str,
            report_path: Path | None) -> None:
    """Replay FILE once per value of one node key and print a row per variant:
    workers placed, pending at the end, waits (median, p95, longest), seats
    taken at the peak, and idle devices over the scenario.

    Example: openrl-place compare day.yaml --set maxWorkersPerClaim=1,2,4 --nodes 'l4-*'
    """
    sets = [_parse_set(setting) for setting in settings]
    keys = [key for key, _ in sets]
    if len(set(keys)) < len(keys):
        fail(f"--set: each key once ({', '.join(keys)} repeats one): list its values "
             "together, as --set KEY=V1,V2")
    key = ", ".join(keys)
    name, text = read_file(file)
    try:
        scenario = load_scenario(text, kind=file_kind(file))
        variants = crossed(scenario, sets, pattern)
        measure = MOVE_KEY in keys or scenario.rebalance_after > 0
        results = run_variants(variants, keep_timelines=report_path is not None,
                               measure=measure)
    except ScenarioError as error:
        fail(f"{name}: {error}")
    except ValueError as error:
        fail(str(error))
    timed = scenario.times is not None
    if report_path is not None:
        _write_report(report_path, name, key, results)
    if output == "json":
        sys.stdout.write(json.dumps(_document(key, pattern, timed, results)) + "\n")
    else:
        click.echo("\n".join(_table(name, key, pattern, timed, results)))


def _parse_set(setting: str) -> tuple[str, list[str]]:
    key, _, listed = setting.partition("=")
    if key not in KEYS and key not in SCENARIO_KEYS:
        fail(f'--set: unknown key "{key}" (one of {", ".join([*KEYS, *SCENARIO_KEYS])}), '
             "as --set KEY=V1,V2")
    values = [value.strip() for value in listed.split(",")]
    if not listed or not all(values):
        fail(f"--set {key}: give the values to try, as --set {key}=V1,V2")
    return key, values


def _write_report(path: Path, name: str, key: str, results: list[Variant]) -> None:
    try:  # matplotlib only when a picture is asked for
        from cli.report import Variant as Column
        from cli.report import comparison_page, write_page
    except ImportError as error:
        fail(f"--report needs matplotlib ({error}); install it with: "
             f"{install_hint('report')}")
    page = comparison_page(name, key, [Column(v.label, v.timeline, v.summary)
                                       for v in results if v.timeline is not None])
    try:
        size = write_page(path, page)
    except OSError as error:
        fail(f"{path}: cannot write the report: {error.strerror or error}")
    click.echo(f"report: {path} ({size / 1024:,.0f} KB)", err=True)


def _document(key: str, pattern: str, timed: bool, results: list[Variant]) -> dict[str, Any]:
    idle = "deviceHoursIdle" if timed else "deviceEventsIdle"
    return {
        "key": key,
        "nodes": pattern,
        "clock": "seconds" if timed else "events",
        "variants": [{
            "variant": variant.label,
            "value": variant.label.partition("=")[2],  # the whole rest, when crossed
            "values": dict(part.split("=", 1) for part in variant.label.split(", ")),
            "placed": variant.summary.placed,
            "pending": variant.summary.pending,
            "waits": {"median": variant.summary.waits.median, "p95": variant.summary.waits.p95,
                      "max": variant.summary.waits.longest},
            "seatsUsed": variant.summary.seats_peak,
            "devicesUsed": variant.devices_peak,
            idle: round(variant.summary.idle, 3),
            **({"nodesPeak": variant.summary.nodes_peak,
                "gpuHours": round(variant.summary.gpu_hours, 3)}
               if variant.summary.gpu_hours is not None else {}),
            "turns": None if variant.turns is None else {
                "switches": variant.turns.switches,
                "switchingShare": variant.turns.switching_share,
                "waits": {"median": variant.turns.median_wait,
                          "max": variant.turns.longest_wait},
                "servedShare": variant.turns.served_share,
                "usefulShare": variant.turns.useful_share},
            **({"moves": {"strandedDeviceHours": round(variant.moves.stranded_hours, 3),
                          "moves": variant.moves.moves,
                          "mostInAnHour": variant.moves.most_in_an_hour,
                          "placedServedShare": variant.moves.placed_share}}
               if variant.moves is not None else {}),
        } for variant in results],
    }


def _table(name: str, key: str, pattern: str, timed: bool,
           results: list[Variant]) -> list[str]:
    def wait(value: float) -> str:
        return format_duration(value) if timed else f"{value:g} ev"

    rows = [[v.label, f"{v.summary.placed:,}", f"{v.summary.pending:,}",
             wait(v.summary.waits.median), wait(v.summary.waits.p95),
             wait(v.summary.waits.longest), f"{v.summary.seats_peak:,}",
             f"{v.devices_peak:,}", f"{v.summary.idle:,.1f}"] for v in results]
    headers = ["variant", "placed", "pending", "median wait", "p95 wait", "longest wait",
               "seats (peak)", "devices (peak)",
               "device-hours idle" if timed else "device-events idle"]
    if any(v.summary.gpu_hours is not None for v in results):
        # An autoscaled fleet: what the policy cost in nodes and in GPU-hours paid for.
        headers += ["nodes (peak)", "GPU-hours"]
        for row, v in zip(rows, results, strict=True):
            row += [f"{v.summary.nodes_peak or 0:,}", f"{v.summary.gpu_hours or 0.0:,.1f}"]
    if any(v.turns is not None for v in results):
        # The trade a quantum makes: the wait for a turn against the time spent switching;
        # then what workers got of what they wanted, and the devices' useful time.
        headers += ["turn wait (median)", "turn wait (longest)", "switches", "switching",
                    "served", "useful busy"]
        for row, v in zip(rows, results, strict=True):
            t = v.turns
            row += (["-"] * 6 if t is None else
                    [wait(t.median_wait), wait(t.longest_wait), f"{t.switches:,}",
                     f"{t.switching_share:.1%}",
                     "-" if t.served_share is None else f"{t.served_share:.1%}",
                     f"{t.useful_share:.1%}"])
    if any(v.moves is not None for v in results):
        # What moves bought: devices no longer left free beside sharing workers.
        headers += ["stranded device-hours", "moves", "most/hour", "served (stay)"]
        for row, v in zip(rows, results, strict=True):
            m = v.moves
            row += (["-"] * 4 if m is None else
                    [f"{m.stranded_hours:,.1f}", f"{m.moves:,}", f"{m.most_in_an_hour}",
                     "-" if m.placed_share is None else f"{m.placed_share:.1%}"])
    where = "every node" if pattern == "*" else f'nodes matching "{pattern}"'
    lines = [
        click.style(f"{name}: {key} on {where}", bold=True),
        "",
        *columns(headers, rows, right=set(range(1, len(headers)))),
    ]
    if not timed:
        lines += ["", NO_CLOCK]
    return lines
