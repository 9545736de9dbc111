"""A worker's Kueue Workload: the object written for it, and what its status says.

Kueue admits work it does not run through a ``Workload`` that the work's own
controller writes (Kueue's external-framework protocol); ``admission.py``
carries that protocol out. Here is the object and its reading.

The Workload written for a queue-labelled worker:

  field                       value
  --------------------------  ---------------------------------------------------------
  name                        ``openrlworker-<worker>-<hash of name and UID>``
  owner                       the worker (controller reference: Kubernetes collects it
                              with the worker, and Kueue knows whose it is)
  label kueue.x-k8s.io/       the worker's UID, as Kueue's own jobs label theirs
    job-uid
  spec.queueName              the worker's ``kueue.x-k8s.io/queue-name`` label
  spec.podSets                one pod set ``main`` of one pod, one container ``worker``
                              requesting ``openrl.io/accelerator-memory`` = the worker's
                              memory estimate; no resource claims (Kueue counts the
                              quota, placement chooses the devices)
  spec.priorityClassRef,      the WorkloadPriorityClass the worker's
    spec.priority             ``kueue.x-k8s.io/priority-class`` label names, and its value

What its status means (``Admission``, read from its conditions):

  conditions                              state        the worker
  --------------------------------------  -----------  ----------------------------------
  Finished=True                           FINISHED     nothing more is asked of Kueue
  Evicted=True, QuotaReserved=True        EVICTED      stopped, then its quota handed back
  Admitted=True                           ADMITTED     may be placed (and stay placed)
  anything else                           WAITING      waits, in Kueue's words

Handing the quota back (Kueue charges an evicted Workload's quota until its
controller says its pods are gone) is one status write: QuotaReserved=False
(reason ``Pending``), the admission cleared, Admitted=False, and Requeued, true
where Kueue evicted it for preemption or lost nodes (it is queued again at
once), as Kueue's own job controllers write it.
"""

from __future__ import annotations

import datetime as dt
import enum

import attrs

from controller.k8s import naming
from controller.k8s.objects import Obj, Worker, format_time, labels_of, meta, name_of
from placement.quantity import format_quantity

__all__ = ["Admission", "State", "build", "finish", "hand_back", "priority_class_of",
           "queue_of", "read", "why_waiting"]

API_VERSION = "kueue.x-k8s.io/v1beta2"
POD_SET = "main"
# The evictions after which Kueue queues the Workload again at once (Requeued=True).
_REQUEUED = frozenset({"Preempted", "NodeFailures"})


class State(enum.Enum):
    WAITING = "waiting for admission"
    ADMITTED = "admitted"
    EVICTED = "evicted"
    FINISHED = "finished"


@attrs.frozen
class Admission:
    """A Workload as read: its state, its queue, and Kueue's own words."""

    name: str
    state: State
    queue: str
    cluster_queue: str = ""  # the ClusterQueue that reserved its quota, if any
    reason: str = ""  # the deciding condition's reason (an eviction's: Preempted, ...)
    message: str = ""  # Kueue's words for it


def _conditions(workload: Obj) -> dict[str, Obj]:
    return {str(c.get("type")): c for c in (workload.get("status") or {}).get("conditions") or []
            if isinstance(c, dict)}


def _true(cond: Obj | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def read(workload: Obj) -> Admission:
    """What a Workload's status says (the module's second table)."""
    conds = _conditions(workload)
    queue = str((workload.get("spec") or {}).get("queueName") or "")
    admission = (workload.get("status") or {}).get("admission") or {}
    cluster_queue = str(admission.get("clusterQueue") or "")
    name = name_of(workload)

    def said(kind: str, state: State) -> Admission:
        cond = conds.get(kind) or {}
        return Admission(name, state, queue, cluster_queue, str(cond.get("reason") or ""),
                         str(cond.get("message") or ""))

    if _true(conds.get("Finished")):
        return said("Finished", State.FINISHED)
    if _true(conds.get("Evicted")) and _true(conds.get("QuotaReserved")):
        return said("Evicted", State.EVICTED)
    if _true(conds.get("Admitted")) and not _true(conds.get("Evicted")):
        return said("Admitted", State.ADMITTED)
    if _true(conds.get("Evicted")):  # evicted, its quota handed back: queued again
        return said("Evicted", State.WAITING)
    if _true(conds.get("QuotaReserved")):  # reserved, admission checks not all ready
        return said("Admitted", State.WAITING)
    return said("QuotaReserved", State.WAITING)


def why_waiting(found: Admission) -> str:
    """Kueue's reason for not admitting it, in its own words."""
    said = ": ".join(p for p in (found.reason, found.message) if p)
    return said or "Kueue has not looked at it yet"


def build(worker: Worker, name: str, *, namespace: str, queue: str,
          priority: tuple[str, int] | None) -> Obj:
    """The Workload for ``worker`` (the module's first table); ``priority``: the
    WorkloadPriorityClass its label names and that class's value."""
    spec: Obj = {
        "queueName": queue,
        "podSets": [{
            "name": POD_SET,
            "count": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": naming.WORKER_CONTAINER,
                "resources": {"requests": {
                    naming.ACCELERATOR_MEMORY: format_quantity(worker.memory)}},
            }]}},
        }],
    }
    if priority is not None:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                    "name": priority[0]}
        spec["priority"] = priority[1]
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {naming.LABEL_JOB_UID: worker.uid},
            "ownerReferences": [naming.owner_reference(worker.obj)],
        },
        "spec": spec,
    }


def _condition(kind: str, status: bool, reason: str, message: str, now: dt.datetime,
               generation: int) -> Obj:
    return {"type": kind, "status": "True" if status else "False", "reason": reason,
            "message": message[:32768], "lastTransitionTime": format_time(now),
            "observedGeneration": generation}


def _with(workload: Obj, now: dt.datetime, *new: Obj) -> list[Obj]:
    """The Workload's conditions with ``new`` set: a condition whose status stays keeps
    its transition time, as Kubernetes' own condition helpers keep it."""
    conds = [dict(c) for c in (workload.get("status") or {}).get("conditions") or []
             if isinstance(c, dict)]
    for cond in new:
        old = next((c for c in conds if c.get("type") == cond["type"]), None)
        if old is None:
            conds.append(cond)
            continue
        if old.get("status") == cond["status"]:
            cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime")
                    or cond["lastTransitionTime"]}
        conds[conds.index(old)] = cond
    return conds


def _status_patch(workload: Obj, status: Obj) -> Obj:
    # On the version read: a Workload Kueue changed since is read again before writing.
    return {"metadata": {"resourceVersion": meta(workload).get("resourceVersion")},
            "status": status}


def hand_back(workload: Obj, found: Admission, now: dt.datetime) -> Obj:
    """The status patch that hands an evicted Workload's quota back (the module's last
    paragraph)."""
    generation = int(meta(workload).get("generation") or 0)
    conds = _with(
        workload, now,
        _condition("Requeued", found.reason in _REQUEUED, found.reason or "Evicted",
                   found.message, now, generation),
        _condition("QuotaReserved", False, "Pending", found.message, now, generation),
        _condition("Admitted", False, "NoReservation", "The workload has no reservation", now,
                   generation))
    return _status_patch(workload, {"conditions": conds, "admission": None})


def finish(workload: Obj, *, succeeded: bool, message: str, now: dt.datetime) -> Obj:
    """The status patch that finishes a Workload (its quota released) as its worker did."""
    generation = int(meta(workload).get("generation") or 0)
    conds = _with(workload, now, _condition(
        "Finished", True, "Succeeded" if succeeded else "Failed", message or
        ("the worker succeeded" if succeeded else "the worker failed"), now, generation))
    return _status_patch(workload, {"conditions": conds})


def queue_of(worker: Worker) -> str:
    """The LocalQueue a worker asks for ('' : none, it is placed as any worker)."""
    return str(labels_of(worker.obj).get(naming.LABEL_QUEUE) or "")


def priority_class_of(worker: Worker) -> str:
    return str(labels_of(worker.obj).get(naming.LABEL_PRIORITY_CLASS) or "")

