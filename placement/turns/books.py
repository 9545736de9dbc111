"""A play's books: each shared claim and worker while its turns are played, on the player's clock.

What ``placement.turns.play`` keeps while it plays, and the records it hands
back. Rules:

* The player's clock counts whole nanoseconds (``NS`` to the second):
  scenario seconds, settings, demand edges and each worker's seconds over the
  link are rounded to the nanosecond on the way in (``ns``), and figures
  turned back into seconds on the way out (``seconds``). Whole numbers held in
  floats (as fast as any float, where Python's ints of that size are not) add
  exactly up to 2**53 ns, a hundred days of scenario time, so within that
  grouping never shows: counting a cycle gives to the bit what playing it
  gives, whichever claim found it, and a claim's figures never depend on
  which other claims were played or which were recorded.
* A claim while played (``LiveClaim``) runs its group on the group's own
  time: the scenario's minus ``shift``, the time its repeats counted so far.
  A stay's times and the recorded intervals are the scenario's (plus
  ``shift``).
* A worker's time wanting the turn is counted up to now (``count_wanting``)
  before it stops wanting or stops being resident, when it goes, at the end,
  and where a cycle is marked; the part of it the worker was resident is its
  served time, and a claim's useful time is its members' served time summed
  (one is resident at a time).
* The records handed back (``MemberTurns``, ``ClaimTurns``) are in seconds;
  a worker's waits that come to the same seconds are summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from placement.turns.group import TurnGroup
from placement.turns.log import Intervals

__all__ = ["NS", "ClaimTurns", "LiveClaim", "Mark", "MemberTurns", "Record", "Stay", "Windows",
           "Worker", "count_wanting", "next_edge", "ns"]

Windows = tuple[tuple[float, float], ...]  # [start, end) of scenario time; end may be inf
# A worker's figures a cycle adds: resident, turns, evictions, wanting, served.
Record = tuple[float, int, int, float, float]
NS = 10**9  # the player's clock ticks per second


# The two records a play hands back are named tuples (immutable all the same): one per
# worker's stay, tens of thousands per replay, and a frozen dataclass costs three times
# as much to build.
class MemberTurns(NamedTuple):
    """One worker's stay on one shared claim, in seconds."""

    worker: str
    owner: str
    claim: str
    joined: float
    left: float | None  # None: still there at the end
    resident: float  # seconds resident (restored, not yet asked to yield)
    turns: int
    evictions: int
    waits: dict[float, int]  # wait -> how many times
    wanting: float = 0.0  # seconds it wanted the turn
    served: float = 0.0  # seconds resident while it wanted the turn

    def stayed(self, end: float) -> float:
        return (self.left if self.left is not None else end) - self.joined


class ClaimTurns(NamedTuple):
    claim: str
    node: str
    bandwidth: int
    first: float  # when its first worker joined
    last: float | None  # when its last worker left; None: still held at the end
    switches: int  # the turn passed from one worker to another
    switching: float  # seconds spent restoring or parking
    # (start, end, worker) resident; (start, end, "") switching: only when asked to keep them
    intervals: Intervals | None = None
    useful: float = 0.0  # seconds a resident member wanted the turn (one is resident at a time)

    def span(self, end: float) -> float:
        return (self.last if self.last is not None else end) - self.first


def ns(seconds: float) -> float:
    """Scenario seconds on the player's clock (a whole number); no end stays no end."""
    return float(round(seconds * NS)) if seconds != math.inf else seconds


class Stay:
    """A ``MemberTurns`` while it is played: on the player's clock."""

    __slots__ = ("claim", "evictions", "joined", "left", "owner", "resident", "served", "turns",
                 "waits", "wanting", "worker")

    def __init__(self, worker: str, owner: str, claim: str, joined: float) -> None:
        self.worker = worker
        self.owner = owner
        self.claim = claim
        self.joined = joined
        self.left: float | None = None
        self.resident: float = 0
        self.turns = 0
        self.evictions = 0
        self.waits: dict[float, int] = {}
        self.wanting: float = 0
        self.served: float = 0

    def seconds(self) -> MemberTurns:
        waits = {wait / NS: times for wait, times in self.waits.items()}
        if len(waits) < len(self.waits):  # waits a nanosecond apart, past 2**52 ns
            waits = {}
            for wait, times in self.waits.items():
                waits[wait / NS] = waits.get(wait / NS, 0) + times
        return MemberTurns(self.worker, self.owner, self.claim, self.joined / NS,
                           None if self.left is None else self.left / NS, self.resident / NS,
                           self.turns, self.evictions, waits, self.wanting / NS,
                           self.served / NS)


class Worker:
    __slots__ = ("demand", "joined", "link", "next_change", "record", "resident_since", "seq",
                 "wants", "wants_since")

    def __init__(self, link: float, demand: Windows | None, record: Stay, seq: int,
                 joined: float) -> None:
        self.link = link  # its memory over the node's link: a restore, and a park
        self.demand = demand  # on the scenario's clock in nanoseconds
        self.record = record
        self.seq = seq  # its place in joining order, as the group numbers members
        self.joined = joined  # the group's time it (re)joined
        self.wants = False
        self.wants_since: float = 0  # while it wants: since when, or since last counted
        self.resident_since: float | None = None
        self.next_change = 0  # index into demand of the next window edge to play


class LiveClaim:
    """One claim's group, its figures so far and its workers' pending acts (restored at,
    parked at), in the group's time: the scenario's minus ``shift``, the repeats counted."""

    __slots__ = ("bandwidth", "claim", "first", "granted_at", "group", "intervals", "last",
                 "last_holder", "log", "node", "now", "owners", "seen", "seq", "served",
                 "served_owner", "shift", "switches", "switching", "timers", "useful",
                 "waiting_from", "windowed", "workers")

    def __init__(self, claim: str, node: str, bandwidth: int, first: float,
                 group: TurnGroup, intervals: Intervals | None) -> None:
        self.claim = claim
        self.node = node
        self.bandwidth = bandwidth
        self.first = first  # scenario seconds, as given
        self.last: float | None = None
        self.switches = 0
        self.switching: float = 0
        self.useful: float = 0  # its members' served time: one is resident at a time
        self.intervals = intervals
        self.group = group
        self.workers: dict[str, Worker] = {}
        self.timers: dict[str, tuple[float, str]] = {}  # worker -> (when, "restored"|"parked")
        self.waiting_from: dict[str, float] = {}
        self.last_holder: str | None = None
        self.now: float = ns(first)
        self.shift: float = 0
        # Where the round-robin stands, read off the grants: owners by first seen (an
        # owner with no member left loses its place), the place last served, and each
        # owner's member last served.
        self.seq = 0
        self.owners: dict[str, int] = {}
        self.served_owner = -1
        self.served: dict[str, int] = {}
        self.granted_at: float = 0
        self.seen: dict[tuple[object, ...], Mark] = {}
        self.log: list[tuple[str, float]] = []  # waits granted since the claim last changed
        self.windowed = 0  # workers with demand windows: only they have edges to play

    def seconds(self) -> ClaimTurns:
        return ClaimTurns(self.claim, self.node, self.bandwidth, self.first, self.last,
                          self.switches, self.switching / NS, self.intervals, self.useful / NS)

    def link(self, memory: int) -> float:
        """Nanoseconds to move ``memory`` bytes over the node's link, rounded."""
        return float(round(memory / self.bandwidth * NS))


@dataclass(frozen=True, slots=True)
class Mark:
    """Where the counts stood when a state was seen."""

    now: float
    names: tuple[str, ...]  # the workers in joining order: the state names them by place
    switches: int
    switching: float
    logged: int
    recorded: int
    records: tuple[Record, ...]  # each worker's figures


def count_wanting(live: LiveClaim, w: Worker, now: float) -> None:
    """``w``'s time wanting the turn up to ``now`` added to its figures (and, resident, its
    served time to its own and the claim's useful time); called before it stops wanting or
    stops being resident, when it goes, at the end, and where a cycle is marked."""
    if not w.wants:
        return
    record = w.record
    record.wanting += now - w.wants_since
    since = w.resident_since
    if since is not None:
        served = now - (since if since > w.wants_since else w.wants_since)
        record.served += served
        live.useful += served
    w.wants_since = now


def next_edge(live: LiveClaim) -> float | None:
    """The group's time of the claim's next demand edge, or None without one."""
    times = [w.demand[w.next_change // 2][w.next_change % 2] for w in live.workers.values()
             if w.demand is not None and w.next_change < 2 * len(w.demand)]
    return min(times) - live.shift if times else None
