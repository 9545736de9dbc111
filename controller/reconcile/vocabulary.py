"""The reconcile's shared words: what a stage reads, what it concludes, the writes it plans.

Every stage of the reconcile (``stages.STAGES``) is a function of a ``Context``
and a ``Case`` that returns a ``Conclusion``, or None to pass the worker on.
These are the types every stage, the reconciler and the write pool share; they
live here, below every step, so that no step imports another for its words.

  word         what it holds
  -----------  -------------------------------------------------------------------------
  Context      what every stage reads besides the worker: the cache as a
               ``CacheReading`` (objects by name, the fleet's reading; never its
               lock), the settings, the namespace, the time
  Case         the worker at hand: the worker, the pod named for it, the live claim
               it holds when it has no pod, its prepared template once read
  Conclusion   the ``Outcome`` a stage came to, the writes (``Write``) it needs, in
               order, and when to come back
  Outcome      the status a conclusion means (status.py turns it into one)
  Write        one planned API write: nothing is written while deciding
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol

import attrs

from controller.fleet.claims import ClaimView
from controller.fleet.rules import FleetReading
from controller.k8s import kube
from controller.k8s.naming import WorkerPhase
from controller.k8s.objects import Obj, Worker, name_of, uid_of
from controller.settings import Settings

__all__ = ["CacheReading", "Case", "Conclusion", "Context", "Outcome", "Write", "claim_to_cut",
           "delete_pod"]


class CacheReading(Protocol):
    """What a stage reads of the cache: objects by name, and the fleet's reading. The
    lock is the reconciler's (stages.py's rule), so a stage is never handed it."""

    def get(self, res: kube.Resource, name: str) -> Obj | None: ...
    @property
    def view(self) -> FleetReading: ...


@attrs.frozen
class Context:
    """What every stage reads besides the worker: the cache, the settings, the time."""

    cache: CacheReading
    settings: Settings
    namespace: str
    now: dt.datetime


@attrs.define
class Case:
    """The worker at hand as the stages see it. The ``template`` stage leaves the
    prepared template here for the ``seat`` stage and the refiners after it."""

    worker: Worker
    pod: Obj | None = None  # the pod named for the worker (orw-<name>), if there is one
    held: ClaimView | None = None  # no pod: the live claim it already holds
    prepared: Obj | None = None  # its template, prepared (``seating.template``)


@attrs.frozen
class Outcome:
    """What one reconcile concluded about a worker."""

    phase: WorkerPhase
    kind: str = ""  # a naming.ReasonKind, or "" (Running carries no reason)
    detail: str = ""
    claim: str = ""
    devices: int | None = None
    memory_per_device: int | None = None
    node: str = ""
    pod: str = ""
    moves: tuple[Obj, ...] | None = None  # the status's moves; None: as they are
    move: Obj | None = None  # the move for efficiency under way; None: none (cleared)

    @property
    def reason(self) -> str:
        if not self.kind:
            return ""
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


@attrs.frozen
class Write:
    verb: str  # create | patch | delete
    res: kube.Resource
    name: str
    body: Obj
    subresource: str | None = None
    assumed: bool = False  # the body goes into the cache before it is written
    uid: str = ""  # a delete's preconditions: only this incarnation of the object,
    resource_version: str = ""  # and (if given) only as it was read


@attrs.frozen
class Conclusion:
    """What a stage concluded for its worker."""

    outcome: Outcome | None = None  # the status it means; None: the status stays
    writes: tuple[Write, ...] = ()  # planned before the status, in order
    requeue_after: float | None = None
    wake: bool = False  # capacity changed: retry every pending worker
    sweep: bool = False  # a claim may have lost its last reference
    decided: str = ""  # a decision's outcome, for the decisions metric


def claim_to_cut(view: FleetReading, worker: Worker) -> str | None:
    """The name a new claim for ``worker`` takes: the first of its two (``own_claims``)
    that no claim bears, closing ones included; None while both are taken."""
    for name in worker.own_claims:
        if name not in view.claims and name not in view.closing:
            return name
    return None


def delete_pod(pod: Obj) -> Write:
    """The delete of this incarnation of a pod (its UID a precondition)."""
    return Write("delete", kube.PODS, name_of(pod), {}, uid=uid_of(pod))
