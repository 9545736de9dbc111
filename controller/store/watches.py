"""Watches: the cluster's changes turned into work-queue keys.

Rules:

* Each watched resource runs list-then-watch on its own thread and re-lists
  when the watch expires or breaks; a re-list is diffed against what was seen,
  so a deletion missed while disconnected is still noticed.
* Lists come in pages; every object is stripped to the fields the controller
  reads as it arrives and handed to the cache (cache.py) before anything is
  queued, so a reconcile woken by a
  change already reads it. Template ConfigMaps are watched for the cache only.
* One list page is read at a time, process-wide (``_READING``): the watches
  wait for their pages side by side, but decode and file them one after the
  other. Interleaved, seven threads reading large pages under one interpreter
  lock cost about a third more CPU than the same work done in turn.
* A change matters only if its *signature* changed (status heartbeats, our
  own status writes and managed-fields churn are ignored), which keeps the
  loop from re-reading the world for nothing.
* What wakes what:
  - a worker (new, deleting): that worker; a worker gone: wake-all;
  - a pod of a worker (scheduled, phase, deletion, kube-scheduler's verdict on an
    unbound pod, the time-slicer's openrl.io/drained mark): its worker;
  - a managed claim deleted, allocated or terminating: wake-all; terminating
    also wakes the workers whose pods it is reserved for; one allocated a
    device another of our claims holds too, or marked as giving one up, also
    queues the workers of every claim giving it up (fleet_rules.device_conflict);
  - a ResourceSlice of the driver changed (a taint gone included): wake-all;
  - the configured DeviceClass changed (its selectors): wake-all;
  - a claim not ours (any namespace; every claim but our managed ones)
    allocated, deallocated or deleted: wake-all, since the devices it held,
    and the counters they consumed, may be free again;
  - a node's openrl.io labels, allocatable memory or allocatable pods
    changed: wake-all; a node gone, or its health changed (its Ready
    condition, its node.kubernetes.io/ taints: controller.fleet.health), also
    queues the workers booked on its claims;
  - a pod other than a worker's left an enabled node (finished, deleted):
    wake-all, since a pod slot came free there. Those pods are watched in
    every namespace, filtered by the server to the bound, unfinished,
    unmanaged ones;
  - a Workload of a worker (team quotas on) whose conditions changed: its worker;
    WorkloadPriorityClasses are watched for the cache only.
* Wake-all is debounced (``WAKE_DELAY``): a burst of capacity events costs one
  pass over the pending workers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from controller.fleet.health import ready_signature
from controller.fleet.rules import foreign_claim
from controller.k8s import kube, naming
from controller.k8s.logs import kv
from controller.k8s.objects import (
    Obj,
    controller_owner,
    meta,
    name_of,
    pod_condition,
    pod_node,
    pod_phase,
)
from controller.store.cache import Cache
from controller.store.queue import WorkQueue
from controller.store.records import PageDecoder, Record, to_obj, to_record
from controller.store.strip import strip
from controller.store.work import HOUSEKEEPING_ORDER, WAKE, worker_key, worker_order

log = logging.getLogger("openrl.controller.watch")

WAKE_DELAY = 0.5
# Lists come in pages, each stripped as it arrives: a large fleet's list never sits in
# memory whole (the figure client-go's informers use).
LIST_PAGE = 500
# Held while a page is decoded and while a list's answer is filed: never while waiting
# for the server, and nothing taken under it waits for it (the cache's lock is taken
# inside it, never the other way round).
_READING = threading.Lock()


class Feed:
    """One resource's events, reduced to signatures and handed to ``on_change``."""

    def __init__(self, resource: kube.Resource, signature: Callable[[Obj], Hashable],
                 on_change: Callable[[str, Obj], None], *, label_selector: str | None = None,
                 field_selector: str | None = None,
                 accept: Callable[[Obj], bool] | None = None) -> None:
        self.resource = resource
        self.signature = signature
        self.on_change = on_change
        self.label_selector = label_selector
        self.field_selector = field_selector
        # None: every object is accepted (a list's records are then not read back to ask)
        self.filters = accept is not None
        self.accept: Callable[[Obj], bool] = accept or _accept_all
        # name -> the last object seen, as the cache holds it (a record) where it was
        # given one; its signature is worked out again when the next change comes, rather
        # than kept beside it for every object of a large fleet
        self._seen: dict[str, Record | Obj] = {}

    def relist(self, items: list[Obj]) -> None:
        current = {name_of(o): o for o in items if self.accept(o)}
        for name in sorted(set(self._seen) - set(current)):
            self._forget(name)
        for obj in current.values():
            self.event("ADDED", obj)

    def relist_records(self, records: list[Record]) -> None:
        """A list's answer as the cache holds it (each record read back one at a time,
        so a large list is never in memory as mappings all at once)."""
        self.forget_missing(records)
        for record in {r.name: r for r in records}.values():
            self.listed(record, to_obj(record))

    def forget_missing(self, records: list[Record]) -> None:
        """The first half of a re-list: what the list no longer has is gone."""
        current = {r.name for r in records}
        for name in sorted(set(self._seen) - current):
            self._forget(name)

    def listed(self, record: Record, obj: Obj) -> None:
        """The second half, one listed record at a time (``obj``: what it holds)."""
        self.event("ADDED", obj, record)

    def _forget(self, name: str) -> None:
        self.event("DELETED", _obj(self._seen[name]))

    def event(self, kind: str, obj: Obj, held: Record | None = None) -> None:
        if not self.accept(obj):
            return
        # The record's own name where there is one (interned: the cache's key too)
        name = name_of(obj) if held is None else held.name
        if kind == "DELETED":
            if self._seen.pop(name, None) is not None:
                self.on_change("DELETED", obj)
            return
        previous = self._seen.get(name)
        self._seen[name] = obj if held is None else held
        if previous is None:
            self.on_change("ADDED", obj)
        elif self.signature(_obj(previous)) != self.signature(obj):
            self.on_change("MODIFIED", obj)


def _accept_all(_obj: Obj) -> bool:
    return True


def _obj(held: Record | Obj) -> Obj:
    return held if isinstance(held, dict) else to_obj(held)


class Watcher(threading.Thread):
    def __init__(self, api: kube.Kube, feed: Feed, cache: Cache, stop: threading.Event,
                 synced: threading.Event, *, retry: float = 2.0) -> None:
        super().__init__(name=f"watch-{feed.resource.key}", daemon=True)
        self.api, self.feed, self.stop, self.synced, self.retry = api, feed, stop, synced, retry
        self.cache = cache
        self._decoder = PageDecoder(feed.resource)

    def _decode(self, data: bytes) -> tuple[Obj, list[Record]]:
        with _READING:
            return self._decoder(data)

    def _keep(self, record: Record) -> Record | None:
        return record if self.feed.accept(to_obj(record)) else None

    def list_once(self) -> str:
        """List the resource into the cache and the feed; the list's resourceVersion."""
        res = self.feed.resource
        items, version = self.api.list_with_version(
            res, label_selector=self.feed.label_selector,
            field_selector=self.feed.field_selector, page=LIST_PAGE,
            keep=self._keep if self.feed.filters else None,
            decode=self._decode)
        with _READING:
            # The feed hears of each record right after the cache has filed it, on the
            # one unpacked object.
            self.cache.relist_records(res, items, version, then=self.feed)
        return version

    def run(self) -> None:
        version = ""
        failures = 0
        while not self.stop.is_set():
            try:
                if not version:
                    version = self.list_once()
                    self.synced.set()
                for kind, obj in self.api.watch(self.feed.resource, version,
                                                label_selector=self.feed.label_selector,
                                                field_selector=self.feed.field_selector):
                    if self.stop.is_set():
                        return
                    version = meta(obj).get("resourceVersion") or version
                    if kind in ("ADDED", "MODIFIED", "DELETED") and self.feed.accept(obj):
                        obj = strip(self.feed.resource, obj)
                        record = to_record(self.feed.resource, obj)
                        self.cache.event_record(self.feed.resource, kind, record)
                        self.feed.event(kind, obj, record)
                failures = 0
            except kube.Gone:
                version = ""  # too old: list again
            except kube.KubeError as exc:
                failures += 1
                log.warning("watch failed; listing again", extra=kv(
                    resource=self.feed.resource.plural, error=str(exc)))
                version = ""
                self.stop.wait(min(30.0, self.retry * failures))
            except Exception:  # never let one bad event end the watch for good
                failures += 1
                log.exception("watch handler failed", extra=kv(resource=self.feed.resource.plural))
                version = ""
                self.stop.wait(min(30.0, self.retry * failures))


def _worker_signature(obj: Obj) -> Hashable:
    # Not the finalizers: the controller adds its own, and reacting to that write
    # would cost a reconcile per worker for nothing. Its Kueue queue is news (a label
    # changes no generation).
    m = meta(obj)
    return (m.get("uid"), m.get("generation"), m.get("deletionTimestamp"),
            (m.get("labels") or {}).get(naming.LABEL_QUEUE))


def _workload_signature(obj: Obj) -> Hashable:
    # Kueue's verdicts and its words for them; not the times it touched them.
    conditions = (obj.get("status") or {}).get("conditions") or []
    return (meta(obj).get("uid"), meta(obj).get("deletionTimestamp"),
            tuple((c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                  for c in conditions if isinstance(c, dict)))


def _pod_signature(obj: Obj) -> Hashable:
    owner = controller_owner(obj) or {}
    # kube-scheduler's verdict on a pod it has not bound (Unschedulable, SchedulerError) is
    # news: a pinned pod whose devices were taken is wedged at once, any other once its
    # grace runs out (moves.py), and neither can be judged by a worker never woken.
    scheduled = pod_condition(obj, "PodScheduled") or {}
    # The time-slicer's word that a moving worker parked is news too (moving.py).
    drained = (meta(obj).get("annotations") or {}).get(naming.ANNOTATION_DRAINED)
    return (meta(obj).get("uid"), owner.get("uid"), pod_phase(obj), pod_node(obj),
            meta(obj).get("deletionTimestamp"), scheduled.get("status"), scheduled.get("reason"),
            drained)


def _reserved_for(claim: Obj) -> list[str]:
    """The workers whose pods the claim is reserved for: its allocation (the node their
    status names) or its deletion is news to them, and they are not pending, so no
    wake-all reaches them. Pods are named orw-<worker>; a cut name finds no worker: one
    empty reconcile."""
    return [str(consumer.get("name") or "").removeprefix("orw-")
            for consumer in (claim.get("status") or {}).get("reservedFor") or []
            if consumer.get("resource") == "pods"
            and str(consumer.get("name") or "").startswith("orw-")]


def _claim_signature(obj: Obj) -> Hashable:
    allocation = (obj.get("status") or {}).get("allocation")
    return (meta(obj).get("uid"), repr(allocation.get("nodeSelector")) if allocation else None,
            repr((allocation.get("devices") or {}).get("results")) if allocation else None,
            (meta(obj).get("annotations") or {}).get(naming.ANNOTATION_GIVES_UP),
            meta(obj).get("deletionTimestamp"))


def _slice_signature(obj: Obj) -> Hashable:
    spec = obj.get("spec") or {}
    return (meta(obj).get("uid"), repr(spec))


def _node_signature(obj: Obj) -> Hashable:
    labels = {k: v for k, v in (meta(obj).get("labels") or {}).items()
              if k.startswith("openrl.io/")}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    return (meta(obj).get("uid"), tuple(sorted(labels.items())), allocatable.get("memory"),
            allocatable.get("pods"), ready_signature(obj))


def _foreign_claim_signature(obj: Obj) -> Hashable:
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return meta(obj).get("uid"), repr((allocation.get("devices") or {}).get("results"))


def _node_pod_signature(obj: Obj) -> Hashable:
    return (pod_node(obj), pod_phase(obj), bool(meta(obj).get("labels")))


def feeds(queue: WorkQueue, driver: str,
          enabled: Callable[[str], bool] = lambda _node: True, *,
          device_class: str | None = None, namespace: str | None = None,
          placed_on: Callable[[str], Iterable[str]] = lambda _node: (),
          in_conflict: Callable[[str], Iterable[str]] = lambda _claim: (),
          kueue: bool = False) -> list[Feed]:
    """The watches' feeds; ``enabled`` says whether placement knows a node;
    ``device_class``: the DeviceClass whose selectors pick the devices (None: unwatched);
    ``namespace``: ours, whose managed claims are the only ones not foreign (None: claims
    not ours unwatched); ``placed_on``: the workers booked on a node's claims;
    ``in_conflict``: the workers to place again when a claim's allocation names a device
    another of ours holds (``moves.workers_in_conflict``); ``kueue``: team quotas are on
    (Kueue's Workloads and priority classes watched)."""
    def wake(*_: Any) -> None:
        queue.add(WAKE, after=WAKE_DELAY, order=HOUSEKEEPING_ORDER)

    def on_node_pod(kind: str, obj: Obj) -> None:
        # A pod coming only takes a slot: nobody can gain. One leaving frees a slot.
        if kind != "ADDED" and enabled(pod_node(obj)):
            wake()

    def on_worker(kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            queue.discard(name_of(obj))
            wake()
        else:
            queue.add(worker_key(obj), order=worker_order(obj))

    def on_pod(kind: str, obj: Obj) -> None:
        owner = controller_owner(obj) or {}
        if owner.get("kind") != naming.KIND or not owner.get("name"):
            return
        if kind == "ADDED" and pod_phase(obj) == naming.PodPhase.PENDING and not pod_node(obj) \
                and not meta(obj).get("deletionTimestamp"):
            return  # just created (by us): nothing to report until it is scheduled
        queue.add(str(owner["name"]))

    def on_claim(kind: str, obj: Obj) -> None:
        if kind != "ADDED":  # a new claim is ours, placed already; its allocation is news
            wake()
        if kind == "MODIFIED":
            for worker in _reserved_for(obj):
                queue.add(worker)
        if kind != "DELETED" and (obj.get("status") or {}).get("allocation"):
            for worker in in_conflict(name_of(obj)):
                queue.add(worker)

    def on_node(kind: str, obj: Obj) -> None:
        wake()
        if kind != "ADDED":  # gone, or its health changed: its workers may have to move
            for worker in placed_on(name_of(obj)):
                queue.add(worker)

    def on_foreign_claim(kind: str, _obj: Obj) -> None:
        # Devices given back (deallocated, deleted) may seat a pending worker; devices
        # taken seat nobody, but the two are one signature: a wake either way.
        if kind != "ADDED":
            wake()

    # Every namespace's claims but our managed ones, for the devices they hold: no
    # server-side selector says that (a namespace or a label alone would miss another
    # install's managed claims, or unmanaged ones beside ours), so the feed filters.
    foreign = ([Feed(kube.OTHER_CLAIMS, _foreign_claim_signature, on_foreign_claim,
                     accept=lambda o: foreign_claim(o, namespace))]
               if namespace is not None else [])
    # The class first: a cache that has its selectors when the slices come reads each
    # pool once, not once without them and again when the class arrives.
    classes = ([Feed(kube.DEVICE_CLASSES, lambda o: repr((o.get("spec") or {}).get("selectors")),
                     wake, accept=lambda o: name_of(o) == device_class)]
               if device_class is not None else [])
    return [
        *classes,
        Feed(kube.WORKERS, _worker_signature, on_worker),
        Feed(kube.PODS, _pod_signature, on_pod, label_selector=naming.MANAGED_SELECTOR),
        Feed(kube.CLAIMS, _claim_signature, on_claim, label_selector=naming.MANAGED_SELECTOR),
        Feed(kube.SLICES, _slice_signature, wake,
             accept=lambda o: (o.get("spec") or {}).get("driver") == driver),
        Feed(kube.NODES, _node_signature, on_node),
        Feed(kube.CONFIGMAPS, lambda o: meta(o).get("resourceVersion"), lambda *_: None),
        Feed(kube.NODE_PODS, _node_pod_signature, on_node_pod,
             label_selector=naming.OTHER_PODS_LABELS, field_selector=naming.OTHER_PODS_FIELDS),
        *foreign,
        *(_quota_feeds(queue) if kueue else []),
    ]


def _quota_feeds(queue: WorkQueue) -> list[Feed]:
    """Kueue's objects, watched with team quotas on: the Workloads wake their workers."""
    def on_workload(kind: str, obj: Obj) -> None:
        owner = controller_owner(obj) or {}
        if owner.get("kind") != naming.KIND or not owner.get("name"):
            return
        if kind == "ADDED" and not (obj.get("status") or {}).get("conditions"):
            return  # just written (by us): Kueue has said nothing of it yet
        queue.add(str(owner["name"]))

    return [Feed(kube.PRIORITY_CLASSES, lambda o: repr(o.get("value")), lambda *_: None),
            Feed(kube.WORKLOADS, _workload_signature, on_workload)]
