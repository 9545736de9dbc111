"""Carrying decisions out: each reconcile's writes as one plan, plans on a bounded pool.

Rules:

* A reconcile decides against the cache and puts what it creates there at
  once (assumed); its API writes then go out as one plan, in order (the
  finalizer before the claim, the claim before the pod, the pod before the
  status), while the loop moves on to the next decision. At most
  ``concurrency`` plans are in flight; a further one waits for a free slot.
* Every answer replaces the cache's copy of the object (``confirm``). When a
  write fails, the assumptions of it and of every write after it in its plan
  are dropped (``forget``), which gives their seat back, and the worker is
  handed back to the loop to be retried with back-off.
* ``fence`` runs before every write: a replica that may no longer lead must
  not write at all, however far its plans had got.
* A plan's best-effort tail (Events) runs after its writes; its failures are
  only logged.
* With ``concurrency`` 0 plans run inline, in the caller's thread (tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import attrs

from controller import kube
from controller.cache import Cache
from controller.logs import kv
from controller.objects import Obj

__all__ = ["Plan", "Write", "Writer"]

log = logging.getLogger("openrl.controller.writes")


@attrs.frozen
class Write:
    verb: str  # create | patch
    res: kube.Resource
    name: str
    body: Obj
    subresource: str | None = None
    assumed: bool = False  # the body is in the cache already: forget it on failure


@attrs.define
class Plan:
    key: str
    writes: list[Write] = attrs.Factory(list)
    after: list[Callable[[], None]] = attrs.Factory(list)

    def __bool__(self) -> bool:
        return bool(self.writes or self.after)


Done = Callable[[str, Write | None, kube.KubeError | None], None]


class Writer:
    def __init__(self, api: kube.Kube, cache: Cache, *, concurrency: int = 8,
                 fence: Callable[[], None] = lambda: None,
                 done: Done = lambda _key, _write, _error: None) -> None:
        self.api, self.cache, self.fence, self.done = api, cache, fence, done
        self.concurrency = concurrency
        self._pool = (ThreadPoolExecutor(concurrency, thread_name_prefix="write")
                      if concurrency else None)
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._lock = threading.Lock()
        self._busy: set[str] = set()

    def busy(self, key: str) -> bool:
        with self._lock:
            return key in self._busy

    def in_flight(self) -> int:
        with self._lock:
            return len(self._busy)

    def submit(self, plan: Plan) -> None:
        if not plan:
            return
        with self._lock:
            self._busy.add(plan.key)
        if self._pool is None:
            self._run(plan)
            return
        self._slots.acquire()
        try:
            self._pool.submit(self._run, plan)
        except RuntimeError:  # shut down meanwhile
            self._slots.release()
            with self._lock:
                self._busy.discard(plan.key)

    def close(self, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)

    def _run(self, plan: Plan) -> None:
        failed: Write | None = None
        error: kube.KubeError | None = None
        try:
            for index, write in enumerate(plan.writes):
                try:
                    self.fence()
                    answer = self._send(write)
                except kube.KubeError as exc:
                    failed, error = write, exc
                    for later in plan.writes[index:]:
                        if later.assumed:
                            self.cache.forget(later.res, later.name)
                    break
                self.cache.confirm(write.res, answer)
            if error is None:
                for call in plan.after:
                    try:
                        call()
                    except Exception:  # best effort: never fails the plan
                        log.exception("best-effort write failed", extra=kv(key=plan.key))
        except Exception as exc:  # never lose a key: report it as failed
            log.exception("plan crashed", extra=kv(key=plan.key))
            error = kube.KubeError(0, "Crashed", str(exc))
        finally:
            with self._lock:
                self._busy.discard(plan.key)
            if self._pool is not None:
                self._slots.release()
            self.done(plan.key, failed, error)

    def _send(self, write: Write) -> Obj:
        if write.verb == "create":
            return self.api.create(write.res, write.body)
        if write.verb == "patch":
            return self.api.patch(write.res, write.name, write.body,
                                  subresource=write.subresource)
        raise ValueError(f"unknown write verb {write.verb!r}")
