"""``explain WORKER``: why a worker on the live cluster waits, and what would seat it.

Rules:

* It prints the worker's phase and reason; for a worker without a seat, one
  verdict line per enabled node and the smallest single change that would
  seat it (``placement.remedy``, which asks the decision about a changed copy
  of the fleet), or that none within this fleet's hardware would; or, when
  the fleet would seat it now, where and why (``joins claim-x: same owner``),
  decided under the scheduler's strategy (``--strategy``, read from the same
  environment variable as the controller's flag).
* A worker without a seat is also told which published devices placement
  does not count, per node and with the reason (not selected by the class,
  tainted, counters consumed, no memory), and a class selector that fails.
* A worker holding a seat gets its claim and node, its turn on the claim as
  the node's time-slicer last published it on the pod (or that it has not),
  and whether and where it would move for efficiency (``rebalancing.outlook``:
  the move under way, or where it would go once devices stay free
  ``--rebalance-after``, read from the controller's environment variable, or
  why it stays).
* A worker labelled with a Kueue queue is told its queue, its Workload and
  what that says: admitted (in which ClusterQueue), waiting (in Kueue's own
  words), evicted, or not written yet.
* Read-only; the cluster is read once (``cli.live``). A cluster that cannot
  be read, or no such worker, is one line on stderr and exit status 2.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import click

from cli.live import KUBECTL, OPENRL_PLACE, Flags, read, unreachable
from controller.fleet.warning import Kind
from controller.inspect_fleet import (
    LiveFleet,
    budget_account,
    budget_line,
    seated_claims,
    standing_claims,
    turn_state,
)
from controller.k8s import kube, naming
from controller.k8s.objects import Worker
from controller.reconcile import workloads
from controller.reconcile.rebalancing import APART, outlook
from controller.reconcile.vocabulary import claim_to_cut
from controller.reconcile.workloads import State
from controller.settings import parse_duration
from placement import Policy, Strategy
from placement.quantity import format_quantity
from placement.rebalance import MoveLimit
from placement.remedy import Diagnosis, NodeVerdict, diagnose

__all__ = ["build", "command", "kubectl_command", "queue_line", "queue_state"]


def build(flags: Flags) -> click.Command:
    """The ``explain`` command, naming its cluster with ``flags``."""

    @click.command("explain")
    @click.argument("worker")
    @flags.apply
    @click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text",
                  show_default=True)
    @click.option("--strategy", envvar="OPEN_RL_STRATEGY", default=Strategy.SPREAD.value,
                  show_default=True, type=click.Choice([s.value for s in Strategy]),
                  help="The scheduler's strategy, under which a seat found now is chosen.")
    @click.option("--rebalance-after", envvar="OPEN_RL_REBALANCE_AFTER", default="5m",
                  show_default=True,
                  help="The scheduler's --rebalance-after: how long devices must stay free "
                       "before a movable worker moves to them (0: moves off).")
    def explain(worker: str, output: str, strategy: str, rebalance_after: str,
                **cluster: Any) -> None:
        """Why WORKER waits: each enabled node's verdict, and the smallest change that
        would seat it.

        Read-only. Exit status 2 when the cluster cannot be read or WORKER does not exist.
        """
        api, live = read(flags, "explain", **cluster)
        found = live.workers.get(worker)
        if found is None:
            unreachable(flags, "explain", f"no OpenRLWorker {worker} in namespace {api.namespace}")
        status = found.status
        claim = seated_claims(live).get(worker)
        standing = standing_claims(live).get(worker)
        diagnosis: Diagnosis | None = None
        if claim is None and not found.spec_error:
            diagnosis = diagnose(found.request, live.view.fleet, Policy(Strategy(strategy)))
        document = _explanation(found.name, found.role.value, found.memory, found.owner,
                                str(status.get("phase") or "Pending"), status.get("reason"),
                                claim, live, diagnosis)
        document["standingClaim"] = standing
        document["queue"] = queue_state(api, found)
        if claim is not None:
            document["turn"] = turn_state(live, found)
            document["move"] = outlook(
                found, live.view.fleet, claim=claim,
                names_taken=claim_to_cut(live.view, found) is None,
                now=dt.datetime.now(dt.UTC), after=_duration(rebalance_after),
                strategy=Strategy(strategy), limit=MoveLimit(apart=APART))
        if output == "json":
            click.echo(json.dumps(document, indent=2))
        else:
            lines = _explanation_lines(document, diagnosis)
            if document["queue"] is not None:
                lines.insert(1, queue_line(document["queue"]))
            if claim is not None:
                lines.append(turn_line(document["turn"]))
                lines.append(f"move: {document['move']}")
            click.echo("\n".join(lines))

    return explain


def queue_state(api: kube.Kube, worker: Worker) -> dict[str, Any] | None:
    """The worker's Kueue queue and what its Workload says; None: it names no queue."""
    queue = workloads.queue_of(worker)
    if not queue:
        return None
    name = naming.workload_name(worker.name, worker.uid)
    document: dict[str, Any] = {"queue": queue, "workload": name}
    try:
        found = workloads.read(api.get(kube.WORKLOADS, name))
    except kube.NotFound:
        return {**document, "state": "no Workload yet (the scheduler writes it when it "
                "looks at the worker, if it runs with --kueue)"}
    except kube.KubeError as exc:
        return {**document, "state": f"its Workload cannot be read: {exc.message}"}
    return {**document, "state": found.state.value, "clusterQueue": found.cluster_queue or None,
            "kueueSays": workloads.why_waiting(found) if found.state is not State.ADMITTED
            else None}


def queue_line(queue: dict[str, Any]) -> str:
    """The worker's queue and its admission, in one line."""
    line = f"queue: {queue['queue']}, Workload {queue['workload']}: {queue['state']}"
    if queue.get("clusterQueue"):
        line += f" in ClusterQueue {queue['clusterQueue']}"
    if queue.get("kueueSays"):
        line += f" (Kueue: {queue['kueueSays']})"
    return line


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="--rebalance-after") from exc


def _explanation(name: str, role: str, memory: int, owner: str, phase: str,
                 reason: str | None, claim: str | None, live: LiveFleet,
                 diagnosis: Diagnosis | None) -> dict[str, Any]:
    claim_view = live.view.claims.get(claim) if claim else None
    return {
        "worker": name, "role": role, "memory": format_quantity(memory), "owner": owner,
        "phase": phase, "reason": reason, "claim": claim,
        "node": claim_view.node if claim_view is not None and claim_view.allocated else None,
        "placementNow": (str(diagnosis.reason) if diagnosis is not None and diagnosis.reason
                         else None),
        # Where it would be seated now, and why ("joins claim-x: same owner"); null: nowhere.
        "seatNow": diagnosis.seat_text or None if diagnosis is not None else None,
        "nodes": ([{**_verdict(v), "hostBudget": budget_account(live, v.node)}
                   for v in diagnosis.nodes] if diagnosis is not None else []),
        "wouldSeat": (diagnosis.change.to_dict() if diagnosis is not None
                      and diagnosis.change is not None else None),
        "alternatives": ([c.to_dict() for c in diagnosis.alternatives[1:]]
                         if diagnosis is not None else []),
        "devicesLeftOut": [w.text for w in live.view.warnings
                           if w.kind in (Kind.DEVICES, Kind.CLASS)],
    }


def _verdict(verdict: NodeVerdict) -> dict[str, Any]:
    return {
        "node": verdict.node, "roles": list(verdict.roles), "accepts": verdict.accepts,
        "devices": verdict.devices, "deviceMemory": format_quantity(verdict.device_memory),
        "freeDevices": verdict.free_devices, "needs": verdict.needed,
        # A mixed node's groups, smallest first, each with its free devices.
        **({"deviceGroups": [{"devices": count, "deviceMemory": format_quantity(size),
                              "freeDevices": free}
                             for (count, size), free in zip(verdict.device_groups,
                                                            verdict.free_by_group, strict=True)]}
           if verdict.device_groups else {}),
        "hostMemory": (format_quantity(verdict.host_memory)
                       if verdict.host_memory is not None else None),
        "parked": format_quantity(verdict.parked) if verdict.parked else "0",
        "maxWorkersPerClaim": verdict.max_workers_per_claim,
        # Pod slots for workers and the workers taking them; null: unchecked.
        "pods": verdict.pods, "workersOnNode": verdict.workers,
        "claims": [{"claim": c.claim, "workers": c.workers, "devices": c.devices,
                    "verdict": c.verdict, "detail": c.detail} for c in verdict.claims],
        "summary": verdict.summary,
    }


def _explanation_lines(document: dict[str, Any], diagnosis: Diagnosis | None) -> list[str]:
    memory = document["memory"]
    lines = [f"worker {document['worker']} ({document['role']}, {memory}, owner "
             f"{document['owner']}): {document['phase']}"]
    if document["claim"] is not None:
        where = f" on {document['node']}" if document["node"] else " (not yet allocated)"
        lines.append(f"holds a seat on claim {document['claim']}{where}")
        return lines
    if document["reason"]:
        lines.append(f"reason: {document['reason']}")
    if document.get("standingClaim"):
        lines.append(f"stands on claim {document['standingClaim']} (not allocated: waiting for "
                     "kube-scheduler or a node to be added; it seats nobody yet)")
    if diagnosis is None:
        return lines
    if diagnosis.reason is None:
        lines.append(f"placement now: it would be seated at its next retry: "
                     f"{diagnosis.seat_text}")
    elif document["reason"] is None or str(diagnosis.reason) not in document["reason"]:
        lines.append(f"placement now: {diagnosis.reason}")
    lines.append("nodes:")
    budgets = {node["node"]: node.get("hostBudget") for node in document.get("nodes") or ()}
    width = max((len(v.node) for v in diagnosis.nodes), default=0)
    for verdict in diagnosis.nodes:
        roles = "/".join(verdict.roles) or "any role"
        lines.append(f"  {verdict.node:<{width}}  {roles:<16} {verdict.summary}")
        account = budgets.get(verdict.node)
        if account is not None and verdict.max_workers_per_claim > 1:
            lines.append(f"  {'':<{width}}    host memory: {budget_line(account)}")
        if not verdict.accepts or not verdict.could_hold:
            continue  # its claims are not this worker's business
        for claim in verdict.claims:
            if claim.verdict != "open":
                lines.append(f"  {'':<{width}}    claim {claim.claim}: {claim.verdict} "
                             f"({claim.detail})")
    if not diagnosis.nodes:
        lines.append("  (no enabled node publishes devices)")
    if document["devicesLeftOut"]:
        lines.append("devices not counted:")
        lines.extend(f"  {line}" for line in document["devicesLeftOut"])
    change = diagnosis.change
    if change is not None:
        lines.append(f"would seat it: {change.text}")
        lines.extend(f"           or: {other.text}" for other in diagnosis.alternatives[1:])
    elif diagnosis.reason is not None and diagnosis.reason.never:
        lines.append("would seat it: nothing within this fleet's hardware (NoCapacity): "
                     f"{diagnosis.reason.detail}")
    elif diagnosis.reason is not None:
        lines.append("would seat it: no single change; it waits for several to free up")
    return lines


def turn_line(turn: dict[str, Any] | None) -> str:
    """The worker's turn on its claim, in one line."""
    if turn is None:
        return ("turn: the time-slicer has not reported on this pod (not installed, or not "
                "running on its node)")
    holder = turn.get("holder") or "nobody"
    return (f"turn: {turn.get('phase', '?')} since {turn.get('since', '?')} on "
            f"{turn.get('node', '?')}; the claim's turn is held by {holder}; "
            f"turns so far {turn.get('turns', 0)}")


command = build(OPENRL_PLACE)  # openrl-place explain
kubectl_command = build(KUBECTL)  # kubectl openrl explain
