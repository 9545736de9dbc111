"""The work queue: every watch feeds it, one loop drains it, one key at a time.

Rules:

* A key is queued at most once: adding a queued key keeps the earlier of the
  two ready times. A key being processed is not handed out again until it is
  done; adding it meanwhile re-queues it after ``done``.
* Among keys that are ready, the lowest ``order`` goes first. The controller
  orders its own housekeeping keys first and workers by arrival (creation
  time, then name), so when capacity frees, pending workers are retried
  oldest first.
* ``retry`` re-adds a failed key after an exponential delay (per key, capped);
  ``forget`` resets it after a success.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

Order = tuple[str, ...]


class WorkQueue:
    def __init__(self, *, base_delay: float = 0.5, max_delay: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._base = base_delay
        self._max = max_delay
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._due: dict[str, float] = {}  # key -> ready time, for queued keys
        self._order: dict[str, Order] = {}
        self._delayed: list[tuple[float, int, str]] = []
        self._ready: list[tuple[Order, int, str]] = []
        self._ready_keys: set[str] = set()
        self._active: set[str] = set()
        self._again: dict[str, float] = {}  # active keys added meanwhile -> ready time
        self._failures: dict[str, int] = {}
        self._closed = False

    def add(self, key: str, *, after: float = 0.0, order: Order | None = None) -> None:
        with self._cond:
            if order is not None:
                self._order[key] = order
            due = self._clock() + max(0.0, after)
            if key in self._active:
                self._again[key] = min(self._again.get(key, due), due)
                return
            if key in self._ready_keys:
                return
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._seq), key))
            self._cond.notify()

    def retry(self, key: str) -> float:
        """Re-add after a failure; returns the delay chosen."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = float(min(self._max, self._base * (2 ** failures)))
        self.add(key, after=delay)
        return delay

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def discard(self, key: str) -> None:
        """Forget what is remembered about a key that is gone (its order, its failures)."""
        with self._cond:
            if key not in self._due and key not in self._ready_keys and key not in self._active:
                self._order.pop(key, None)
                self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> str | None:
        """The next ready key (None on timeout or close). Call ``done`` with it."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._closed:
                self._promote()
                if self._ready:
                    _, _, key = heapq.heappop(self._ready)
                    self._ready_keys.discard(key)
                    self._active.add(key)
                    return key
                wait = None if deadline is None else deadline - self._clock()
                if self._delayed:
                    until_due = self._delayed[0][0] - self._clock()
                    wait = until_due if wait is None else min(wait, until_due)
                if wait is not None and wait <= 0:
                    if deadline is not None and self._clock() >= deadline:
                        return None
                    continue
                self._cond.wait(wait)
            return None

    def done(self, key: str) -> None:
        with self._cond:
            self._active.discard(key)
            if key in self._again:
                due = self._again.pop(key)
                self._due[key] = due
                heapq.heappush(self._delayed, (due, next(self._seq), key))
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def due_within(self, seconds: float) -> list[str]:
        """Keys being processed, ready, or due within ``seconds`` (for progress reports)."""
        with self._cond:
            horizon = self._clock() + seconds
            soon = [k for k, due in self._due.items() if due <= horizon]
            return sorted({*self._active, *self._ready_keys, *soon})

    def __len__(self) -> int:
        with self._cond:
            return len(self._due) + len(self._ready_keys)

    def _promote(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue  # superseded by an earlier add
            del self._due[key]
            self._ready_keys.add(key)
            heapq.heappush(self._ready, (self._order.get(key, ("~", key)), next(self._seq), key))
