"""One reconcile: one worker, read from the cache, one decision, its writes planned.

Every read comes from the cache the watches keep (cache.py), never from a
LIST or GET; the cache already holds every earlier decision (assumed), so a
reconcile always sees the seats promised before it. Writes are planned, not
made: every write a reconcile causes -- finalizer, deletions, claim, join
commit, pod, status, Event -- goes into one plan, handed to the write pool
(writes.py) once the reconcile returns; what a failed write means is that
module's table.

The sequence for a worker, each step a function of steps.py (of seating.py
for a worker with no pod yet) returning a ``Conclusion`` (the status to set,
the writes it needs, when to come back):

1. Read the worker and its pod (``orw-<name>``). Gone: nothing to do.
2. Deleting (``finalize``): delete its pod; only once the pod is verifiably
   gone, remove the finalizer. The seat stays booked (through the worker's
   status and its pod) until then: a seat cannot free while the process may
   still hold the device.
3. First sight (``add_finalizer``): plan the finalizer (the one extra write).
4. Failed and Succeeded are terminal; the finished pod is deleted, and its
   claim at once unless another worker holds a seat on it (``moves.finished``).
   A spec the controller cannot act on is InvalidSpec.
5. A pod named for the worker exists: first ``moves.with_pod`` (completed:
   Succeeded; its node lost or not ready, or the pod wedged: the worker is
   placed again, moves.py's table); else ``steps.with_pod``:
   - owned by this incarnation: report it (Placing, Running, PodFailed;
     Unschedulable, and the pod deleted, once it has waited past the
     placement timeout);
   - owned by an earlier incarnation of the same name: delete it, wait until
     it is gone, never adopt it;
   - anything else: PodConflict, nothing deleted.
6. No pod: a seat on a lost or not-ready node, or under a wedged pod, is
   given back (``moves.leave``); a moving worker placed again too often
   waits (``moves.held_back``). Then read and check the template
   (``template``: TemplateNotFound waits,
   keeping a held claim's seat booked (``held_claim``); TemplateError fails,
   also for a ConfigMap the operator has not marked as a template),
   then decide under the cache's lock (``seat``):
   - if the worker already holds a live claim (its status says so, or the
     claim derived from its UID exists after a lost write, or a claim's
     booked list commits its join), recreate the pod on it -- placed workers
     stay put -- unless others already fill that claim's seats: then it is
     decided afresh;
   - a join is committed on the claim (its booked list, updated with the
     claim's resourceVersion as a precondition) before the pod is planned;
     a conflict means someone changed the claim since: decide again;
   - otherwise decide against the cache's fleet; the claim (new claims only)
     and the pod are assumed into the cache before the lock goes, and the
     plan creates the claim, creates the pod, patches the status.
7. Waiting workers are retried at the retry interval (and woken by capacity
   changes); one no node could ever hold fails Unsatisfiable after the
   placement timeout.

Then ``_plan`` turns the conclusion into the plan: the finalizer, the step's
writes, the status patch when the status changed (status.py), an Event on a
transition. The plan also carries two steps for its pod, run by the write
pool when the table calls for them: ``settle`` (the pod exists after all:
``with_pod`` on what is there) and ``refused`` (the API server refused the
pod: TemplateError).

Housekeeping keys (``WAKE``, ``SWEEP``: see housekeeping.py) share the queue,
so they never run beside a reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import attrs

from controller.k8s import kube
from controller.k8s.events import Recorder
from controller.k8s.logs import kv
from controller.k8s.naming import FINISHED_PHASES, ReasonKind, WorkerPhase
from controller.k8s.objects import Obj, Worker
from controller.metrics import Metrics
from controller.reconcile import housekeeping, moves, seating, standing, status, steps
from controller.reconcile.status import Outcome
from controller.reconcile.steps import Conclusion, Context
from controller.reconcile.writes import Plan, Verdict, Write, Writer
from controller.settings import Settings
from controller.store.cache import Cache
from controller.store.work import SWEEP, WAKE, Result, utcnow

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
        self._warned: set[str] = set()

    def __call__(self, key: str) -> Result:
        if key == WAKE:
            self._observe()
            return housekeeping.wake(self.cache, self.metrics)
        if key == SWEEP:
            result, deletes = housekeeping.sweep(self.api, self.cache, self.settings,
                                                 self.metrics, self.now())
            self.writer.submit(Plan(SWEEP, deletes))
            return result
        return self.reconcile(key)

    # ------------------------------------------------------------- a worker

    def reconcile(self, name: str) -> Result:
        obj = self.cache.get(kube.WORKERS, name)
        if obj is None:
            return Result()
        worker = Worker.from_obj(obj)
        ctx = self._context()
        plan = self._new_plan(name)
        first: Write | None = None
        if worker.deleting:
            done = steps.finalize(ctx, worker, self.cache.get(kube.PODS, worker.pod_name))
        else:
            worker, first = steps.add_finalizer(worker)
            done = self._conclude(ctx, worker)
        if first is not None:
            plan.writes.append(first)
        try:
            self._plan(worker, done, plan, ctx.now)
        finally:  # what was assumed is written (or forgotten) whatever happened
            self.writer.submit(plan)
        return Result(requeue_after=done.requeue_after, wake=done.wake, sweep=done.sweep)

    def _conclude(self, ctx: Context, worker: Worker) -> Conclusion:
        """Steps 4 to 7: what the worker's status is to become, and the writes for it."""
        pod = self.cache.get(kube.PODS, worker.pod_name)
        if worker.phase in FINISHED_PHASES:
            return moves.finished(ctx, worker, pod)
        if worker.spec_error:
            return Conclusion(
                Outcome(WorkerPhase.FAILED, ReasonKind.INVALID_SPEC, worker.spec_error))
        if pod is not None:
            standing_pod = (standing.with_pod(ctx, worker, pod) if self.settings.autoscaling
                            else None)
            if standing_pod is not None:
                return standing_pod
            moved = moves.with_pod(ctx, worker, pod)
            if moved is not None:
                return self._counted(moved)
            return self._wedge_check(ctx, pod, steps.with_pod(ctx, worker, pod))
        gone = standing.without_pod(ctx, worker) if self.settings.autoscaling else None
        if gone is not None:
            return gone
        with self.cache.lock:
            held = seating.held_claim(ctx, worker)
            left = moves.leave(ctx, worker, held) or (
                moves.held_back(ctx, worker) if held is None else None)
        if left is not None:
            return self._counted(left)
        prepared = seating.template(ctx, worker, held)
        if isinstance(prepared, Conclusion):
            return prepared
        with self.cache.lock:  # decide and assume as one step: no decision in between
            done = moves.explain(ctx, worker, seating.seat(ctx, worker, prepared,
                                                           avoid=moves.wedged_on(worker)))
            if self.settings.autoscaling:
                done = standing.instead(ctx, worker, prepared, done)
            for write in done.writes:
                if write.assumed:
                    self.cache.assume(write.res, write.body)
        if done.decided:
            self.metrics.decisions.labels(outcome=done.decided).inc()
        return done

    def _counted(self, done: Conclusion) -> Conclusion:
        """A move's conclusion, counted when it records the move (moves_total)."""
        if done.outcome is not None and done.outcome.moves:
            self.metrics.moves.labels(reason=done.outcome.kind).inc()
        return done

    @staticmethod
    def _wedge_check(ctx: Context, pod: Obj, done: Conclusion) -> Conclusion:
        """Come back when an unschedulable pod's grace runs out, if nothing sooner."""
        due = moves.wedge_due(ctx, pod)
        if due is None or (done.requeue_after is not None and done.requeue_after <= due):
            return done
        return attrs.evolve(done, requeue_after=due)

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
        done = steps.with_pod(ctx, worker, pod)
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
            f"{worker.template_name}: {error.message}")), plan, self.now())
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
        for warning in warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                node = warning.split(":")[0].removeprefix("node ")
                log.warning(warning, extra=kv(node=node) if " " not in node else {})
