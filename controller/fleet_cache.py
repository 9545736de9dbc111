"""Placement's fleet kept current from object changes, never rebuilt per decision.

Rules:

* The same reading as ``fleet_reader.build_fleet`` (which stays the plain
  reference), by the same rules: slices and nodes through ``read_slices`` and
  ``read_nodes``, who holds which seat, a claim's shape in placement and the
  seat counts through ``fleet_rules``. This module only decides what a change
  touches.
* What it offers to read is ``view``, a ``fleet_rules.FleetReading`` shaped
  like the plain reading's ``FleetView`` (the same kinds: ``nodes``, ``claims``,
  ``closing`` and ``bookings`` by name), read-only and always current; its
  maps are its own.
* The configured DeviceClass's selectors are compiled once per version of
  the class; a class that changes re-reads every pool (rare, and what it
  selects may change anywhere). Another class's changes touch nothing.
* Every change costs what it touches: a slice re-reads its pool's nodes, a
  node is taken out of the fleet and put back (also when a pod other than a
  worker's comes to it or leaves it: its pod slots changed), a claim (or a booking on it) is
  dropped and re-added with its seats -- a few workers, never the fleet.
* It holds no lock and does no I/O; the cache around it serializes changes.
* It keeps no object: what it must read again (a pool's slices, a node, an
  orphan's pod, a claim whose node comes from its pools) it looks up in the
  cache (``lookup``), and of workers and pods it keeps only what a seat
  depends on. The cache holds each object once.
* It also keeps the pending workers (``work.waiting_of``), for a wake and
  the metrics' census: what those cost grows with the pending workers, not
  with the fleet.
* What the fleet refuses (a node with fewer devices than a claim on it holds,
  say) is left out and reported among the warnings, never raised: one odd
  object must not stop the watches.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from msgspec import Struct

from controller import kube, naming
from controller.claims import ClaimView, read_claim
from controller.fleet_reader import Hardware, read_nodes, read_slices
from controller.fleet_rules import (
    ORPHAN_PREFIX,
    Booked,
    claim_holder,
    committed_uids,
    held_devices,
    live_pod_claim,
    orphan_booking,
    other_pod_node,
    placement_claim,
    seats_total,
    seats_used,
    worker_booking,
)
from controller.objects import Obj, Worker, worker_owner_uid
from controller.selectors import DeviceSelector
from controller.work import Waiting, waiting_of
from placement import Claim, Fleet, Node, PlacementError

__all__ = ["CachedView", "FleetCache", "Lookup"]

Lookup = Callable[[kube.Resource, str], Obj | None]  # the cache's current object, if any


# Small frozen structs the cyclic collector does not track (strings and an int: no
# cycle can pass through them), one of each per worker: a third smaller than named
# tuples, and never walked by a collection.

class WorkerSeat(Struct, frozen=True, gc=False):
    """What a worker's seat depends on (``fleet_rules.worker_booking`` reads it)."""

    name: str
    uid: str
    phase: str
    claim: str
    owner: str
    memory: int
    exclusive: bool = False
    role: str = ""  # the role's value: a joiner prefers a claim its owner holds in the other

    @classmethod
    def of(cls, worker: Worker) -> WorkerSeat:
        # Interned: the same names and uids are keys and values of several maps here.
        return cls(sys.intern(worker.name), sys.intern(worker.uid), sys.intern(worker.phase),
                   sys.intern(worker.claim), sys.intern(worker.owner), worker.memory,
                   worker.exclusive, worker.role.value)


class PodSeat(Struct, frozen=True, gc=False):
    owner_uid: str  # the worker controlling it ('' if none)
    claim: str  # the claim it holds a seat on while alive ('' if none)


class FleetCache:
    def __init__(self, driver: str, *, lookup: Lookup, device_class: str | None = None) -> None:
        self.driver = driver
        self._lookup = lookup
        self._class_name = device_class
        self._selector: DeviceSelector | None = None
        self._fleet = Fleet()
        self._nodes: dict[str, Node] = {}  # as filed in the fleet
        self._claims: dict[str, ClaimView] = {}  # managed claims not being deleted
        self._closing: dict[str, ClaimView] = {}  # being deleted: booked until gone
        self._bookings: dict[str, Booked] = {}  # holder -> its booking
        self._pool_nodes: dict[str, str] = {}
        # Claims not ours: what each holds ((pool, device)), and per pool each held
        # device's holders (sorted; the first names it): a small record, never the claim
        self._foreign: dict[str, tuple[tuple[str, str], ...]] = {}
        self._taken: dict[str, dict[str, tuple[str, ...]]] = {}
        self._slices: dict[str, tuple[str, str]] = {}  # slice -> (pool, node) it names
        self._pool_slices: dict[str, set[str]] = {}
        self._node_pools: dict[str, Counter[str]] = {}  # node -> pools naming it (slice count)
        self._hardware: dict[str, Hardware] = {}
        self._pool_notes: dict[str, list[str]] = {}
        self._node_warnings: dict[str, list[str]] = {}
        self._by_pool: set[str] = set()  # allocated claims whose node comes from a pool
        self._in_fleet: dict[str, Claim] = {}
        self._claim_notes: dict[str, str] = {}  # claims the fleet refused, and why
        self._on_claim: dict[str, tuple[str, ...]] = {}  # claim -> holders booked on it
        self._workers: dict[str, WorkerSeat] = {}
        self._waiting: dict[str, Waiting] = {}  # the pending workers (work.waiting_of)
        self._worker_by_uid: dict[str, str] = {}
        self._pods: dict[str, PodSeat] = {}
        self._pods_of: dict[str, tuple[str, ...]] = {}  # worker uid -> pods it controls
        self._booked: dict[str, set[str]] = {}  # live claim -> uids its booked list commits
        self._committed: dict[str, set[str]] = {}  # worker uid -> claims listing it
        self._pod_slot: dict[str, str] = {}  # namespace/name -> the node it takes a slot on
        self._other_pods: Counter[str] = Counter()  # node -> its pods that are not workers
        self.view = CachedView(self)

    # ---------------------------------------------------------------- changes

    def slice_changed(self, name: str, obj: Obj | None) -> None:
        old = self._slices.pop(name, None)
        touched_pools: set[str] = set()
        touched_nodes: set[str] = set()
        if old is not None:
            pool, node = old
            self._pool_slices[pool].discard(name)
            if not self._pool_slices[pool]:
                del self._pool_slices[pool]
            self._unname(node, pool)
            touched_pools.add(pool)
            touched_nodes.add(node)
        if obj is not None and (obj.get("spec") or {}).get("driver") == self.driver:
            pool, node = self._slices[name] = _pool_and_node(obj)
            self._pool_slices.setdefault(pool, set()).add(name)
            self._node_pools.setdefault(node, Counter())[pool] += 1
            touched_pools.add(pool)
            touched_nodes.add(node)
        for pool in touched_pools:
            touched_nodes |= self._reread_pool(pool)
        for node in sorted(touched_nodes - {""}):
            self._reread_hardware(node)
        for claim in sorted(self._by_pool):
            self.claim_changed(claim, self._lookup(kube.CLAIMS, claim))

    def device_class_changed(self, name: str, obj: Obj | None) -> None:
        if name != self._class_name:
            return
        selector = DeviceSelector.of(obj) if obj is not None else None
        if selector == self._selector:
            return
        self._selector = selector
        nodes: set[str] = set()
        for pool in sorted(self._pool_slices):
            nodes |= self._reread_pool(pool)
        for node in sorted((nodes | set(self._hardware)) - {""}):
            self._reread_hardware(node)

    def foreign_claim_changed(self, name: str, obj: Obj | None) -> None:
        """A claim not ours (``namespace/name``): the devices it holds, and with them
        the counters those consume, are taken or given back."""
        old = self._foreign.pop(name, ())
        new = tuple(sorted(set(held_devices(obj, self.driver)))) if obj is not None else ()
        if new:
            self._foreign[name] = new
        if old == new:
            return
        holder = claim_holder(obj) if obj is not None else name
        for (pool, device), step in [*((d, -1) for d in old), *((d, 1) for d in new)]:
            devices = self._taken.setdefault(pool, {})
            rest = tuple(h for h in devices.get(device, ()) if h != holder)
            rest = tuple(sorted((*rest, holder))) if step > 0 else rest
            if rest:
                devices[device] = rest
            else:
                devices.pop(device, None)
            if not devices:
                del self._taken[pool]
        nodes: set[str] = set()
        for pool in sorted({pool for pool, _ in (*old, *new)} & set(self._pool_slices)):
            nodes |= self._reread_pool(pool)
        for node in sorted(nodes - {""}):
            self._reread_hardware(node)

    def node_changed(self, name: str, obj: Obj | None) -> None:
        self._refile_node(name, obj)

    def claim_changed(self, name: str, obj: Obj | None) -> None:
        self._by_pool.discard(name)
        if obj is None:
            self._claims.pop(name, None)
            self._closing.pop(name, None)
        else:
            view = read_claim(obj, self._pool_nodes)
            if view.deleting:
                self._claims.pop(name, None)
                self._closing[name] = view
            else:
                self._claims[name] = view
                self._closing.pop(name, None)
            allocation = (obj.get("status") or {}).get("allocation")
            if allocation and not _single_node(allocation):
                self._by_pool.add(name)
        self._sync_claim(name)
        self._recommit(name, obj)

    def _recommit(self, name: str, obj: Obj | None) -> None:
        """Follow the claim's booked list: its workers' committed seats."""
        new = set(committed_uids(obj)) if obj is not None else set()
        old = self._booked.pop(name, set())
        if new:
            self._booked[name] = new
        for uid in old ^ new:
            claims = self._committed.setdefault(uid, set())
            if uid in new:
                claims.add(name)
            else:
                claims.discard(name)
            if not claims:
                del self._committed[uid]
            worker = self._worker_by_uid.get(uid)
            if worker is not None:
                self._rebook(worker)

    def worker_changed(self, name: str, obj: Obj | None) -> None:
        old = self._workers.pop(name, None)
        uids: set[str] = set()
        if old is not None:
            self._worker_by_uid.pop(old.uid, None)
            uids.add(old.uid)
        self._waiting.pop(name, None)
        if obj is not None:
            waiting = waiting_of(obj)
            if waiting is not None:
                self._waiting[name] = waiting
            worker = WorkerSeat.of(Worker.from_obj(obj))
            self._workers[name] = worker
            self._worker_by_uid[worker.uid] = name
            uids.add(worker.uid)
        self._rebook(name)
        for uid in uids:
            for pod in sorted(self._pods_of.get(uid, ())):
                self._rebook(f"pod/{pod}")

    def pod_changed(self, name: str, obj: Obj | None) -> None:
        old = self._pods.pop(name, None)
        uids: set[str] = set()
        if old is not None:
            uid = old.owner_uid
            _discard(self._pods_of, uid, name)
            uids.add(uid)
        if obj is not None:
            uid = sys.intern(worker_owner_uid(obj))
            self._pods[name] = PodSeat(uid, sys.intern(live_pod_claim(obj)))
            _add(self._pods_of, uid, name)
            uids.add(uid)
        self._rebook(f"pod/{name}")
        for uid in uids:
            worker = self._worker_by_uid.get(uid)
            if worker is not None:
                self._rebook(worker)

    def node_pod_changed(self, name: str, obj: Obj | None) -> None:
        """A pod of any namespace (``namespace/name``): the pod slot it takes, if any."""
        old = self._pod_slot.pop(name, "")
        new = other_pod_node(obj) if obj is not None else ""
        if new:
            self._pod_slot[name] = new
        if old == new:
            return
        for node, step in ((old, -1), (new, 1)):
            if node:
                self._other_pods[node] += step
                if self._other_pods[node] <= 0:
                    del self._other_pods[node]
                self._refile_node(node)

    def waiting(self) -> list[Waiting]:
        """The pending workers, as ``work.waiting_of`` reads each (in no set order)."""
        return list(self._waiting.values())

    # ------------------------------------------------------------- hardware

    def _unname(self, node: str, pool: str) -> None:
        pools = self._node_pools.get(node)
        if pools is None:
            return
        pools[pool] -= 1
        if pools[pool] <= 0:
            del pools[pool]
        if not pools:
            del self._node_pools[node]

    def _reread_pool(self, pool: str) -> set[str]:
        """Re-read one pool's slices; the nodes whose hardware may have changed."""
        before = {self._pool_nodes[pool]} if pool in self._pool_nodes else set()
        names = sorted(self._pool_slices.get(pool, ()))
        slices = self._objs(kube.SLICES, names)
        _, pool_nodes, notes = self._read(slices, [pool])
        self._pool_notes.pop(pool, None)
        if notes:
            self._pool_notes[pool] = notes
        self._pool_nodes.pop(pool, None)
        if pool in pool_nodes:
            self._pool_nodes[pool] = pool_nodes[pool]
        named = {self._slices[s][1] for s in names}
        return before | named | set(pool_nodes.values())

    def _read(self, slices: list[Obj], pools: Iterable[str],
              ) -> tuple[dict[str, Hardware], dict[str, str], list[str]]:
        """``read_slices`` with the class's selector and what claims not ours hold of
        these pools."""
        taken = {pool: {device: holders[0] for device, holders in self._taken[pool].items()}
                 for pool in pools if pool in self._taken}
        return read_slices(slices, self.driver, self._selector, taken)

    def _objs(self, res: kube.Resource, names: list[str]) -> list[Obj]:
        found = (self._lookup(res, name) for name in names)
        return [obj for obj in found if obj is not None]

    def _reread_hardware(self, node: str) -> None:
        pools = self._node_pools.get(node, Counter())
        slices = self._objs(kube.SLICES, [s for pool in sorted(pools)
                                          for s in sorted(self._pool_slices.get(pool, ()))])
        hardware, _, _ = self._read(slices, pools)
        if node in hardware:
            self._hardware[node] = hardware[node]
        else:
            self._hardware.pop(node, None)
        self._refile_node(node)

    def _refile_node(self, name: str, obj: Obj | None = None) -> None:
        """File the node as it now reads (``obj``: the node, when the caller has it)."""
        obj = obj if obj is not None else self._lookup(kube.NODES, name)
        hardware = self._hardware.get(name)
        desired: Node | None = None
        self._node_warnings.pop(name, None)
        if obj is not None and hardware is not None:
            nodes, warnings = read_nodes([obj], {name: hardware}, self._other_pods)
            desired = nodes[0] if nodes else None
            if warnings:
                self._node_warnings[name] = warnings
        current = self._nodes.get(name)
        if desired == current:
            return
        if current is not None:
            self._fleet.remove_node(name)
            del self._nodes[name]
        if desired is not None:
            try:
                self._fleet.add_node(desired)
            except PlacementError as exc:  # e.g. fewer devices than a claim on it holds
                self._node_warnings.setdefault(name, []).append(
                    f"node {name}: left out of placement: {exc}")
                return
            self._nodes[name] = desired

    # ------------------------------------------------------------- bookings

    def _rebook(self, holder: str) -> None:
        new = self._booking_of(holder)
        old = self._bookings.get(holder)
        if new == old:
            return
        if old is not None:
            del self._bookings[holder]
            _discard(self._on_claim, old.claim, holder)
            self._sync_claim(old.claim)
        if new is not None:
            self._bookings[holder] = new
            _add(self._on_claim, new.claim, holder)
            self._sync_claim(new.claim)

    def _booking_of(self, holder: str) -> Booked | None:
        if holder.startswith(ORPHAN_PREFIX):
            name = holder[len(ORPHAN_PREFIX):]
            seat = self._pods.get(name)
            if seat is None or seat.owner_uid in self._worker_by_uid:
                return None  # gone, or its worker holds the seat
            pod = self._lookup(kube.PODS, name)
            return None if pod is None else orphan_booking(pod)
        worker = self._workers.get(holder)
        if worker is None:
            return None
        pods = self._pods_of.get(worker.uid, ())
        return worker_booking(worker, [(p, self._pods[p].claim) for p in pods],
                              self._committed.get(worker.uid, ()))

    def _sync_claim(self, name: str) -> None:
        """Put the claim into the fleet as it now reads, seats included (or take it out)."""
        view = self._claims.get(name) or self._closing.get(name)
        desired: Claim | None = None
        if view is not None:
            desired = placement_claim(
                view, [self._bookings[h] for h in self._on_claim.get(name, ())])
        current = self._in_fleet.get(name)
        if desired is None:
            self._claim_notes.pop(name, None)
        if desired == current:
            return
        if current is not None:
            for booking in current.bookings:
                self._fleet.unbook(booking.worker)
            self._fleet.remove_claim(name)
            del self._in_fleet[name]
        if desired is not None:
            try:
                self._fleet.add_claim(desired)
            except PlacementError as exc:
                self._claim_notes[name] = f"claim {name}: left out of placement: {exc}"
                return
            self._claim_notes.pop(name, None)
            self._in_fleet[name] = desired


class CachedView:
    """The cache's fleet to read: read-only and current, the kinds ``FleetView`` has."""

    __slots__ = ("_of", "bookings", "claims", "closing", "nodes")

    def __init__(self, of: FleetCache) -> None:
        self._of = of
        self.nodes: Mapping[str, Node] = MappingProxyType(of._nodes)
        self.claims: Mapping[str, ClaimView] = MappingProxyType(of._claims)
        self.closing: Mapping[str, ClaimView] = MappingProxyType(of._closing)
        self.bookings: Mapping[str, Booked] = MappingProxyType(of._bookings)

    @property
    def fleet(self) -> Fleet:
        """Placement's books, for decisions (``decide``) and their read-only figures."""
        return self._of._fleet

    @property
    def warnings(self) -> tuple[str, ...]:
        of = self._of
        notes = [*(of._selector.warnings if of._selector is not None else ())]
        notes += [n for pool in sorted(of._pool_notes) for n in of._pool_notes[pool]]
        notes += [of._claim_notes[c] for c in sorted(of._claim_notes)]
        return (*notes, *(w for node in sorted(of._node_warnings)
                          for w in of._node_warnings[node]))

    @property
    def seats_total(self) -> int:
        return seats_total(self.nodes.values())

    @property
    def seats_used(self) -> int:
        return seats_used(self.bookings.values(), self.claims)

    def live_uid(self, uid: str) -> bool:
        """Whether a worker of that UID is known and not finished (Failed, Succeeded)."""
        name = self._of._worker_by_uid.get(uid)
        return name is not None and \
            self._of._workers[name].phase not in naming.FINISHED_PHASES


def _pool_and_node(item: Obj) -> tuple[str, str]:
    spec = item.get("spec") or {}
    return str((spec.get("pool") or {}).get("name", "")), str(spec.get("nodeName") or "")


def _single_node(allocation: Obj) -> bool:
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and len(field.get("values") or []) == 1:
                return True
    return False


# One key's members as a sorted tuple, not a set: almost every key has one member
# (a worker's pod, a claim's holder), and a tuple of one is a fifth of a set's size.

def _add(index: dict[str, tuple[str, ...]], key: str, member: str) -> None:
    members = index.get(key, ())
    if member not in members:
        index[key] = tuple(sorted((*members, member)))


def _discard(index: dict[str, tuple[str, ...]], key: str, member: str) -> None:
    rest = tuple(m for m in index.get(key, ()) if m != member)
    if rest:
        index[key] = rest
    else:
        index.pop(key, None)
