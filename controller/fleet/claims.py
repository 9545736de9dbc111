"""ResourceClaims: the one the controller cuts, and how it reads them back.

Rules:

* A claim is ``resource.k8s.io/v1`` with one device request named ``gpu``:
  exactly ``count`` devices of the configured DeviceClass, with a CEL selector
  bounding the device's ``memory`` capacity (in the driver's domain) between
  the per-device floor and the ceiling the claim was priced against, so DRA
  can neither hand out a device too small nor substitute a bigger one
  placement never chose. On a node of mixed devices the ceiling is the chosen
  group's size and the floor sits above the node's smaller groups, so DRA
  allocates only devices of that group.
* Labels carry ``openrl.io/managed=true`` and the shape (devices, floor,
  ceiling, the node it was sized against); the exact node name also goes in
  an annotation, since a label value may have to be sanitized.
* No owner reference: a shared claim belongs to no single worker. The reclaim
  sweep removes claims nobody references.
* A seat is committed on the claim itself: a new claim is created listing its
  cutter in the ``openrl.io/booked`` annotation; a join updates that list with
  the claim's resourceVersion as a precondition before its pod is created.
  Every join thus changes the claim, and a join decided on an older version
  of it -- by a replica that was paused, or lost its lease -- fails with a
  conflict instead of taking a seat someone else took meanwhile.
* Reading back: an allocated claim's node comes from its allocation's node
  selector (``matchFields`` on ``metadata.name``), else from the node of the
  pools its devices came from; its width from the allocation's results. An
  unallocated claim reserves the node it was sized against. Its device group
  is its memory ceiling label (the size it was priced against; unreadable:
  none, the node's smallest). The devices its allocation holds are kept by
  name (``driver/pool/device``): two of our claims holding one device is a
  conflict to end (``fleet_rules.device_conflict``); a claim marked as giving
  a device up (``openrl.io/gives-up-device``) stays in conflict until it is
  gone.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping

import attrs

from controller.k8s import naming
from controller.k8s.objects import Obj, annotations_of, created_at, is_deleting, labels_of, name_of
from placement import NewClaim
from placement.quantity import QuantityError, format_quantity, parse_quantity


def memory_selector(driver: str, floor: int, ceiling: int) -> str:
    capacity = f'device.capacity["{driver}"].memory'
    return (f'{capacity}.compareTo(quantity("{format_quantity(floor)}")) >= 0 && '
            f'{capacity}.compareTo(quantity("{format_quantity(ceiling)}")) <= 0')


def build_claim(
    name: str, decision: NewClaim, *, namespace: str, device_class: str, driver: str,
    worker: str, worker_uid: str = "",
) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                naming.LABEL_MANAGED: "true",
                naming.LABEL_DEVICES: str(decision.devices),
                naming.LABEL_MEMORY_FLOOR: format_quantity(decision.memory_floor),
                naming.LABEL_MEMORY_CEILING: format_quantity(decision.memory_ceiling),
                naming.LABEL_SIZED_FOR: naming.label_value(decision.node),
            },
            "annotations": {
                naming.ANNOTATION_SIZED_FOR: decision.node,
                # Who cut it, for people reading the claim; the controller never relies on it.
                naming.ANNOTATION_WORKER: worker,
                # The cutter's seat is committed by the create itself.
                **({naming.ANNOTATION_BOOKED: worker_uid} if worker_uid else {}),
            },
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": naming.CLAIM_REQUEST,
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": decision.devices,
                            "selectors": [{"cel": {"expression": memory_selector(
                                driver, decision.memory_floor, decision.memory_ceiling)}}],
                        },
                    }
                ]
            }
        },
    }


@attrs.frozen
class ClaimView:
    name: str
    node: str  # allocated node, or the node it was sized against
    devices: int
    allocated: bool
    deleting: bool
    created: dt.datetime
    reserved: bool  # DRA lists a consumer in status.reservedFor
    device_memory: int = 0  # the device group's size it was cut from (its ceiling); 0: unknown
    held: tuple[str, ...] = ()  # driver/pool/device of each device its allocation holds
    gives_up: str = ""  # the device it was marked giving up (a conflict seen), or ''

    @property
    def joinable(self) -> bool:
        """Allocated and not on its way out: only such a claim takes a joiner."""
        return self.allocated and not self.deleting


def booked_uids(claim: Obj) -> list[str]:
    """The workers that committed a seat on the claim (its booked annotation)."""
    raw = annotations_of(claim).get(naming.ANNOTATION_BOOKED, "")
    return [uid for uid in raw.split(",") if uid]


def books(claim: Obj | None, worker_uid: str) -> bool:
    """Whether the claim (None: no such claim) lists the worker on its booked list."""
    return claim is not None and worker_uid in booked_uids(claim)


def commit_join(claim: Obj, worker_uid: str, live: Callable[[str], bool]) -> Obj:
    """The merge patch that commits a join: the booked list plus the joiner, with the
    claim's resourceVersion as a precondition, so it fails (409) if anyone changed the
    claim since it was read. Entries of workers no longer live are dropped."""
    kept = [uid for uid in booked_uids(claim) if live(uid) and uid != worker_uid]
    return {"metadata": {
        "resourceVersion": (claim.get("metadata") or {}).get("resourceVersion"),
        "annotations": {naming.ANNOTATION_BOOKED: ",".join([*kept, worker_uid])},
    }}


def leave_join(claim: Obj, worker_uid: str) -> Obj | None:
    """The merge patch that takes a worker off the claim's booked list (the claim's
    resourceVersion a precondition, as for a commit); None when it is not on it."""
    uids = booked_uids(claim)
    if worker_uid not in uids:
        return None
    return {"metadata": {
        "resourceVersion": (claim.get("metadata") or {}).get("resourceVersion"),
        "annotations": {naming.ANNOTATION_BOOKED: ",".join(u for u in uids if u != worker_uid)
                        or None},
    }}


def requested_devices(claim: Obj) -> int:
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly") or request  # v1 nests under exactly; older flat
        if request.get("name") == naming.CLAIM_REQUEST:
            try:
                return max(1, int(exactly.get("count") or 1))
            except (TypeError, ValueError):
                return 1
    try:
        return max(1, int(labels_of(claim).get(naming.LABEL_DEVICES, "1")))
    except ValueError:
        return 1


def allocated_node(allocation: Obj, pool_nodes: Mapping[str, str]) -> str:
    selector = allocation.get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = field.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    # No single-node selector: fall back to where the allocated devices live.
    nodes = {
        pool_nodes.get(str(result.get("pool", "")), "")
        for result in (allocation.get("devices") or {}).get("results") or []
    }
    nodes.discard("")
    return nodes.pop() if len(nodes) == 1 else ""


def read_claim(claim: Obj, pool_nodes: Mapping[str, str]) -> ClaimView:
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    sized_for = (annotations_of(claim).get(naming.ANNOTATION_SIZED_FOR)
                 or labels_of(claim).get(naming.LABEL_SIZED_FOR, ""))
    held: tuple[str, ...] = ()
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        node = allocated_node(allocation, pool_nodes)
        devices = len(results) or requested_devices(claim)
        allocated = bool(node)
        held = tuple(sorted({sys.intern(f"{r.get('driver', '')}/{r.get('pool', '')}/"
                                        f"{r.get('device', '')}") for r in results}))
    else:
        node, devices, allocated = sized_for, requested_devices(claim), False
    return ClaimView(
        name=sys.intern(name_of(claim)),  # the fleet cache holds many readings of each
        node=sys.intern(node or sized_for),
        devices=devices,
        allocated=allocated,
        deleting=is_deleting(claim),
        created=created_at(claim),
        reserved=bool(status.get("reservedFor")),
        device_memory=_ceiling(claim),
        held=held,
        gives_up=annotations_of(claim).get(naming.ANNOTATION_GIVES_UP, ""),
    )


def _ceiling(claim: Obj) -> int:
    text = labels_of(claim).get(naming.LABEL_MEMORY_CEILING, "")
    try:
        return parse_quantity(text) if text else 0
    except QuantityError:
        return 0
