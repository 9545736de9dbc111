"""A worker's wait for a seat, read off a replay's log, and the waits' figures.

Rules:

* A worker's wait runs from its arrival to its seat. A worker that never got
  one waited until it left or until the last event: its wait is a lower
  bound, counted all the same (leaving it out would flatter a fleet that
  keeps workers waiting).
* Each arrival has one wait (``WaitBook``): it ends at the arrival's first
  seat, or when the worker leaves still waiting, or at the last event.
* The median and p95 are nearest-rank: a wait some worker really had, never
  an interpolation between two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from cli.eventlog import ArriveStep

__all__ = ["Wait", "WaitBook", "WaitStats", "wait_stats"]


@dataclass(frozen=True, slots=True)
class Wait:
    worker: str
    owner: str
    role: str
    arrived: float
    placed: float | None  # None: never got a seat
    until: float  # the seat, or when it left still waiting, or the last event

    @property
    def waited(self) -> float:
        return self.until - self.arrived


@dataclass(frozen=True, slots=True)
class WaitStats:
    count: int
    unseated: int  # of which never got a seat
    median: float
    p95: float
    longest: float


def wait_stats(waits: Sequence[Wait]) -> WaitStats:
    values = sorted(wait.waited for wait in waits)
    unseated = sum(1 for wait in waits if wait.placed is None)
    if not values:
        return WaitStats(0, 0, 0.0, 0.0, 0.0)
    return WaitStats(len(values), unseated, _rank(values, 0.5), _rank(values, 0.95), values[-1])


def _rank(ordered: list[float], q: float) -> float:
    # Nearest rank: a wait some worker really had, never an interpolation between two.
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class WaitBook:
    """Each arrival's wait by the module's rule: to its seat, or until it left or the end."""

    __slots__ = ("waiting", "waits")

    def __init__(self) -> None:
        self.waits: list[Wait] = []
        self.waiting: dict[str, int] = {}  # worker -> its index in ``waits`` while unseated

    def arrived(self, step: ArriveStep, at: float) -> None:
        self.waiting[step.worker] = len(self.waits)
        self.waits.append(Wait(step.worker, step.owner, step.role, at, None, at))

    def ended(self, worker: str, placed: float | None, until: float) -> bool:
        """The worker's wait ends (``placed``: with a seat); False when it was not waiting."""
        index = self.waiting.pop(worker, None)
        if index is None:
            return False
        wait = self.waits[index]
        self.waits[index] = Wait(wait.worker, wait.owner, wait.role, wait.arrived, placed, until)
        return True

    def close(self, end: float) -> list[Wait]:
        """Every wait, those still running ended at ``end`` (never seated)."""
        for worker in list(self.waiting):
            self.ended(worker, None, end)
        return self.waits
