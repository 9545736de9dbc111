"""The rules of reading the fleet, once: who holds which seat, and what placement is told.

Both readings call these: ``fleet_reader.build_fleet`` (the plain reference,
everything from lists) and ``fleet_cache.FleetCache`` (kept current change by
change). Each rule is a pure function of the objects it names.

Rules:

* A worker's booking, strongest first: the claim its live pod consumes (the
  pod wins after a lost status write; among several live pods the last by
  name), then, unless the worker is Failed, its ``status.claimName``, then a
  join committed on a claim's booked list and not yet carried out (the last
  claim by name where several list it). No claim: no booking.
* A pod books for its worker while that worker is known (whatever its
  phase). A live managed pod whose worker is gone holds its seat as
  ``pod/<name>`` until it is gone, with the memory and owner stamped on it.
* A claim commits the seats of the UIDs on its booked list only while it is
  not being deleted.
* A claim goes to placement when it has a node (allocated, or sized for
  one); it takes joiners only when allocated and not being deleted; its
  seats are its bookings, by holder.
* Seats: the total is every node's devices times its seats per claim (never
  more than its pod slots for workers); the used ones are the bookings on
  claims not being deleted.
* A published device counts only where DRA would hand it to one of our
  claims: it has a ``memory`` capacity, the configured DeviceClass's
  selectors select it (``selectors``), it carries no ``NoSchedule`` or
  ``NoExecute`` taint (``None`` only informs), no claim but ours holds it, and
  the counters it consumes are not taken by a device another claim holds. A
  device allowing multiple allocations counts once, whole: our claims ask for
  it in full. Every device left out is named with its reason (``LeftOut``).
* Pod slots: a pod takes one of its node's slots from the moment it is bound
  until it finishes. Workers take theirs through their bookings (placement
  counts those), so a node's slots for workers are its allocatable ``pods``
  less its other pods: bound, not finished, and not labelled managed.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Container, Iterable, Mapping
from typing import Protocol

import attrs

from controller import naming
from controller.claims import ClaimView, booked_uids
from controller.objects import (
    Obj,
    annotations_of,
    is_deleting,
    labels_of,
    name_of,
    pod_alive,
    pod_claim,
    pod_node,
)
from controller.selectors import DeviceSelector
from placement import Booking, Claim, Fleet, Node
from placement.quantity import QuantityError, parse_quantity

__all__ = ["Booked", "FleetReading", "LeftOut", "committed_uids", "device_memory",
           "device_product", "left_out_warnings", "live_pod_claim", "orphan_booking",
           "other_pod_node", "placement_claim", "pool_devices", "seats_total", "seats_used",
           "taken_devices", "worker_booking", "worker_pod_slots"]

ORPHAN_PREFIX = "pod/"
_HOLDER = operator.attrgetter("holder")


@attrs.frozen
class Booked:
    holder: str  # worker name, or pod/<name> for a pod whose worker is gone
    claim: str
    owner: str
    memory: int


class FleetReading(Protocol):
    """What reconcile (and the read-only tools) read of the fleet; both readings offer it.

    ``claims`` holds the managed claims not being deleted, ``closing`` the ones
    being deleted (booked until gone); ``nodes`` the nodes placement knows, by name.
    """

    @property
    def fleet(self) -> Fleet: ...
    @property
    def nodes(self) -> Mapping[str, Node]: ...
    @property
    def claims(self) -> Mapping[str, ClaimView]: ...
    @property
    def closing(self) -> Mapping[str, ClaimView]: ...
    @property
    def bookings(self) -> Mapping[str, Booked]: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...
    @property
    def seats_total(self) -> int: ...
    @property
    def seats_used(self) -> int: ...
    def live_uid(self, uid: str) -> bool: ...


def live_pod_claim(pod: Obj) -> str:
    """The claim a pod holds a seat on: its claim while it is alive, else none."""
    return pod_claim(pod) if pod_alive(pod) else ""


class SeatHolder(Protocol):
    """What a worker's seat depends on: a ``Worker`` has it, and so does the cache's
    compact copy of one."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def claim(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def memory(self) -> int: ...


def worker_booking(worker: SeatHolder, pod_claims: Iterable[tuple[str, str]],
                   committed: Iterable[str]) -> Booked | None:
    """The worker's seat, if any. ``pod_claims``: (pod name, live claim) of the pods it
    controls; ``committed``: the claims whose booked list commits it."""
    live = [(pod, claim) for pod, claim in pod_claims if claim]
    if live:
        claim = max(live)[1]
    elif worker.phase == naming.Phase.FAILED:
        return None
    else:
        claim = worker.claim or max(committed, default="")
    if not claim:
        return None
    return Booked(worker.name, claim, worker.owner, worker.memory)


def orphan_booking(pod: Obj) -> Booked | None:
    """The seat a pod holds whose worker is gone (the caller knows that it is)."""
    claim = live_pod_claim(pod)
    if not claim or labels_of(pod).get(naming.LABEL_MANAGED) != "true":
        return None
    notes = annotations_of(pod)
    try:
        memory = max(0, int(notes.get(naming.ANNOTATION_MEMORY, "0")))
    except ValueError:
        memory = 0
    holder = ORPHAN_PREFIX + name_of(pod)
    return Booked(holder, claim, notes.get(naming.ANNOTATION_OWNER, holder), memory)


def other_pod_node(pod: Obj) -> str:
    """The node whose pod slot this pod takes besides the workers; "" for none."""
    if not pod_alive(pod) or labels_of(pod).get(naming.LABEL_MANAGED) == "true":
        return ""
    return pod_node(pod)


def worker_pod_slots(allocatable: int | None, others: int) -> int | None:
    """A node's pod slots for workers: what its other pods leave (None: unchecked)."""
    return None if allocatable is None else max(0, allocatable - others)


def committed_uids(claim: Obj) -> list[str]:
    """The workers whose seat the claim commits (none while it is being deleted)."""
    return [] if is_deleting(claim) else booked_uids(claim)


def placement_claim(view: ClaimView, seats: Iterable[Booked]) -> Claim | None:
    """The claim as placement books it, with its seats; None while it has no node."""
    if not view.node:
        return None
    return Claim(view.name, view.node, view.devices, allocated=view.joinable, bookings=tuple([
        Booking(b.holder, b.owner, b.memory) for b in sorted(seats, key=_HOLDER)]))


def seats_total(nodes: Iterable[Node]) -> int:
    total = 0
    for node in nodes:
        seats = node.devices * node.seats_per_claim
        total += seats if node.pods is None else min(seats, node.pods)
    return total


def seats_used(bookings: Iterable[Booked], live_claims: Container[str]) -> int:
    return sum(1 for b in bookings if b.claim in live_claims)


# ------------------------------------------------------------------ devices

_BARRING = ("NoSchedule", "NoExecute")


@attrs.frozen
class LeftOut:
    node: str
    device: str
    reason: str


def device_memory(device: Obj, driver: str) -> int | None:
    capacity = device.get("capacity") or (device.get("basic") or {}).get("capacity") or {}
    entry = capacity.get("memory") or capacity.get(f"{driver}/memory")
    if not isinstance(entry, dict):
        return None
    value = entry.get("value")
    return _memory(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=4096)
def _memory(text: str) -> int | None:
    # A fleet spells its memory in a few ways ("81559Mi"): each is parsed once.
    try:
        return parse_quantity(text)
    except QuantityError:
        return None


def device_product(device: Obj) -> str:
    attributes = device.get("attributes") or (device.get("basic") or {}).get("attributes") or {}
    value = attributes.get("productName") or {}
    return str(value.get("string") or "") if isinstance(value, dict) else ""


def _amount(entry: object) -> int:
    try:
        return parse_quantity((entry or {}).get("value") if isinstance(entry, dict) else entry,
                              allow_zero=True)
    except QuantityError:
        return 0


def _consumes(device: Obj) -> list[tuple[tuple[str, str], int]]:
    return [((str(use.get("counterSet") or ""), str(name)), _amount(entry))
            for use in device.get("consumesCounters") or []
            for name, entry in (use.get("counters") or {}).items()]


def _barring_taint(device: Obj) -> str:
    for taint in device.get("taints") or []:
        if taint.get("effect") in _BARRING:
            value = taint.get("value")
            return f"tainted {taint.get('key')}{'=' + str(value) if value else ''}:" \
                   f"{taint.get('effect')}"
    return ""


def pool_devices(pool: str, slices: Iterable[Obj], driver: str,
                 selector: DeviceSelector | None,
                 taken: Mapping[tuple[str, str], str],
                 ) -> tuple[list[tuple[str, int, str]], list[LeftOut]]:
    """One complete pool generation's devices: those counted (node, memory, product), and
    those left out with why.

    ``taken``: (pool, device) -> the claim holding it, for claims that are not ours.
    """
    members = [(str((s.get("spec") or {}).get("nodeName") or ""), s) for s in slices]
    left = {(str(set_.get("name") or ""), str(name)): _amount(entry)
            for _, s in members for set_ in (s.get("spec") or {}).get("sharedCounters") or []
            for name, entry in (set_.get("counters") or {}).items()}
    holder_of: dict[tuple[str, str], str] = {}
    for _, s in members if taken else ():
        for device in (s.get("spec") or {}).get("devices") or []:
            claim = taken.get((pool, str(device.get("name") or "")))
            if claim:
                for counter, amount in _consumes(device):
                    left[counter] = left.get(counter, 0) - amount
                    holder_of[counter] = f"claim {claim} ({device.get('name')})"
    counted: list[tuple[str, int, str]] = []
    out: list[LeftOut] = []
    qualified = f"{driver}/memory"
    for node, s in members:
        devices = (s.get("spec") or {}).get("devices") or []
        verdicts = selector.slice_verdicts(driver, s) if selector is not None else ()
        for index, device in enumerate(devices):
            # device_memory, inlined: this loop runs once per published device
            capacity = device.get("capacity") or (device.get("basic") or {}).get("capacity")
            entry = capacity and (capacity.get("memory") or capacity.get(qualified))
            value = entry.get("value") if isinstance(entry, dict) else None
            memory = _memory(value) if isinstance(value, str) else None
            reason = ("no memory capacity" if not memory else
                      verdicts[index] if verdicts and verdicts[index] else
                      _left_out_reason(pool, device, taken, left, holder_of)
                      if taken or "taints" in device or "consumesCounters" in device else "")
            if reason:
                out.append(LeftOut(node, str(device.get("name") or ""), reason))
            elif memory:
                counted.append((node, memory, device_product(device)))
    return counted, out


def _left_out_reason(pool: str, device: Obj, taken: Mapping[tuple[str, str], str],
                     left: Mapping[tuple[str, str], int],
                     holder_of: Mapping[tuple[str, str], str]) -> str:
    if "taints" in device and (taint := _barring_taint(device)):
        return taint
    claim = taken.get((pool, str(device.get("name") or ""))) if taken else None
    if claim:
        return f"allocated to claim {claim}"
    for counter, amount in _consumes(device) if "consumesCounters" in device else ():
        if amount > left.get(counter, 0):
            by = holder_of.get(counter)
            return (f"counters consumed by {by}" if by else
                    f"counter {counter[0]}/{counter[1]} short ({amount} needed)")
    return ""


def left_out_warnings(node: str, left_out: Iterable[LeftOut]) -> list[str]:
    """One line per reason, naming the node's devices left out for it."""
    by_reason: dict[str, list[str]] = {}
    for item in left_out:
        by_reason.setdefault(item.reason, []).append(item.device)
    return [f"node {node}: {len(names)} device{'s' if len(names) > 1 else ''} left out "
            f"({', '.join(sorted(names))}): {reason}"
            for reason, names in sorted(by_reason.items())]


def taken_devices(claims: Iterable[Obj], driver: str) -> dict[tuple[str, str], str]:
    """(pool, device) -> ``namespace/name`` of the claim holding it, for allocated claims
    that are not ours (a managed claim's devices are booked through placement)."""
    taken: dict[tuple[str, str], str] = {}
    for claim in claims:
        if labels_of(claim).get(naming.LABEL_MANAGED) == "true":
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        holder = f"{(claim.get('metadata') or {}).get('namespace', '')}/{name_of(claim)}"
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("driver", driver) == driver:
                taken[(str(result.get("pool") or ""), str(result.get("device") or ""))] = holder
    return taken
