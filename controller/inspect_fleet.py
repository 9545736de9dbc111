"""Read-only looks at a live cluster: the fleet read once, as the controller reads it.

Rules:

* Nothing here writes: every call is a list or a get (the ``openrl-place-viewer``
  ClusterRole in manifests/ grants exactly that).
* The fleet comes from ``fleet_reader.build_fleet`` over one LIST of each kind
  the controller watches (its driver's ResourceSlices, the DeviceClass, nodes,
  managed claims, workers, managed pods, and every namespace's other pods for
  the nodes' pod slots, and every namespace's claims that are not ours -- all
  but our namespace's managed ones -- for the devices they hold): the
  controller's own reading rules, not a copy.
* A node's parking budget is shown with what took it (``budget_account``):
  its allocatable memory, its other pods' memory requests (the largest few by
  name, and how many), the load parked on its shared claims, what is left.
* A cluster that cannot be reached, or refuses the reads, is ``Unreachable``:
  the commands print one line and exit 2.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from controller.fleet.reader import FleetView, build_fleet
from controller.fleet.rules import foreign_claim
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import kube, naming
from controller.k8s.objects import Obj, Worker, age_order, annotations_of, created_at, name_of
from controller.store.cache import strip
from placement.quantity import format_quantity

__all__ = [
    "READS",
    "Holder",
    "LiveFleet",
    "Unreachable",
    "budget_account",
    "budget_line",
    "connect",
    "holders_in_order",
    "read_live_fleet",
    "seated_claims",
    "standing_claims",
]


class Unreachable(Exception):
    """The cluster cannot be read: no kubeconfig, no answer, or no permission."""


@attrs.frozen
class Holder:
    """A worker (or a pod whose worker is gone) as the snapshot replays it."""

    name: str
    role: str
    memory: int
    owner: str
    order: tuple[str, str]  # creation time, then name: the controller's arrival order
    exclusive: bool = False  # spec.exclusive: it runs alone
    devices: int | None = None  # spec.devices: the exact count it names; None: none


@attrs.frozen
class LiveFleet:
    view: FleetView
    workers: dict[str, Worker]  # by name
    pods: dict[str, Obj]  # managed pods, by name


def connect(kubeconfig: str | None, namespace: str, context: str | None = None) -> kube.Kube:
    try:
        return kube.Kube(kube.load_api_client(kubeconfig, context), namespace)
    except kube.NoConfig as error:
        # A YAML error spans lines (the problem, then where): one line here.
        raise Unreachable(f"no usable kubeconfig: {' '.join(str(error).split())}") from None


# Everything the tools read (and the openrl-place-viewer ClusterRole grants).
READS = (kube.CLAIMS, kube.WORKERS, kube.PODS, kube.SLICES, kube.NODES, kube.NODE_PODS,
         kube.DEVICE_CLASSES, kube.OTHER_CLAIMS)


def read_live_fleet(api: kube.Kube, driver: str, device_class: str | None = None) -> LiveFleet:
    """One LIST of each kind the controller watches, read by the controller's rules.
    ``device_class``: the DeviceClass whose selectors pick the devices (None: not read)."""
    try:
        claims = api.list(kube.CLAIMS, label_selector=naming.MANAGED_SELECTOR)
        classes = ([c for c in api.list(kube.DEVICE_CLASSES) if name_of(c) == device_class]
                   if device_class is not None else [])
        others, unseen = _other_claims(api)
        worker_objs = api.list(kube.WORKERS)
        pods = api.list(kube.PODS, label_selector=naming.MANAGED_SELECTOR)
        slices = api.list(kube.SLICES)
        nodes = api.list(kube.NODES)
        # Only what a pod slot needs is kept of each, page by page.
        node_pods, _ = api.list_with_version(
            kube.NODE_PODS, label_selector=naming.OTHER_PODS_LABELS,
            field_selector=naming.OTHER_PODS_FIELDS, page=500,
            keep=lambda pod: strip(kube.NODE_PODS, pod))
    except kube.KubeError as error:
        raise Unreachable(_kube_message(error, api)) from None
    workers = [Worker.from_obj(obj) for obj in worker_objs]
    view = build_fleet(slices=slices, nodes=nodes, claims=claims, workers=workers, pods=pods,
                       driver=driver, node_pods=node_pods,
                       device_class=classes[0] if classes else None, foreign_claims=others)
    if unseen is not None:
        view = attrs.evolve(view, warnings=(*view.warnings, unseen))
    return LiveFleet(view, {w.name: w for w in workers}, {name_of(p): p for p in pods})


def budget_account(live: LiveFleet, node: str) -> dict[str, Any] | None:
    """The node's parking budget and what took it, as plain data; None for a node
    placement does not read, or whose allocatable memory is unread (unchecked)."""
    budget = live.view.budgets.get(node)
    if budget is None or budget.allocatable is None or node not in live.view.nodes:
        return None
    left = budget.left or 0
    parked = live.view.fleet.parked_load(node)
    return {"allocatable": format_quantity(budget.allocatable),
            "otherPods": {"count": budget.pods, "requests": format_quantity(budget.others),
                          "largest": [{"pod": pod, "memory": format_quantity(memory)}
                                      for pod, memory in budget.largest]},
            "budget": format_quantity(left), "parked": format_quantity(parked),
            "left": format_quantity(max(0, left - parked))}


def budget_line(account: dict[str, Any]) -> str:
    """One line of an account: ``100Gi allocatable - 31Gi for 2 other pods (...)``."""
    others = account["otherPods"]
    named = ", ".join(f"{p['pod']} {p['memory']}" for p in others["largest"])
    more = others["count"] - len(others["largest"])
    named += f", {more} more" if named and more > 0 else ""
    return (f"{account['allocatable']} allocatable - {others['requests']} for "
            f"{others['count']} other pod{'' if others['count'] == 1 else 's'}"
            f"{f' ({named})' if named else ''} = {account['budget']} parking budget; "
            f"{account['parked']} parked, {account['left']} left")


def seated_claims(live: LiveFleet) -> dict[str, str]:
    """Each seat holder's claim, by holder: a live claim with a node (a standing claim not
    yet allocated seats nobody)."""
    claims = live.view.claims
    return {holder: booked.claim for holder, booked in live.view.bookings.items()
            if booked.claim in claims and claims[booked.claim].node}


def standing_claims(live: LiveFleet) -> dict[str, str]:
    """Workers standing on an unallocated claim (autoscaling), with the claim, by worker."""
    claims = live.view.claims
    return {holder: booked.claim for holder, booked in live.view.bookings.items()
            if booked.claim in claims and not claims[booked.claim].node}


def turn_state(live: LiveFleet, worker: Worker) -> Obj | None:
    """What the node's time-slicer last said about the worker's pod (its turn annotation:
    phase, since, the group's holder, turns, node), or None if it never has -- not
    installed, or not running on that node."""
    pod = live.pods.get(worker.pod_name)
    text = annotations_of(pod).get(naming.ANNOTATION_TURN) if pod is not None else None
    if not text:
        return None
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    return state if isinstance(state, dict) else {"phase": "Unreadable", "raw": text}


def _other_claims(api: kube.Kube) -> tuple[list[Obj], FleetWarning | None]:
    """Every namespace's claims that are not ours, for the devices they hold; where this
    identity may not list them, none, and a warning saying so."""
    try:
        return [claim for claim in api.list(kube.OTHER_CLAIMS)
                if foreign_claim(claim, api.namespace)], None
    except kube.Forbidden:
        return [], warning(Kind.UNREAD, "claims of other namespaces not readable",
                           "devices they hold (and the counters they consume) count as free")


def holders_in_order(live: LiveFleet) -> list[Holder]:
    """Every seat holder and every waiting worker, oldest first, as arrivals to replay.

    Failed workers hold nothing and are left out; a deleting worker still
    holds its seat until its pod is gone, so it stays in.
    """
    holders = [
        Holder(w.name, w.role.value, w.memory, w.owner, age_order(w.obj), w.exclusive,
               w.devices)
        for w in live.workers.values()
        if w.phase not in naming.FINISHED_PHASES and not w.spec_error
    ]
    for holder, booked in live.view.bookings.items():
        if holder.startswith("pod/"):
            pod = live.pods.get(holder.removeprefix("pod/"), {})
            role = (pod.get("metadata", {}).get("labels") or {}).get(naming.LABEL_ROLE, "trainer")
            holders.append(Holder(holder, role if role in ("trainer", "sampler") else "trainer",
                                  max(1, booked.memory),
                                  annotations_of(pod).get(naming.ANNOTATION_OWNER, holder),
                                  (created_at(pod).isoformat(), holder)))
    return sorted(holders, key=lambda h: h.order)


def _kube_message(error: kube.KubeError, api: kube.Kube) -> str:
    if isinstance(error, kube.Forbidden):
        return (f"not allowed to read the fleet ({error.message}); bind the "
                "openrl-place-viewer ClusterRole (manifests/base/viewer.yaml)")
    host = getattr(api.api.configuration, "host", "the cluster")
    text = error.message or str(error)
    # A transport error's text is a page of urllib3; its cause is at the end.
    cause = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    return f"cannot reach {host}: {cause.group(1) if cause else text[:300]}"
