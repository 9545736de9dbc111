"""Carrying decisions out: each reconcile's writes as one plan, plans on a bounded pool.

Rules:

* A reconcile decides against the cache and puts what it creates there at
  once (assumed); its API writes -- deletions included -- then go out as one
  plan, in order (the finalizer before the claim, the claim before the pod,
  the pod before the status), while the loop moves on to the next decision.
  At most ``concurrency`` plans are in flight; a further one waits for a free
  slot.
* Every answer replaces the cache's copy of the object (``confirm``). When a
  write fails, ``ON_FAILURE`` below says what happens, read top to bottom,
  first row that matches: the plan goes on (a delete of something already
  gone), or it stops there -- the assumptions of the failed write and of
  every write after it are dropped (``forget``), which gives their seat back
  -- and the worker's ``Verdict`` goes to the loop: retry with back-off,
  soon, or drop.
* Two rows finish the worker's story inside the plan itself, with the step
  its reconcile left in it (``Plan.settle``, ``Plan.refused``): a pod that
  already exists is read once and settled (whose is it?), and a pod the API
  server refuses fails its worker. Their follow-up writes (a status, an
  Event) run in the same plan, never through the loop.
* A write that fails in any other way -- an error the API layer does not
  wrap, a crash inside the plan or its follow-up -- is handled like the
  table's last row: the assumptions of it and of every write after it are
  dropped and the worker is retried with back-off. A plan that cannot even
  start (the pool shut down) drops all of its assumptions. Whatever else
  slips through, ``Cache.expire`` forgets once its deadline passes; the
  writer says which assumptions still have a plan in flight
  (``assumed_in_flight``), and those are never expired.
* ``fence`` runs before every write: a replica that may no longer lead must
  not write at all, however far its plans had got.
* A plan's best-effort tail (Events) runs after its writes; its failures are
  only logged.
* With ``concurrency`` 0 plans run inline, in the caller's thread (tests).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import attrs

from controller.k8s import kube
from controller.k8s.logs import kv
from controller.k8s.objects import Obj
from controller.reconcile.vocabulary import Write
from controller.store.cache import Cache

__all__ = ["CONCURRENCY", "ON_FAILURE", "Failure", "NotLeading", "Plan", "Then", "Verdict",
           "Writer", "after_failure"]

log = logging.getLogger("openrl.controller.writes")

# Plans in flight at once, as the loop runs the pool (loop.WRITE_CONCURRENCY, design.md).
CONCURRENCY = 16


class NotLeading(kube.KubeError):
    """This replica may no longer lead: it must not write."""


class Verdict(enum.Enum):
    """What the loop does with a worker whose plan failed."""

    RETRY = "retry"  # again, with back-off
    SOON = "soon"  # again after a short pause: a read behind a newer write
    DROP = "drop"  # not again: gone, failed for good, or no longer ours to act on


class Then(enum.Enum):
    """What the writer does about one failed write, short of a verdict."""

    GO_ON = "go on"  # the failure is what the write wanted: carry on with the plan
    SETTLE = "settle"  # read what is there, and let the plan's settle step say what it means
    REFUSED = "refused"  # the plan's refusal step says what its worker becomes


@attrs.frozen
class Failure:
    """One row: a failed write of this verb and resource with this error means ``then``."""

    verb: str | None  # None: any verb
    res: kube.Resource | None  # None: any resource
    error: type[kube.KubeError]
    then: Verdict | Then
    why: str
    says: str = ""  # the error's message must say this too

    def matches(self, write: Write, error: kube.KubeError) -> bool:
        return ((self.verb is None or self.verb == write.verb)
                and (self.res is None or self.res == write.res)
                and isinstance(error, self.error) and self.says in error.message)


# What a failed write means for its worker, first matching row wins.
ON_FAILURE: tuple[Failure, ...] = (
    Failure(None, None, NotLeading, Verdict.DROP,
            "this replica may no longer lead: it writes nothing more"),
    Failure(None, kube.WORKERS, kube.NotFound, Verdict.DROP, "the worker is gone"),
    Failure("delete", None, kube.NotFound, Then.GO_ON, "gone already: what the delete wanted"),
    Failure("delete", kube.CLAIMS, kube.Conflict, Then.GO_ON,
            "the sweep's claim changed since it was read: left for the next sweep"),
    Failure("create", kube.PODS, kube.AlreadyExists, Then.SETTLE,
            "created since we looked, or not a pod the cache holds (not managed by us): "
            "read it once and settle whose it is"),
    Failure("create", kube.PODS, kube.Invalid, Then.REFUSED,
            "the API server refused the rendered pod (a field it rejects): the template's "
            "doing, which retrying cannot fix; a claim cut for it is left to the sweep"),
    Failure("create", kube.PODS, kube.Forbidden, Then.REFUSED,
            "Pod Security admission refused the rendered pod: likewise", says="PodSecurity"),
    # A worker pod on a node that may share claims asks for its memory estimate
    # (reconcile.parking): a namespace's bounds can refuse that where they took the
    # template's own request. Neither passes by retrying: the worker fails, saying so.
    Failure("create", kube.PODS, kube.Forbidden, Then.REFUSED,
            "a LimitRange refused the pod's memory (above its per-container or per-pod "
            "maximum)", says="maximum memory usage"),
    Failure("create", kube.PODS, kube.Forbidden, Then.REFUSED,
            "a ResourceQuota refused the pod (its memory, or anything else, past the "
            "namespace's quota)", says="exceeded quota"),
    Failure("create", kube.WORKLOADS, kube.AlreadyExists, Verdict.SOON,
            "a Workload written before the cache saw it (an earlier reconcile, a replica "
            "before this one): its watch brings it"),
    Failure(None, None, kube.Conflict, Verdict.SOON,
            "someone changed the object since we read it: decide again shortly"),
    Failure(None, None, kube.KubeError, Verdict.RETRY, "anything else: again, with back-off"),
)


def after_failure(write: Write, error: kube.KubeError) -> Verdict | Then:
    for row in ON_FAILURE:
        if row.matches(write, error):
            return row.then
    return Verdict.RETRY


# A follow-up the plan carries for its pod: the writes it leads to, and the verdict.
FollowUp = tuple["Plan", Verdict]


@attrs.define
class Plan:
    key: str
    writes: list[Write] = attrs.Factory(list)
    after: list[Callable[[], None]] = attrs.Factory(list)
    # The pod already exists: given what a read found there (None: gone again).
    settle: Callable[[Obj | None], FollowUp] | None = None
    # The API server refused the pod itself.
    refused: Callable[[kube.KubeError], FollowUp] | None = None
    # How many of ``writes`` have been answered (or passed over): the rest are unresolved.
    landed: int = 0

    def assumed(self) -> list[tuple[str, str]]:
        """(plural, name) of the writes whose bodies are assumed into the cache."""
        return [(w.res.plural, w.name) for w in self.writes if w.assumed]

    def __bool__(self) -> bool:
        return bool(self.writes or self.after)


# The plan's key, the write that failed and why (None, None: all landed), and the verdict.
Done = Callable[[str, Write | None, kube.KubeError | None, Verdict | None], None]


class Writer:
    def __init__(self, api: kube.Kube, cache: Cache, *, concurrency: int = CONCURRENCY,
                 fence: Callable[[], None] = lambda: None,
                 done: Done = lambda _key, _write, _error, _verdict: None) -> None:
        self.api, self.cache, self.fence, self.done = api, cache, fence, done
        self.concurrency = concurrency
        self._pool = (ThreadPoolExecutor(concurrency, thread_name_prefix="write")
                      if concurrency else None)
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._assumed: Counter[tuple[str, str]] = Counter()  # of the plans in flight

    def busy(self, key: str) -> bool:
        with self._lock:
            return key in self._busy

    def in_flight(self) -> int:
        with self._lock:
            return len(self._busy)

    def assumed_in_flight(self) -> set[tuple[str, str]]:
        """(plural, name) of every assumption a plan still in flight will resolve."""
        with self._lock:
            return set(self._assumed)

    def submit(self, plan: Plan) -> None:
        if not plan:
            return
        with self._lock:
            self._busy.add(plan.key)
            self._assumed.update(plan.assumed())
        if self._pool is None:
            self._run(plan)
            return
        self._slots.acquire()
        try:
            self._pool.submit(self._run, plan)
        except RuntimeError:  # shut down meanwhile: none of it will be written
            self._slots.release()
            self._forget(plan.writes)
            self._release(plan)

    def close(self, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)

    def _run(self, plan: Plan) -> None:
        failed: Write | None = None
        error: kube.KubeError | None = None
        verdict: Verdict | None = None
        try:
            failed, error, verdict = self._carry_out(plan)
        except Exception as exc:  # never lose a key, nor a seat: report it as failed
            log.exception("plan crashed", extra=kv(key=plan.key))
            self._forget(plan.writes[plan.landed:])
            failed = plan.writes[min(plan.landed, len(plan.writes) - 1)] if plan.writes else None
            error, verdict = kube.KubeError(0, "Crashed", f"{type(exc).__name__}: {exc}"), \
                Verdict.RETRY
        finally:
            self._release(plan)
            if self._pool is not None:
                self._slots.release()
            self.done(plan.key, failed, error, verdict)

    def _forget(self, writes: list[Write]) -> None:
        for write in writes:
            if write.assumed:
                self.cache.forget(write.res, write.name)

    def _release(self, plan: Plan) -> None:
        with self._lock:
            self._busy.discard(plan.key)
            for key in plan.assumed():
                self._assumed[key] -= 1
                if self._assumed[key] <= 0:
                    del self._assumed[key]

    def _carry_out(self, plan: Plan) -> tuple[Write | None, kube.KubeError | None,
                                              Verdict | None]:
        """Send the plan's writes in order; at a failure, do what ``ON_FAILURE`` says."""
        for index, write in enumerate(plan.writes):
            try:
                self.fence()
                answer = self._send(write)
            except kube.KubeError as exc:
                then = after_failure(write, exc)
                if then is Then.GO_ON:
                    plan.landed = index + 1
                    continue
                self._forget(plan.writes[index:])
                plan.landed = len(plan.writes)  # resolved: nothing left to forget
                if then is Then.SETTLE or then is Then.REFUSED:
                    return write, exc, self._follow_up(plan, write, exc, then)
                assert isinstance(then, Verdict)
                return write, exc, then
            if answer is not None:
                self.cache.confirm(write.res, answer)
            plan.landed = index + 1
        self._tail(plan)
        return None, None, None

    def _follow_up(self, plan: Plan, write: Write, error: kube.KubeError,
                   then: Then) -> Verdict:
        """Finish the worker's story in this plan: the step it carries says what the pod
        that was there, or the refusal, means; its writes go out here and now."""
        if then is Then.SETTLE:
            if plan.settle is None:
                return Verdict.SOON
            try:
                found: Obj | None = self.api.get(write.res, write.name)
            except kube.NotFound:
                found = None  # gone again meanwhile: try afresh
            follow, verdict = plan.settle(found)
        else:
            if plan.refused is None:
                return Verdict.RETRY
            follow, verdict = plan.refused(error)
        failed, _, again = self._carry_out(follow)
        return again if failed is not None and again is not None else verdict

    def _tail(self, plan: Plan) -> None:
        for call in plan.after:
            try:
                call()
            except Exception:  # best effort: never fails the plan
                log.exception("best-effort write failed", extra=kv(key=plan.key))

    def _send(self, write: Write) -> Obj | None:
        if write.verb == "create":
            return self.api.create(write.res, write.body)
        if write.verb == "patch":
            return self.api.patch(write.res, write.name, write.body,
                                  subresource=write.subresource)
        if write.verb == "delete":
            self.api.delete(write.res, write.name, uid=write.uid or None,
                            resource_version=write.resource_version or None)
            return None  # the watch tells when it is gone
        raise ValueError(f"unknown write verb {write.verb!r}")
