"""One reconcile: one worker, read from the cache, one decision, its writes planned.

Every read comes from the cache the watches keep (cache.py), never from a
LIST or GET; the cache already holds every earlier decision (assumed), so a
reconcile always sees the seats promised before it. Writes are planned, not
made: the plan (finalizer, claim, pod, status, Event) goes to the write pool
(writes.py) once the reconcile returns, and a write that fails gives its
seat back and brings the worker back with back-off. The rare deletions (a
deleted worker's pod, a predecessor's, an unschedulable one) are made at once.

The sequence for a worker:

1. Read the worker and its pod (``orw-<name>``). Gone: nothing to do.
2. Deleting: delete its pod; only once the pod is verifiably gone, remove the
   finalizer. The seat stays booked (through the worker's status and its
   pod) until then: a seat cannot free while the process may still hold the
   device.
3. First sight: add the finalizer (the one extra write).
4. Failed is terminal; a Failed worker's finished pod is deleted. A spec
   the controller cannot act on is InvalidSpec.
5. A pod named for the worker exists:
   - owned by this incarnation: report it (Placing, Running, PodFailed;
     Unschedulable once it has waited past the placement timeout);
   - owned by an earlier incarnation of the same name: delete it, wait until
     it is gone, never adopt it;
   - anything else: PodConflict, nothing deleted.
6. No pod: read and check the template (TemplateNotFound waits, keeping a
   held claim's seat booked; TemplateError fails), then
   - if the worker already holds a live claim (its status says so, or the
     claim derived from its UID exists after a lost write, or a claim's
     booked list commits its join), recreate the pod
     on it -- placed workers stay put -- unless others already fill that
     claim's seats: then it is decided afresh;
   - a join is committed on the claim (its booked list, updated with the
     claim's resourceVersion as a precondition) before the pod is planned;
     a conflict means someone changed the claim since: decide again;
   - otherwise decide against the cache's fleet, assume the claim (new
     claims only) and the pod into the cache, and plan: create the claim,
     create the pod, patch the status.
7. Waiting workers are retried at the retry interval (and woken by capacity
   changes); one no node could ever hold fails Unsatisfiable after the
   placement timeout.

Housekeeping keys (``WAKE``, ``SWEEP``: see housekeeping.py) share the queue,
so they never run beside a reconcile.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import attrs

from controller import housekeeping, kube, naming, render, status
from controller.cache import Cache
from controller.claims import ClaimView, build_claim, commit_join, read_claim
from controller.events import Recorder
from controller.logs import kv
from controller.metrics import Metrics
from controller.naming import Phase, PodPhase, ReasonKind
from controller.objects import (
    Obj,
    Worker,
    controller_owner,
    created_at,
    is_deleting,
    labels_of,
    name_of,
    pod_alive,
    pod_claim,
    pod_condition,
    pod_failure,
    pod_node,
    pod_phase,
    uid_of,
    worker_owner_uid,
)
from controller.settings import Settings
from controller.status import Outcome
from controller.work import SWEEP, WAKE, Result, utcnow
from controller.writes import Plan, Write, Writer
from placement import JoinClaim, NewClaim, Request, Wait, decide
from placement.model import per_device_share
from placement.quantity import format_quantity

log = logging.getLogger("openrl.controller")

class _Conclude(Exception):
    """Raised inside a step that has reached an outcome the worker must be told."""

    def __init__(self, outcome: Outcome, requeue_after: float | None = None) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome
        self.requeue_after = requeue_after


# A placed pod's progress short of Running is written once it has waited this share of
# the placement timeout (default 10m: 2.5m), well before Unschedulable: in a burst,
# kube-scheduler may take a minute to reach a pod, and every such write is one more.
STATUS_QUIET = 0.25

# A write's failure, and what the loop does about it: retry with back-off, soon, or not.
RETRY, SOON, DROP = "retry", "soon", "drop"


class Reconciler:
    def __init__(self, api: kube.Kube, settings: Settings, *, cache: Cache,
                 writer: Writer | None = None, metrics: Metrics | None = None,
                 recorder: Recorder | None = None,
                 now: Callable[[], dt.datetime] = utcnow) -> None:
        self.api = api
        self.settings = settings
        self.cache = cache
        self.writer = writer or Writer(api, cache, concurrency=0, done=self._written_inline)
        self.metrics = metrics or Metrics()
        self.now = now
        self.recorder = recorder or Recorder(api, settings.identity, now)
        self._warned: set[str] = set()

    def __call__(self, key: str) -> Result:
        if key == WAKE:
            self._observe()
            return housekeeping.wake(self.cache, self.metrics)
        if key == SWEEP:
            return housekeeping.sweep(self.api, self.cache, self.settings, self.metrics,
                                      self.now())
        return self.reconcile(key)

    # ------------------------------------------------------------- a worker

    def reconcile(self, name: str) -> Result:
        plan = Plan(name)
        try:
            return self._reconcile(name, plan)
        finally:
            self.writer.submit(plan)

    def _reconcile(self, name: str, plan: Plan) -> Result:
        obj = self.cache.get(kube.WORKERS, name)
        if obj is None:
            return Result()
        worker = Worker.from_obj(obj)
        pod = self.cache.get(kube.PODS, worker.pod_name)
        if worker.deleting:
            return self._finalize(worker, pod)
        if naming.FINALIZER not in worker.finalizers:
            worker = self._add_finalizer(worker, plan)
        if worker.phase == Phase.FAILED:
            return self._drop_finished_pod(worker, pod)
        try:
            if worker.spec_error:
                raise _Conclude(Outcome(Phase.FAILED, ReasonKind.INVALID_SPEC, worker.spec_error))
            if pod is not None:
                return self._with_pod(worker, pod)
            return self._place(worker, plan)
        except _Conclude as done:
            return self._conclude(worker, done.outcome, done.requeue_after, plan)

    def _add_finalizer(self, worker: Worker, plan: Plan) -> Worker:
        """Plan the finalizer (first, so it is there before any seat is written)."""
        finalizers = [*worker.finalizers, naming.FINALIZER]
        body = {"metadata": {"finalizers": finalizers,
                             "resourceVersion": worker.obj["metadata"]["resourceVersion"]}}
        plan.writes.append(Write("patch", kube.WORKERS, worker.name, body))
        return Worker.from_obj({**worker.obj, "metadata": {**worker.obj["metadata"],
                                                           "finalizers": finalizers}})

    def _written_inline(self, key: str, write: Write | None,
                        error: kube.KubeError | None) -> None:
        if write is not None and error is not None:
            self.failed_write(key, write, error)

    def _settle_existing_pod(self, key: str) -> str:
        obj = self.cache.get(kube.WORKERS, key)
        if obj is None:
            return DROP
        try:
            pod = self.api.get(kube.PODS, naming.pod_name(key))
        except kube.NotFound:
            return SOON  # gone again meanwhile: try afresh
        worker, plan = Worker.from_obj(obj), Plan(key)
        try:
            self._with_pod(worker, pod)
        except _Conclude as done:
            self._conclude(worker, done.outcome, done.requeue_after, plan)
            if done.outcome.phase == Phase.FAILED:
                return DROP
        finally:
            Writer(self.api, self.cache, concurrency=0, fence=self.writer.fence).submit(plan)
        return SOON

    def failed_write(self, key: str, write: Write, error: kube.KubeError) -> str:
        """What a failed planned write means for the worker: RETRY, SOON or DROP.

        Called from the write pool once the plan's assumptions are dropped.
        """
        if isinstance(error, kube.NotFound) and write.res == kube.WORKERS:
            return DROP  # the worker is gone
        if write.res == kube.PODS and isinstance(error, kube.AlreadyExists):
            # Created since we looked, or not a pod the cache holds (not managed by us):
            # read it once and settle whose it is.
            return self._settle_existing_pod(key)
        if write.res == kube.PODS and (isinstance(error, kube.Invalid) or (
                isinstance(error, kube.Forbidden) and "PodSecurity" in error.message)):
            # The API server refused the rendered pod itself (a field it rejects, or Pod
            # Security admission): the template's doing, and retrying cannot fix it. A
            # claim cut for it is left to the sweep (a Failed worker pins no claim).
            obj = self.cache.get(kube.WORKERS, key)
            if obj is None:
                return DROP
            worker = Worker.from_obj(obj)
            plan = Plan(key)
            self._conclude(worker, Outcome(
                Phase.FAILED, ReasonKind.TEMPLATE_ERROR,
                f"the API server refused pod {worker.pod_name} rendered from "
                f"{worker.template_name}: {error.message}"), None, plan)
            Writer(self.api, self.cache, concurrency=0, fence=self.writer.fence).submit(plan)
            return DROP
        if isinstance(error, kube.Conflict):
            return SOON
        return RETRY

    def _finalize(self, worker: Worker, pod: Obj | None) -> Result:
        # Only orw-<name> is ever created for a worker, so reading it by name is enough.
        mine = [pod] if pod is not None and worker_owner_uid(pod) == worker.uid else []
        for pod in mine:
            if not is_deleting(pod):
                try:
                    self.writer.fence()
                    self.api.delete(kube.PODS, name_of(pod), uid=uid_of(pod))
                    log.info("deleting pod of deleted worker",
                             extra=kv(worker=worker.name, pod=name_of(pod),
                                      claim=pod_claim(pod), node=pod_node(pod)))
                except kube.NotFound:
                    continue
        if mine:
            # Pod events bring us back as soon as it is gone; this is the fallback.
            return Result(requeue_after=self.settings.retry_interval)
        if naming.FINALIZER in worker.finalizers:
            remaining = [f for f in worker.finalizers if f != naming.FINALIZER]
            body = {"metadata": {"finalizers": remaining,
                                 "resourceVersion": worker.obj["metadata"]["resourceVersion"]}}
            self.writer.fence()
            with contextlib.suppress(kube.NotFound):
                self.cache.confirm(kube.WORKERS, self.api.patch(kube.WORKERS, worker.name, body))
            log.info("released seat of deleted worker",
                     extra=kv(worker=worker.name, claim=worker.claim))
        return Result(wake=True, sweep=True)

    def _drop_finished_pod(self, worker: Worker, pod: Obj | None) -> Result:
        """A Failed worker's own finished pod is deleted once the failure is on record.

        The status keeps why it ended. The pod holds no seat in our books, but while it
        existed its claim's reservation was seen flipping between listing it and not,
        many times a second, and a later joiner would have shared the claim with it.
        """
        if pod is None or pod_alive(pod) or is_deleting(pod) or \
                worker_owner_uid(pod) != worker.uid:
            return Result()
        self.writer.fence()
        with contextlib.suppress(kube.NotFound, kube.Conflict):
            self.api.delete(kube.PODS, name_of(pod), uid=uid_of(pod))
        log.info("deleted the finished pod of a failed worker",
                 extra=kv(worker=worker.name, pod=name_of(pod), claim=pod_claim(pod)))
        return Result(wake=True, sweep=True)

    def _with_pod(self, worker: Worker, pod: Obj) -> Result:
        owner = controller_owner(pod) or {}
        owner_uid = worker_owner_uid(pod)
        if owner_uid == worker.uid:
            return self._track(worker, pod)
        predecessor = (
            owner_uid
            and owner.get("name") == worker.name
            and labels_of(pod).get(naming.LABEL_WORKER) == naming.label_value(worker.name)
        )
        if not predecessor:
            who = labels_of(pod).get(naming.LABEL_WORKER) or owner.get("name") or "nobody"
            raise _Conclude(Outcome(
                Phase.FAILED, ReasonKind.POD_CONFLICT,
                f"pod {name_of(pod)} exists and belongs to {who!r}, not to this worker; "
                "nothing was deleted"))
        if not is_deleting(pod):
            self.writer.fence()
            with contextlib.suppress(kube.NotFound):
                self.api.delete(kube.PODS, name_of(pod), uid=uid_of(pod))
            log.info("deleting pod of an earlier incarnation",
                     extra=kv(worker=worker.name, pod=name_of(pod), old_uid=owner_uid))
        raise _Conclude(
            Outcome(Phase.PENDING, ReasonKind.WAITING_FOR_PREDECESSOR,
                    f"pod {name_of(pod)} belongs to an earlier {naming.KIND} named "
                    f"{worker.name} (uid {owner_uid}); it is being deleted, never adopted"),
            self.settings.retry_interval)

    def _track(self, worker: Worker, pod: Obj) -> Result:
        claim = pod_claim(pod) or worker.claim
        node, devices, closing = self._allocation(worker, claim)
        share = per_device_share(worker.memory, devices)
        base = Outcome(Phase.PLACING, ReasonKind.PLACED, "", claim=claim, devices=devices,
                       memory_per_device=share, node=node, pod=name_of(pod))
        if closing and pod_alive(pod) and not is_deleting(pod):
            # Someone deleted the claim under a placed worker: DRA keeps it (and its
            # devices) until the pod is gone, and so do our books. Say so, loudly.
            raise _Conclude(attrs.evolve(
                base, phase=Phase.RUNNING if pod_phase(pod) == PodPhase.RUNNING else Phase.PLACING,
                kind=ReasonKind.CLAIM_DELETING,
                detail=f"claim {claim} is being deleted; its devices stay booked for pod "
                       f"{name_of(pod)} until the pod is gone, and the worker is placed "
                       "again after that"), self.settings.retry_interval)
        if is_deleting(pod):
            raise _Conclude(attrs.evolve(
                base, detail=f"pod {name_of(pod)} is being deleted; it will be recreated on "
                             f"claim {claim}"), self.settings.retry_interval)
        phase = pod_phase(pod)
        if not pod_alive(pod):
            # Back at once: with the failure on record, the finished pod goes.
            raise _Conclude(attrs.evolve(base, phase=Phase.FAILED, kind=ReasonKind.POD_FAILED,
                                         detail=pod_failure(pod)), 1.0)
        if phase == PodPhase.RUNNING:
            raise _Conclude(attrs.evolve(base, phase=Phase.RUNNING, kind="",
                                         detail=f"pod {name_of(pod)} running on node "
                                                f"{pod_node(pod)}"))
        waited = (self.now() - created_at(pod)).total_seconds()
        quiet = STATUS_QUIET * self.settings.placement_timeout
        if worker.phase == Phase.PLACING and worker.claim == claim and waited < quiet:
            # Already reported Placing on this claim: progress short of Running is not
            # worth a write while it is young (most pods run within it). Look again then.
            return Result(requeue_after=quiet - waited)
        if pod_node(pod):
            raise _Conclude(attrs.evolve(base, detail=f"pod {name_of(pod)} starting on node "
                                                      f"{pod_node(pod)}"))
        scheduled = pod_condition(pod, "PodScheduled") or {}
        why = scheduled.get("message") or "not scheduled yet"
        if waited >= self.settings.placement_timeout:
            self.writer.fence()
            with contextlib.suppress(kube.NotFound):
                self.api.delete(kube.PODS, name_of(pod), uid=uid_of(pod))
            raise _Conclude(Outcome(
                Phase.FAILED, ReasonKind.UNSCHEDULABLE,
                f"pod {name_of(pod)} with claim {claim} was not scheduled within "
                f"{self.settings.placement_timeout:.0f}s: {why}; pod deleted, seat released"))
        raise _Conclude(attrs.evolve(base, detail=f"pod {name_of(pod)} waiting for the scheduler "
                                                  f"with claim {claim}: {why}"),
                        self.settings.placement_timeout - waited)

    def _allocation(self, worker: Worker, claim: str) -> tuple[str, int, bool]:
        """(node once allocated, devices, being deleted) of the worker's claim; status
        first, then the cache."""
        known_devices = worker.status.get("deviceCount")
        obj = self.cache.get(kube.CLAIMS, claim)
        closing = obj is not None and is_deleting(obj)
        if claim == worker.claim and worker.status.get("nodeName") and known_devices:
            return str(worker.status["nodeName"]), int(known_devices), closing
        if obj is None:
            return "", int(known_devices or 1), False
        view = read_claim(obj, self.cache.view.pool_nodes)
        return (view.node if view.allocated else ""), view.devices, closing

    def _place(self, worker: Worker, plan: Plan) -> Result:
        with self.cache.lock:
            views = self.cache.view.claims
            held = next((c for c in self._holds(worker) if c in views), None)
            held_view = views.get(held) if held is not None else None
        prepared = self._template(worker, held_view)
        with self.cache.lock:  # decide and assume as one step: no decision in between
            return self._decide(worker, prepared, plan)

    def _decide(self, worker: Worker, prepared: Obj, plan: Plan) -> Result:
        views = self.cache.view.claims
        held = next((c for c in self._holds(worker) if c in views), None)
        if held is not None and self._seat_kept(worker, held):
            view = views[held]
            return self._start(worker, prepared, held, view.devices,
                               view.node if view.allocated else "",
                               f"resumed on claim {held}", plan, pin=view.node)
        fleet = self.cache.view.fleet
        request = Request(worker.name, worker.role, worker.memory, worker.owner)
        decision = decide(request, fleet)
        if isinstance(decision, NewClaim) and worker.own_claim in views:
            # The claim named for this worker exists and others fill it: it cannot cut
            # another, so it waits for a seat like anyone else.
            raise _Conclude(Outcome(Phase.PENDING, ReasonKind.WAITING_FOR_CAPACITY,
                                    f"claim {worker.own_claim}, cut for this worker, is "
                                    "taken by others; waiting for a seat"),
                            self.settings.retry_interval)
        if isinstance(decision, NewClaim):
            self.metrics.decisions.labels(outcome="new_claim").inc()
            body = build_claim(worker.own_claim, decision, namespace=self.api.namespace,
                               device_class=self.settings.device_class,
                               driver=self.settings.device_driver, worker=worker.name,
                               worker_uid=worker.uid)
            self.cache.assume(kube.CLAIMS, body)
            plan.writes.append(Write("create", kube.CLAIMS, worker.own_claim, body, assumed=True))
            log.info("cut claim", extra=kv(worker=worker.name, claim=worker.own_claim,
                                           node=decision.node, devices=decision.devices,
                                           floor=format_quantity(decision.memory_floor),
                                           ceiling=format_quantity(decision.memory_ceiling)))
            return self._start(
                worker, prepared, worker.own_claim, decision.devices, "",
                f"new claim {worker.own_claim}: {decision.devices} device(s) of "
                f"{format_quantity(decision.memory_floor)}..."
                f"{format_quantity(decision.memory_ceiling)}, sized for node {decision.node}",
                plan, pin=decision.node)
        if isinstance(decision, JoinClaim):
            self.metrics.decisions.labels(outcome="join_claim").inc()
            others = fleet.workers_on(decision.claim)
            self._commit_join(worker, decision.claim, plan)
            return self._start(worker, prepared, decision.claim, decision.devices, decision.node,
                               f"joined claim {decision.claim} on node {decision.node} "
                               f"({others} other worker(s))", plan, pin=decision.node)
        assert isinstance(decision, Wait)
        reason = decision.reason
        self.metrics.decisions.labels(
            outcome="no_capacity" if reason.never else "waiting_for_capacity").inc()
        retry = self.settings.retry_interval
        if reason.never:
            waited = (self.now() - worker.created).total_seconds()
            left = self.settings.placement_timeout - waited
            if left <= 0:
                raise _Conclude(Outcome(Phase.FAILED, ReasonKind.UNSATISFIABLE,
                                        f"{reason} (waited {waited:.0f}s)"))
            retry = min(retry, left)
        raise _Conclude(Outcome(Phase.PENDING, str(reason.kind), reason.detail), retry)

    def _holds(self, worker: Worker) -> list[str]:
        """Claims the worker already holds, most certain first: its status, its own
        claim (cut before a lost write), a join committed on a claim's booked list."""
        booked = self.cache.view.bookings.get(worker.name)
        return [c for c in (worker.claim, worker.own_claim, booked.claim if booked else "") if c]

    def _commit_join(self, worker: Worker, claim: str, plan: Plan) -> None:
        """Plan the join's commit on the claim, before its pod: a compare-and-swap on the
        claim's resourceVersion (see claims.commit_join). A 409 drops the plan's pod and
        brings the worker straight back to be decided again."""
        obj = self.cache.get(kube.CLAIMS, claim)
        if obj is None:
            return
        # Only the claim's own list is checked against the cache: a join costs its few
        # seats, never a pass over every worker.
        plan.writes.append(Write("patch", kube.CLAIMS, claim,
                                 commit_join(obj, worker.uid, self.cache.view.live_uid)))

    def _seat_kept(self, worker: Worker, claim: str) -> bool:
        """Whether a worker holding ``claim`` may recreate its pod there.

        It may unless the claim is full without it. A placed worker never moves while
        its seat is booked, and a recreated pod never takes a claim past its seats: a
        claim full of others means this worker's booking was lost, and it goes through
        the decision like a newcomer.
        """
        fleet = self.cache.fleet
        if not fleet.fleet.has_claim(claim):
            return True  # its node left placement: nothing to count against
        node = fleet.nodes.get(fleet.fleet.claim_node(claim))
        if node is None:
            return True
        others = sum(1 for b in fleet.bookings.values()
                     if b.claim == claim and b.holder != worker.name)
        if others < node.max_workers_per_claim:
            return True
        log.warning("the claim this worker held is full without it; deciding afresh",
                    extra=kv(worker=worker.name, claim=claim, others=others))
        return False

    def _template(self, worker: Worker, held: ClaimView | None = None) -> Obj:
        """The worker's prepared template. Waiting for it keeps a held claim's seat booked
        (the status keeps the claim), so the seat cannot be promised to anyone else."""
        source = f"ConfigMap {self.api.namespace}/{worker.template_name} key {worker.template_key}"
        keep: dict[str, Any] = {}
        seat = ""
        if held is not None:
            keep = {"claim": held.name, "devices": held.devices,
                    "memory_per_device": per_device_share(worker.memory, held.devices),
                    "node": held.node if held.allocated else ""}
            seat = f"; its seat on claim {held.name} stays booked"
        config_map = self.cache.get(kube.CONFIGMAPS, worker.template_name)
        if config_map is None:
            raise _Conclude(Outcome(Phase.PENDING, ReasonKind.TEMPLATE_NOT_FOUND,
                                    f"{source.rsplit(' key ', 1)[0]} not found{seat}", **keep),
                            self.settings.retry_interval)
        text = (config_map.get("data") or {}).get(worker.template_key)
        if text is None:
            raise _Conclude(Outcome(Phase.PENDING, ReasonKind.TEMPLATE_NOT_FOUND,
                                    f"{source}: no such key{seat}", **keep),
                            self.settings.retry_interval)
        try:
            return render.prepare(text, worker, source)
        except render.TemplateError as exc:
            raise _Conclude(Outcome(Phase.FAILED, ReasonKind.TEMPLATE_ERROR, str(exc))) from exc

    def _start(self, worker: Worker, prepared: Obj, claim: str, devices: int, node: str,
               how: str, plan: Plan, *, pin: str) -> Result:
        """Assume and plan the pod on ``claim``, pinned to ``pin`` (the node placement
        chose); ``node`` is the allocation's node once observed (the status reports only
        that). A refusal of the pod is handled by ``failed_write``."""
        pod = render.stamp(prepared, worker, claim, self.api.namespace, pin)
        self.cache.assume(kube.PODS, pod)
        plan.writes.append(Write("create", kube.PODS, worker.pod_name, pod, assumed=True))
        log.info("creating pod", extra=kv(worker=worker.name, pod=worker.pod_name, claim=claim,
                                         node=node))
        raise _Conclude(Outcome(Phase.PLACING, ReasonKind.PLACED, how, claim=claim, devices=devices,
                                memory_per_device=per_device_share(worker.memory, devices),
                                node=node, pod=worker.pod_name),
                        self.settings.placement_timeout)

    def _conclude(self, worker: Worker, outcome: Outcome,
                  requeue_after: float | None, plan: Plan) -> Result:
        new = status.desired(worker, outcome, self.now())
        if status.changed(worker, new):
            plan.writes.append(Write("patch", kube.WORKERS, worker.name, status.patch_body(new),
                                     subresource="status"))
            level = logging.WARNING if outcome.phase == Phase.FAILED else logging.INFO
            log.log(level, f"worker {outcome.phase.lower()}",
                    extra=kv(worker=worker.name, phase=outcome.phase, reason=outcome.reason,
                             claim=outcome.claim, node=outcome.node))
            if status.transition(worker, outcome):
                obj, kind = worker.obj, status.event_type(outcome)
                reason, action = outcome.kind or outcome.phase, outcome.phase
                note = outcome.reason or outcome.detail or outcome.phase
                plan.after.append(lambda: self.recorder.record(obj, kind, reason, action, note))
        return Result(requeue_after=requeue_after)

    def _observe(self) -> None:
        """Fleet gauges and node warnings, on each wake (never per decision)."""
        with self.cache.lock:
            fleet = self.cache.fleet
            claims, used, total = len(fleet.claims), fleet.seats_used, fleet.seats_total
            warnings = fleet.warnings
        self.metrics.claims.set(claims)
        self.metrics.seats_used.set(used)
        self.metrics.seats_total.set(total)
        self.metrics.node_warnings.set(len(warnings))
        for warning in warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                node = warning.split(":")[0].removeprefix("node ")
                log.warning(warning, extra=kv(node=node) if " " not in node else {})
