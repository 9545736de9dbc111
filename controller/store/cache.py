"""The controller's memory of the cluster: objects from list-then-watch, and assumptions.

Rules:

* One store per watched resource, fed by its watch (events) and by re-lists
  (at start, on gaining leadership, after a 410). Only the fields the
  controller reads are kept (``strip``): a pod is not kept whole.
* An event never moves an object back to an older resourceVersion, and a
  stale event never brings back an object already seen deleted (a tombstone
  remembers the version it went at until the next re-list).
* Assume, then write: the objects a decision creates (its claim, its pod) are
  put in the store at once, before any request returns, so the next decision
  already sees the seat. The server's answer replaces an assumption
  (``confirm``); a failed write drops it (``forget``), restoring what was
  there before. While assumed, an object ignores events from before the
  assumption (at or below the newest version the store had seen).
* Assumptions always resolve. One that no answer has confirmed or forgotten
  after a deadline -- its plan lost, or a failure nothing else caught -- is
  forgotten by ``expire`` and gives its seat back, as kube-scheduler's assumed
  pods expire. Assumptions whose plan is still in flight are kept: their plan
  resolves them, and expiring one early could promise its seat twice.
* Pods of every namespace are kept for their node's pod slots alone
  (``NODE_PODS``, filed under its own key): as ``namespace/name``, with their
  node, phase and whether they are managed, nothing else. Claims not ours, of
  every namespace (``OTHER_CLAIMS``, likewise ``namespace/name``), are kept
  for the devices they hold alone: the devices their allocation names, their
  namespace and whether they are managed (for the watch's filter), nothing
  else; our namespace's managed claims are kept as ``CLAIMS``.
* Every change to slices, nodes, claims (ours and not), workers and pods is
  handed to the ``FleetCache``, which keeps placement's fleet current;
  ``view`` is what a reconcile reads of it (a ``fleet_rules.FleetReading``,
  like the plain reading's). ``lock`` serializes the watch threads, the write pool's answers
  and the decision; read ``view`` under it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from typing import NamedTuple, Protocol

from controller.fleet.cache import FleetCache
from controller.fleet.rules import FleetReading
from controller.k8s import kube
from controller.k8s.objects import Obj
from controller.store.records import Record, name_and_version, to_obj, to_record
from controller.store.strip import strip
from controller.store.work import Waiting

__all__ = ["Assumption", "Cache", "strip"]

KINDS = (kube.WORKERS, kube.PODS, kube.CLAIMS, kube.SLICES, kube.NODES, kube.CONFIGMAPS,
         kube.NODE_PODS, kube.DEVICE_CLASSES, kube.OTHER_CLAIMS, kube.WORKLOADS,
         kube.PRIORITY_CLASSES)


def _rv(record: Record | None) -> int | None:
    return None if record is None else record.version


def _version(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


Change = tuple[Record | None, Record | None]


class Listener(Protocol):
    """What else hears of a list (the watch's feed), told after the cache."""

    def forget_missing(self, records: list[Record]) -> None: ...

    def listed(self, record: Record, obj: Obj) -> None: ...


class Assumption(NamedTuple):
    before: Record | None  # what the store held before (restored if forgotten)
    floor: int  # events at or below this version are from before the assumption
    since: float  # when it was assumed (the cache's clock)


class Store:
    """Objects of one resource by name, as records (records.py)."""

    def __init__(self) -> None:
        self.objs: dict[str, Record] = {}
        self.assumed: dict[str, Assumption] = {}
        self.gone: dict[str, int] = {}  # name -> version it was deleted at
        self.newest = 0  # the newest resourceVersion seen from the server
        self.listed_at = 0  # the version of the last list

    def event(self, kind: str, obj: Record) -> Change | None:
        """Apply a watch event; (old, new) if it changed anything, else None."""
        name, rv = name_and_version(obj)
        if rv is not None:
            self.newest = max(self.newest, rv)
        if name in self.assumed:
            if rv is None or rv <= self.assumed[name].floor:
                return None  # from before the assumption
            del self.assumed[name]
        else:
            current_rv = _rv(self.objs.get(name))
            if rv is not None and current_rv is not None and (
                    rv < current_rv or (rv == current_rv and kind != "DELETED")):
                return None  # stale or duplicate
            if name not in self.objs and rv is not None and rv <= self.gone.get(
                    name, self.listed_at):
                return None  # from before a deletion we saw, or before the last list
        old = self.objs.get(name)
        if kind == "DELETED":
            if rv is not None:
                self.gone[name] = rv
            if old is None:
                return None
            del self.objs[name]
            return old, None
        self.gone.pop(name, None)
        self.objs[name] = obj
        return old, obj

    def relist(self, items: list[Record], version: str = "",
               ) -> list[tuple[str, Record | None, Record | None]]:
        """Replace everything with a list's answer (at ``version``); assumptions in flight stay."""
        listed = {name_and_version(o)[0]: o for o in items}
        for o in items:
            rv = _rv(o)
            if rv is not None:
                self.newest = max(self.newest, rv)
        self.listed_at = _version(version) or self.newest
        self.newest = max(self.newest, self.listed_at)
        changes: list[tuple[str, Record | None, Record | None]] = []
        self.gone.clear()
        for name in sorted(set(self.objs) - set(listed)):
            if name in self.assumed:
                continue
            changes.append((name, self.objs.pop(name), None))
        for name, obj in listed.items():
            if name in self.assumed:
                if (_rv(obj) or 0) <= self.assumed[name].floor:
                    continue
                del self.assumed[name]
            old = self.objs.get(name)
            if old is not None and _rv(old) is not None and _rv(old) == _rv(obj):
                continue
            self.objs[name] = obj
            changes.append((name, old, obj))
        return changes

    def assume(self, obj: Record, now: float = 0.0) -> Change:
        name = name_and_version(obj)[0]
        old = self.objs.get(name)
        if name not in self.assumed:
            self.assumed[name] = Assumption(old, self.newest, now)
        self.objs[name] = obj
        return old, obj

    def confirm(self, obj: Record) -> Change | None:
        """The server's answer to our write: it replaces the assumption (if still ours)."""
        self.assumed.pop(name_and_version(obj)[0], None)
        return self.event("MODIFIED", obj)

    def forget(self, name: str) -> Change | None:
        if name not in self.assumed:
            return None
        before = self.assumed.pop(name).before
        old = self.objs.pop(name, None)
        if before is not None:
            self.objs[name] = before
        return old, before


class Cache:
    def __init__(self, driver: str, *, clock: Callable[[], float] = time.monotonic,
                 device_class: str | None = None) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.fleet = FleetCache(driver, lookup=self._current, device_class=device_class)
        self.stores = {res.key: Store() for res in KINDS}
        self._feed: dict[str, Callable[[str, Obj | None], None]] = {
            kube.SLICES.key: self.fleet.slice_changed,
            kube.NODES.key: self.fleet.node_changed,
            kube.CLAIMS.key: self.fleet.claim_changed,
            kube.WORKERS.key: self.fleet.worker_changed,
            kube.PODS.key: self.fleet.pod_changed,
            kube.NODE_PODS.key: self.fleet.node_pod_changed,
            kube.DEVICE_CLASSES.key: self.fleet.device_class_changed,
            kube.OTHER_CLAIMS.key: self.fleet.foreign_claim_changed,
        }

    # ---------------------------------------------------------------- reading

    def _current(self, res: kube.Resource, name: str) -> Obj | None:
        record = self.stores[res.key].objs.get(name)
        return None if record is None else to_obj(record)

    @property
    def view(self) -> FleetReading:
        """The fleet as read from what the cache holds (current; read under ``lock``)."""
        return self.fleet.view

    def get(self, res: kube.Resource, name: str) -> Obj | None:
        """The stripped object (a mapping of the caller's own), or None."""
        with self.lock:
            record = self.stores[res.key].objs.get(name)
            return None if record is None else to_obj(record)

    def waiting(self) -> list[Waiting]:
        """The pending workers (``work.waiting_of``), kept as workers change."""
        with self.lock:
            return self.fleet.waiting()

    def items(self, res: kube.Resource) -> list[Obj]:
        with self.lock:
            return [to_obj(r) for r in self.stores[res.key].objs.values()]

    # ---------------------------------------------------------------- changes

    # ``stripped``: the caller has stripped the object already (``strip``); the
    # ``_record`` forms take what ``records.to_record`` (or a page decoder) made of it,
    # which the watches share with their own bookkeeping rather than keep a second copy.

    def event(self, res: kube.Resource, kind: str, obj: Obj, *, stripped: bool = False) -> bool:
        return self.event_record(res, kind, to_record(res, obj if stripped else strip(res, obj)))

    def event_record(self, res: kube.Resource, kind: str, record: Record) -> bool:
        with self.lock:
            return self._apply(res, self.stores[res.key].event(kind, record))

    def relist(self, res: kube.Resource, items: list[Obj], version: str = "", *,
               stripped: bool = False) -> None:
        self.relist_records(res, [to_record(res, o if stripped else strip(res, o))
                                  for o in items], version)

    def relist_records(self, res: kube.Resource, items: list[Record], version: str = "", *,
                       then: Listener | None = None) -> None:
        """Replace ``res``'s objects with a list's answer. With ``then``, it hears of the
        list too, record by record, each right after the fleet has taken that record's
        change: one unpacking serves both (the object is shared, read-only; the fleet
        keeps none of it)."""
        with self.lock:
            changes = self.stores[res.key].relist(items, version)
            if then is None:
                for name, _, new in changes:
                    self._notify(res, name, new)
                return
            feed = self._feed.get(res.key)
            listed = [c for c in changes if c[2] is not None]
            for name, _, new in changes:
                if new is None and feed is not None:
                    feed(name, None)
            then.forget_missing(items)
            upcoming = iter(listed)
            change = next(upcoming, None)
            # The store's order: each name once, at its first place, as last listed
            for record in {r.name: r for r in items}.values():
                obj = to_obj(record)
                if change is not None and change[2] is record:
                    if feed is not None:
                        feed(change[0], obj)
                    change = next(upcoming, None)
                then.listed(record, obj)

    def assume(self, res: kube.Resource, obj: Obj) -> None:
        with self.lock:
            self._apply(res, self.stores[res.key].assume(to_record(res, strip(res, obj)),
                                                            self.clock()))

    def confirm(self, res: kube.Resource, obj: Obj) -> None:
        with self.lock:
            self._apply(res, self.stores[res.key].confirm(to_record(res, strip(res, obj))))

    def forget(self, res: kube.Resource, name: str) -> None:
        with self.lock:
            change = self.stores[res.key].forget(name)
            if change is not None:
                self._notify(res, name, change[1])

    def expire(self, older_than: float, *, keep: Collection[tuple[str, str]] = ()
               ) -> list[tuple[kube.Resource, str]]:
        """Forget every assumption older than ``older_than`` seconds that no answer has
        resolved, except those in ``keep`` ((plural, name) of plans still in flight)."""
        expired: list[tuple[kube.Resource, str]] = []
        with self.lock:
            now = self.clock()
            for res in KINDS:
                store = self.stores[res.key]
                for name, assumption in list(store.assumed.items()):
                    if (res.key, name) not in keep and now - assumption.since >= older_than:
                        self.forget(res, name)
                        expired.append((res, name))
        return expired

    def _apply(self, res: kube.Resource, change: Change | None) -> bool:
        if change is None:
            return False
        old, new = change
        held = new if new is not None else old
        self._notify(res, name_and_version(held)[0] if held is not None else "", new)
        return True

    def _notify(self, res: kube.Resource, name: str, new: Record | None) -> None:
        feed = self._feed.get(res.key)
        if feed is not None:
            feed(name, None if new is None else to_obj(new))
