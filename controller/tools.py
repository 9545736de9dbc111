"""``openrl-place snapshot`` and ``openrl-place explain``: read-only answers about a live fleet.

Rules:

* Both read the cluster once, through the controller's own reading
  (``inspect_fleet``), and write nothing. They take the controller's
  cluster flags (namespace, device class and driver, kubeconfig) with the
  same environment fallbacks.
* ``snapshot`` prints a scenario: the enabled nodes as the fleet (geometry,
  host memory, roles, max-workers-per-claim), every worker holding or
  waiting for a seat as an arrival in the controller's arrival order, and
  DRA's allocations as they stand (``dra: deferred`` with an ``allocate``
  after the arrival that cut each allocated claim, when some claim is still
  unallocated). It then replays that scenario and says whether ``simulate``
  reproduces the cluster's placements -- same sharing groups on the same
  nodes, the same workers waiting -- or where it does not.
* ``explain WORKER`` prints the worker's phase and reason, one verdict line
  per enabled node, and the smallest single change that would seat it
  (``placement.remedy``), or that none within this fleet's hardware would.
* A cluster that cannot be read is one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
import yaml

from cli.replay import replay
from cli.scenario import ScenarioError, build_scenario
from controller import kube
from controller.inspect_fleet import (
    LiveFleet,
    Unreachable,
    connect,
    holders_in_order,
    read_live_fleet,
)
from controller.settings import default_namespace
from placement import Node, Request, Role
from placement.quantity import format_quantity
from placement.remedy import Diagnosis, NodeVerdict, diagnose

__all__ = ["cluster_options", "explain", "snapshot", "snapshot_document", "verify_snapshot"]

EXIT_UNREACHABLE = 2


def cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The flags that say which cluster and which fleet: the controller's own."""
    for option in reversed((
        click.option("--namespace", envvar="OPEN_RL_NAMESPACE",
                     help="Namespace of workers, pods, claims and templates "
                          "[default: this pod's namespace, else openrl]."),
        click.option("--device-class", envvar="OPEN_RL_DEVICE_CLASS",
                     default="gpu.example.com", show_default=True,
                     help="DeviceClass the claims request."),
        click.option("--device-driver", envvar="OPEN_RL_DEVICE_DRIVER",
                     help="DRA driver publishing the devices [default: the device class]."),
        click.option("--kubeconfig", type=click.Path(dir_okay=False),
                     help="[default: $KUBECONFIG, else in-cluster]"),
    )):
        command = option(command)
    return command


def _read(namespace: str | None, device_class: str, device_driver: str | None,
          kubeconfig: str | None, what: str) -> tuple[kube.Kube, LiveFleet]:
    try:
        api = connect(kubeconfig, namespace or default_namespace())
        return api, read_live_fleet(api, device_driver or device_class)
    except Unreachable as error:
        _unreachable(what, str(error))


def _unreachable(what: str, message: str) -> NoReturn:
    click.echo(f"openrl-place {what}: {message}", err=True)
    sys.exit(EXIT_UNREACHABLE)


# ------------------------------------------------------------------ snapshot


def snapshot_document(live: LiveFleet) -> dict[str, Any]:
    """The fleet and its workers as a scenario document (plain data, YAML- or JSON-ready)."""
    view = live.view
    holders = holders_in_order(live)
    claim_of = {holder: booked.claim for holder, booked in view.bookings.items()
                if booked.claim in view.claims}
    allocated = {name for name, claim in view.claims.items() if claim.allocated}
    deferred = any(not claim.allocated for name, claim in view.claims.items()
                   if name in set(claim_of.values()))
    events: list[dict[str, Any]] = []
    cut: set[str] = set()
    for holder in holders:
        arrive: dict[str, Any] = {"name": holder.name, "role": holder.role,
                                  "memory": format_quantity(holder.memory)}
        if holder.owner != holder.name:
            arrive["owner"] = holder.owner
        events.append({"arrive": arrive})
        claim = claim_of.get(holder.name)
        # The oldest holder of a claim is the one that cut it in a replay.
        if deferred and claim is not None and claim not in cut:
            cut.add(claim)
            if claim in allocated:
                events.append({"allocate": holder.name})
    return {"dra": "deferred" if deferred else "instant",
            "nodes": [_node(node) for node in view.nodes], "events": events}


def _node(node: Node) -> dict[str, Any]:
    document: dict[str, Any] = {"name": node.name, "devices": node.devices,
                                "deviceMemory": format_quantity(node.device_memory)}
    if node.host_memory is not None:
        document["hostMemory"] = format_quantity(node.host_memory)
    if node.roles:
        document["roles"] = sorted(str(role) for role in node.roles)
    document["maxWorkersPerClaim"] = node.max_workers_per_claim
    if node.product:
        document["product"] = node.product
    return document


def verify_snapshot(live: LiveFleet, document: dict[str, Any]) -> list[str]:
    """Where ``simulate`` of the snapshot differs from the cluster; empty when it reproduces it.

    Compared: who shares a claim, on which node, how wide, allocated or not;
    and which workers wait. Claim names differ (the simulator names its own).
    """
    try:
        report = replay(build_scenario(document))
    except ScenarioError as error:
        return [f"the snapshot does not replay: {error}"]
    simulated = {(tuple(sorted(c.workers)), c.node, c.devices, c.allocated)
                 for c in report.claims}
    view = live.view
    on_claim: dict[str, list[str]] = {}
    for holder, booked in view.bookings.items():
        if booked.claim in view.claims:
            on_claim.setdefault(booked.claim, []).append(holder)
    cluster = {(tuple(sorted(on_claim[name])), claim.node, claim.devices, claim.allocated)
               for name, claim in view.claims.items() if name in on_claim}
    differences = [f"simulate only: {_group(g)}" for g in sorted(simulated - cluster)]
    differences += [f"cluster only: {_group(g)}" for g in sorted(cluster - simulated)]
    waiting = {s.name for s in report.workers if s.claim is None}
    seated = {holder for holders in on_claim.values() for holder in holders}
    for arrival in holders_in_order(live):
        if (arrival.name in waiting) != (arrival.name not in seated):
            where = "waits" if arrival.name in waiting else "is seated"
            differences.append(f"{arrival.name} {where} in simulate, not on the cluster")
    return differences


def _group(group: tuple[tuple[str, ...], str, int, bool]) -> str:
    workers, node, devices, allocated = group
    state = "" if allocated else ", not yet allocated"
    return f"[{', '.join(workers)}] on {node} ({devices} device{_s(devices)}{state})"


@click.command("snapshot")
@cluster_options
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml",
              show_default=True)
def snapshot(namespace: str | None, device_class: str, device_driver: str | None,
             kubeconfig: str | None, output: str) -> None:
    """Print the live fleet and its workers as a scenario for ``openrl-place simulate``.

    Append the arrivals you are planning and replay it to see them land.
    Read-only. Says on stderr whether simulate reproduces today's placements.
    Exit status 2 when the cluster cannot be read.
    """
    _, live = _read(namespace, device_class, device_driver, kubeconfig, "snapshot")
    document = snapshot_document(live)
    differences = verify_snapshot(live, document)
    arrivals = sum(1 for event in document["events"] if "arrive" in event)
    seats = sum(1 for b in live.view.bookings.values() if b.claim in live.view.claims)
    if differences:
        verdict = ("simulate does NOT reproduce the cluster's placements: "
                   + "; ".join(differences))
    else:
        verdict = (f"simulate reproduces the cluster's placements "
                   f"({len(live.view.nodes)} nodes, {seats} workers seated, "
                   f"{arrivals - seats} waiting)")
    for warning in live.view.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"snapshot: {verdict}", err=True)
    if output == "json":
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(f"# openrl-place snapshot: {verdict}")
        click.echo(_yaml(document), nl=False)


def _yaml(document: dict[str, Any]) -> str:
    """Nodes one key a line, events one a line: the shape people edit and append to."""
    head = yaml.safe_dump({"dra": document["dra"], "nodes": document["nodes"]},
                          sort_keys=False, default_flow_style=False)
    events = yaml.safe_dump(document["events"], sort_keys=False, default_flow_style=None,
                            width=1 << 16) if document["events"] else "[]\n"
    return head + "events:" + ("\n" if document["events"] else " ") + events


# ------------------------------------------------------------------ explain


@click.command("explain")
@click.argument("worker")
@cluster_options
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def explain(worker: str, namespace: str | None, device_class: str,
            device_driver: str | None, kubeconfig: str | None, output: str) -> None:
    """Why WORKER waits: each enabled node's verdict, and the smallest change that would seat it.

    Read-only. Exit status 2 when the cluster cannot be read or WORKER does not exist.
    """
    api, live = _read(namespace, device_class, device_driver, kubeconfig, "explain")
    found = live.workers.get(worker)
    if found is None:
        _unreachable("explain", f"no OpenRLWorker {worker} in namespace {api.namespace}")
    status = found.status
    booked = live.view.bookings.get(worker)
    claim = booked.claim if booked is not None and booked.claim in live.view.claims else None
    diagnosis: Diagnosis | None = None
    if claim is None and not found.spec_error:
        request = Request(found.name, Role(found.role), found.memory, found.owner)
        diagnosis = diagnose(request, live.view.fleet)
    document = _explanation(found.name, found.role.value, found.memory, found.owner,
                            str(status.get("phase") or "Pending"), status.get("reason"),
                            claim, live, diagnosis)
    if output == "json":
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo("\n".join(_explanation_lines(document, diagnosis)))


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
        "nodes": [_verdict(v) for v in diagnosis.nodes] if diagnosis is not None else [],
        "wouldSeat": (diagnosis.change.to_dict() if diagnosis is not None
                      and diagnosis.change is not None else None),
        "alternatives": ([c.to_dict() for c in diagnosis.alternatives[1:]]
                         if diagnosis is not None else []),
    }


def _verdict(verdict: NodeVerdict) -> dict[str, Any]:
    return {
        "node": verdict.node, "roles": list(verdict.roles), "accepts": verdict.accepts,
        "devices": verdict.devices, "deviceMemory": format_quantity(verdict.device_memory),
        "freeDevices": verdict.free_devices, "needs": verdict.needed,
        "hostMemory": (format_quantity(verdict.host_memory)
                       if verdict.host_memory is not None else None),
        "parked": format_quantity(verdict.parked) if verdict.parked else "0",
        "maxWorkersPerClaim": verdict.max_workers_per_claim,
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
    if diagnosis is None:
        return lines
    if diagnosis.reason is None:
        lines.append("placement now: it would be seated at its next retry")
    elif document["reason"] is None or str(diagnosis.reason) not in document["reason"]:
        lines.append(f"placement now: {diagnosis.reason}")
    lines.append("nodes:")
    width = max((len(v.node) for v in diagnosis.nodes), default=0)
    for verdict in diagnosis.nodes:
        roles = "/".join(verdict.roles) or "any role"
        lines.append(f"  {verdict.node:<{width}}  {roles:<16} {verdict.summary}")
        if not verdict.accepts or verdict.needed > verdict.devices:
            continue  # its claims are not this worker's business
        for claim in verdict.claims:
            if claim.verdict != "open":
                lines.append(f"  {'':<{width}}    claim {claim.claim}: {claim.verdict} "
                             f"({claim.detail})")
    if not diagnosis.nodes:
        lines.append("  (no enabled node publishes devices)")
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


def _s(count: int) -> str:
    return "" if count == 1 else "s"
