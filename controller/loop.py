"""The loop: watches feed one queue, one reconcile at a time.

Rules:

* Concurrency is one, on purpose: two reconciles at once would each decide
  against a fleet missing the other's booking.
* Nothing a reconcile raises stops the loop. API errors are retried with a
  per-key exponential delay; a ``Conflict`` (a stale read racing a newer
  write) is retried at once after a short pause; anything else is logged with
  its traceback and retried like an API error.
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

from controller import kube
from controller.logs import kv
from controller.metrics import Health, Metrics
from controller.queue import WorkQueue
from controller.reconcile import Reconciler
from controller.settings import Settings
from controller.watches import WAKE_DELAY, Watcher, feeds
from controller.work import HOUSEKEEPING_ORDER, SWEEP, WAKE, Result, utcnow

log = logging.getLogger("openrl.controller.loop")

CONFLICT_DELAY = 0.2
# A worker just let go of its claim: sweep shortly (the grace still protects young claims).
SWEEP_SOON = 1.0
SYNC_TIMEOUT = 60.0


class Controller:
    def __init__(self, api: kube.Kube, settings: Settings, *, metrics: Metrics | None = None,
                 health: Health | None = None,
                 now: Callable[[], dt.datetime] = utcnow) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.health = health or Health()
        self.queue = WorkQueue(max_delay=settings.retry_interval)
        self.reconciler = Reconciler(api, settings, metrics=self.metrics, now=now)
        self.reconciles = 0
        self.watchers: list[Watcher] = []

    def start_watches(self, stop: threading.Event) -> bool:
        """Start every watch; True once all of them have listed (False on timeout)."""
        synced = []
        for feed in feeds(self.queue, self.settings.device_driver):
            done = threading.Event()
            watcher = Watcher(self.api, feed, stop, done)
            watcher.start()
            self.watchers.append(watcher)
            synced.append(done)
        deadline = time.monotonic() + SYNC_TIMEOUT
        return all(done.wait(max(0.0, deadline - time.monotonic())) for done in synced)

    def run(self, stop: threading.Event) -> None:
        self.health.beat()
        if not self.start_watches(stop):
            log.warning("watches not synced yet; starting anyway")
        self.health.set_ready(True, "leading")
        self.queue.add(SWEEP, after=min(5.0, self.settings.reclaim_interval),
                       order=HOUSEKEEPING_ORDER)
        log.info("controller running", extra=kv(namespace=self.settings.namespace,
                                                device_class=self.settings.device_class))
        while not stop.is_set():
            self.health.beat()
            key = self.queue.get(timeout=1.0)
            if key is None:
                continue
            if stop.is_set():
                self.queue.done(key)
                break
            self.process(key)
        self.queue.close()

    def process(self, key: str) -> Result | None:
        started = time.monotonic()
        result: Result | None = None
        outcome = "error"
        try:
            result = self.reconciler(key)
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
