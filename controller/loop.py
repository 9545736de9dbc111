"""The loop: watches feed the cache and one queue, one decision at a time, writes in parallel.

Rules:

* Decisions are one at a time, on purpose: two at once would each decide
  against a fleet missing the other's booking. Their writes are not: each
  reconcile's plan goes to a bounded pool (writes.py), and a worker whose
  plan is still in flight is looked at again only once it has landed.
* Nothing is decided before every watch has listed (the cache would lack
  seats already promised), nor once ``may_act`` says this replica may no
  longer lead: the loop stops instead.
* A failed write comes back with its worker's ``Verdict`` (the write table's,
  writes.py): retried with back-off, soon after a short pause, or dropped.
* Nothing a reconcile raises stops the loop. API errors are retried with a
  per-key exponential delay; a ``Conflict`` (a stale read racing a newer
  write) is retried at once after a short pause; anything else is logged with
  its traceback and retried like an API error.
* Between decisions, about once a second, assumptions no answer resolved
  within ``assume_timeout`` are expired (``Cache.expire``; never one whose
  plan is in flight), and pending workers are woken to take the seats given
  back.
* The sweep is a queue key like any other, re-queued at the reclaim interval,
  so it never runs beside a reconcile that might be joining the claim it is
  about to delete.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from controller import memory
from controller.k8s import kube
from controller.k8s.logs import kv
from controller.metrics import Health, Metrics
from controller.reconcile import moves
from controller.reconcile.housekeeping import tally
from controller.reconcile.rebalancing import moves_on, pass_interval
from controller.reconcile.reconciler import Reconciler
from controller.reconcile.vocabulary import Write
from controller.reconcile.writes import NotLeading, Verdict, Writer
from controller.settings import Settings
from controller.store.cache import Cache
from controller.store.queue import WorkQueue
from controller.store.watches import WAKE_DELAY, Watcher, feeds
from controller.store.work import HOUSEKEEPING_ORDER, REBALANCE, SWEEP, WAKE, Result, utcnow

log = logging.getLogger("openrl.controller.loop")

CONFLICT_DELAY = 0.2
# A worker just let go of its claim: sweep shortly (the grace still protects young claims).
SWEEP_SOON = 1.0
SYNC_TIMEOUT = 60.0
EXPIRE_EVERY = 1.0  # seconds between looks for assumptions past their deadline
WRITE_CONCURRENCY = 16


class Controller:
    def __init__(self, api: kube.Kube, settings: Settings, *, metrics: Metrics | None = None,
                 health: Health | None = None, may_act: Callable[[], bool] = lambda: True,
                 concurrency: int = WRITE_CONCURRENCY,
                 now: Callable[[], dt.datetime] = utcnow,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.health = health or Health()
        self.may_act = may_act
        self.queue = WorkQueue(max_delay=settings.retry_interval)
        self.cache = Cache(settings.device_driver, clock=clock,
                           device_class=settings.device_class)
        self.writer = Writer(api, self.cache, concurrency=concurrency, fence=self._fence,
                             done=self._written)
        self.reconciler = Reconciler(api, settings, cache=self.cache, writer=self.writer,
                                     metrics=self.metrics, now=now)
        self.metrics.census_from(lambda: tally(self.cache.waiting()))
        self.reconciles = 0
        self.watchers: list[Watcher] = []
        self._deferred: set[str] = set()  # came up while its plan was in flight
        self._failing: set[str] = set()  # its last plan failed: keep its back-off
        self._deferred_lock = threading.Lock()

    def _fence(self) -> None:
        if not self.may_act():
            raise NotLeading(0, "NotLeading", "the lease may have passed to another replica")

    def _enabled(self, node: str) -> bool:
        with self.cache.lock:
            return node in self.cache.view.nodes

    def start_watches(self, stop: threading.Event) -> bool:
        """Start every watch; True once all of them have listed (False if stopped first)."""
        with memory.collection_paused() as pause:
            synced = []
            for feed in feeds(self.queue, self.settings.device_driver, self._enabled,
                              device_class=self.settings.device_class,
                              namespace=self.settings.namespace,
                              placed_on=lambda node: moves.workers_on_node(self.cache, node),
                              in_conflict=lambda claim: moves.workers_in_conflict(
                                  self.cache, claim),
                              kueue=self.settings.kueue):
                done = threading.Event()
                watcher = Watcher(self.api, feed, self.cache, stop, done)
                watcher.start()
                self.watchers.append(watcher)
                synced.append(done)
            deadline = time.monotonic() + SYNC_TIMEOUT
            for done in synced:
                while not done.wait(1.0):
                    self.health.beat()
                    if stop.is_set():
                        return False
                    if time.monotonic() > deadline:
                        log.warning("watches not synced yet; still waiting before any decision")
                        pause.resume()  # a list this late may never end: collect again
                        deadline = time.monotonic() + SYNC_TIMEOUT
        memory.give_back()  # what the list passed through, not kept, back to the system
        return True

    def run(self, stop: threading.Event) -> None:
        self.health.beat()
        if not self.start_watches(stop):
            self.writer.close(wait=False)
            return
        self.health.set_ready(True, "leading")
        self.queue.add(SWEEP, after=min(5.0, self.settings.reclaim_interval),
                       order=HOUSEKEEPING_ORDER)
        if moves_on(self.settings):
            self.queue.add(REBALANCE, after=pass_interval(self.settings),
                           order=HOUSEKEEPING_ORDER)
        log.info("controller running", extra=kv(namespace=self.settings.namespace,
                                                device_class=self.settings.device_class))
        next_expiry = time.monotonic() + EXPIRE_EVERY
        while not stop.is_set():
            self.health.beat()
            key = self.queue.get(timeout=1.0)
            if time.monotonic() >= next_expiry:
                self.expire_assumptions()
                next_expiry = time.monotonic() + EXPIRE_EVERY
            if key is None:
                continue
            if stop.is_set() or not self.may_act():
                self.queue.done(key)
                break
            self.process(key)
        self.queue.close()
        self.writer.close(wait=True)

    def expire_assumptions(self) -> list[tuple[kube.Resource, str]]:
        """Forget what no answer confirmed in time (and no plan in flight will), and wake
        the pending workers: the seats it held are free again."""
        expired = self.cache.expire(self.settings.assume_timeout,
                                    keep=self.writer.assumed_in_flight())
        for res, name in expired:
            log.warning("an assumption expired: no answer confirmed it; its seat is free again",
                        extra=kv(resource=res.plural, name=name,
                                 after=self.settings.assume_timeout))
        if expired:
            self.queue.add(WAKE, order=HOUSEKEEPING_ORDER)
        return expired

    def _written(self, key: str, write: Write | None, error: kube.KubeError | None,
                 verdict: Verdict | None) -> None:
        """A plan has landed (or failed): bring its worker back if that is due."""
        if error is not None and not isinstance(error, NotLeading):
            resource = write.res.plural if write else "plan"  # a plan that crashed
            self.metrics.write_failed(resource, type(error).__name__)
        with self._deferred_lock:
            deferred = key in self._deferred
            self._deferred.discard(key)
            if error is None:
                self._failing.discard(key)
            else:
                self._failing.add(key)
        if error is None or write is None or verdict is None:
            self.queue.forget(key)  # back-off resets once a worker's writes land
            if deferred:
                self.queue.add(key)
            return
        if isinstance(error, NotLeading):
            return
        log.warning("write failed", extra=kv(key=key, verb=write.verb,
                                             resource=write.res.plural, error=str(error),
                                             then=verdict.value))
        if verdict is Verdict.SOON:
            self.queue.add(key, after=CONFLICT_DELAY)
        elif verdict is Verdict.RETRY:
            self.queue.retry(key)

    def process(self, key: str) -> Result | None:
        if self.writer.busy(key):
            with self._deferred_lock:
                self._deferred.add(key)
            if self.writer.busy(key):  # else it landed meanwhile: go on
                self.queue.done(key)
                return None
            with self._deferred_lock:
                self._deferred.discard(key)
        started = time.monotonic()
        result: Result | None = None
        outcome = "error"
        try:
            result = self.reconciler(key)
            with self._deferred_lock:
                if key not in self._failing and not self.writer.busy(key):
                    self.queue.forget(key)
            for other, order in result.enqueue:
                self.queue.add(other, order=order)
            if result.wake:
                self.queue.add(WAKE, after=WAKE_DELAY, order=HOUSEKEEPING_ORDER)
            if result.sweep:
                self.queue.add(SWEEP, after=SWEEP_SOON, order=HOUSEKEEPING_ORDER)
            if result.requeue_after is not None:
                self.queue.add(key, after=result.requeue_after)
                outcome = "requeue"
            else:
                outcome = "ok"
        except kube.Conflict as exc:
            log.info("conflict; retrying", extra=kv(key=key, error=exc.message))
            self.queue.add(key, after=CONFLICT_DELAY)
        except kube.KubeError as exc:
            delay = self.queue.retry(key)
            log.warning("reconcile failed", extra=kv(key=key, error=str(exc), retry_in=delay))
        except Exception:
            delay = self.queue.retry(key)
            log.exception("reconcile crashed", extra=kv(key=key, retry_in=delay))
        finally:
            self.queue.done(key)
            self.reconciles += 1
            self.metrics.reconciles.labels(result=outcome).inc()
            self.metrics.latency.observe(time.monotonic() - started)
            self.metrics.queue_depth.set(len(self.queue))
        return result
