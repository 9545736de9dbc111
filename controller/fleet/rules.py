"""The rules of reading the fleet, once: who holds which seat, and what placement is told.

Both readings call these: ``fleet_reader.build_fleet`` (the plain reference,
everything from lists) and ``fleet_cache.FleetCache`` (kept current change by
change). Each rule is a pure function of the objects it names.

Rules:

* A worker's booking, strongest first: the claim its live pod consumes (the
  pod wins after a lost status write; among several live pods the last by
  name), then, unless the worker is finished (Failed, Succeeded), its ``status.claimName``, then a
  join committed on a claim's booked list and not yet carried out (the last
  claim by name where several list it). No claim: no booking.
  A booking carries its worker's ``spec.exclusive``, so no one joins an
  exclusive worker's claim (a pod whose worker is gone holds a plain seat).
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
  What a slice's own content decides (memory, selectors, taints, the counters
  each device consumes) is read once per version of the slice
  (``slice_devices``, kept by the selector); the claims not ours and the
  counters' balance are applied on every read of the pool.
* Claims not ours (``foreign_claim``): every claim but the managed ones of
  our namespace, whatever its namespace -- DRA will not hand a device another
  claim holds to ours. Of each only the devices its allocation holds are read
  (``held_devices``); a device several hold is named with the first by name.
* Pod slots: a pod takes one of its node's slots from the moment it is bound
  until it finishes. Workers take theirs through their bookings (placement
  counts those), so a node's slots for workers are its allocatable ``pods``
  less its other pods: bound, not finished, and not labelled managed.
* Make way (``make_way``): a node narrower than a claim on it (the claim holds
  more devices than the node now reads) gives way: the claim's devices are
  really held, and the node's reading would offer some of them as free. The
  node is left out of placement, with a warning naming the first such claim
  by name; placement keeps the claim.
* A device conflict (``device_conflict``): two of our claims whose
  allocations name one device. Kubernetes never means that (kube-scheduler
  allocates no device an allocated claim holds, one being deleted included),
  but it allocates from its cache, and a lost answer to its allocation write
  (the write done, the answer cut off, as when the API server restarts)
  leaves the device looking free there until its watch catches up. Every
  claim holding such a device gives it up (moves.py places its workers
  again), none keeps it: kube-scheduler keeps the allocated devices as a
  set, so once either claim lets the device go it counts it free while the
  other still holds it, and would give it out again. Only once every holder
  has let it go is its memory true again; so a claim marked as giving a
  device up stays in conflict after the other claim is gone.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Protocol

import attrs

from controller.fleet.claims import ClaimView, booked_uids
from controller.fleet.selectors import DeviceSelector
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import naming
from controller.k8s.objects import (
    Obj,
    annotations_of,
    is_deleting,
    labels_of,
    name_of,
    pod_alive,
    pod_claim,
    pod_node,
)
from placement import Booking, Claim, Fleet, Node, Role
from placement.quantity import QuantityError, parse_quantity

__all__ = ["Booked", "FleetReading", "LeftOut", "claim_holder", "committed_uids",
           "device_conflict", "device_memory", "device_product", "foreign_claim", "held_devices",
           "left_out_warnings", "live_pod_claim", "make_way", "orphan_booking", "other_pod_node",
           "placement_claim", "pool_devices", "seats_total", "seats_used", "slice_devices",
           "taken_devices", "worker_booking", "worker_pod_slots"]

ORPHAN_PREFIX = "pod/"
_HOLDER = operator.attrgetter("holder")
_NAME = operator.attrgetter("name")


@attrs.frozen
class Booked:
    holder: str  # worker name, or pod/<name> for a pod whose worker is gone
    claim: str
    owner: str
    memory: int
    exclusive: bool = False  # the worker runs alone: no one joins its claim
    role: str = ""  # the worker's role; "" where it cannot be told (a pod whose worker is gone)


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
    def warnings(self) -> tuple[FleetWarning, ...]: ...
    @property
    def seats_total(self) -> int: ...
    @property
    def seats_used(self) -> int: ...
    def live_uid(self, uid: str) -> bool: ...
    def device_conflict(self, claim: str) -> tuple[str, str] | None: ...
    def sharing(self, claim: str) -> tuple[str, ...]: ...


def device_conflict(claim: ClaimView | None, holding: Callable[[str], Iterable[ClaimView]],
                    ) -> tuple[str, str] | None:
    """(device, other) when another of our claims' allocations names a device ``claim``'s
    names (the first such device, then the first such claim by name), or ``claim`` was
    marked giving a device up (other: ''): ``claim`` must give it up. ``holding(device)``:
    our claims whose allocations name it, being deleted or not. None: no conflict, or
    ``claim`` is unknown."""
    if claim is None:
        return None
    for device in claim.held:
        other = min((v.name for v in holding(device) if v.name != claim.name), default=None)
        if other is not None:
            return device, other
    return (claim.gives_up, "") if claim.gives_up else None


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
    @property
    def exclusive(self) -> bool: ...
    @property
    def role(self) -> str: ...


def worker_booking(worker: SeatHolder, pod_claims: Iterable[tuple[str, str]],
                   committed: Iterable[str]) -> Booked | None:
    """The worker's seat, if any. ``pod_claims``: (pod name, live claim) of the pods it
    controls; ``committed``: the claims whose booked list commits it."""
    live = [(pod, claim) for pod, claim in pod_claims if claim]
    if live:
        claim = max(live)[1]
    elif worker.phase in naming.FINISHED_PHASES:
        return None
    else:
        claim = worker.claim or max(committed, default="")
    if not claim:
        return None
    return Booked(worker.name, claim, worker.owner, worker.memory, worker.exclusive,
                  str(worker.role))


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
    return Claim(view.name, view.node, view.devices, allocated=view.joinable,
                 device_memory=view.device_memory, bookings=tuple([
        Booking(b.holder, b.owner, b.memory, b.exclusive, Role(b.role) if b.role else None)
        for b in sorted(seats, key=_HOLDER)]))


def make_way(nodes: Iterable[Node], claims: Iterable[Claim]) -> dict[str, FleetWarning]:
    """The nodes that give way (the module's rule), each with its warning, in the order
    of the claims they give way to, by name."""
    by_name = {node.name: node for node in nodes}
    out: dict[str, FleetWarning] = {}
    for claim in sorted(claims, key=_NAME):
        node = by_name.get(claim.node)
        if node is not None and claim.devices > node.devices and node.name not in out:
            out[node.name] = warning(Kind.MAKE_WAY, node.name, f"claim {claim.name} holds "
                                     f"{claim.devices} devices, node {node.name} has "
                                     f"{node.devices}", claim=claim.name)
    return out


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
    value = (entry or {}).get("value") if isinstance(entry, dict) else entry
    return _counter(value) if isinstance(value, str) else _counter_of(value)


@functools.lru_cache(maxsize=4096)
def _counter(text: str) -> int:
    # A pool spells its counters in a few ways ("80Gi"): each is parsed once.
    return _counter_of(text)


def _counter_of(value: object) -> int:
    try:
        return parse_quantity(value, allow_zero=True)
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


Seat = tuple[str, int, str]  # a counted device: (node, memory, product)
Use = tuple[tuple[str, str], int]  # (counter set, counter) and the amount a device takes


@attrs.frozen
class SliceDevices:
    """A slice's devices as its own content decides them, read once per version of it.

    ``entries``, in the slice's order: (device, its seat or None when left out whatever
    the claims, the reason it is, the counters it consumes). ``counted`` and ``out`` are
    the answer when neither a claim not ours nor a counter's balance can change it
    (``open`` false, nothing of the pool taken)."""

    node: str
    entries: tuple[tuple[str, Seat | None, str, tuple[Use, ...]], ...]
    shared: tuple[Use, ...]  # the counters the slice offers
    counted: tuple[Seat, ...]
    out: tuple[LeftOut, ...]
    open: bool  # a device that may count consumes counters: their balance decides


def slice_devices(item: Obj, driver: str, selector: DeviceSelector | None) -> SliceDevices:
    """What the slice's content alone says of each device: memory, the class's selectors,
    a barring taint (``pool_devices`` adds the claims not ours and the counters)."""
    spec = item.get("spec") or {}
    node = str(spec.get("nodeName") or "")
    verdicts = selector.slice_verdicts(driver, item) if selector is not None else ()
    qualified = f"{driver}/memory"
    entries: list[tuple[str, Seat | None, str, tuple[Use, ...]]] = []
    counted: list[Seat] = []
    out: list[LeftOut] = []
    open_ = False
    for index, device in enumerate(spec.get("devices") or []):
        name = device.get("name") or ""
        # device_memory and device_product, inlined: this loop runs once per published
        # device whenever a slice changes
        basic = device.get("basic")
        capacity = device.get("capacity") or (basic or {}).get("capacity")
        entry = capacity and (capacity.get("memory") or capacity.get(qualified))
        value = entry.get("value") if isinstance(entry, dict) else None
        memory = _memory(value) if isinstance(value, str) else None
        uses = tuple(_consumes(device)) if "consumesCounters" in device else ()
        reason = ("no memory capacity" if not memory else
                  verdicts[index] if verdicts and verdicts[index] else
                  _barring_taint(device) if "taints" in device else "")
        if reason or not memory:
            entries.append((str(name), None, reason, uses))
            out.append(LeftOut(node, str(name), reason))
            continue
        product = (device.get("attributes") or (basic or {}).get("attributes") or {}).get(
            "productName")
        seat = (node, memory, str(product.get("string") or "")
                if isinstance(product, dict) else "")
        entries.append((name if isinstance(name, str) else str(name), seat, "", uses))
        counted.append(seat)
        open_ = open_ or bool(uses)
    shared = tuple(((str(set_.get("name") or ""), str(name)), _amount(amount))
                   for set_ in spec.get("sharedCounters") or []
                   for name, amount in (set_.get("counters") or {}).items())
    return SliceDevices(node, tuple(entries), shared, tuple(counted), tuple(out), open_)


def pool_devices(pool: str, slices: Iterable[Obj], driver: str,
                 selector: DeviceSelector | None, taken: Mapping[str, str],
                 ) -> tuple[list[Seat], list[LeftOut]]:
    """One complete pool generation's devices: those counted (node, memory, product), and
    those left out with why.

    ``taken``: the pool's devices claims not ours hold, each to the claim holding it.
    With a selector, what a slice's content decides is kept per slice version
    (``DeviceSelector.per_slice``); the claims and counters are applied on each read."""
    tables = [selector.per_slice(driver, s, functools.partial(slice_devices, s, driver,
                                                              selector))
              if selector is not None else slice_devices(s, driver, None) for s in slices]
    if not taken and not any(t.open for t in tables):
        return ([seat for t in tables for seat in t.counted],
                [gone for t in tables for gone in t.out])
    left = {counter: amount for t in tables for counter, amount in t.shared}
    holder_of: dict[tuple[str, str], str] = {}
    for t in tables if taken else ():
        for name, _, _, uses in t.entries:
            claim = taken.get(name)
            if claim:
                for counter, amount in uses:
                    left[counter] = left.get(counter, 0) - amount
                    holder_of[counter] = f"claim {claim} ({name})"
    counted: list[Seat] = []
    out: list[LeftOut] = []
    for t in tables:
        for name, seat, reason, uses in t.entries:
            if seat is not None:
                reason = _claimed(name, uses, taken, left, holder_of)
            if reason:
                out.append(LeftOut(t.node, name, reason))
            elif seat is not None:
                counted.append(seat)
    return counted, out


def _claimed(name: str, uses: tuple[Use, ...], taken: Mapping[str, str],
             left: Mapping[tuple[str, str], int],
             holder_of: Mapping[tuple[str, str], str]) -> str:
    """Why a device its slice would count is not free: a claim not ours holds it, or what
    it consumes of a counter is no longer left."""
    claim = taken.get(name) if taken else None
    if claim:
        return f"allocated to claim {claim}"
    for counter, amount in uses:
        if amount > left.get(counter, 0):
            by = holder_of.get(counter)
            return (f"counters consumed by {by}" if by else
                    f"counter {counter[0]}/{counter[1]} short ({amount} needed)")
    return ""


def left_out_warnings(node: str, left_out: Iterable[LeftOut]) -> list[FleetWarning]:
    """One warning per reason, naming the node's devices left out for it."""
    by_reason: dict[str, list[str]] = {}
    for item in left_out:
        by_reason.setdefault(item.reason, []).append(item.device)
    return [warning(Kind.DEVICES, node, f"{len(names)} device{'s' if len(names) > 1 else ''} "
                    f"left out ({', '.join(sorted(names))}): {reason}")
            for reason, names in sorted(by_reason.items())]


def foreign_claim(claim: Obj, namespace: str) -> bool:
    """Whether a claim is not ours. Ours are the managed claims of our namespace, read
    whole by their own watch; any other claim, of any namespace (another install's
    managed ones too), holds what DRA allocated it for someone else."""
    return not ((claim.get("metadata") or {}).get("namespace") == namespace
                and labels_of(claim).get(naming.LABEL_MANAGED) == "true")


def claim_holder(claim: Obj) -> str:
    """``namespace/name``, as a claim not ours is named where it holds a device (its
    cache record is named so already); an other pod is named so too."""
    name = name_of(claim)
    return name if "/" in name else f"{(claim.get('metadata') or {}).get('namespace', '')}/{name}"


def held_devices(claim: Obj, driver: str) -> list[tuple[str, str]]:
    """(pool, device) of each device of the driver the claim's allocation holds."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(str(result.get("pool") or ""), str(result.get("device") or ""))
            for result in (allocation.get("devices") or {}).get("results") or []
            if result.get("driver", driver) == driver]


def taken_devices(claims: Iterable[Obj], driver: str) -> dict[str, dict[str, str]]:
    """Per pool, its devices allocated to these claims (the caller's: claims not ours,
    ``foreign_claim``), each to the claim holding it; a device several hold (one allowing
    multiple allocations) is named with the first of them by name."""
    taken: dict[str, dict[str, str]] = {}
    for claim in claims:
        holder = claim_holder(claim)
        for pool, device in held_devices(claim, driver):
            devices = taken.setdefault(pool, {})
            if device not in devices or holder < devices[device]:
                devices[device] = holder
    return taken
