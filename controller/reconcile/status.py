"""The worker's status: phases, the Placed condition, reasons, and when to write.

Rules:

* Phases: ``Pending`` (no seat yet; the reason is placement's, and its kind
  tells "never" (NoCapacity) from "not yet" (WaitingForCapacity); or a seat
  kept, with ``claimName``, while the worker waits for its pod template),
  ``Placing`` (claim and pod exist, the pod is not running yet), ``Running``
  (the pod runs), ``Succeeded`` (its pod completed; terminal), ``Failed``
  (InvalidSpec, TemplateError, PodConflict, PodFailed, Unsatisfiable,
  Unschedulable; terminal). A placed worker whose claim is being deleted
  keeps its phase, with reason ``ClaimDeleting``; one whose node is not ready
  keeps it with ``NodeNotReady``. A worker being placed again is Pending with
  the move's kind (``NodeLost``, ``NodeNotReady``, ``PodWedged``,
  ``DeviceConflict``) until it is placed, or ``PlacedTooOften``
  (controller.reconcile.moves).
* ``moves`` lists the worker's latest moves (when, why, from which node and
  claim), newest last; an outcome that says nothing of them keeps them.
  ``move`` is the move for efficiency under way (moving.py): only the
  steps carrying it out keep it, any other outcome ends it.
* ``status.reason`` reads ``<Kind>: <detail>``; the ``Placed`` condition
  carries the kind as its reason and the detail as its message. Placed is
  True in Placing and Running.
* ``nodeName`` is set only once the claim's allocation has been observed.
* A status is written only when something other than a timestamp changed; a
  condition keeps its ``lastTransitionTime`` while its status holds.
* An Event is recorded when the phase changes, or the reason's kind while pending,
  or when a warning kind appears on a placed worker.
"""

from __future__ import annotations

import datetime as dt

from controller.k8s.naming import CONDITION_PLACED, WARNING_REASONS, WorkerPhase
from controller.k8s.objects import Obj, Worker, format_time, parse_time
from controller.reconcile.vocabulary import Outcome
from placement.quantity import format_quantity


def desired(worker: Worker, outcome: Outcome, now: dt.datetime) -> Obj:
    """The full status ``outcome`` means for ``worker`` (keys with None are removed)."""
    old = worker.status
    placed = outcome.phase in (WorkerPhase.PLACING, WorkerPhase.RUNNING)
    condition = {
        "type": CONDITION_PLACED,
        "status": "True" if placed else "False",
        "reason": outcome.kind or outcome.phase,
        "message": outcome.detail or outcome.reason or outcome.phase,
        "observedGeneration": worker.generation,
        "lastTransitionTime": format_time(now),
    }
    for previous in old.get("conditions") or []:
        same = previous.get("status") == condition["status"]
        if previous.get("type") == CONDITION_PLACED and same:
            condition["lastTransitionTime"] = previous.get("lastTransitionTime",
                                                           condition["lastTransitionTime"])
    share = outcome.memory_per_device
    shared_parks = worker.memory if outcome.claim else None
    return {
        "phase": outcome.phase,
        "reason": outcome.reason or None,
        "claimName": outcome.claim or None,
        "podName": outcome.pod or None,
        "nodeName": outcome.node or None,
        "deviceCount": outcome.devices,
        "memoryPerDevice": format_quantity(share) if share else None,
        # What the worker parks in host RAM whenever its claim's other worker is resident.
        "hostMemoryWhenParked": format_quantity(shared_parks) if shared_parks else None,
        "estimatorVersion": worker.estimator_version or None,
        "observedGeneration": worker.generation,
        "conditions": [condition],
        "moves": (list(outcome.moves) if outcome.moves is not None
                  else old.get("moves")) or None,
        "move": dict(outcome.move) if outcome.move else None,
    }


def _comparable(status: Obj) -> Obj:
    out = {k: v for k, v in status.items() if v is not None and k != "conditions"}
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return out


def changed(worker: Worker, new: Obj) -> bool:
    return _comparable(worker.status) != _comparable(new)


def patch_body(new: Obj) -> Obj:
    """A merge patch replacing the whole status (None deletes a key)."""
    return {"status": new}


def transition(worker: Worker, outcome: Outcome) -> bool:
    """Whether this outcome is news worth an Event: a new phase, or a new reason kind while
    pending (NoCapacity turning into WaitingForCapacity is news; a pod starting is not)."""
    if worker.phase != outcome.phase:
        return True
    old_kind = ""
    for cond in worker.status.get("conditions") or []:
        if cond.get("type") == CONDITION_PLACED:
            old_kind = str(cond.get("reason") or "")
    if outcome.phase != WorkerPhase.PENDING:
        # A warning appearing on a placed worker (its claim being deleted) is news too.
        return outcome.kind in WARNING_REASONS and old_kind != outcome.kind
    return old_kind != (outcome.kind or outcome.phase)


def event_type(outcome: Outcome) -> str:
    return "Warning" if outcome.kind in WARNING_REASONS else "Normal"


def waits_ended(worker: Worker, new: Obj, now: dt.datetime) -> tuple[float | None, float | None]:
    """Which waits a status write ends, in seconds: (creation -> first seat, seat -> Running).

    The seat wait ends when a worker first enters Placing or Running; the start wait
    when it enters Running, measured from the moment its ``Placed`` condition turned
    True (the same write, when the pod ran before Placing was ever written: 0).
    """
    seated = (WorkerPhase.PLACING, WorkerPhase.RUNNING)
    old, phase = worker.phase, new.get("phase")
    seat = start = None
    if phase in seated and old not in seated:
        seat = (now - worker.created).total_seconds()
    if phase == WorkerPhase.RUNNING and old != WorkerPhase.RUNNING:
        since = now
        if old in seated:
            for cond in worker.status.get("conditions") or []:
                if cond.get("type") == CONDITION_PLACED and cond.get("status") == "True":
                    since = parse_time(cond.get("lastTransitionTime")) or now
        start = (now - since).total_seconds()
    return seat, start
