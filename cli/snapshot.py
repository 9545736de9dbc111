"""``snapshot``: the live fleet and its workers as a scenario, checked by replaying it.

Rules:

* The scenario: the enabled nodes as the fleet (geometry, host memory,
  roles, max-workers-per-claim), every worker holding or waiting for a seat
  as an arrival in the controller's arrival order, and DRA's allocations as
  they stand (``dra: deferred`` with an ``allocate`` after the arrival that
  cut each allocated claim, when some claim is still unallocated).
* A node publishing devices placement does not count says how many and why
  (``leftOut``), so a snapshot of a mixed node replays as the cluster reads.
  A node whose counted devices differ in memory lists them as
  ``deviceGroups`` (devices and deviceMemory per size), as placement reads it.
* A node's ``hostMemory`` is its parking budget: allocatable memory less
  its other pods' memory requests. Where it may share claims, a comment
  (stderr too) says what took the rest and what is parked and left.
* It is then replayed, and stderr says whether ``simulate`` reproduces the
  cluster's placements -- same sharing groups on the same nodes, the same
  workers waiting -- or where it does not.
* Read-only; the cluster is read once (``cli.live``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import click
import yaml

from cli.live import KUBECTL, OPENRL_PLACE, Flags, read
from cli.options import count
from cli.replay import replay
from cli.scenario import ScenarioError, build_scenario
from controller.fleet.rules import LeftOut
from controller.inspect_fleet import (
    LiveFleet,
    budget_account,
    budget_line,
    holders_in_order,
    seated_claims,
    standing_claims,
)
from placement import Node
from placement.quantity import format_quantity

__all__ = ["build", "command", "kubectl_command", "snapshot_document", "verify_snapshot"]


def snapshot_document(live: LiveFleet) -> dict[str, Any]:
    """The fleet and its workers as a scenario document (plain data, YAML- or JSON-ready)."""
    view = live.view
    holders = holders_in_order(live)
    claim_of = seated_claims(live)
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
        # What placement reads of the worker besides: a replay without them decides otherwise.
        if holder.exclusive:
            arrive["exclusive"] = True
        if holder.devices is not None:
            arrive["devices"] = holder.devices
        events.append({"arrive": arrive})
        claim = claim_of.get(holder.name)
        # The oldest holder of a claim is the one that cut it in a replay.
        if deferred and claim is not None and claim not in cut:
            cut.add(claim)
            if claim in allocated:
                events.append({"allocate": holder.name})
    return {"dra": "deferred" if deferred else "instant",
            "nodes": [_node(node, view.left_out.get(node.name, ()))
                      for node in view.nodes.values()], "events": events}


def budget_lines(live: LiveFleet) -> list[str]:
    """Each node's host memory (its scenario ``hostMemory``, the parking budget) and what
    took the rest of its allocatable memory, for nodes that may share claims."""
    lines = []
    for name, node in live.view.nodes.items():
        account = budget_account(live, name) if node.max_workers_per_claim > 1 else None
        if account is not None:
            lines.append(f"node {name} host memory: {budget_line(account)}")
    return lines


def _node(node: Node, left_out: Iterable[LeftOut] = ()) -> dict[str, Any]:
    document: dict[str, Any] = {"name": node.name}
    if node.device_groups:
        document["deviceGroups"] = [{"devices": devices, "deviceMemory": format_quantity(size)}
                                    for devices, size in node.device_groups]
    else:
        document.update(devices=node.devices, deviceMemory=format_quantity(node.device_memory))
    if node.host_memory is not None:
        document["hostMemory"] = format_quantity(node.host_memory)
    if node.roles:
        document["roles"] = sorted(str(role) for role in node.roles)
    document["maxWorkersPerClaim"] = node.max_workers_per_claim
    if node.product:
        document["product"] = node.product
    if node.pods is not None:
        # Its free pod slots: allocatable pods less the pods that are not workers.
        document["pods"] = node.pods
    reasons = Counter(item.reason for item in left_out)
    if reasons:
        document["leftOut"] = [{"devices": count, "reason": reason}
                               for reason, count in sorted(reasons.items())]
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
    for holder, claim in seated_claims(live).items():
        on_claim.setdefault(claim, []).append(holder)
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
    plural = "" if devices == 1 else "s"
    return f"[{', '.join(workers)}] on {node} ({devices} device{plural}{state})"


def build(flags: Flags) -> click.Command:
    """The ``snapshot`` command, naming its cluster with ``flags``."""

    @click.command("snapshot")
    @flags.apply
    @click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml",
                  show_default=True)
    def snapshot(output: str, **cluster: Any) -> None:
        """Print the live fleet and its workers as a scenario for ``openrl-place simulate``.

        Append the arrivals you are planning and replay it to see them land.
        Read-only. Says on stderr whether simulate reproduces today's placements.
        Exit status 2 when the cluster cannot be read.
        """
        _, live = read(flags, "snapshot", **cluster)
        document = snapshot_document(live)
        differences = verify_snapshot(live, document)
        arrivals = sum(1 for event in document["events"] if "arrive" in event)
        seats = len(seated_claims(live))
        standing = standing_claims(live)
        if differences:
            verdict = ("simulate does NOT reproduce the cluster's placements: "
                       + "; ".join(differences))
        else:
            verdict = (f"simulate reproduces the cluster's placements "
                       f"({count(len(live.view.nodes), 'node')}, {count(seats, 'worker')} seated, "
                       f"{arrivals - seats} waiting)")
        for warning in live.view.warnings:
            click.echo(f"warning: {warning.text}", err=True)
        click.echo(f"snapshot: {verdict}", err=True)
        if standing:
            click.echo(f"snapshot: {_standing_line(standing)}", err=True)
        budgets = budget_lines(live)
        for line in budgets:
            click.echo(f"snapshot: {line}", err=True)
        if output == "json":
            click.echo(json.dumps(document, indent=2))
        else:
            click.echo(f"# {flags.prog} snapshot: {verdict}")
            if standing:
                click.echo(f"# {_standing_line(standing)}")
            for line in budgets:
                click.echo(f"# {line}")
            click.echo(_yaml(document), nl=False)

    return snapshot


def _standing_line(standing: dict[str, str]) -> str:
    """The workers standing on unallocated claims (autoscaling): waiting arrivals here."""
    pairs = ", ".join(f"{worker} ({claim})" for worker, claim in sorted(standing.items()))
    return (f"{count(len(standing), 'standing claim')} waiting for kube-scheduler or a node "
            f"to be added: {pairs}")


def _yaml(document: dict[str, Any]) -> str:
    """Nodes one key a line, events one a line: the shape people edit and append to."""
    head = yaml.safe_dump({"dra": document["dra"], "nodes": document["nodes"]},
                          sort_keys=False, default_flow_style=False)
    events = yaml.safe_dump(document["events"], sort_keys=False, default_flow_style=None,
                            width=1 << 16) if document["events"] else "[]\n"
    return head + "events:" + ("\n" if document["events"] else " ") + events


command = build(OPENRL_PLACE)  # openrl-place snapshot
kubectl_command = build(KUBECTL)  # kubectl openrl snapshot
