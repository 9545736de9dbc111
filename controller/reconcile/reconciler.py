"""One reconcile: one worker, read from the cache, one decision, its writes planned.

Every read comes from the cache the watches keep (store/cache.py), never from
a LIST or GET; the cache already holds every earlier decision (assumed), so a
reconcile always sees the seats promised before it. Writes are planned, not
made: every write a reconcile causes -- finalizer, deletions, claim, join
commit, pod, status, Event -- goes into one plan, handed to the write pool
(writes.py) once the reconcile returns; what a failed write means is that
module's table.

A worker's reconcile:

1. Read the worker (gone: nothing to do) and, on first sight, plan its
   finalizer first (``tracking.add_finalizer``: the one extra write).
2. Holding the cache's lock, walk the stages to one ``Conclusion``
   (stages.py: its table is the order, its rules hold for every step), and
   assume what the conclusion creates before the lock goes. Count it: a
   decision (``decisions_total``), a move it records (``moves_total``).
3. ``_plan`` turns the conclusion into the plan: the finalizer, the step's
   writes, the status patch when the status changed (status.py), an Event on
   a transition.

The plan also carries two steps for its pod, run by the write pool when the
table calls for them: ``settle`` (the pod exists after all: the ``own pod``
stage on what is there) and ``refused`` (the API server refused the pod:
TemplateError).

Housekeeping keys (``WAKE``, ``SWEEP``: see housekeeping.py; ``REBALANCE``:
rebalancing.py) share the queue, so they never run beside a reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import attrs

from controller.k8s import kube
from controller.k8s.events import Recorder
from controller.k8s.logs import kv
from controller.k8s.naming import ReasonKind, WorkerPhase
from controller.k8s.objects import Obj, Worker
from controller.metrics import Metrics
from controller.reconcile import housekeeping, stages, status, tracking
from controller.reconcile.parking import memory_bound
from controller.reconcile.rebalancing import Rebalancer
from controller.reconcile.vocabulary import Case, Conclusion, Context, Outcome, Write
from controller.reconcile.writes import Plan, Verdict, Writer
from controller.settings import Settings
from controller.store.cache import Cache
from controller.store.work import REBALANCE, SWEEP, WAKE, Result, utcnow, worker_order

__all__ = ["Reconciler"]

log = logging.getLogger("openrl.controller")


class Reconciler:
    def __init__(self, api: kube.Kube, settings: Settings, *, cache: Cache,
                 writer: Writer | None = None, metrics: Metrics | None = None,
                 recorder: Recorder | None = None,
                 now: Callable[[], dt.datetime] = utcnow) -> None:
        self.api = api
        self.settings = settings
        self.cache = cache
        self.writer = writer or Writer(api, cache, concurrency=0)
        self.metrics = metrics or Metrics()
        self.now = now
        self.recorder = recorder or Recorder(api, settings.identity, now)
        # The fleet's warnings (FleetWarning values) standing at the last wake: each is
        # logged when it comes, and again only if it went away and came back.
        self._warned: frozenset[object] = frozenset()
        self.rebalancer = Rebalancer(settings)

    def __call__(self, key: str) -> Result:
        if key == WAKE:
            self._observe()
            return housekeeping.wake(self.cache, self.metrics)
        if key == SWEEP:
            result, deletes = housekeeping.sweep(self.api, self.cache, self.settings,
                                                 self.metrics, self.now())
            self.writer.submit(Plan(SWEEP, deletes))
            return result
        if key == REBALANCE:
            return self.rebalance()
        return self.reconcile(key)

    def rebalance(self) -> Result:
        """The move rule's pass (rebalancing.py): at most one move started, its first
        writes planned as the worker's own; then the worker's reconciles carry it on."""
        again = Result(requeue_after=self.rebalancer.interval())
        if not self.rebalancer.on:
            return Result()
        ctx = self._context()
        with self.cache.lock:
            found = self.rebalancer.decide(ctx, self.cache.waiting())
            if found is not None:
                for write in found[1].writes:
                    if write.assumed:
                        self.cache.assume(write.res, write.body)
        self.metrics.stranded.set(self.rebalancer.stranded)
        if found is None:
            return again
        worker, done = found
        plan = self._new_plan(worker.name)
        try:
            self._plan(worker, done, plan, ctx.now)
        finally:
            self.writer.submit(plan)
        self.metrics.moves.labels(reason=str((done.outcome.move or {}).get("reason"))
                                  if done.outcome else "").inc()
        obj = self.cache.get(kube.WORKERS, worker.name)
        order = worker_order(obj) if obj is not None else ()
        return attrs.evolve(again, enqueue=((worker.name, order),))

    # ------------------------------------------------------------- a worker

    def reconcile(self, name: str) -> Result:
        obj = self.cache.get(kube.WORKERS, name)
        if obj is None:
            return Result()
        worker, first = tracking.add_finalizer(Worker.from_obj(obj))
        ctx = self._context()
        plan = self._new_plan(name)
        if first is not None:
            plan.writes.append(first)
        done = self._conclude(ctx, worker)
        try:
            self._plan(worker, done, plan, ctx.now)
        finally:  # what was assumed is written (or forgotten) whatever happened
            self.writer.submit(plan)
        return Result(requeue_after=done.requeue_after, wake=done.wake, sweep=done.sweep)

    def _conclude(self, ctx: Context, worker: Worker) -> Conclusion:
        """The stages' conclusion, walked under the cache's lock (stages.py's first rule),
        with what it creates assumed before the lock goes; then counted."""
        with self.cache.lock:
            done = stages.conclude(ctx, worker, self.cache.get(kube.PODS, worker.pod_name))
            for write in done.writes:
                if write.assumed:
                    self.cache.assume(write.res, write.body)
        if done.decided:
            self.metrics.decisions.labels(outcome=done.decided).inc()
        if done.outcome is not None and done.outcome.moves:  # it records a move
            self.metrics.moves.labels(reason=done.outcome.kind).inc()
        return done

    def _context(self) -> Context:
        return Context(self.cache, self.settings, self.api.namespace, self.now())

    def _new_plan(self, key: str) -> Plan:
        return Plan(key, settle=lambda pod: self._settle(key, pod),
                    refused=lambda error: self._refused(key, error))

    def _plan(self, worker: Worker, done: Conclusion, plan: Plan, now: dt.datetime) -> None:
        """The conclusion as writes: the step's, then the status and its Event if due."""
        plan.writes.extend(done.writes)
        outcome = done.outcome
        if outcome is None:
            return
        new = status.desired(worker, outcome, now)
        if not status.changed(worker, new):
            return
        plan.writes.append(Write("patch", kube.WORKERS, worker.name, status.patch_body(new),
                                 subresource="status"))
        seat, start = status.waits_ended(worker, new, now)
        if seat is not None or start is not None:  # observed once the writes have landed
            plan.after.append(lambda: self.metrics.waited(worker.role, seat, start))
        level = logging.WARNING if outcome.phase == WorkerPhase.FAILED else logging.INFO
        log.log(level, f"worker {outcome.phase.lower()}",
                extra=kv(worker=worker.name, phase=outcome.phase, reason=outcome.reason,
                         claim=outcome.claim, node=outcome.node))
        if status.transition(worker, outcome):
            obj, kind = worker.obj, status.event_type(outcome)
            reason, action = outcome.kind or outcome.phase, outcome.phase
            note = outcome.reason or outcome.detail or outcome.phase
            plan.after.append(lambda: self.recorder.record(obj, kind, reason, action, note))

    # ------------------------------------- the plan's own steps for its pod

    def _settle(self, key: str, pod: Obj | None) -> tuple[Plan, Verdict]:
        """The pod we meant to create exists: say what the one there means (a read, once,
        since it may be no pod the cache holds). Come back soon unless that is final."""
        plan = Plan(key)
        obj = self.cache.get(kube.WORKERS, key)
        if obj is None:
            return plan, Verdict.DROP
        if pod is None:
            return plan, Verdict.SOON  # gone again meanwhile: try afresh
        worker, ctx = Worker.from_obj(obj), self._context()
        with self.cache.lock:  # the stages' rule: the step reads the cache as one moment
            done = tracking.own_pod(ctx, Case(worker, pod))
        self._plan(worker, done, plan, ctx.now)
        failed = done.outcome is not None and done.outcome.phase == WorkerPhase.FAILED
        return plan, Verdict.DROP if failed else Verdict.SOON

    def _refused(self, key: str, error: kube.KubeError) -> tuple[Plan, Verdict]:
        """The API server refused the rendered pod itself: the worker fails."""
        plan = Plan(key)
        obj = self.cache.get(kube.WORKERS, key)
        if obj is None:
            return plan, Verdict.DROP
        worker = Worker.from_obj(obj)
        self._plan(worker, Conclusion(Outcome(
            WorkerPhase.FAILED, ReasonKind.TEMPLATE_ERROR,
            f"the API server refused pod {worker.pod_name} rendered from "
            f"{worker.template_name}: {error.message}{memory_bound(worker, error)}")),
            plan, self.now())
        return plan, Verdict.DROP

    # ------------------------------------------------------------ housekeeping

    def _observe(self) -> None:
        """Fleet gauges and node warnings, on each wake (never per decision)."""
        with self.cache.lock:
            view = self.cache.view
            claims, used, total = len(view.claims), view.seats_used, view.seats_total
            warnings = view.warnings
        self.metrics.claims.set(claims)
        self.metrics.seats_used.set(used)
        self.metrics.seats_total.set(total)
        self.metrics.node_warnings.set(len(warnings))
        for warning in dict.fromkeys(warnings):  # in order, each once
            if warning not in self._warned:
                log.warning(warning.text, extra=kv(node=warning.node) if warning.node else {})
        self._warned = frozenset(warnings)  # those gone are forgotten
