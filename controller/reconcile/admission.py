"""Team quotas through Kueue: a queue-labelled worker is placed only while Kueue admits it.

With ``settings.kueue`` on, a worker labelled ``kueue.x-k8s.io/queue-name``
queues with a Kueue ``Workload`` the scheduler writes for it (workloads.py has
the object). Kueue decides, by its queues' quotas, cohorts and preemption,
whether the worker may hold devices at all; placement still decides where.
Two rows of the stages' table (stages.py) and two refiners carry the protocol
out, each a function below:

  the worker                               its step                   writes
  ---------------------------------------  -------------------------  -------------------------
  no pod, no seat, no Workload (``admit``) its Workload written       the Workload
  no pod, no seat, Workload waiting        waits: Queued, naming its  none
                                           queue and Kueue's words
  no pod, no seat, Workload admitted       placed as any worker       (the later stages')
  a live pod (a standing one too),         its pod stopped            the pod's delete
    Workload not admitted (evicted, gone,
    waiting) (``stop``)
  no pod, a seat, not admitted (``admit``) its seat given back        its own claim deleted (if
                                                                      nobody else sits on it),
                                                                      else off the booked list;
                                                                      status.claimName cleared
  no pod, no seat, Workload evicted with   its quota handed back:     the Workload's status
    its quota still reserved (``admit``)   Kueue queues it again
  Succeeded or Failed (``finish``,         its Workload finished, as  the Workload's status
    after the ``finished`` stage)          the worker ended
  deleted, its pod gone (``forget``,       its Workload deleted       the Workload's delete
    after the ``deleting`` stage)

Rules:

* Kueue's protocol fixes the order of an eviction: the pod first, then the
  seat (once no pod can hold the device), and only then the quota; until the
  Workload says its quota is handed back, Kueue counts it against the queue,
  so whoever preempted the worker waits for the devices to be free.
* A labelled worker runs only while its Workload is admitted: a Workload
  missing, waiting or evicted stops its pod; turning ``kueue`` on therefore
  stops the labelled workers already running until Kueue admits them.
* The Workload asks for the worker's memory estimate, whatever claim it ends
  up on: sharing a claim never changes what a team is charged.
* Workers without the label, or with ``kueue`` off, pass straight on.
* A priority class the label names must exist (as a WorkloadPriorityClass):
  until it does, the worker waits, saying so, and no Workload is written.
"""

from __future__ import annotations

import logging

import attrs

from controller.k8s import kube, naming
from controller.k8s.logs import kv
from controller.k8s.naming import FINISHED_PHASES, ReasonKind, WorkerPhase
from controller.k8s.objects import (
    Obj,
    Worker,
    is_deleting,
    name_of,
    pod_alive,
    uid_of,
    worker_owner_uid,
)
from controller.reconcile import moves, workloads
from controller.reconcile.vocabulary import Case, Conclusion, Context, Outcome, Write, delete_pod
from controller.reconcile.workloads import Admission, State

__all__ = ["ANSWER_WAIT", "admit", "finish", "forget", "queued", "stop"]

log = logging.getLogger("openrl.controller")

# A Workload just written is looked at again this long after, if Kueue has not answered
# by then (its answer wakes the worker first): its status then says it waits. Kueue says
# nothing of a Workload it can admit until it does, and in a burst of 800 it took 20-30 s
# to reach the last: at 5 s, half to four fifths of a burst's workers got a status and an
# Event saying they waited, two writes each that the admission made stale at once.
ANSWER_WAIT = 30.0


def queued(ctx: Context, worker: Worker) -> bool:
    """Whether the worker's placement waits on Kueue (the module's last rules)."""
    return ctx.settings.kueue and bool(workloads.queue_of(worker))


def _workload(ctx: Context, worker: Worker) -> Obj | None:
    return ctx.cache.get(kube.WORKLOADS, naming.workload_name(worker.name, worker.uid))


def _evicted_words(found: Admission) -> str:
    return f"Kueue evicted its Workload {found.name} ({workloads.why_waiting(found)})"


def _not_admitted(found: Admission | None, name: str) -> str:
    if found is None:
        return f"its Workload {name} is gone"
    if found.state is State.EVICTED:
        return _evicted_words(found)
    if found.state is State.FINISHED:
        return f"its Workload {found.name} is finished"
    return f"Kueue no longer admits its Workload {found.name} ({workloads.why_waiting(found)})"


def stop(ctx: Context, case: Case) -> Conclusion | None:
    """A labelled worker's pod while its Workload is not admitted: stopped. None: admitted,
    or not its pod (the later stages say)."""
    worker, pod = case.worker, case.pod
    if pod is None or worker_owner_uid(pod) != worker.uid or not queued(ctx, worker) \
            or not pod_alive(pod):
        return None  # a pod that ended is the later stages' (it succeeded, or it failed)
    obj = _workload(ctx, worker)
    found = workloads.read(obj) if obj is not None else None
    if found is not None and found.state is State.ADMITTED:
        return None
    why = _not_admitted(found, naming.workload_name(worker.name, worker.uid))
    if is_deleting(pod):
        return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.EVICTED,
                                  f"{why}: its pod {name_of(pod)} is stopping"),
                          requeue_after=ctx.settings.retry_interval)
    log.info("stopping pod of a worker Kueue does not admit",
             extra=kv(worker=worker.name, pod=name_of(pod), why=why))
    return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.EVICTED,
                              f"{why}: its pod {name_of(pod)} is stopped"),
                      (delete_pod(pod),), requeue_after=ctx.settings.retry_interval)


def admit(ctx: Context, case: Case) -> Conclusion | None:
    """A labelled worker without a pod: its Workload written, its seat and quota handed
    back after an eviction, or its wait for admission said (the module's table). None:
    admitted, or not labelled: the later stages place it."""
    worker = case.worker
    if not queued(ctx, worker):
        return None
    name = naming.workload_name(worker.name, worker.uid)
    obj = _workload(ctx, worker)
    found = workloads.read(obj) if obj is not None else None
    if found is not None and found.state is State.ADMITTED:
        return None
    seat = ctx.cache.view.bookings.get(worker.name)
    if seat is not None:
        return _give_seat_back(ctx, worker, seat.claim, _not_admitted(found, name))
    if obj is None or found is None:
        return _write(ctx, worker, name)
    if found.state is State.EVICTED:
        body = workloads.hand_back(obj, found, ctx.now)
        return Conclusion(Outcome(
            WorkerPhase.PENDING, ReasonKind.EVICTED,
            f"{_evicted_words(found)}: its pod is gone and its seat given back; its quota is "
            f"handed back and it waits in queue {found.queue} again"),
            (Write("patch", kube.WORKLOADS, name, body, subresource="status"),))
    return Conclusion(Outcome(
        WorkerPhase.PENDING, ReasonKind.QUEUED,
        f"waiting for Kueue to admit its Workload {name} in queue {found.queue}: "
        f"{workloads.why_waiting(found)}"))


def _give_seat_back(ctx: Context, worker: Worker, claim: str, why: str) -> Conclusion:
    """The seat of a worker Kueue does not admit, now that no pod of it can hold the
    device: its own claim deleted where nobody else sits on it, else off the claim's
    booked list; the status no longer names the claim."""
    view = ctx.cache.view
    held = view.claims.get(claim) or view.closing.get(claim)
    writes = () if held is None else moves.release(ctx, worker, held, others_on_own="leave")
    return Conclusion(Outcome(WorkerPhase.PENDING, ReasonKind.EVICTED,
                              f"{why}: its seat on claim {claim} is given back"),
                      writes, requeue_after=1.0, wake=True, sweep=True)


def _write(ctx: Context, worker: Worker, name: str) -> Conclusion:
    """The Workload written for a worker that has none (the module's first row)."""
    queue = workloads.queue_of(worker)
    priority: tuple[str, int] | None = None
    wanted = workloads.priority_class_of(worker)
    if wanted:
        found = ctx.cache.get(kube.PRIORITY_CLASSES, wanted)
        value = (found or {}).get("value")
        if found is None or type(value) is not int:
            return Conclusion(Outcome(
                WorkerPhase.PENDING, ReasonKind.QUEUED,
                f"its label {naming.LABEL_PRIORITY_CLASS}={wanted} names no "
                "WorkloadPriorityClass; it is queued once that class exists"),
                requeue_after=ctx.settings.retry_interval)
        priority = (wanted, value)
    body = workloads.build(worker, name, namespace=ctx.namespace, queue=queue,
                           priority=priority)
    log.info("queued with Kueue", extra=kv(worker=worker.name, workload=name, queue=queue))
    # The status stays as it is: Kueue usually answers at once, and its answer (the
    # Workload's status) wakes the worker; only a slow answer is worth a status write.
    return Conclusion(writes=(Write("create", kube.WORKLOADS, name, body, assumed=True),),
                      requeue_after=ANSWER_WAIT)


def finish(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """After the ``finished`` stage: a finished worker finishes its Workload too (Kueue
    releases its quota)."""
    worker = case.worker
    obj = _workload(ctx, worker) if ctx.settings.kueue else None
    if obj is None or workloads.read(obj).state is State.FINISHED \
            or worker.phase not in FINISHED_PHASES:
        return done
    body = workloads.finish(obj, succeeded=worker.phase == WorkerPhase.SUCCEEDED,
                            message=str(worker.status.get("reason") or ""), now=ctx.now)
    write = Write("patch", kube.WORKLOADS, name_of(obj), body, subresource="status")
    return attrs.evolve(done, writes=(*done.writes, write))


def forget(ctx: Context, case: Case, done: Conclusion) -> Conclusion:
    """After the ``deleting`` stage: once the deleted worker's pod is gone (its quota was
    held until then), its Workload goes before its finalizer does."""
    worker, pod = case.worker, case.pod
    obj = _workload(ctx, worker) if ctx.settings.kueue else None
    if obj is None or is_deleting(obj) or (pod is not None
                                           and worker_owner_uid(pod) == worker.uid):
        return done
    write = Write("delete", kube.WORKLOADS, name_of(obj), {}, uid=uid_of(obj))
    return attrs.evolve(done, writes=(write, *done.writes))
