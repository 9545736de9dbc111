"""The ``--output json`` document: a fixed shape a script can rely on.

``workers``, ``claims``, ``steps`` and ``expectations``, and with a clock
``turns`` (the shared claims' turns played, see ``turns_document``), nothing else. A
pending worker also carries ``wouldSeat``: the smallest single change to the
final fleet that would seat it (``placement.remedy``), or null when none
would. Step
entries carry ``event``, ``at`` (the step's time) and what that event did;
every step but ``expect`` lists under ``placed`` the workers it seated, the
event's own worker first and then any pending worker the change let in.

With node groups the autoscaler's steps sit among the events at their times
(``askNode``, ``nodeUp``, ``nodeDown``) and ``nodeGroups`` says, per group
and for the fixed nodes, the nodes over time (``[at, nodes]`` at each
change), the peak, nodes asked for, joined and removed and the GPU-hours paid
for, then the total and the waits (``cli.timeline``'s reading).

Times are seconds since the start when the scenario gives them, and event
indices when it does not (waits then count events). A worker's ``waited`` is
from its arrival to its seat, or, still pending, to the last event.
"""

from __future__ import annotations

import json
from typing import Any

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
from cli.replay import Report
from cli.timeline import FleetUse, fleet_of
from cli.turns import Turns, useful_share
from placement import Fleet, Request, Role
from placement.quantity import format_gib
from placement.remedy import smallest_changes
from placement.simulator.simulation import Placement

__all__ = ["groups_document", "render_json", "to_document", "turns_document"]


def render_json(report: Report) -> str:
    # Compact and ASCII on purpose: that is the C encoder's fast path, and a
    # replay of 30,000 events should not spend its time pretty-printing. The
    # document is a tree built just above, so the cycle check is wasted work.
    return json.dumps(to_document(report), separators=(",", ":"), check_circular=False)


def to_document(report: Report) -> dict[str, Any]:
    failures = list(report.failures)
    steps: list[dict[str, Any]] = []
    arrived: dict[str, float] = {}
    arrivals: dict[str, ArriveStep] = {}  # each worker's latest
    seated: dict[str, float] = {}
    at: float = 0
    for step, at in zip(report.steps, report.clock, strict=True):
        if at.__class__ is float and at.is_integer():
            at = int(at)
        steps.append(_step(step, at))
        if step.__class__ is ArriveStep:
            arrived[step.worker] = at
            arrivals[step.worker] = step
            seated.pop(step.worker, None)
        for seat in step.placed:
            seated[seat.worker] = at
    end = at
    would_seat = _would_seat(report, arrivals)
    return {
        "workers": {
            state.name: {
                "phase": str(state.phase),
                "claim": state.claim,
                "node": state.node,
                "devices": state.devices,
                "memoryPerDevice": (format_gib(state.memory_per_device)
                                    if state.memory_per_device is not None else None),
                "owner": state.owner,
                "reason": str(state.reason) if state.reason is not None else None,
                "arrivedAt": arrived[state.name],
                "placedAt": seated.get(state.name),
                "waited": seated.get(state.name, end) - arrived[state.name],
                **({"wouldSeat": would_seat[_class_of(arrivals[state.name])]}
                   if state.claim is None else {}),
            }
            for state in report.workers
        },
        "claims": {
            claim.name: {
                "node": claim.node,
                "allocated": claim.allocated,
                "devices": claim.devices,
                "workers": list(claim.workers),
            }
            for claim in report.claims
        },
        "steps": steps,
        "expectations": {
            "passed": len(report.expectations) - len(failures),
            "failed": len(failures),
            "failures": failures,
        },
        # Without a clock no turn is played, and the document keeps its four keys.
        **({"turns": turns_document(report.turns)}
           if report.turns is not None and report.turns.note is None else {}),
        **({"nodeGroups": groups_document(fleet_of(report.log))}
           if report.log.groups else {}),
    }


def groups_document(fleet: FleetUse) -> dict[str, Any]:
    """The fleet the autoscaler kept (``cli.timeline``): nodes over time, GPU-hours, waits."""
    waits = fleet.waits
    return {
        "groups": {use.group: {"nodes": [[_number(at), count] for at, count in use.nodes],
                               "peak": use.peak, "asked": use.asked, "joined": use.added,
                               "removed": use.removed, "gpuHours": use.gpu_hours}
                   for use in fleet.groups},
        "nodesPeak": fleet.nodes_peak,
        "gpuHours": fleet.gpu_hours,
        "waits": {"workers": waits.count, "neverSeated": waits.unseated,
                  "median": waits.median, "p95": waits.p95, "max": waits.longest},
    }


def _number(at: float) -> float:
    return int(at) if at.is_integer() else at


def turns_document(turns: Turns) -> dict[str, Any]:
    """The shared claims' turns (``cli.turns``); seconds throughout."""
    t = turns.settings
    s = turns.summary()
    return {
        "settings": {"quantum": t.quantum, "minResident": t.min_resident,
                     "yieldGrace": t.yield_grace,
                     **({"nodes": {name: {"quantum": n.quantum, "minResident": n.min_resident,
                                          "yieldGrace": n.yield_grace}
                                   for name, n in turns.nodes}} if turns.nodes else {})},
        "switches": s.switches,
        "switchingShare": s.switching_share,
        "waits": {"median": s.median_wait, "max": s.longest_wait},
        "servedShare": s.served_share,
        "usefulShare": s.useful_share,
        "claims": {c.claim: {"node": c.node, "switches": c.switches,
                             "switchingSeconds": c.switching,
                             "switchingShare": (c.switching / c.span(turns.end)
                                                if c.span(turns.end) > 0 else 0.0),
                             "usefulSeconds": c.useful,
                             "usefulShare": useful_share(c, turns.end)}
                   for c in turns.claims},
        "workers": {w.worker: {"owner": w.owner, "claim": w.claim, "residentSeconds": w.resident,
                               "residentShare": w.share, "wantingSeconds": w.wanting,
                               "servedSeconds": w.served, "servedShare": w.served_share,
                               "turns": w.turns,
                               "evictions": w.evictions,
                               "waits": {"median": w.median_wait, "max": w.longest_wait}}
                    for w in turns.workers},
        "owners": {o.owner: {"workers": o.workers, "residentSeconds": o.resident,
                             "residentShare": o.share, "wantingSeconds": o.wanting,
                             "servedSeconds": o.served, "servedShare": o.served_share,
                             "waits": {"median": o.median_wait, "max": o.longest_wait}}
                   for o in turns.owners},
    }


_Class = tuple[str, int, bool, int]  # role, memory, exclusive, devices named (0: none)


def _class_of(arrival: ArriveStep) -> _Class:
    return arrival.role, arrival.memory, arrival.exclusive, arrival.devices or 0


def _would_seat(report: Report,
                arrivals: dict[str, ArriveStep]) -> dict[_Class, dict[str, object] | None]:
    """The smallest change that would seat each pending worker, per (role, memory,
    exclusive, devices named).

    The decision reads nothing else of a worker (its owner only ranks joins, and a
    change is tried by whether it seats at all), so one answer serves a class. The
    fleet is built here for this alone, so the trials borrow it rather than a copy
    each: on a 1,000-node day a copy costs about as much as building it.
    """
    classes = sorted({_class_of(arrivals[s.name]) for s in report.workers if s.claim is None})
    if not classes:
        return {}
    found = smallest_changes((Request("pending", Role(role), memory, exclusive=exclusive,
                                      devices=devices or None)
                              for role, memory, exclusive, devices in classes),
                             _ending_fleet(report), lend=True)
    return {key: change.to_dict() if change is not None else None
            for key, change in zip(classes, found, strict=True)}


def _ending_fleet(report: Report) -> Fleet:
    """The fleet at the end of the replay, from its claims and nodes: the claims first,
    then the nodes. A node joining files the claims waiting for it at once, where each
    claim added to a known node refiles the node's free devices (on the bench's 1,000-node
    days, from a fifth to half of the building). The books and the index are the same."""
    fleet = Fleet((), report.claims)
    for summary in report.nodes:
        fleet.add_node(summary.node)
    return fleet


def _step(step: Step, at: float) -> dict[str, Any]:
    if isinstance(step, ArriveStep):
        return {"event": "arrive", "at": at, "worker": step.worker,
                "placed": _seats(step.placed), "reason": step.reason}
    if isinstance(step, LoseNodeStep):
        seats = {seat.worker: seat for seat in step.placed}
        return {"event": "loseNode", "at": at, "node": step.node,
                "moved": [{"worker": m.worker, "claim": m.claim, "released": m.released,
                           "placed": _seats(tuple(filter(None, [seats.get(m.worker)]))),
                           "reason": m.reason} for m in step.moved],
                "placed": _seats(step.placed)}
    if isinstance(step, MoveStep):
        return {"event": "move", "at": at, "worker": step.worker, "claim": step.claim,
                "node": step.node, "released": step.released, "reason": step.reason,
                "detail": step.detail, "restartSeconds": step.restart,
                "placed": _seats(step.placed)}
    if isinstance(step, LeaveStep):
        return {"event": "finish" if isinstance(step, FinishStep) else "leave", "at": at,
                "worker": step.worker, "claim": step.claim, "released": step.released,
                "placed": _seats(step.placed)}
    if isinstance(step, AllocateStep):
        return {"event": "allocate", "at": at, "worker": step.worker, "claim": step.claim,
                "node": step.node, "placed": _seats(step.placed)}
    if isinstance(step, AddNodeStep):
        if step.group is not None:
            return {"event": "nodeUp", "at": at, "node": step.node, "group": step.group,
                    "placed": _seats(step.placed)}
        return {"event": "addNode", "at": at, "node": step.node, "placed": _seats(step.placed)}
    if isinstance(step, AskNodeStep):
        return {"event": "askNode", "at": at, "node": step.node, "group": step.group,
                "worker": step.worker, "ready": step.ready}
    if isinstance(step, RemoveNodeStep):
        return {"event": "nodeDown", "at": at, "node": step.node, "group": step.group}
    assert isinstance(step, ExpectStep)
    return {"event": "expect", "at": at, "worker": step.worker, "expected": step.expected,
            "passed": step.passed, "failure": step.failure}


def _seats(seats: tuple[Placement, ...]) -> list[dict[str, Any]]:
    return [{"worker": seat.worker, "claim": seat.claim, "node": seat.node,
             "devices": seat.devices, "newClaim": seat.new_claim, "allocated": seat.allocated,
             "retried": seat.retried, "workers": seat.workers} for seat in seats]
