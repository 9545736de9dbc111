"""The cluster as placement's data: nodes from ResourceSlices x node labels, claims, bookings.

Rules:

* Hardware comes from the configured driver's ResourceSlices, never from
  labels. Per pool only the latest generation counts, and only when it is
  complete (as many slices at that generation as ``resourceSliceCount``):
  mixing generations double-counts devices, a partial one under-counts, and
  DRA itself allocates nothing from an incomplete pool.
* Which devices count is ``fleet_rules.pool_devices``' (memory, the class's
  selectors, taints, counters, claims not ours); a node's device memory is its
  smallest counted device's, and a node whose counted devices differ in
  memory is read as groups of equal devices (``Node.device_groups``), each
  claim cut from one group; the devices left out are warned about per node
  and reason. Slices without a
  ``nodeName`` describe no single node and are skipped: a worker lives on one
  node.
* A node is a pool only if it carries ``openrl.io/enabled=true`` and the
  driver publishes devices for it. Host memory is the node's parking
  budget: its allocatable memory less its other pods' memory requests
  (``requests``: kube-scheduler's count; below zero, zero with a warning).
  Role labels count when ``true``; a node with role labels none of which is
  ``true`` accepts no role (the pod's node affinity would agree) and is left
  out. A malformed ``max-workers-per-claim`` falls back to 1, one
  above 256 (the most consumers a ResourceClaim lists) counts as 256; all
  are reported as warnings. A node that cannot keep its workers (not ready,
  out-of-service: ``controller.fleet.health``) is left out, with a warning. Pod
  slots for workers: the node's allocatable
  ``pods`` less its other pods (``fleet_rules``); unreadable, unchecked, with
  a warning.
* Claims: managed. A terminating claim keeps its devices and seats booked
  until it is gone (DRA keeps it, allocated, while a pod still uses it), but
  reads as unallocated, so nobody joins a claim on its way out; ``claims``
  of the view lists only the ones not terminating, ``closing`` the others.
* Who holds which seat, a claim's shape in placement, the seat counts and
  which node gives way to a claim wider than it are ``fleet_rules``' (shared
  with the incremental ``fleet_cache``); this module only gathers the objects
  those rules read. Warnings are ``warning.FleetWarning`` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from controller.fleet.claims import ClaimView, read_claim
from controller.fleet.health import closing, trouble
from controller.fleet.requests import Budget, budget_of, memory_request, parking_budget
from controller.fleet.rules import (
    Booked,
    FleetReading,
    LeftOut,
    Seat,
    claim_holder,
    committed_uids,
    device_conflict,
    left_out_warnings,
    live_pod_claim,
    make_way,
    orphan_booking,
    other_pod_node,
    placement_claim,
    pool_devices,
    seats_total,
    seats_used,
    taken_devices,
    worker_booking,
    worker_pod_slots,
)
from controller.fleet.selectors import DeviceSelector
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import naming
from controller.k8s.objects import Obj, Worker, labels_of, name_of, worker_owner_uid
from placement import Fleet, Node, Role
from placement.model import MAX_CLAIM_CONSUMERS
from placement.quantity import QuantityError, parse_quantity


@attrs.frozen
class Hardware:
    """A node's counted devices (none: all left out), and the ones left out."""

    devices: int
    device_memory: int
    product: str
    left_out: tuple[LeftOut, ...] = ()
    # (devices, memory) per size, smallest first, where the sizes differ; () otherwise
    device_groups: tuple[tuple[int, int], ...] = ()


@attrs.frozen
class FleetView:
    """The plain reading (a ``fleet_rules.FleetReading``), built whole from lists."""

    fleet: Fleet
    nodes: dict[str, Node]
    claims: dict[str, ClaimView]
    closing: dict[str, ClaimView]
    bookings: dict[str, Booked]
    warnings: tuple[FleetWarning, ...]
    live_uids: frozenset[str] = frozenset()
    # Per node placement knows, the devices it publishes that do not count (snapshot's)
    left_out: dict[str, tuple[LeftOut, ...]] = attrs.field(factory=dict)
    # Per node placement knows, its parking budget's account (snapshot's, explain's)
    budgets: dict[str, Budget] = attrs.field(factory=dict)

    @property
    def seats_total(self) -> int:
        return seats_total(self.nodes.values())

    @property
    def seats_used(self) -> int:
        return seats_used(self.bookings.values(), self.claims)

    def live_uid(self, uid: str) -> bool:
        return uid in self.live_uids

    def device_conflict(self, claim: str) -> tuple[str, str] | None:
        views = (*self.claims.values(), *self.closing.values())
        return device_conflict(self.claims.get(claim) or self.closing.get(claim),
                               lambda device: [v for v in views if device in v.held])

    def sharing(self, claim: str) -> tuple[str, ...]:
        """Our other claims whose allocations name a device this one's names."""
        mine = self.claims.get(claim) or self.closing.get(claim)
        held = set(mine.held) if mine is not None else set()
        return tuple(sorted(v.name for v in (*self.claims.values(), *self.closing.values())
                            if v.name != claim and held & set(v.held)))


def read_slices(slices: list[Obj], driver: str, selector: DeviceSelector | None = None,
                taken: Mapping[str, Mapping[str, str]] | None = None,
                ) -> tuple[dict[str, Hardware], dict[str, str], list[FleetWarning]]:
    """(hardware per node, node per pool, notes) from the driver's ResourceSlices.

    ``selector``: the DeviceClass's (None: every device with memory is selected);
    ``taken``: per pool, its devices claims not ours hold, each to the claim."""
    taken = taken or {}
    left_out: dict[str, list[LeftOut]] = {}
    pools: dict[str, list[tuple[int, Obj, Obj]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pool = spec.get("pool") or {}
        pools.setdefault(str(pool.get("name", "")), []).append((_generation(pool), spec, item))
    per_node: dict[str, list[Seat]] = {}
    pool_nodes: dict[str, str] = {}
    notes: list[FleetWarning] = []
    for name in sorted(pools):
        members = pools[name]
        latest = max(m[0] for m in members)
        current = [m for m in members if m[0] == latest]
        expected = max(int((spec.get("pool") or {}).get("resourceSliceCount") or 1)
                       for _, spec, _ in current)
        if len(current) != expected:
            notes.append(warning(Kind.POOL, name, f"generation {latest} has {len(current)} "
                                 f"of {expected} slices; skipped until complete"))
            continue
        placed = []
        for _, spec, item in current:
            node = spec.get("nodeName")
            if node:
                pool_nodes[name] = str(node)
                placed.append(item)
            elif spec.get("devices"):
                notes.append(warning(Kind.SLICE, name_of(item), "no nodeName; skipped"))
        counted, out = pool_devices(name, placed, driver, selector, taken.get(name) or {})
        last, bucket = "", None
        for seat in counted:  # a pool's devices are almost always on one node
            if bucket is None or seat[0] != last:
                last, bucket = seat[0], per_node.setdefault(seat[0], [])
            bucket.append(seat)
        for dropped in out:
            left_out.setdefault(dropped.node, []).append(dropped)
    hardware = {}
    for node, devs in per_node.items():
        _, memory, product = min(devs)  # the smallest memory, and its product
        sizes: dict[int, int] = {}
        for _, size, _ in devs:
            sizes[size] = sizes.get(size, 0) + 1
        hardware[node] = Hardware(
            devices=len(devs), device_memory=memory, product=product,
            left_out=tuple(left_out.pop(node, ())),
            device_groups=tuple((sizes[size], size) for size in sorted(sizes))
            if len(sizes) > 1 else ())
    for node, items in left_out.items():
        hardware[node] = Hardware(devices=0, device_memory=0, product="",
                                  left_out=tuple(items))
    return hardware, pool_nodes, notes


def _generation(pool: Obj) -> int:
    try:
        return int(pool.get("generation") or 0)
    except (TypeError, ValueError):
        return 0


def read_nodes(node_objs: list[Obj], hardware: dict[str, Hardware],
               other_pods: Mapping[str, int] | None = None,
               other_memory: Mapping[str, int] | None = None,
               ) -> tuple[list[Node], list[FleetWarning]]:
    """Enabled nodes the driver publishes devices for, with their policy; plus warnings.

    ``other_pods``: per node, its pods that are not workers (``other_pods_by_node``);
    ``other_memory``: per node, what they request of its memory (``requests``).
    """
    nodes: list[Node] = []
    warnings: list[FleetWarning] = []
    for obj in sorted(node_objs, key=name_of):
        name, labels = name_of(obj), labels_of(obj)
        if labels.get(naming.NODE_ENABLED) != "true" or name not in hardware:
            continue
        warnings += left_out_warnings(name, hardware[name].left_out)
        if not hardware[name].devices:
            continue
        sick = trouble(obj, name)
        # No new seat on a node that cannot keep its workers, nor on one closing.
        why = sick.why if sick is not None else closing(obj, name)
        if why:
            warnings.append(warning(Kind.NODE_LEFT_OUT, name, why))
            continue
        present = {role: labels[key] for role, key in naming.NODE_ROLE_LABELS.items()
                   if key in labels}
        roles = frozenset(Role(role) for role, value in present.items() if value == "true")
        if present and not roles:
            warnings.append(warning(Kind.NODE, name, f"role labels {present} name no role as "
                                    "'true'; the node accepts no workers"))
            continue
        max_workers = 1
        raw = labels.get(naming.NODE_MAX_WORKERS)
        if raw is not None:
            if raw.isdigit() and int(raw) >= 1:
                max_workers = int(raw)
            else:
                warnings.append(warning(Kind.NODE, name, f"{naming.NODE_MAX_WORKERS}={raw!r} "
                                        "is not a whole number >= 1; using 1"))
            if max_workers > MAX_CLAIM_CONSUMERS:
                warnings.append(warning(Kind.NODE, name, f"{naming.NODE_MAX_WORKERS}={raw!r} "
                                        f"is above {MAX_CLAIM_CONSUMERS}, the most consumers "
                                        "a ResourceClaim lists; using "
                                        f"{MAX_CLAIM_CONSUMERS}"))
                max_workers = MAX_CLAIM_CONSUMERS
        allocatable = (obj.get("status") or {}).get("allocatable") or {}
        pods: int | None = None
        if allocatable.get("pods") is not None:
            try:
                pods = parse_quantity(allocatable["pods"], allow_zero=True)
            except QuantityError:
                warnings.append(warning(Kind.NODE, name, f"allocatable pods "
                                        f"{allocatable['pods']!r} unreadable; pod slots "
                                        "unchecked"))
        host = allocatable.get("memory")
        host_memory: int | None = None
        if host is not None:
            try:
                host_memory = parse_quantity(host, allow_zero=True)
            except QuantityError:
                warnings.append(warning(Kind.NODE, name, f"allocatable memory {host!r} "
                                        "unreadable; host memory unchecked"))
        host_memory, short = parking_budget(name, host_memory,
                                            (other_memory or {}).get(name, 0))
        if short is not None:
            warnings.append(short)
        hw = hardware[name]
        nodes.append(Node(name=name, devices=hw.devices, device_memory=hw.device_memory,
                          host_memory=host_memory, roles=roles,
                          max_workers_per_claim=max_workers, product=hw.product,
                          pods=worker_pod_slots(pods, (other_pods or {}).get(name, 0)),
                          device_groups=hw.device_groups))
    return nodes, warnings


def other_pods_by_node(pods: Iterable[Obj]) -> dict[str, list[tuple[str, int]]]:
    """Per node, the pods on it besides the workers (they take a pod slot and their
    memory requests), each as (name, memory request)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for pod in pods:
        node = other_pod_node(pod)
        if node:
            out.setdefault(node, []).append((claim_holder(pod), memory_request(pod)))
    return out


def _allocatable_memory(node: Obj) -> int | None:
    text = ((node.get("status") or {}).get("allocatable") or {}).get("memory")
    try:
        return None if text is None else parse_quantity(text, allow_zero=True)
    except QuantityError:
        return None


def committed_claims(claims: list[Obj]) -> dict[str, list[str]]:
    """Worker UID -> the claims whose booked list commits its seat."""
    out: dict[str, list[str]] = {}
    for claim in claims:
        for uid in committed_uids(claim):
            out.setdefault(uid, []).append(name_of(claim))
    return out


def read_bookings(workers: list[Worker], pods: list[Obj],
                  committed: dict[str, list[str]] | None = None) -> dict[str, Booked]:
    """Who holds which seat (fleet_rules: the live pod, the status, a committed join;
    a live managed pod whose worker is gone)."""
    by_uid = {w.uid: w for w in workers}
    pods_of: dict[str, list[tuple[str, str]]] = {}
    orphans: list[Booked] = []
    for pod in pods:
        uid = worker_owner_uid(pod)
        if uid in by_uid:
            pods_of.setdefault(uid, []).append((name_of(pod), live_pod_claim(pod)))
        elif (orphan := orphan_booking(pod)) is not None:
            orphans.append(orphan)
    bookings: dict[str, Booked] = {}
    for worker in workers:
        booked = worker_booking(worker, pods_of.get(worker.uid, ()),
                                (committed or {}).get(worker.uid, ()))
        if booked is not None:
            bookings[worker.name] = booked
    for orphan in orphans:
        bookings[orphan.holder] = orphan
    return bookings


def build_fleet(
    *, slices: list[Obj], nodes: list[Obj], claims: list[Obj], workers: list[Worker],
    pods: list[Obj], driver: str, node_pods: Iterable[Obj] = (),
    device_class: Obj | None = None, foreign_claims: Iterable[Obj] = (),
) -> FleetView:
    """The plain reading of these objects (a ``FleetReading``, as ``Cache.view`` is).
    ``node_pods``: every namespace's bound pods that are not managed (or more:
    ``other_pod_node`` picks), for the nodes' pod slots. ``device_class``: the
    configured DeviceClass, whose selectors pick the devices (None: not read, every
    device with memory is selected); ``foreign_claims``: claims not ours whose
    allocations take devices and counters."""
    selector = DeviceSelector.of(device_class) if device_class is not None else None
    hardware, pool_nodes, notes = read_slices(slices, driver, selector,
                                              taken_devices(foreign_claims, driver))
    if selector is not None:
        notes = [*selector.warnings, *notes]
    others = other_pods_by_node(node_pods)
    placement_nodes, warnings = read_nodes(
        nodes, hardware, {node: len(pods) for node, pods in others.items()},
        {node: sum(m for _, m in pods) for node, pods in others.items()})
    bookings = read_bookings(workers, pods, committed_claims(claims))
    views = {v.name: v for v in (read_claim(c, pool_nodes) for c in claims)}
    on_claim: dict[str, list[Booked]] = {}
    for booked in bookings.values():
        on_claim.setdefault(booked.claim, []).append(booked)
    fleet_claims = [claim for v in views.values()
                    if (claim := placement_claim(v, on_claim.get(v.name, ()))) is not None]
    # A node narrower than a claim on it gives way (fleet_rules.make_way).
    giving_way = make_way(placement_nodes, fleet_claims)
    if giving_way:
        warnings += giving_way.values()
        placement_nodes = [n for n in placement_nodes if n.name not in giving_way]
    fleet = Fleet(placement_nodes, fleet_claims)
    placed = {n.name for n in placement_nodes}
    return FleetView(
        fleet=fleet, nodes={node.name: node for node in placement_nodes},
        claims={name: v for name, v in views.items() if not v.deleting},
        closing={name: v for name, v in views.items() if v.deleting},
        bookings=bookings, warnings=tuple(notes + warnings),
        live_uids=frozenset(w.uid for w in workers if w.phase not in naming.FINISHED_PHASES),
        left_out={n.name: hardware[n.name].left_out for n in placement_nodes
                  if hardware[n.name].left_out},
        budgets={name_of(obj): budget_of(_allocatable_memory(obj), others.get(name_of(obj), ()))
                 for obj in nodes if name_of(obj) in placed})


def _reading(view: FleetView) -> FleetReading:
    return view  # mypy checks here that the plain view offers the whole read interface
