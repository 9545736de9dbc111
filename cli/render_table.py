"""The table output: what a platform engineer reads after a replay.

First one line per event -- where the worker went (a new claim, or which
claim it joined and how full that claim now is), or why it waits -- with the
pending workers a departure or an allocation let in indented beneath it.
Then the fleet at the end: nodes (devices free, claims, seats, parked host
memory against host memory, and the pod slots workers take against the
node's where a scenario sets them), claims (node, allocated, devices, workers) and
totals, and finally the expectations that did not hold.

Styling (``click.style``) is stripped by ``click.echo`` when the output is not
a terminal, so pipes and files get plain text. Everything the scenario named
(workers, claims, nodes, products, expected values) goes through
``cli.show.printable`` before any styling is added: a name holding a newline
or a terminal escape is shown escaped, one row, no codes reaching the terminal.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import click

from cli.clock import format_duration
from cli.eventlog import (
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    AskNodeStep,
    ExpectStep,
    FinishStep,
    LeaveStep,
    LoseNodeStep,
    MoveStep,
    RemoveNodeStep,
    Step,
)
from cli.replay import NodeSummary, Report
from cli.show import printable as shown
from cli.timeline import FIXED, FleetUse, fleet_of
from cli.turns import Turns, useful_share
from placement import Node
from placement.quantity import format_gib
from placement.remedy import geometry
from placement.simulator.simulation import Placement, Seating

__all__ = ["columns", "group_section", "render_table", "turn_section"]


def render_table(report: Report, title: str) -> Iterator[str]:
    """The report as lines of text (without newlines)."""
    nodes = {summary.node.name: summary.node for summary in report.nodes}
    if report.log.groups:  # a group's node may have left the fleet by the end
            nodes |= {step.node: step.spec for step in report.steps
                  if isinstance(step, AddNodeStep | RemoveNodeStep) and step.spec is not None}
    nodes |= {step.node: step.spec for step in report.steps if isinstance(step, LoseNodeStep)}
    yield click.style(title, bold=True)
    yield ""
    numbered = list(_event_rows(report.steps, nodes))
    rows = [row for _, row in numbered]
    headers = ["#", "event", "worker", "outcome"]
    if report.times is not None:
        # A scenario with times: when each event happened, since the start.
        times = report.times
        headers.insert(1, "at")
        rows = [[row[0], format_duration(times[step], units=4) if step is not None else "",
                 *row[1:]] for step, row in numbered]
    yield from columns(headers, rows, right={0, 1} if report.times is not None else {0})
    yield ""
    yield click.style("Nodes", bold=True)
    if not report.nodes:
        yield "  (none)"
    pods = any(summary.node.pods is not None for summary in report.nodes)
    yield from () if not report.nodes else columns(
        ["node", "product", "roles", "devices", "free", "claims", "seats",
         *(["pods"] if pods else []), "parked / host"],
        [_node_row(summary, pods) for summary in report.nodes],
        right={4, 5, 6, 7} if pods else {4, 5, 6},
    )
    yield ""
    yield click.style("Claims", bold=True)
    if report.claims:
        yield from columns(
            ["claim", "node", "allocated", "devices", "workers"],
            [[shown(claim.name), shown(claim.node),
              "yes" if claim.allocated else "no (sized against)", str(claim.devices),
              shown(", ".join(claim.workers))] for claim in report.claims],
            right={3},
        )
    else:
        yield "  (none)"
    yield ""
    if report.log.groups:
        yield from group_section(fleet_of(report.log))
    if report.turns is not None:
        yield from turn_section(report.turns)
    yield from _totals(report)


# ------------------------------------------------------------------- events


def _event_rows(steps: Sequence[Step],
                nodes: dict[str, Node]) -> Iterator[tuple[int | None, list[str]]]:
    """Each step's row with its index in the log (for its time), then the seats it let in.
    The scenario's events are numbered as in the file; the autoscaler's steps are not."""
    number = 0
    for at, step in enumerate(steps):
        own: Placement | None = None
        retried = step.placed
        if isinstance(step, ArriveStep):
            own, retried = (step.placed[0], step.placed[1:]) if step.placed else (None, ())
            outcome = (_seat_text(own, nodes) if own is not None
                       else click.style("waits", fg="yellow") + f"  {step.reason}")
            row = [str(number), "arrive", shown(step.worker), outcome]
        elif isinstance(step, FinishStep):
            row = [str(number), "finish", shown(step.worker),
                   "completes and " + _leave_text(step)]
        elif isinstance(step, LeaveStep):
            row = [str(number), "leave", shown(step.worker), _leave_text(step)]
        elif isinstance(step, LoseNodeStep):
            row = [str(number), "loseNode", shown(step.node),
                   click.style("lost", fg="red") + f": its {_plural(len(step.moved), 'worker')}"
                   " placed again, oldest first"]
            retried = ()
        elif isinstance(step, MoveStep):  # the rule's, not the scenario's: no number
            row = ["", "move", shown(step.worker),
                   click.style("moves", fg="magenta") + f" ({step.reason}) {shown(step.detail)}; "
                   f"restarts in {format_duration(step.restart)}"]
            retried = step.placed[1:]
        elif isinstance(step, AllocateStep):
            row = [str(number), "allocate", shown(step.worker),
                   f"DRA allocates {shown(step.claim)} on {shown(step.node)}"]
        elif isinstance(step, AddNodeStep) and step.group is None:
            row = [str(number), "addNode", shown(step.node),
                   f"joins the fleet: {_node_text(nodes[step.node])}"]
        elif isinstance(step, ExpectStep):
            row = [str(number), "expect", shown(step.worker), _expect_text(step)]
        else:
            row = ["", *_autoscaler_row(step, nodes)]  # not the scenario's: no number
        number += bool(row[0])
        yield at, row
        for seat in retried:
            yield None, ["", "", f"  + {shown(seat.worker)}",
                         f"was pending: {_seat_text(seat, nodes)}"]
        if isinstance(step, LoseNodeStep):
            yield from ((None, row) for row in _moved_rows(step, nodes))


def _autoscaler_row(step: AddNodeStep | AskNodeStep | RemoveNodeStep,
                    nodes: dict[str, Node]) -> list[str]:
    if isinstance(step, AskNodeStep):
        return ["askNode", shown(step.node),
                f"group {shown(step.group)} asked for a node for {shown(step.worker)}; "
                f"it joins at {format_duration(step.ready, units=4)}"]
    if isinstance(step, AddNodeStep):
        return ["nodeUp", shown(step.node),
                f"joins the fleet (group {shown(step.group or '')}): "
                f"{_node_text(nodes[step.node])}"]
    return ["nodeDown", shown(step.node),
            f"held no claim for its idle time: leaves the fleet (group {shown(step.group)})"]


def _seat_text(seat: Placement, nodes: dict[str, Node]) -> str:
    devices = _plural(seat.devices, "device")
    if seat.new_claim:
        state = "" if seat.allocated else ", waiting for DRA to allocate"
        return f"new claim {shown(seat.claim)} on {shown(seat.node)} ({devices}{state})"
    limit = nodes[seat.node].seats_per_claim
    return (click.style("shares", fg="cyan") + f" {shown(seat.claim)} on {shown(seat.node)} "
            f"({devices}, {seat.workers}/{limit} workers)")


def _moved_rows(step: LoseNodeStep, nodes: dict[str, Node]) -> Iterator[list[str]]:
    """A lost node's workers: where each was placed again, or why it waits."""
    seats = {seat.worker: seat for seat in step.placed}
    for moved in step.moved:
        seat = seats.get(moved.worker)
        outcome = (f"left {shown(moved.claim)}, placed again: {_seat_text(seat, nodes)}"
                   if seat is not None else
                   f"left {shown(moved.claim)}, " + click.style("waits", fg="yellow")
                   + f"  {moved.reason}")
        yield ["", "", f"  ~ {shown(moved.worker)}", outcome]


def _leave_text(step: LeaveStep) -> str:
    if step.claim is None:
        return "leaves while pending"
    if step.released:
        return f"leaves {shown(step.claim)}; the claim is released and its devices return"
    return f"leaves {shown(step.claim)}; the claim stays with its other workers"


def _expect_text(step: ExpectStep) -> str:
    wanted = ", ".join(f"{key} {_yaml_value(value)}" for key, value in step.expected.items())
    wanted = wanted or "is here"
    if step.failure is None:
        return click.style("ok", fg="green") + f"    {wanted}"
    # The failure names the event and worker already shown on the line.
    detail = step.failure.split(": ", 1)[1]
    return click.style("FAIL", fg="red", bold=True) + f"  {shown(detail)}"


def _yaml_value(value: object) -> str:
    """A value as the scenario author wrote it: true/false, reasons in quotes."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and " " in value:
        return f'"{shown(value)}"'
    return shown(str(value))


# -------------------------------------------------------------- node groups

CHANGES = 12  # node counts over time shown per group, the first ones


def group_section(fleet: FleetUse) -> Iterator[str]:
    """Each group's nodes over time and the GPU-hours paid for, then the waits."""
    yield click.style("Node groups", bold=True)
    yield from columns(
        ["group", "nodes now", "peak", "asked", "joined", "removed", "GPU-hours"],
        [[shown(use.group), str(use.nodes[-1][1]), str(use.peak), str(use.asked),
          str(use.added), str(use.removed), f"{use.gpu_hours:,.1f}"]
         for use in fleet.groups], right={1, 2, 3, 4, 5, 6})
    yield (f"  total    {_plural(fleet.nodes_peak, 'node')} at the peak, "
           f"{fleet.gpu_hours:,.1f} GPU-hours paid for (devices x hours in the fleet)")
    waits = fleet.waits
    never = f", {waits.unseated} never seated" if waits.unseated else ""
    yield (f"  waits    {_plural(waits.count, 'worker')}: median "
           f"{format_duration(waits.median)}, p95 {format_duration(waits.p95)}, longest "
           f"{format_duration(waits.longest)}{never}")
    for use in fleet.groups:
        if use.group == FIXED:
            continue
        shown_changes = [f"{count} at {format_duration(at, units=4)}"
                         for at, count in use.nodes[:CHANGES]]
        more = f", ... {len(use.nodes) - CHANGES} more" if len(use.nodes) > CHANGES else ""
        yield f"  {shown(use.group)} nodes over time: {', '.join(shown_changes)}{more}"
    yield ""


# -------------------------------------------------------------------- turns

TOP = 10  # claims and workers listed in the turns section, worst first


def turn_section(turns: Turns) -> Iterator[str]:
    """The shared claims' turns: totals, owners, then the worst claims and workers only."""
    yield click.style("Turns", bold=True)
    if turns.note is not None:
        yield f"  {turns.note}"
        yield ""
        return
    if not turns.claims:
        yield "  no claim was ever shared"
        yield ""
        return
    s, t = turns.summary(), turns.settings
    switches = f"{s.switches:,} switch{'' if s.switches == 1 else 'es'}"
    yield (f"  {_plural(s.claims, 'shared claim')}, {switches}, "
           f"{s.switching_share:.1%} of their time switching; wait for a turn: median "
           f"{format_duration(s.median_wait)}, longest {format_duration(s.longest_wait)} "
           f"(quantum {format_duration(t.quantum)}, minResident "
           f"{format_duration(t.min_resident)}, yieldGrace {format_duration(t.yield_grace)})")
    yield (f"  served {_percent(s.served_share)} of the time workers wanted the turn; "
           f"useful busy {s.useful_share:.1%} of the shared claims' time")
    yield from columns(["owner", "workers", "resident share", "served share", "median wait",
                        "longest wait"],
                       [[shown(o.owner), str(o.workers), f"{o.share:.1%}",
                         _percent(o.served_share), format_duration(o.median_wait),
                         format_duration(o.longest_wait)]
                        for o in sorted(turns.owners, key=lambda o: (o.share, o.owner))[:TOP]],
                       right={1, 2, 3, 4, 5})
    yield from _more(len(turns.owners), "owners", "least resident first")
    yield from columns(
        ["claim", "node", "switches", "switching", "useful busy"],
        [[shown(c.claim), shown(c.node), str(c.switches),
          f"{c.switching / c.span(turns.end):.1%}" if c.span(turns.end) > 0 else "-",
          f"{useful_share(c, turns.end):.1%}" if c.span(turns.end) > 0 else "-"]
         for c in turns.claims[:TOP]], right={2, 3, 4})
    yield from _more(len(turns.claims), "shared claims", "most switches first")
    worst = sorted(turns.workers, key=lambda w: (-w.longest_wait, w.worker))[:TOP]
    yield from columns(
        ["worker", "owner", "claim", "resident", "share", "served", "turns", "median wait",
         "longest wait"],
        [[shown(w.worker), shown(w.owner), shown(w.claim), format_duration(w.resident),
          f"{w.share:.1%}", _percent(w.served_share), str(w.turns),
          format_duration(w.median_wait), format_duration(w.longest_wait)] for w in worst],
        right={3, 4, 5, 6, 7, 8})
    yield from _more(len(turns.workers), "workers", "longest wait first")
    yield ""


def _percent(share: float | None) -> str:
    """A share, or "-" where there is nothing to divide by (never wanted the turn)."""
    return "-" if share is None else f"{share:.1%}"


def _more(count: int, what: str, order: str) -> Iterator[str]:
    if count > TOP:
        yield f"  ... {count - TOP:,} more {what} ({order})"


# ------------------------------------------------------------------ summary


def _node_text(node: Node) -> str:
    roles = "+".join(sorted(node.roles)) or "trainer+sampler"
    host = format_gib(node.host_memory) if node.host_memory is not None else "unchecked"
    pods = "" if node.pods is None else f", {_plural(node.pods, 'pod slot')} for workers"
    return (f"{geometry(node)}, {roles}, host memory {host}, "
            f"up to {_plural(node.seats_per_claim, 'worker')} per claim{pods}")


def _node_row(summary: NodeSummary, pods: bool) -> list[str]:
    node = summary.node
    host = format_gib(node.host_memory) if node.host_memory is not None else "unchecked"
    # Every seat taken runs a pod: the slots used are the seats used.
    slots = [] if not pods else [
        "-" if node.pods is None else f"{summary.seats_used}/{node.pods}"]
    return [
        shown(node.name),
        shown(node.product) or "-",
        "+".join(sorted(node.roles)) or "any",
        geometry(node),
        str(summary.free_devices),
        str(summary.claims),
        f"{summary.seats_used}/{summary.seat_limit}",
        *slots,
        f"{format_gib(summary.parked)} / {host}",
    ]


def _totals(report: Report) -> Iterator[str]:
    phases = {phase: 0 for phase in Seating}
    for state in report.workers:
        phases[state.phase] += 1
    devices = sum(summary.node.devices for summary in report.nodes)
    free = sum(summary.free_devices for summary in report.nodes)
    seats = sum(summary.seats_used for summary in report.nodes)
    limit = sum(summary.seat_limit for summary in report.nodes)
    yield click.style("Totals", bold=True)
    yield (f"  workers  {len(report.workers)}: {phases[Seating.PLACED]} placed, "
           f"{phases[Seating.PLACING]} placing, {phases[Seating.PENDING]} pending")
    yield (f"  fleet    {_plural(len(report.nodes), 'node')}, {devices - free}/{devices} "
           f"devices in use, {_plural(len(report.claims), 'claim')}, "
           f"{seats}/{limit} seats taken")
    expectations = report.expectations
    failures = report.failures
    held = len(expectations) - len(failures)
    if not expectations:
        yield "  expect   none in the scenario"
        return
    if not failures:
        yield f"  expect   all {held} held"
        return
    yield "  expect   " + click.style(f"{len(failures)} of {len(expectations)} FAILED",
                                      fg="red", bold=True)
    yield ""
    for failure in failures:
        yield click.style("FAIL ", fg="red", bold=True) + shown(failure)


# ------------------------------------------------------------------ helpers


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def columns(headers: list[str], rows: list[list[str]], right: set[int]) -> Iterator[str]:
    """Rows padded into columns; the last column is never padded (it may be long)."""
    widths = [len(header) for header in headers]
    for row in rows:
        for column, cell in enumerate(row[:-1]):
            widths[column] = max(widths[column], len(click.unstyle(cell)))

    def line(cells: list[str]) -> str:
        parts = []
        for column, cell in enumerate(cells):
            if column == len(cells) - 1:
                parts.append(cell)
                continue
            pad = " " * (widths[column] - len(click.unstyle(cell)))
            parts.append(pad + cell if column in right else cell + pad)
        return "  " + "  ".join(parts).rstrip()

    yield click.style(line(headers), dim=True)
    for row in rows:
        yield line(row)
