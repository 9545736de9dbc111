"""Housekeeping keys: waking pending workers, and sweeping orphaned claims.

Rules:

* Both read the cache, never the API: wake-all re-queues every pending worker
  (no status yet, or Pending), oldest arrival first; the queue's order does
  the rest. The pending workers are kept by the fleet cache as they change
  (``Cache.waiting``): a wake or a scrape costs the pending, never the fleet.
* The sweep deletes a managed claim only when nothing references it: no
  unfinished worker's ``status.claimName``, nor one of its two UID-derived
  claim names that still books it (a claim cut just before a lost pod write;
  a claim it moved off and left to others books it no more, and goes once
  they leave), no pod in the namespace (in any phase),
  no consumer in the claim's ``status.reservedFor``. Only when the cache finds
  such a claim are the namespace's pods listed (an unmanaged pod, which the
  cache does not hold, may use it too). Never one younger than the
  reclaim grace; every delete carries the claim's UID and resourceVersion, so
  a claim that changed since it was read is left for the next sweep. The
  deletes are returned as writes, for a plan like any reconcile's
  (writes.py), never made here.
* ``tally`` counts the Pending workers for the metrics (by reason kind, and
  each role's oldest); it is read at scrape time, never per reconcile.
  ``census`` is the same count over worker objects, the plain reference.
* Both run as queue keys, never beside a reconcile: a reconcile joining a
  claim and a sweep deleting it at the same moment is exactly the race one
  queue with one consumer rules out.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterable

from controller.fleet.claims import books, read_claim
from controller.k8s import kube, naming
from controller.k8s.logs import kv
from controller.k8s.objects import Obj, Worker, is_deleting, pod_claims, uid_of, version_of
from controller.metrics import NEW, Census, Metrics
from controller.reconcile.vocabulary import Write
from controller.settings import Settings
from controller.store.cache import Cache
from controller.store.work import Result, Waiting, waiting_of

log = logging.getLogger("openrl.controller.sweep")


def wake(cache: Cache, metrics: Metrics) -> Result:
    pending = cache.waiting()
    metrics.pending.set(len(pending))
    return Result(enqueue=tuple((w.key, w.order)
                                for w in sorted(pending, key=lambda w: w.order)))


def census(objs: list[Obj]) -> Census:
    """The Pending workers among ``objs``: how many per reason kind (``New``: no answer
    yet), and the creation time of each role's oldest (the plain reading: ``tally`` of
    what the cache keeps is checked against it)."""
    return tally(w for w in map(waiting_of, objs) if w is not None)


def tally(waiting: Iterable[Waiting]) -> Census:
    """The census of these pending workers."""
    kinds: Counter[str] = Counter()
    oldest: dict[str, float] = {}
    for worker in waiting:
        kinds[worker.reason or NEW] += 1
        if worker.reason == naming.ReasonKind.QUEUED:
            continue  # its team's quota holds it back, by the team's own policy: not the fleet
        oldest[worker.role] = min(worker.created, oldest.get(worker.role, worker.created))
    return kinds, oldest


def sweep(api: kube.Kube, cache: Cache, settings: Settings, metrics: Metrics,
          now: dt.datetime) -> tuple[Result, list[Write]]:
    """When to sweep again, and the deletes of the orphaned claims old enough to go."""
    claims = cache.items(kube.CLAIMS)
    workers = [Worker.from_obj(o) for o in cache.items(kube.WORKERS)]
    # A finished worker pins nothing: its pod, while it exists, speaks for it.
    live = [w for w in workers if w.phase not in naming.FINISHED_PHASES]
    referenced = {w.claim for w in live} | {name for w in live for name in w.own_claims
                                             if books(cache.get(kube.CLAIMS, name), w.uid)}
    for pod in cache.items(kube.PODS):
        referenced |= pod_claims(pod)
    if any(_orphan(claim, referenced, now, settings.reclaim_grace) for claim in claims):
        for pod in api.list(kube.PODS):  # every pod: an unmanaged pod may use our claim too
            referenced |= pod_claims(pod)
    deletes: list[Write] = []
    next_run = settings.reclaim_interval
    for claim in claims:
        view = read_claim(claim, {})
        if view.deleting or view.reserved or view.name in referenced:
            continue
        age = (now - view.created).total_seconds()
        if age < settings.reclaim_grace:
            log.debug("orphaned claim still young", extra=kv(claim=view.name, age=int(age)))
            # Come back as soon as it is old enough, not a whole interval later.
            next_run = min(next_run, settings.reclaim_grace - age + 1.0)
            continue
        deletes.append(Write("delete", kube.CLAIMS, view.name, {}, uid=uid_of(claim),
                             resource_version=version_of(claim)))
        log.info("reclaimed orphaned claim", extra=kv(claim=view.name, node=view.node,
                                                      age=int(age)))
    metrics.claims.set(sum(1 for c in claims if not is_deleting(c)) - len(deletes))
    return Result(requeue_after=next_run, wake=bool(deletes)), deletes


def _orphan(claim: Obj, referenced: set[str], now: dt.datetime, grace: float) -> bool:
    """Old enough, and nothing the cache holds uses it."""
    view = read_claim(claim, {})
    return not (view.deleting or view.reserved or view.name in referenced) and (
        now - view.created).total_seconds() >= grace
