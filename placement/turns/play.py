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

Repeats are counted, not played (unless ``compress=False``). Between two
things happening on a claim (a worker joining or leaving, a demand edge) the
same members take the same turns over and over. After every grant the player
reads the claim's *state*: everything that decides what comes next, relative
to now (who holds the turn and since when, who wants one and since when, the
pending restores and parks, the policy's next deadline, and where the
round-robin stands, as the grants so far place it), its workers and owners
named by their place in joining order, with the settings and each worker's
seconds over the link. When a state recurs with the same workers, the steps
between the two are a cycle: it is accounted whole as many times as it fits
before the claim's next change, and play resumes from there; without demand
edges less than one more cycle is left, so no state is read again until the
next change. A cycle is kept by its state for every claim: another claim
reaching that state (other names, another time) counts the same cycle at
once instead of playing it to find it (not while it records intervals or has
demand windows, whose edges are not relative to now). The group
keeps its own clock, behind the scenario's by the time counted so far (the
policy reads only differences of times), so the policy still decides every
turn that is not a repeat. Loops are bounded: a state recurring without time
passing is an error, and a claim whose cycle is longer than ``CYCLE_STATES``
steps is played switch by switch.

The player's clock counts whole nanoseconds (``NS`` to the second): scenario
seconds, settings, demand edges and each worker's seconds over the link are
rounded to the nanosecond on the way in, and figures turned back into seconds
on the way out. Whole numbers held in floats (as fast as any float, where
Python's ints of that size are not) add exactly up to 2**53 ns, a hundred
days of scenario time, so within that grouping never shows:
counting a cycle gives to the bit what playing it gives, whichever claim
found it, and a claim's figures never depend on which other claims were
played or which were recorded. States are compared exactly, with no rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from placement.turns.group import TurnGroup
from placement.turns.log import Intervals
from placement.turns.values import Evict, Grant, TurnSettings, Yield

__all__ = ["CYCLE_STATES", "NS", "ClaimTurns", "MemberTurns", "TurnPlay"]

Windows = tuple[tuple[float, float], ...]  # [start, end) of scenario time; end may be inf
# A worker's figures a cycle adds: resident, turns, evictions, wanting, served.
_Record = tuple[float, int, int, float, float]
CYCLE_STATES = 4096  # states remembered while looking for a cycle: past them, play on
NS = 10**9  # the player's clock ticks per second
_STALL = 10_000  # steps at one instant: no well-behaved claim takes that many


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


def _ns(seconds: float) -> float:
    """Scenario seconds on the player's clock (a whole number); no end stays no end."""
    return float(round(seconds * NS)) if seconds != math.inf else seconds


def _in_ns(settings: TurnSettings) -> TurnSettings:
    return TurnSettings(_ns(settings.quantum), _ns(settings.min_resident),
                        _ns(settings.yield_grace))


class _Stay:
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


class _Worker:
    __slots__ = ("demand", "joined", "link", "next_change", "record", "resident_since", "seq",
                 "wants", "wants_since")

    def __init__(self, link: float, demand: Windows | None, record: _Stay, seq: int,
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


class _Claim:
    """One claim's group, its figures so far and its workers' pending acts (restored at,
    parked at), in the group's time: the scenario's minus ``shift``, the repeats counted."""

    __slots__ = ("bandwidth", "claim", "first", "granted_at", "group", "intervals", "last",
                 "last_holder", "log", "node", "now", "owners", "seen", "seq", "served",
                 "served_owner", "shift", "switches", "switching", "timers", "useful",
                 "waiting_from", "windowed", "workers")

    def __init__(self, claim: str, node: str, bandwidth: int, first: float,
                 settings: TurnSettings, intervals: Intervals | None) -> None:
        self.claim = claim
        self.node = node
        self.bandwidth = bandwidth
        self.first = first  # scenario seconds, as given
        self.last: float | None = None
        self.switches = 0
        self.switching: float = 0
        self.useful: float = 0  # its members' served time: one is resident at a time
        self.intervals = intervals
        self.group = TurnGroup(settings)
        self.workers: dict[str, _Worker] = {}
        self.timers: dict[str, tuple[float, str]] = {}  # worker -> (when, "restored"|"parked")
        self.waiting_from: dict[str, float] = {}
        self.last_holder: str | None = None
        self.now: float = _ns(first)
        self.shift: float = 0
        # Where the round-robin stands, read off the grants: owners by first seen (an
        # owner with no member left loses its place), the place last served, and each
        # owner's member last served.
        self.seq = 0
        self.owners: dict[str, int] = {}
        self.served_owner = -1
        self.served: dict[str, int] = {}
        self.granted_at: float = 0
        self.seen: dict[tuple[object, ...], _Mark] = {}
        self.log: list[tuple[str, float]] = []  # waits granted since the claim last changed
        self.windowed = 0  # workers with demand windows: only they have edges to play

    def seconds(self) -> ClaimTurns:
        return ClaimTurns(self.claim, self.node, self.bandwidth, self.first, self.last,
                          self.switches, self.switching / NS, self.intervals, self.useful / NS)

    def link(self, memory: int) -> float:
        """Nanoseconds to move ``memory`` bytes over the node's link, rounded."""
        return float(round(memory / self.bandwidth * NS))


@dataclass(frozen=True, slots=True)
class _Mark:
    """Where the counts stood when a state was seen."""

    now: float
    names: tuple[str, ...]  # the workers in joining order: the state names them by place
    switches: int
    switching: float
    logged: int
    recorded: int
    records: tuple[_Record, ...]  # each worker's figures


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
        self._claims: list[_Claim] = []
        self._stays: list[_Stay] = []
        self._live: dict[str, _Claim] = {}
        self._first: dict[str, _First] = {}
        self._cycles: dict[tuple[object, ...], _Cycle] = {}  # by state: see ``_state``
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
        at = float(round(now * NS))  # _ns inline: a call per join shows in a large replay
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
        at = _ns(now)
        for live in self._live.values():
            self._advance(live, at - live.shift)
            for worker in live.workers.values():
                self._stop_resident(live, worker, at - live.shift)
                _count_wanting(live, worker, at - live.shift)
        self.claims = {live.claim: live.seconds() for live in self._claims}
        self.members = [stay.seconds() for stay in self._stays]

    # ------------------------------------------------------------------ internal

    def _open(self, claim: str, first: _First) -> _Claim:
        """The claim's second worker came: its group, the first worker played from its start."""
        worker, owner, memory, demand, at, node, bandwidth, settings = first
        scaled = self._scaled.get(settings)
        if scaled is None:
            scaled = self._scaled[settings] = _in_ns(settings)
        live = _Claim(claim, node, bandwidth, at, scaled,
                      Intervals(NS) if claim in self.keep else None)
        self._claims.append(live)
        self._live[claim] = live
        self._enter(live, worker, owner, live.link(memory),
                    None if demand is None else _windows(demand), _ns(at))
        return live

    def _enter(self, live: _Claim, worker: str, owner: str, link: float,
               demand: Windows | None, now: float, record: _Stay | None = None) -> None:
        if record is None:
            record = _Stay(worker, owner, live.claim, now + live.shift)
            self._stays.append(record)
        live.seq += 1
        live.owners.setdefault(owner, live.seq)
        live.workers[worker] = _Worker(link, demand, record, live.seq, now)
        live.windowed += demand is not None
        self._act(live, live.group.join(worker, owner, now), now)
        self._demand(live, live.workers[worker], now)

    def _gone(self, live: _Claim, worker: str, now: float) -> _Worker:
        w = live.workers.pop(worker)
        live.windowed -= w.demand is not None
        _count_wanting(live, w, now)
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

    def _demand(self, live: _Claim, w: _Worker, now: float) -> None:
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
                    _count_wanting(live, w, when)
                    w.wants = False
                    live.waiting_from.pop(name, None)
                    self._act(live, live.group.idle(name, when), when)
            elif not w.wants and edges[index][1] - live.shift > when:
                w.wants = True
                self._want(live, name, when)

    def _want(self, live: _Claim, name: str, now: float) -> None:
        live.workers[name].wants_since = now
        if live.group.holder != name:
            live.waiting_from[name] = now
        self._act(live, live.group.want(name, now), now)

    def _next_edge(self, live: _Claim) -> float | None:
        times = [w.demand[w.next_change // 2][w.next_change % 2] for w in live.workers.values()
                 if w.demand is not None and w.next_change < 2 * len(w.demand)]
        return min(times) - live.shift if times else None

    def _advance(self, live: _Claim, until: float) -> None:
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
            edge = self._next_edge(live) if live.windowed else None
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
                counted = self._count_repeats(live, now, until)
                if counted is not None:
                    until -= counted
                    # Without demand edges the claim stays in that cycle, and less than
                    # one more of it is left before ``until``: nothing more to compare.
                    looking = live.windowed > 0

    def _due(self, live: _Claim, now: float, deadline: float | None,
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

    def _count_repeats(self, live: _Claim, now: float, until: float) -> float | None:
        """If the claim's state was seen before (or another claim's cycle starts from the
        same state), count the cycle as often as it fits before ``until``; the time
        counted (the group's clock falls that much behind), None while no cycle is known."""
        state = _state(live, now)
        names = tuple(live.workers)
        found = self._known_cycle(live, state, names, now)
        if found is None:
            if len(live.seen) >= CYCLE_STATES:
                live.seen.clear()  # a cycle this long is rare: forget, and look afresh
            live.seen[state] = self._mark(live, now, names)
            return None
        cycle, recorded = found
        count = max(0, (until - now) // cycle.period)
        edge = self._next_edge(live) if live.windowed else None
        if edge is not None and edge < math.inf:  # a cycle must end before the edge
            count = min(count, max(0, (edge - now - 1) // cycle.period))
        live.seen.clear()
        if count:
            self._repeat(live, cycle, int(count), recorded)
        if live.windowed:  # past the next edge, another cycle may begin: look again
            live.seen[state] = self._mark(live, now, names)
        return count * cycle.period

    def _known_cycle(self, live: _Claim, state: tuple[object, ...], names: tuple[str, ...],
                     now: float) -> tuple[_Cycle, int] | None:
        """The cycle from this state: the claim's own (found now) or one another claim
        found, with where its recorded intervals start; None if none is known yet."""
        before = live.seen.get(state)
        if before is not None and before.names == names:
            if now - before.now <= 0:
                raise RuntimeError(f"turns on claim {live.claim} repeat without time "
                                   f"passing at {(now + live.shift) / NS}s")
            cycle = _cycle(live, before, self._mark(live, now, names), now)
            if not live.windowed:  # kept for the claims that may use it (see below)
                self._cycles[state] = cycle
            return cycle, before.recorded
        # Another claim's cycle: not while intervals are kept (they would need its block
        # renamed) nor with demand windows (their edges are not relative to now). The
        # clock being exact, it adds to the bit what finding it here would have added.
        if live.intervals is not None or live.windowed:
            return None
        shared = self._cycles.get(state)
        return None if shared is None else (shared, 0)

    def _repeat(self, live: _Claim, cycle: _Cycle, count: int, recorded: int) -> None:
        """``cycle`` accounted ``count`` more times on the claim."""
        live.switches += count * cycle.switches
        live.switching += count * cycle.switching
        workers = list(live.workers.values())
        for w, (resident, turns, evictions, wanting, served) in zip(workers, cycle.records,
                                                                      strict=True):
            w.record.resident += count * resident
            w.record.turns += count * turns
            w.record.evictions += count * evictions
            w.record.wanting += count * wanting
            w.record.served += count * served
            live.useful += count * served
        for place, wait in cycle.waits:
            waits = workers[place].record.waits
            waits[wait] = waits.get(wait, 0) + count
        if live.intervals is not None:
            live.intervals.repeat(recorded, cycle.period, count)
        live.shift += count * cycle.period
        live.log.clear()

    def _mark(self, live: _Claim, now: float, names: tuple[str, ...]) -> _Mark:
        for w in live.workers.values():  # the time wanted so far counted, so a cycle adds it
            _count_wanting(live, w, now)
        return _Mark(now, names, live.switches, live.switching, len(live.log),
                     len(live.intervals.parts) if live.intervals is not None else 0,
                     tuple((w.record.resident, w.record.turns, w.record.evictions,
                            w.record.wanting, w.record.served)
                           for w in live.workers.values()))

    def _act(self, live: _Claim, actions: list[Grant | Yield | Evict], now: float) -> None:
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

    def _switching(self, live: _Claim, now: float, took: float) -> None:
        live.switching += took
        if live.intervals is not None:
            live.intervals.append((now + live.shift, now + took + live.shift, ""))

    def _stop_resident(self, live: _Claim, w: _Worker, now: float) -> None:
        if w.resident_since is None:
            return
        _count_wanting(live, w, now)
        w.record.resident += now - w.resident_since
        if live.intervals is not None:
            live.intervals.append((w.resident_since + live.shift, now + live.shift,
                                   w.record.worker))
        w.resident_since = None


def _count_wanting(live: _Claim, w: _Worker, now: float) -> None:
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


def _windows(demand: Windows) -> Windows:
    return tuple((_ns(start), _ns(end)) for start, end in demand)


@dataclass(frozen=True, slots=True)
class _Cycle:
    """What one repeat of a cycle adds, its workers named by their place in joining order."""

    period: float
    switches: int
    switching: float
    records: tuple[_Record, ...]  # each worker's figures
    waits: tuple[tuple[int, float], ...]  # each grant's worker and its wait


def _cycle(live: _Claim, before: _Mark, mark: _Mark, now: float) -> _Cycle:
    places = {name: place for place, name in enumerate(live.workers)}
    return _Cycle(now - before.now, mark.switches - before.switches,
                  mark.switching - before.switching,
                  tuple(_less(after, start) for start, after
                        in zip(before.records, mark.records, strict=True)),
                  tuple((places[name], wait) for name, wait in live.log[before.logged:mark.logged]))


def _less(after: _Record, before: _Record) -> _Record:
    return (after[0] - before[0], after[1] - before[1], after[2] - before[2],
            after[3] - before[3], after[4] - before[4])


def _state(live: _Claim, now: float) -> tuple[object, ...]:
    """Everything that decides what comes next on the claim, relative to now, its workers
    and owners named by their place in joining order, with the settings and each worker's
    time over the link: two claims in one state play the same turns, time-shifted and
    renamed (the policy reads only differences of times and the order of names)."""
    owners = {owner: place for place, owner in enumerate(live.owners)}
    holder = live.group.holder
    at = last = -1
    workers = []
    for place, (name, w) in enumerate(live.workers.items()):
        if name == holder:
            at = place
        if name == live.last_holder:
            last = place
        timer = live.timers.get(name)
        owner = w.record.owner
        since = w.resident_since
        waiting = live.waiting_from.get(name)
        workers.append((owners[owner], w.link, w.wants, w.next_change,
                        w.seq <= live.served.get(owner, -1),
                        None if timer is None else (now - timer[0], timer[1]),
                        None if since is None else now - since,
                        None if waiting is None else now - waiting))
    deadline = live.group.next_deadline()
    return (live.group.settings, tuple(workers), len(owners), at,
            None if live.last_holder is None else last,
            now - live.granted_at if holder is not None else None,
            None if deadline is None else now - deadline,
            sum(1 for place in live.owners.values() if place <= live.served_owner))
