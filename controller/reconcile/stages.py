"""One reconcile's order: the stages a worker goes through, as one table.

The reconciler reads the worker and the pod named for it, adds its finalizer
on first sight (``tracking.add_finalizer``), then walks ``STAGES`` below, top
to bottom: a stage applies when all its conditions (``When``) hold, and the
first that applies and concludes -- its step returns a ``Conclusion``; None
passes the worker on -- ends the walk. The ``REFINERS`` that follow that stage
then reword its conclusion, in their order. Each branch ends in a stage that
always concludes (``own pod`` for a worker with a pod, ``seat`` without). A
new rule is one row.

Rules, for every step:

* The reconciler walks the table holding the cache's lock, and nothing else
  of the reconcile takes it: every step reads the cache (``Context.cache``:
  objects by name, the fleet's reading) as one moment, and what the
  conclusion creates (a ``Write`` marked ``assumed``: the claim cut, the pod)
  is assumed into the cache before the lock goes, so the next decision sees
  the seat. A failed write forgets it again (writes.py).
* Steps read only the cache, never the API, and write nothing: every write a
  worker needs is in its conclusion, deletions included. A normal outcome is a
  return value, never an exception.
* What a stage finds for later ones goes on the ``Case``: the live claim a
  worker with no pod holds (read as the walk begins), its prepared template
  (the ``template`` stage, for ``seat`` and the refiners after it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from controller.k8s.naming import FINISHED_PHASES
from controller.k8s.objects import Obj, Worker
from controller.reconcile import admission, moves, moving, seating, standing, tracking
from controller.reconcile.vocabulary import Case, Conclusion, Context

__all__ = ["REFINERS", "STAGES", "Refiner", "Stage", "When", "conclude"]


class When(enum.Enum):
    """A condition a stage (or a refiner) applies under."""

    DELETING = "the worker is being deleted"
    FINISHED = "the worker is Failed or Succeeded"
    INVALID = "the worker's spec cannot be acted on"
    AUTOSCALING = "autoscaling is on"
    POD = "a pod is named for the worker"
    STANDING_POD = "that pod is a standing one (standing.py)"
    PINNED_POD = "that pod is pinned to a node (not a standing one)"
    NO_POD = "no pod is named for the worker"
    NO_SEAT = "no pod, and no live claim the worker holds"
    KUEUE = "team quotas through Kueue are on"
    QUEUED = "the worker is labelled with a Kueue queue (and team quotas are on)"

    def holds(self, ctx: Context, case: Case) -> bool:
        return _HOLDS[self](ctx, case)


_HOLDS: dict[When, Callable[[Context, Case], bool]] = {
    When.DELETING: lambda _, case: case.worker.deleting,
    When.FINISHED: lambda _, case: case.worker.phase in FINISHED_PHASES,
    When.INVALID: lambda _, case: bool(case.worker.spec_error),
    When.AUTOSCALING: lambda ctx, _: ctx.settings.autoscaling,
    When.POD: lambda _, case: case.pod is not None,
    When.STANDING_POD: lambda _, case: case.pod is not None and standing.is_standing(case.pod),
    When.PINNED_POD: lambda _, case: (case.pod is not None
                                      and not standing.is_standing(case.pod)),
    When.NO_POD: lambda _, case: case.pod is None,
    When.NO_SEAT: lambda _, case: case.pod is None and case.held is None,
    When.KUEUE: lambda ctx, _: ctx.settings.kueue,
    When.QUEUED: lambda ctx, case: admission.queued(ctx, case.worker),
}


@attrs.frozen
class Stage:
    """One row: under ``when`` (all of it), ``step`` may conclude for the worker."""

    name: str
    when: tuple[When, ...]
    step: Callable[[Context, Case], Conclusion | None]

    def applies(self, ctx: Context, case: Case) -> bool:
        return all(condition.holds(ctx, case) for condition in self.when)


@attrs.frozen
class Refiner:
    """One row: after stage ``after`` concluded, under ``when``, ``refine`` rewords it."""

    name: str
    after: str
    when: tuple[When, ...]
    refine: Callable[[Context, Case, Conclusion], Conclusion]

    def applies(self, ctx: Context, case: Case) -> bool:
        return all(condition.holds(ctx, case) for condition in self.when)


# The reconcile's order, first stage that concludes wins.
STAGES: tuple[Stage, ...] = (
    Stage("deleting", (When.DELETING,), tracking.finalize),
    Stage("finished", (When.FINISHED,), tracking.finished),
    Stage("invalid spec", (When.INVALID,), tracking.invalid_spec),
    Stage("not admitted", (When.QUEUED, When.POD), admission.stop),
    Stage("standing pod", (When.AUTOSCALING, When.STANDING_POD), standing.standing_pod),
    Stage("lost race", (When.AUTOSCALING, When.PINNED_POD), standing.lost_race),
    Stage("moved pod", (When.POD,), moves.moved_pod),
    Stage("moving", (When.POD,), moving.drain),
    Stage("own pod", (When.POD,), tracking.own_pod),
    Stage("standing claim left", (When.AUTOSCALING, When.NO_POD), standing.standing_claim_left),
    Stage("old seat back", (When.NO_POD,), moving.old_seat_back),
    Stage("seat given back", (When.NO_POD,), moves.give_seat_back),
    Stage("admission", (When.QUEUED, When.NO_POD), admission.admit),
    Stage("held back", (When.NO_SEAT,), moves.held_back),
    Stage("template", (When.NO_POD,), seating.template),
    Stage("seat", (When.NO_POD,), seating.seat),
)

# What rewords a stage's conclusion, in order.
REFINERS: tuple[Refiner, ...] = (
    Refiner("workload deleted", "deleting", (When.KUEUE,), admission.forget),
    Refiner("workload finished", "finished", (When.KUEUE,), admission.finish),
    Refiner("wedge due", "own pod", (), moves.back_when_wedged),
    Refiner("placed again", "seat", (), moves.placed_again),
    Refiner("moved", "seat", (), moving.moved),
    Refiner("stands instead", "seat", (When.AUTOSCALING,), standing.stand_instead),
)


def conclude(ctx: Context, worker: Worker, pod: Obj | None) -> Conclusion:
    """The worker's conclusion: the first stage that concludes, reworded by its refiners.
    Called by the reconciler holding the cache's lock (the module's first rule)."""
    case = Case(worker, pod, held=seating.held_claim(ctx, worker) if pod is None else None)
    for stage in STAGES:
        if not stage.applies(ctx, case):
            continue
        done = stage.step(ctx, case)
        if done is None:
            continue
        for refiner in REFINERS:
            if refiner.after == stage.name and refiner.applies(ctx, case):
                done = refiner.refine(ctx, case, done)
        return done
    raise AssertionError(f"no stage concluded for worker {worker.name}")  # see the docstring
