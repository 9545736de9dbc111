"""Placement's fleet kept current from object changes, never rebuilt per decision.

Rules:

* The same reading as ``fleet_reader.build_fleet`` (which stays the plain
  reference), by the same rules: the nodes as ``fleet_nodes`` files them,
  who holds which seat, a claim's shape in placement and the seat counts
  through ``fleet_rules``. This module only decides what a change touches.
* What it offers to read is ``view``, a ``fleet_rules.FleetReading`` shaped
  like the plain reading's ``FleetView`` (the same kinds: ``nodes``, ``claims``,
  ``closing`` and ``bookings`` by name), read-only and always current; its
  maps are its own. The view reads only what ``FleetCache`` offers in public
  (``fleet``, the four maps, ``warnings()``, ``live_uid``), and the cache
  reads its nodes through ``fleet_nodes``' interface (its table).
* Every change costs what it touches, a few workers, never the fleet (the
  changes the nodes alone read are in ``fleet_nodes``' table):

    the change                                 what is read again
    -----------------------------------------  -----------------------------------------
    a slice                                    the nodes (``fleet_nodes``), then every
                                               claim whose node comes from a pool
    a claim of ours                            that claim, dropped and re-added with its
                                               seats; the bookings of the workers its
                                               booked list gained or lost; the devices
                                               its allocation names (``held``)
    a worker                                   its booking, then its pods' bookings as
                                               orphans
    a pod of ours                              its booking as an orphan, then its
                                               worker's booking
    a booking that changed                     the claim it was on and the one it is on,
                                               each dropped and re-added with its seats
    a claim coming to a node, leaving it, or   that node (``fleet_nodes.settle``): it
      changing its width                         gives way or is filed again, as
                                                 ``fleet_rules.make_way`` says

* It holds no lock and does no I/O; the cache around it serializes changes.
* It keeps no object: what it must read again (an orphan's pod, a claim
  whose node comes from its pools) it looks up in the cache (``lookup``),
  and of workers and pods it keeps only what a seat depends on. The cache
  holds each object once.
* It also keeps the pending workers (``work.waiting_of``), for a wake and
  the metrics' census: what those cost grows with the pending workers, not
  with the fleet.
* What the fleet refuses (a claim holding more devices than its node has,
  or a worker seated on two claims, say) is left out and reported among the
  warnings, never raised: one odd object must not stop the watches.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType

from msgspec import Struct

from controller.fleet.claims import ClaimView, read_claim
from controller.fleet.nodes import FleetNodes, Lookup
from controller.fleet.rules import (
    ORPHAN_PREFIX,
    Booked,
    committed_uids,
    device_conflict,
    live_pod_claim,
    orphan_booking,
    placement_claim,
    seats_total,
    seats_used,
    worker_booking,
)
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import kube, naming
from controller.k8s.objects import Obj, Worker, worker_owner_uid
from controller.store.work import Waiting, waiting_of
from placement import Claim, Fleet, Node, PlacementError

__all__ = ["CachedView", "FleetCache"]


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
        self._fleet = Fleet()
        self._nodes = FleetNodes(driver, self._fleet, lookup=lookup, claims_on=self._claims_on,
                                 device_class=device_class)
        self._claims: dict[str, ClaimView] = {}  # managed claims not being deleted
        self._closing: dict[str, ClaimView] = {}  # being deleted: booked until gone
        self._bookings: dict[str, Booked] = {}  # holder -> its booking
        self._by_pool: set[str] = set()  # allocated claims whose node comes from a pool
        self._held: dict[str, tuple[str, ...]] = {}  # device -> our claims allocated it
        self._in_fleet: dict[str, Claim] = {}
        self._on_node: dict[str, tuple[str, ...]] = {}  # node -> claims in the fleet on it
        self._claim_notes: dict[str, FleetWarning] = {}  # claims the fleet refused, and why
        self._on_claim: dict[str, tuple[str, ...]] = {}  # claim -> holders booked on it
        self._workers: dict[str, WorkerSeat] = {}
        self._waiting: dict[str, Waiting] = {}  # the pending workers (work.waiting_of)
        self._worker_by_uid: dict[str, str] = {}
        self._pods: dict[str, PodSeat] = {}
        self._pods_of: dict[str, tuple[str, ...]] = {}  # worker uid -> pods it controls
        self._booked: dict[str, set[str]] = {}  # live claim -> uids its booked list commits
        self._committed: dict[str, set[str]] = {}  # worker uid -> claims listing it
        self.nodes: Mapping[str, Node] = self._nodes.nodes
        self.claims: Mapping[str, ClaimView] = MappingProxyType(self._claims)
        self.closing: Mapping[str, ClaimView] = MappingProxyType(self._closing)
        self.bookings: Mapping[str, Booked] = MappingProxyType(self._bookings)
        self.view = CachedView(self)

    # ------------------------------------------------------------------ reads

    @property
    def fleet(self) -> Fleet:
        """Placement's books, as the changes so far left them."""
        return self._fleet

    def warnings(self) -> tuple[FleetWarning, ...]:
        """In the order they have always been given: the class's, each pool's, each
        claim's, each node's."""
        return (*self._nodes.reading_notes(),
                *(self._claim_notes[c] for c in sorted(self._claim_notes)),
                *self._nodes.node_warnings())

    def live_uid(self, uid: str) -> bool:
        """Whether a worker of that UID is known and not finished (Failed, Succeeded)."""
        name = self._worker_by_uid.get(uid)
        return name is not None and self._workers[name].phase not in naming.FINISHED_PHASES

    def _claims_on(self, node: str) -> list[Claim]:
        """The claims the fleet holds filed on the node (``fleet_nodes`` asks)."""
        return [self._in_fleet[name] for name in self._on_node.get(node, ())]

    # ---------------------------------------------------------------- changes

    def slice_changed(self, name: str, obj: Obj | None) -> None:
        self._nodes.slice_changed(name, obj)
        # A claim allocated from a pool takes its node from the pool's slices, just re-read.
        for claim in sorted(self._by_pool):
            self.claim_changed(claim, self._lookup(kube.CLAIMS, claim))

    # The rest only the nodes read (``fleet_nodes``): none moves a pool to another node.

    def device_class_changed(self, name: str, obj: Obj | None) -> None:
        self._nodes.device_class_changed(name, obj)

    def foreign_claim_changed(self, name: str, obj: Obj | None) -> None:
        self._nodes.foreign_claim_changed(name, obj)

    def node_changed(self, name: str, obj: Obj | None) -> None:
        self._nodes.node_changed(name, obj)

    def node_pod_changed(self, name: str, obj: Obj | None) -> None:
        self._nodes.node_pod_changed(name, obj)

    def claim_changed(self, name: str, obj: Obj | None) -> None:
        self._by_pool.discard(name)
        old = self._claims.get(name) or self._closing.get(name)
        for device in old.held if old is not None else ():
            _discard(self._held, device, name)
        if obj is None:
            self._claims.pop(name, None)
            self._closing.pop(name, None)
        else:
            view = read_claim(obj, self._nodes.pool_nodes)
            if view.deleting:
                self._claims.pop(name, None)
                self._closing[name] = view
            else:
                self._claims[name] = view
                self._closing.pop(name, None)
            for device in view.held:
                _add(self._held, device, name)
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

    def device_conflict(self, claim: str) -> tuple[str, str] | None:
        """``fleet_rules.device_conflict`` of one of our claims, from the devices' index."""
        return device_conflict(self._claims.get(claim) or self._closing.get(claim), lambda d: [
            self._claims.get(n) or self._closing[n] for n in self._held.get(d, ())])

    def sharing(self, claim: str) -> tuple[str, ...]:
        """Our other claims whose allocations name a device this one's names."""
        mine = self._claims.get(claim) or self._closing.get(claim)
        return tuple(sorted({n for d in (mine.held if mine is not None else ())
                             for n in self._held.get(d, ()) if n != claim}))

    def waiting(self) -> list[Waiting]:
        """The pending workers, as ``work.waiting_of`` reads each (in no set order)."""
        return list(self._waiting.values())

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
        # Whether its node's claims change as make_way reads them (bookings alone do not).
        moved = (current is None or desired is None
                 or (desired.node, desired.devices) != (current.node, current.devices))
        if current is not None:
            for booking in current.bookings:
                self._fleet.unbook(booking.worker)
            self._fleet.remove_claim(name)
            del self._in_fleet[name]
            _discard(self._on_node, current.node, name)
            if moved and (desired is None or desired.node != current.node):
                self._nodes.settle(current.node)  # this claim may have kept it out
        if desired is not None:
            if moved:
                self._nodes.settle(desired.node, desired)  # a narrower node gives way first
            try:
                self._fleet.add_claim(desired)
            except PlacementError as exc:
                self._claim_notes[name] = warning(Kind.CLAIM_LEFT_OUT, name, str(exc))
            else:
                self._claim_notes.pop(name, None)
                self._in_fleet[name] = desired
                _add(self._on_node, desired.node, name)


class CachedView:
    """The cache's fleet to read: read-only and current, the kinds ``FleetView`` has."""

    __slots__ = ("_of", "bookings", "claims", "closing", "nodes")

    def __init__(self, of: FleetCache) -> None:
        self._of = of
        self.nodes = of.nodes
        self.claims = of.claims
        self.closing = of.closing
        self.bookings = of.bookings

    @property
    def fleet(self) -> Fleet:
        """Placement's books, for decisions (``decide``) and their read-only figures."""
        return self._of.fleet

    @property
    def warnings(self) -> tuple[FleetWarning, ...]:
        return self._of.warnings()

    @property
    def seats_total(self) -> int:
        return seats_total(self.nodes.values())

    @property
    def seats_used(self) -> int:
        return seats_used(self.bookings.values(), self.claims)

    def live_uid(self, uid: str) -> bool:
        """Whether a worker of that UID is known and not finished (Failed, Succeeded)."""
        return self._of.live_uid(uid)

    def device_conflict(self, claim: str) -> tuple[str, str] | None:
        return self._of.device_conflict(claim)

    def sharing(self, claim: str) -> tuple[str, ...]:
        return self._of.sharing(claim)


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
