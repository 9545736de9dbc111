"""Turns played offline: each shared claim's ``TurnGroup`` driven over a scenario's clock.

The simulator decides no turn itself; :mod:`placement.turns` does, as on a
node. What this module adds is the workers' side, played as well-behaved
workers would:

* A worker joins its claim's group when it is seated on an allocated claim,
  and is gone from it when it leaves.
* It wants a turn while its demand says so: always, by default, or within
  its windows ``[start, end)`` of scenario time.
* Granted, it restores its memory over the node's host-to-device link and
  then reports resident; asked to yield, it parks the same memory over the
  same link and then reports parked. So a switch costs the outgoing worker's
  park plus the incoming worker's restore.
* What it wanted and got: its time wanting the turn, and the part of that it
  was resident (served). One worker is resident at a time, so a claim's
  useful time, a resident member wanting the turn, is its members' served
  time summed; a holder kept resident while it wants nothing (nobody waits)
  is busy but not useful.
* A worker whose park outlasts the grace is evicted by the policy; its pod is
  recreated at once on the same claim, and it rejoins at the back.
* Only claims that come to hold two workers get a group. The first worker's
  history is played into the group from its start when the second joins, so
  the group is as if it had run all along.
* A group moves forward only when something happens on its claim, and at the
  end: groups are independent of each other.

Repeats are counted, not played (unless ``compress=False``): between two
changes of a claim the same turns come again and again, so a cycle is found
once and accounted whole (``placement.turns.cycles``, its rules there); a
claim whose cycle is longer than ``CYCLE_STATES`` steps is played switch by
switch. The player's clock counts whole nanoseconds (``NS``; the books and
their clock in ``placement.turns.books``), so counting a cycle gives to the
bit what playing it gives. A claim that takes more than ``_STALL`` steps at
one instant is an error.
"""

from __future__ import annotations

import math

from placement.turns.books import (
    NS,
    ClaimTurns,
    LiveClaim,
    MemberTurns,
    Stay,
    Windows,
    Worker,
    count_wanting,
    next_edge,
    ns,
)
from placement.turns.cycles import Cycle, count_repeats
from placement.turns.group import TurnGroup
from placement.turns.log import Intervals
from placement.turns.values import Evict, Grant, TurnSettings, Yield

__all__ = ["CYCLE_STATES", "NS", "ClaimTurns", "MemberTurns", "TurnPlay"]

CYCLE_STATES = 4096  # states remembered while looking for a cycle: past them, play on
_STALL = 10_000  # steps at one instant: no well-behaved claim takes that many


def _in_ns(settings: TurnSettings) -> TurnSettings:
    return TurnSettings(ns(settings.quantum), ns(settings.min_resident),
                        ns(settings.yield_grace))


def _windows(demand: Windows) -> Windows:
    return tuple((ns(start), ns(end)) for start, end in demand)


# The first worker of a claim with no group yet: played into the group when a second comes.
_First = tuple[str, str, int, Windows | None, float, str, int, TurnSettings]


class TurnPlay:
    """Every shared claim of one replay. Call ``join`` and ``leave`` in time order, then
    ``end``: ``claims`` and ``members`` hold the figures from then on."""

    def __init__(self, settings: TurnSettings | None = None, *, keep: frozenset[str] = frozenset(),
                 compress: bool = True) -> None:
        self.settings = settings or TurnSettings()
        self.keep = keep  # claims whose intervals are recorded
        self.compress = compress  # count repeated cycles instead of playing them
        self.claims: dict[str, ClaimTurns] = {}
        self.members: list[MemberTurns] = []
        self._claims: list[LiveClaim] = []
        self._stays: list[Stay] = []
        self._live: dict[str, LiveClaim] = {}
        self._first: dict[str, _First] = {}
        self._cycles: dict[tuple[object, ...], Cycle] = {}  # by state: see placement.turns.cycles
        self._scaled: dict[TurnSettings, TurnSettings] = {}

    def join(self, claim: str, node: str, bandwidth: int, worker: str, owner: str, memory: int,
             demand: Windows | None, now: float, settings: TurnSettings | None = None) -> None:
        """``worker`` is seated on the allocated ``claim`` at ``now``; ``settings``: the
        claim's node's turn settings when they are not the play's."""
        live = self._live.get(claim)
        if live is None:
            first = self._first.pop(claim, None)
            if first is None:
                self._first[claim] = (worker, owner, memory, demand, now, node, bandwidth,
                                      settings or self.settings)
                return
            live = self._open(claim, first)
        at = float(round(now * NS))  # ns inline: a call per join shows in a large replay
        self._advance(live, at - live.shift)  # the shift grows by the repeats counted
        self._enter(live, worker, owner, live.link(memory),
                    None if demand is None else _windows(demand), at - live.shift)

    def leave(self, claim: str, worker: str, now: float) -> None:
        live = self._live.get(claim)
        if live is None:
            first = self._first.get(claim)
            if first is not None and first[0] == worker:
                del self._first[claim]
            return
        at = float(round(now * NS))
        self._advance(live, at - live.shift)
        self._gone(live, worker, at - live.shift)
        if not live.workers:
            live.last = now
            del self._live[claim]

    def end(self, now: float) -> None:
        """The scenario is over: every group played to ``now``, the figures read."""
        at = ns(now)
        for live in self._live.values():
            self._advance(live, at - live.shift)
            for worker in live.workers.values():
                self._stop_resident(live, worker, at - live.shift)
                count_wanting(live, worker, at - live.shift)
        self.claims = {live.claim: live.seconds() for live in self._claims}
        self.members = [stay.seconds() for stay in self._stays]

    # ------------------------------------------------------------------ internal

    def _open(self, claim: str, first: _First) -> LiveClaim:
        """The claim's second worker came: its group, the first worker played from its start."""
        worker, owner, memory, demand, at, node, bandwidth, settings = first
        scaled = self._scaled.get(settings)
        if scaled is None:
            scaled = self._scaled[settings] = _in_ns(settings)
        live = LiveClaim(claim, node, bandwidth, at, TurnGroup(scaled),
                         Intervals(NS) if claim in self.keep else None)
        self._claims.append(live)
        self._live[claim] = live
        self._enter(live, worker, owner, live.link(memory),
                    None if demand is None else _windows(demand), ns(at))
        return live

    def _enter(self, live: LiveClaim, worker: str, owner: str, link: float,
               demand: Windows | None, now: float, record: Stay | None = None) -> None:
        if record is None:
            record = Stay(worker, owner, live.claim, now + live.shift)
            self._stays.append(record)
        live.seq += 1
        live.owners.setdefault(owner, live.seq)
        live.workers[worker] = Worker(link, demand, record, live.seq, now)
        live.windowed += demand is not None
        self._act(live, live.group.join(worker, owner, now), now)
        self._demand(live, live.workers[worker], now)

    def _gone(self, live: LiveClaim, worker: str, now: float) -> Worker:
        w = live.workers.pop(worker)
        live.windowed -= w.demand is not None
        count_wanting(live, w, now)
        self._stop_resident(live, w, now)
        w.record.left = now + live.shift
        live.timers.pop(worker, None)
        live.waiting_from.pop(worker, None)
        owner = w.record.owner
        if not any(other.record.owner == owner for other in live.workers.values()):
            del live.owners[owner]
            live.served.pop(owner, None)
        self._act(live, live.group.gone(worker, now), now)
        return w

    def _demand(self, live: LiveClaim, w: Worker, now: float) -> None:
        """Play ``w``'s demand edges up to ``now``."""
        name = w.record.worker
        if w.demand is None:
            if not w.wants:
                w.wants = True
                self._want(live, name, now)
            return
        edges = w.demand
        while w.next_change < 2 * len(edges):
            index, is_end = divmod(w.next_change, 2)
            at = edges[index][is_end] - live.shift
            if at > now:
                return
            w.next_change += 1
            when = max(at, w.joined)
            if is_end:
                if w.wants:
                    count_wanting(live, w, when)
                    w.wants = False
                    live.waiting_from.pop(name, None)
                    self._act(live, live.group.idle(name, when), when)
            elif not w.wants and edges[index][1] - live.shift > when:
                w.wants = True
                self._want(live, name, when)

    def _want(self, live: LiveClaim, name: str, now: float) -> None:
        live.workers[name].wants_since = now
        if live.group.holder != name:
            live.waiting_from[name] = now
        self._act(live, live.group.want(name, now), now)

    def _advance(self, live: LiveClaim, until: float) -> None:
        """Everything due on the claim up to ``until`` (the group's time), in time order."""
        group = live.group
        live.seen.clear()
        live.log.clear()
        stalled = 0
        looking = self.compress
        timers = live.timers  # the same dict throughout: read once
        next_deadline = group.next_deadline
        while True:
            soonest = math.inf
            for at, _ in timers.values():
                if at < soonest:
                    soonest = at
            deadline = next_deadline()
            if deadline is not None and deadline < soonest:
                soonest = deadline
            edge = next_edge(live) if live.windowed else None
            if edge is not None and edge < soonest:
                soonest = edge
            if soonest > until:
                live.now = max(live.now, until)
                return
            now = max(live.now, soonest)
            stalled = stalled + 1 if now == live.now else 0
            if stalled > _STALL:
                raise RuntimeError(f"turns on claim {live.claim} make no progress at "
                                   f"{(now + live.shift) / NS}s")
            live.now = now
            self._due(live, now, deadline, edge)
            # A cycle holds a grant: the states after grants are the ones to compare.
            if looking and live.granted_at == now:
                counted = count_repeats(live, now, until, self._cycles, CYCLE_STATES)
                if counted is not None:
                    until -= counted
                    # Without demand edges the claim stays in that cycle, and less than
                    # one more of it is left before ``until``: nothing more to compare.
                    looking = live.windowed > 0

    def _due(self, live: LiveClaim, now: float, deadline: float | None,
             edge: float | None) -> None:
        """What is due at ``now``: the restores and parks done, in worker order, then the
        demand edges and the policy's deadline."""
        timers = live.timers
        due = [(worker, what) for worker, (at, what)
               in (timers.items() if len(timers) < 2 else sorted(timers.items()))
               if at <= now]
        for worker, what in due:
            del timers[worker]
            w = live.workers[worker]
            if what == "restored":
                w.resident_since = now
                actions = live.group.resident(worker, now)
            else:
                if w.wants:
                    live.waiting_from[worker] = now
                actions = live.group.parked(worker, now)
            if actions:
                self._act(live, actions, now)
        if edge is not None:
            for w in list(live.workers.values()):
                self._demand(live, w, now)
        # Every other call already advanced the group to now: with no edge played and no
        # deadline due, a tick would find nothing to do.
        if edge is not None or (deadline is not None and deadline <= now):
            self._act(live, live.group.tick(now), now)

    def _act(self, live: LiveClaim, actions: list[Grant | Yield | Evict], now: float) -> None:
        for action in actions:
            name = action.member
            w = live.workers.get(name)
            if w is None:
                continue
            if isinstance(action, Grant):
                w.record.turns += 1
                since = live.waiting_from.pop(name, None)
                wait = now - since if since is not None else 0
                w.record.waits[wait] = w.record.waits.get(wait, 0) + 1
                live.log.append((name, wait))
                if live.last_holder is not None and live.last_holder != name:
                    live.switches += 1
                live.last_holder = name
                live.served_owner = live.owners[w.record.owner]
                live.served[w.record.owner] = w.seq
                live.granted_at = now
                self._switching(live, now, w.link)
                live.timers[name] = (now + w.link, "restored")
            elif isinstance(action, Yield):
                self._stop_resident(live, w, now)
                self._switching(live, now, min(w.link, action.grace))
                live.timers[name] = (now + w.link, "parked")
            else:
                # Evicted: its pod is deleted and recreated on the same claim at once.
                w.record.evictions += 1
                gone = self._gone(live, name, now)
                gone.record.left = None
                self._enter(live, name, gone.record.owner, gone.link, gone.demand, now,
                            gone.record)

    def _switching(self, live: LiveClaim, now: float, took: float) -> None:
        live.switching += took
        if live.intervals is not None:
            live.intervals.append((now + live.shift, now + took + live.shift, ""))

    def _stop_resident(self, live: LiveClaim, w: Worker, now: float) -> None:
        if w.resident_since is None:
            return
        count_wanting(live, w, now)
        w.record.resident += now - w.resident_since
        if live.intervals is not None:
            live.intervals.append((w.resident_since + live.shift, now + live.shift,
                                   w.record.worker))
        w.resident_since = None

