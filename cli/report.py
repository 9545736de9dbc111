"""``--report``: one self-contained HTML page about a replay, or about several.

The page needs nothing but itself: the pictures are SVG written into it, the
style sits in the page, and a content security policy forbids fetching
anything, so it opens the same with no network as with one (and a reference
that slipped in would show as an error in the browser's console, which the
browser test looks for).

Tables stay readable however long the scenario: owners and shared claims
are listed worst first, up to a limit, with a line saying how many more
there are. The figures never leave anything out (see ``cli.timeline``). Each
lost node (the log's ``LoseNodeStep``) is marked at its time on every figure
drawn over time, and a drawn claim on it ends there.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cli import figures
from cli.clock import format_duration
from cli.eventlog import LoseNodeStep, MoveStep
from cli.render_json import turns_document
from cli.replay import Report
from cli.timeline import (
    ROLES,
    GroupUse,
    SharedClaim,
    Summary,
    Timeline,
    Wait,
    WaitStats,
    timeline_of,
    wait_stats,
)
from cli.turns import Turns, play_turns
from placement.quantity import format_gib
from placement.turns.play import ClaimTurns

__all__ = ["Variant", "comparison_page", "scenario_page", "write_page", "write_report"]

ROWS = 50  # owners, shared claims, expectations: worst first, then "N more"
DRAWN = 6  # the busiest shared claims whose turns are drawn over time
OVERHEAD = 20  # claims in the switch-overhead figure, most switching first

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; }
p.lead { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; text-align: left;
         white-space: nowrap; }
td.wrap { white-space: normal; }
tr.fail td { color: #b00020; } tr.best td { font-weight: 600; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
.more { color: #777; font-style: italic; }
"""
# A numeric column right-aligned by its table's class (n3: the fourth column), not by a
# class on every cell: cells are most of a page's weight. A row's cells are its children.
NUMERIC_COLUMNS = 10  # the numeric columns a table may mark are among its first ten
_STYLE += ",".join(f".n{i} tr>:nth-child({i + 1})" for i in range(NUMERIC_COLUMNS)) \
    + "{text-align:right;font-variant-numeric:tabular-nums}"
_POLICY = "default-src 'none'; style-src 'unsafe-inline'"

Formatter = Callable[[float], str]
_LOST_CAPTION = " A dotted red line marks each lost node, at the moment it was lost."


@dataclass(frozen=True, slots=True)
class Variant:
    """One replay of a comparison: its label, its counters and its summary."""

    label: str
    timeline: Timeline
    summary: Summary


def write_report(path: Path, name: str, scenario: object, report: Report) -> int:
    """The page for one replay; a path ending in ``.svg`` gets the over-time figure alone.
    Everything comes from the report's log: ``scenario`` is not read (its callers pass it)."""
    timeline = timeline_of(report.log)
    if path.suffix.lower() == ".svg":
        return write_page(path, figures.over_time(timeline, name, _lost(report)))
    return write_page(path, scenario_page(name, report, timeline, _drawn_turns(report)))


def write_page(path: Path, page: str) -> int:
    """Write the page; return its size in bytes."""
    data = page.encode("utf-8")
    path.write_bytes(data)
    return len(data)


def scenario_page(name: str, report: Report, timeline: Timeline,
                  turns: Turns | None = None) -> str:
    """``turns``: the replay's, with intervals kept for the claims to draw (``report.turns``
    when not given: then the section has no residency figure)."""
    fmt = _formatter(timeline.timed)
    summary = timeline.summary()
    devices = timeline.capacity[-1] if timeline.capacity else timeline.start_capacity
    span = (f"{format_duration(timeline.end)} of scenario time" if timeline.timed
            else "no times given: waits count events")
    failed = len(report.failures)
    lost = _lost(report)
    parts = [
        _head(f"openrl-place report: {name}"),
        f"<h1>{_e(name)}</h1>",
        f'<p class="lead">{len(report.nodes)} node{"" if len(report.nodes) == 1 else "s"}, '
        f'{devices:,} device{"" if devices == 1 else "s"}, {_pod_slots(report)}'
        f"{len(report.steps):,} events, {span}, dra: {_e(report.dra)}. "
        f"{summary.placed:,} arrivals got a seat; {summary.pending:,} workers pending at "
        f"the end; expectations: {len(report.expectations) - failed} held, {failed} failed.</p>",
        "<h2>Over time</h2>",
        _figure(figures.over_time(timeline, lost=lost), "over-time",
                "Devices in use by the role of the workers on each claim (a claim that holds "
                "both roles counts as both), against the devices in the fleet; seats taken and "
                "pending workers by role. Each point is the busiest moment of its interval; "
                "the thin line is the quietest." + (_LOST_CAPTION if lost else "")),
        *_group_section(timeline, fmt, lost),
        *_lost_section(report, fmt),
        *_move_section(report, fmt),
        "<h2>Waits</h2>",
        "<p>From arrival to a seat. A worker that never got one counts with the time it "
        "waited until it left or the scenario ended.</p>",
        _figure(figures.waits(timeline.waits, timeline.timed), "waits",
                "Share of arrivals that waited at most so long, by role."),
        "<h3>By role</h3>",
        _wait_table("role", _group(timeline.waits, lambda w: w.role, ROLES), fmt),
        "<h3>By owner</h3>",
        _wait_table("owner", _group(timeline.waits, lambda w: w.owner), fmt, limit=ROWS),
        "<h2>Shared claims</h2>",
        _shared_section(timeline.shared),
        *_turn_section(turns or report.turns, fmt, lost),
        "<h2>Expectations</h2>",
        _expectations(report),
        "</body></html>",
    ]
    return "\n".join(parts)


def _pod_slots(report: Report) -> str:
    """The pod slots for workers, on the nodes that set them (none: nothing to say)."""
    limited = [summary.node.pods for summary in report.nodes if summary.node.pods is not None]
    if not limited:
        return ""
    where = "" if len(limited) == len(report.nodes) else f" on {len(limited)} of them"
    return f"{sum(limited):,} pod slots for workers{where}, "


def comparison_page(name: str, key: str, variants: Sequence[Variant]) -> str:
    timed = all(variant.timeline.timed for variant in variants)
    parts = [
        _head(f"openrl-place compare: {name}"),
        f"<h1>{_e(name)}: {_e(key)}</h1>",
        f'<p class="lead">The same scenario replayed once per value of {_e(key)}.</p>',
        comparison_table(variants, timed),
        *([_figure(figures.nodes([(v.label, total_nodes(v.timeline.fleet)) for v in variants],
                                 timed, max(v.timeline.end for v in variants)), "nodes",
                   "Per variant: nodes in the fleet over time, every group's and the fixed "
                   "ones together.")] if any(v.timeline.fleet for v in variants) else []),
        _figure(figures.side_by_side([(v.label, v.timeline) for v in variants]), "side-by-side",
                "Per variant: devices in use, seats taken and pending workers, on shared "
                "scales. Each point is the busiest moment of its interval; the thin line is "
                "the quietest."),
        "</body></html>",
    ]
    return "\n".join(parts)


def comparison_table(variants: Sequence[Variant], timed: bool) -> str:
    fmt = _formatter(timed)
    idle = "device-hours idle" if timed else "device-events idle"
    rows = []
    for variant in variants:
        s = variant.summary
        rows.append([variant.label, f"{s.placed:,}", f"{s.pending:,}", fmt(s.waits.median),
                     fmt(s.waits.p95), fmt(s.waits.longest), f"{s.seats_peak:,}",
                     f"{s.idle:,.1f}"])
    header = ["variant", "placed", "pending at the end", "median wait", "p95 wait",
              "longest wait", "seats taken (peak)", idle]
    if any(variant.summary.gpu_hours is not None for variant in variants):
        header += ["nodes (peak)", "GPU-hours"]
        for row, variant in zip(rows, variants, strict=True):
            row += [f"{variant.summary.nodes_peak or 0:,}",
                    f"{variant.summary.gpu_hours or 0.0:,.1f}"]
    return _table(header, rows, numeric=range(1, len(header)))


def total_nodes(fleet: Sequence[GroupUse]) -> list[tuple[float, int]]:
    """Every group's node counts over time added up: (time, nodes) at each change."""
    changes = sorted((at, index, count) for index, use in enumerate(fleet)
                     for at, count in use.nodes)
    now = [0] * len(fleet)
    out: list[tuple[float, int]] = []
    for at, index, count in changes:
        now[index] = count
        if out and out[-1][0] == at:
            out[-1] = (at, sum(now))
        else:
            out.append((at, sum(now)))
    return out or [(0.0, 0)]


def _group_section(timeline: Timeline, fmt: Formatter,
                   lost: Sequence[tuple[float, str]] = ()) -> list[str]:
    """With node groups: each group's nodes over time and the GPU-hours paid for."""
    if not timeline.fleet:
        return []
    summary = timeline.summary()
    rows = [[use.group, f"{use.nodes[-1][1]:,}", f"{use.peak:,}", f"{use.asked:,}",
             f"{use.added:,}", f"{use.removed:,}", f"{use.gpu_hours:,.1f}"]
            for use in timeline.fleet]
    return [
        "<h2>Node groups</h2>",
        f"<p>{timeline.nodes_peak:,} nodes at the peak; {summary.gpu_hours or 0.0:,.1f} "
        "GPU-hours paid for (each node's devices times the hours it was in the fleet, from "
        "the start or when it joined until it was removed or the scenario ended). Waits: "
        f"median {fmt(summary.waits.median)}, p95 {fmt(summary.waits.p95)}, longest "
        f"{fmt(summary.waits.longest)}.</p>",
        _figure(figures.nodes([(use.group, use.nodes) for use in timeline.fleet],
                              timeline.timed, timeline.end, lost), "nodes",
                "Nodes in the fleet over time, per node group, and the fixed nodes."
                + (_LOST_CAPTION if lost else "")),
        _table(["group", "nodes at the end", "peak", "asked for", "joined", "removed",
                "GPU-hours"], rows, numeric=range(1, 7)),
    ]


# ------------------------------------------------------------------ sections


def _lost_steps(report: Report) -> list[tuple[float, LoseNodeStep]]:
    return [(at, step) for step, at in zip(report.steps, report.log.clock, strict=True)
            if isinstance(step, LoseNodeStep)]


def _lost(report: Report) -> list[tuple[float, str]]:
    return [(at, step.node) for at, step in _lost_steps(report)]


def _lost_under(claim: ClaimTurns, lost: Sequence[tuple[float, str]]) -> float | None:
    """When the claim's node was lost under it, None if it wasn't: a loss of its node when
    its last worker left (a claim released before a loss, or cut on a node of that name that
    came back after one, was not). The turns' clock is whole nanoseconds: a hair apart."""
    if claim.last is None:
        return None
    return next((at for at, node in lost
                 if node == claim.node and abs(at - claim.last) < 1e-6), None)


def _lost_section(report: Report, fmt: Formatter) -> list[str]:
    """A row per lost node: when, and which of its workers were placed again or wait."""
    rows = [(fmt(at), step.node,
             ", ".join(m.worker for m in step.moved if m.reason is None) or "-",
             ", ".join(m.worker for m in step.moved if m.reason is not None) or "-")
            for at, step in _lost_steps(report)]
    if not rows:
        return []
    return ["<h2>Lost nodes</h2>",
            _table(("at", "node", "placed again", "waiting"), rows, wrap=(2, 3))]


def _move_section(report: Report, fmt: Formatter) -> list[str]:
    """A row per move (``rebalanceAfter``): when, who, why, from where to where, its cost."""
    rows = [(fmt(at), step.worker, step.reason, step.detail, format_duration(step.restart))
            for step, at in zip(report.steps, report.log.clock, strict=True)
            if isinstance(step, MoveStep)]
    if not rows:
        return []
    shown = rows[:ROWS]
    more = (f"<p>The first {ROWS:,} of {len(rows):,} moves.</p>" if len(rows) > ROWS
            else "")
    return ["<h2>Moves</h2>",
            "<p>Movable workers moved at a turn's boundary: to devices of their own "
            "once they stayed free (spread), or off a node they held alone so it can go "
            "(binpack). A move costs its worker the restart shown: neither resident nor "
            "served meanwhile.</p>",
            _table(("at", "worker", "reason", "what", "restart"), shown, wrap=(3,)), more]


def _head(title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>")


def _figure(svg: str, name: str, caption: str) -> str:
    return (f'<figure id="figure-{name}" class="figure">{svg}'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _group(waits: Iterable[Wait], key: Callable[[Wait], str],
           order: Sequence[str] = ()) -> dict[str, WaitStats]:
    groups: dict[str, list[Wait]] = {name: [] for name in order}
    for wait in waits:
        groups.setdefault(key(wait), []).append(wait)
    return {name: wait_stats(group) for name, group in groups.items() if group}


def _wait_table(label: str, stats: dict[str, WaitStats], fmt: Formatter,
                limit: int | None = None) -> str:
    ordered = list(stats.items())
    if limit is not None:
        ordered.sort(key=lambda item: (-item[1].p95, -item[1].longest, item[0]))
    shown = ordered[:limit] if limit is not None else ordered
    rows = [[name, f"{s.count:,}", f"{s.unseated:,}", fmt(s.median), fmt(s.p95),
             fmt(s.longest)] for name, s in shown]
    table = _table([label, "arrivals", "never seated", "median", "p95", "longest"], rows,
                   numeric=range(1, 6))
    return table + _more(len(ordered) - len(shown), f"{label}s", "by p95 wait")


def _shared_section(shared: Sequence[SharedClaim]) -> str:
    if not shared:
        return "<p>No claim was ever shared.</p>"
    ordered = sorted(shared, key=lambda c: (-c.switch_seconds[1], c.claim))
    rows = []
    for claim in ordered[:ROWS]:
        cheapest, dearest = claim.switch_seconds
        cost = (format_duration(dearest) if cheapest == dearest
                else f"{format_duration(cheapest)} to {format_duration(dearest)}")
        names = [f"{worker} ({format_gib(memory)})" for worker, memory in claim.workers[:6]]
        if len(claim.workers) > 6:
            names.append(f"and {len(claim.workers) - 6} more")
        rows.append([claim.claim, claim.node, str(claim.devices), str(claim.most),
                     ", ".join(names), f"{claim.bandwidth / 1e9:g}GB/s", cost])
    intro = ("<p>Every claim that held two or more workers at once. One switch parks the "
             "outgoing worker and restores the incoming one: both workers' memory over the "
             "node's host-to-device bandwidth (<code>hostToDeviceBandwidth</code>, default "
             "25GB/s). The range runs from the two smallest workers it held to the two "
             "largest.</p>")
    table = _table(["claim", "node", "devices", "most at once", "workers it held",
                    "host-to-device", "one switch"], rows, numeric=(2, 3, 6), wrap=(4,))
    return intro + table + _more(len(ordered) - ROWS, "shared claims", "by dearest switch")


def _drawn_turns(report: Report) -> Turns | None:
    """The replay's turns with the busiest claims' intervals: the first pass says which they
    are; only those are played again, keeping their intervals (keeping every claim's would
    cost memory the page never uses, and replaying every claim time it never shows)."""
    turns = report.turns
    if turns is None or turns.note is not None or not turns.claims:
        return turns
    busiest = frozenset(claim.claim for claim in turns.claims[:DRAWN])
    again = play_turns(report.log, keep=busiest, only=busiest)
    intervals = {claim.claim: claim.intervals for claim in again.claims}
    return replace(turns, claims=tuple(
        claim._replace(intervals=intervals[claim.claim]) if claim.claim in intervals else claim
        for claim in turns.claims))


def _turn_section(turns: Turns | None, fmt: Formatter,
                  lost: Sequence[tuple[float, str]] = ()) -> list[str]:
    if turns is None:
        return []
    head = "<h2>Turns</h2>"
    if turns.note is not None:
        return [head, f"<p>{_e(turns.note)}</p>"]
    if not turns.claims:
        return [head, "<p>No claim was ever shared, so no turn was taken.</p>"]
    s, t = turns.summary(), turns.settings
    document = turns_document(turns)
    share = {name: claim["switchingShare"] for name, claim in document["claims"].items()}
    parts = [head, (
        f"<p>Only one worker on a shared claim is resident at a time; the others wait parked "
        f"in host memory. {s.claims:,} shared claims, {s.switches:,} switches, "
        f"{s.switching_share:.1%} of their time switching; wait for a turn: median "
        f"{fmt(s.median_wait)}, longest {fmt(s.longest_wait)} (quantum "
        f"{format_duration(t.quantum)}, minResident {format_duration(t.min_resident)}, "
        f"yieldGrace {format_duration(t.yield_grace)}).</p>")]
    shown = [(c, list(c.intervals)) for c in turns.claims[:DRAWN] if c.intervals is not None]
    drawn = [(f"{c.claim} ({c.node})", intervals) for c, intervals in shown]
    if drawn:
        stops = [_lost_under(c, lost) for c, _ in shown]
        parts.append(_figure(
            figures.residency(drawn, turns.end, True, lost, stops), "residency",
            f"Who was resident when on the {len(drawn)} busiest shared claims (most switches "
            "first): one colour per worker, grey while a worker is parked or restored (a "
            "switch takes seconds, so its grey shows only where switches crowd). On a long "
            "scenario each bar is the worker resident for most of its slice."
            + (" A claim whose node was lost ends at a black bar."
               if any(stop is not None for stop in stops) else "")
            + (_LOST_CAPTION if lost else "")))
    overhead = sorted(turns.claims, key=lambda c: (-share[c.claim], c.claim))[:OVERHEAD]
    parts.append(_figure(
        figures.switch_overhead([(f"{c.claim} ({c.node})", share[c.claim]) for c in overhead]),
        "switch-overhead", f"The share of each claim's time (from its first worker to its "
        f"last) spent switching, for the {len(overhead)} claims that spent most."))
    owners = sorted(turns.owners, key=lambda o: (o.share, o.owner))
    parts += ["<h3>By owner</h3>", _table(
        ["owner", "workers", "resident share"],
        [[o.owner, f"{o.workers:,}", f"{o.share:.1%}"] for o in owners[:ROWS]],
        numeric=(1, 2)), _more(len(owners) - ROWS, "owners", "least resident first")]
    parts += ["<h3>Busiest claims</h3>", _table(
        ["claim", "node", "switches", "switching"],
        [[c.claim, c.node, f"{c.switches:,}", f"{share[c.claim]:.1%}"]
         for c in turns.claims[:ROWS]], numeric=(2, 3)),
        _more(len(turns.claims) - ROWS, "shared claims", "most switches first")]
    worst = sorted(turns.workers, key=lambda w: (-w.longest_wait, w.worker))
    parts += ["<h3>Longest waits for a turn</h3>", _table(
        ["worker", "owner", "claim", "resident", "share", "turns", "median wait",
         "longest wait"],
        [[w.worker, w.owner, w.claim, fmt(w.resident), f"{w.share:.1%}", f"{w.turns:,}",
          fmt(w.median_wait), fmt(w.longest_wait)] for w in worst[:ROWS]],
        numeric=range(3, 8)), _more(len(worst) - ROWS, "workers", "longest wait first")]
    return parts


def _expectations(report: Report) -> str:
    expectations = report.expectations
    if not expectations:
        return "<p>The scenario states no expectations.</p>"
    # Failures first, so a long list still shows what went wrong.
    ordered = sorted(expectations, key=lambda step: step.passed)
    rows, classes = [], []
    for step in ordered[:ROWS]:
        expected = ", ".join(f"{key} {str(value).lower() if isinstance(value, bool) else value}"
                             for key, value in step.expected.items())
        rows.append([step.worker, expected or "present",
                     "held" if step.passed else f"FAILED: {step.failure}"])
        classes.append("" if step.passed else "fail")
    failed = len(report.failures)
    lead = f"<p>{len(expectations) - failed} held, {failed} failed.</p>"
    return (lead + _table(["worker", "expected", "verdict"], rows, classes=classes, wrap=(2,))
            + _more(len(ordered) - ROWS, "expectations", "failures first"))


# ------------------------------------------------------------------- helpers


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Iterable[int] = (),
           classes: Sequence[str] = (), wrap: Iterable[int] = ()) -> str:
    right, wrapped = set(numeric), set(wrap)
    assert max(right, default=0) < NUMERIC_COLUMNS, "a numeric column the style cannot align"
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        css = f' class="{classes[index]}"' if index < len(classes) and classes[index] else ""
        cells = "".join(f"<td class=wrap>{_e(c)}</td>" if i in wrapped
                        else f"<td>{_e(c)}</td>" for i, c in enumerate(row))
        body.append(f"<tr{css}>{cells}</tr>")
    numbers = " ".join(f"n{i}" for i in sorted(right))
    table = f'<table class="{numbers}">' if numbers else "<table>"
    return f"{table}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _more(count: int, what: str, order: str) -> str:
    return f"<p class=more>{count:,} more {what} not listed ({order}).</p>" if count > 0 else ""


def _formatter(timed: bool) -> Formatter:
    if timed:
        return format_duration
    return lambda events: f"{events:,.0f} events" if events != 1 else "1 event"


def _e(text: object) -> str:
    return html.escape(str(text))
