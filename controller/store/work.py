"""The vocabulary between the loop and the reconciles: queue keys, their order, results.

Rules: a worker's key is its name; housekeeping keys start with ``*`` (never a
valid object name) and sort before every worker; workers sort by arrival
(creation time, then name), so the oldest pending worker is retried first.
A pending worker (no phase yet, or Pending, and not being deleted) is what a
wake re-queues and the census counts: ``waiting_of`` reads it once, for both.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import NamedTuple

import attrs

from controller.k8s.naming import WorkerPhase
from controller.k8s.objects import Obj, age_order, created_at, is_deleting, name_of

WAKE = "*wake"  # re-queue every pending worker
SWEEP = "*sweep"  # delete orphaned claims
REBALANCE = "*rebalance"  # decide a move for efficiency, if one is due
HOUSEKEEPING_ORDER = ("0",)


def worker_order(obj: Obj) -> tuple[str, ...]:
    # Interned: the name is the cache's own string, and a burst of arrivals shares its
    # creation time (a queue of 100,000 workers holds one order each).
    return ("1", *map(sys.intern, age_order(obj)))


def worker_key(obj: Obj) -> str:
    """A worker's queue key: its name, interned (the string the cache keys it by)."""
    return sys.intern(name_of(obj))


def is_pending(obj: Obj) -> bool:
    phase = (obj.get("status") or {}).get("phase")
    return not is_deleting(obj) and phase in (None, "", WorkerPhase.PENDING)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@attrs.frozen
class Result:
    requeue_after: float | None = None
    wake: bool = False  # capacity changed: retry every pending worker
    sweep: bool = False  # a claim may have lost its last reference: sweep soon
    enqueue: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Waiting(NamedTuple):
    """A pending worker, as a wake and the census read it."""

    key: str  # its queue key
    order: tuple[str, ...]  # its queue order
    reason: str  # the kind of its reason ('': not answered yet)
    role: str
    created: float  # its creation time (POSIX seconds)


def waiting_of(obj: Obj) -> Waiting | None:
    """The worker as a pending one, or None if it is not pending."""
    if not is_pending(obj):
        return None
    reason = str((obj.get("status") or {}).get("reason") or "")
    return Waiting(worker_key(obj), worker_order(obj), sys.intern(reason.split(":", 1)[0]),
                   sys.intern(str((obj.get("spec") or {}).get("role") or "")),
                   created_at(obj).timestamp())
