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
* A worker whose park outlasts the grace is evicted by the policy; its pod is
  recreated at once on the same claim, and it rejoins at the back.
* Only claims that come to hold two workers get a group. The first worker's
  history is played into the group from its start when the second joins, so
  the group is as if it had run all along.
* A group moves forward only when something happens on its claim, and at the
  end: groups are independent of each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placement.turns import Evict, Grant, TurnGroup, TurnSettings, Yield

__all__ = ["ClaimTurns", "MemberTurns", "TurnPlay"]

Windows = tuple[tuple[float, float], ...]  # [start, end) of scenario time; end may be inf


@dataclass(slots=True)
class MemberTurns:
    """One worker's stay on one shared claim."""

    worker: str
    owner: str
    claim: str
    joined: float
    left: float | None = None
    resident: float = 0.0  # seconds resident (restored, not yet asked to yield)
    turns: int = 0
    evictions: int = 0
    waits: list[float] = field(default_factory=list)

    def stayed(self, end: float) -> float:
        return (self.left if self.left is not None else end) - self.joined


@dataclass(slots=True)
class ClaimTurns:
    claim: str
    node: str
    bandwidth: int
    first: float  # when its first worker joined
    last: float | None = None  # when its last worker left
    switches: int = 0  # the turn passed from one worker to another
    switching: float = 0.0  # seconds spent restoring or parking
    # (start, end, worker) resident; (start, end, "") switching: only when asked to keep them
    intervals: list[tuple[float, float, str]] | None = None

    def span(self, end: float) -> float:
        return (self.last if self.last is not None else end) - self.first


class _Worker:
    __slots__ = ("demand", "memory", "next_change", "record", "resident_since", "wants")

    def __init__(self, memory: int, demand: Windows | None, record: MemberTurns) -> None:
        self.memory = memory
        self.demand = demand
        self.record = record
        self.wants = False
        self.resident_since: float | None = None
        self.next_change = 0  # index into demand of the next window edge to play


class _Claim:
    """One claim's group and its workers' pending acts (restored at, parked at)."""

    __slots__ = ("group", "last_holder", "now", "result", "timers", "waiting_from", "workers")

    def __init__(self, result: ClaimTurns, settings: TurnSettings) -> None:
        self.result = result
        self.group = TurnGroup(settings)
        self.workers: dict[str, _Worker] = {}
        self.timers: dict[str, tuple[float, str]] = {}  # worker -> (when, "restored"|"parked")
        self.waiting_from: dict[str, float] = {}
        self.last_holder: str | None = None
        self.now = result.first


class TurnPlay:
    """Every shared claim of one replay. Call ``join`` and ``leave`` in time order, then ``end``."""

    def __init__(self, settings: TurnSettings | None = None, *, keep: frozenset[str] = frozenset()
                 ) -> None:
        self.settings = settings or TurnSettings()
        self.keep = keep  # claims whose intervals are recorded
        self.claims: dict[str, ClaimTurns] = {}
        self.members: list[MemberTurns] = []
        self._live: dict[str, _Claim] = {}
        self._first: dict[str, tuple[str, str, int, Windows | None, float, str, int]] = {}

    def join(self, claim: str, node: str, bandwidth: int, worker: str, owner: str, memory: int,
             demand: Windows | None, now: float) -> None:
        """``worker`` is seated on the allocated ``claim`` at ``now``."""
        live = self._live.get(claim)
        if live is None:
            first = self._first.pop(claim, None)
            if first is None:
                self._first[claim] = (worker, owner, memory, demand, now, node, bandwidth)
                return
            f_worker, f_owner, f_memory, f_demand, f_at, f_node, f_bandwidth = first
            result = ClaimTurns(claim, f_node, f_bandwidth, f_at,
                                intervals=[] if claim in self.keep else None)
            self.claims[claim] = result
            live = self._live[claim] = _Claim(result, self.settings)
            self._enter(live, f_worker, f_owner, f_memory, f_demand, f_at)
        self._advance(live, now)
        self._enter(live, worker, owner, memory, demand, now)

    def leave(self, claim: str, worker: str, now: float) -> None:
        live = self._live.get(claim)
        if live is None:
            first = self._first.get(claim)
            if first is not None and first[0] == worker:
                del self._first[claim]
            return
        self._advance(live, now)
        self._gone(live, worker, now)
        if not live.workers:
            live.result.last = now
            del self._live[claim]

    def end(self, now: float) -> None:
        """The scenario is over: every group played to ``now``."""
        for live in self._live.values():
            self._advance(live, now)
            for worker in live.workers.values():
                self._stop_resident(live, worker, now)

    # ------------------------------------------------------------------ internal

    def _enter(self, live: _Claim, worker: str, owner: str, memory: int,
               demand: Windows | None, now: float) -> None:
        record = MemberTurns(worker, owner, live.result.claim, now)
        self.members.append(record)
        live.workers[worker] = _Worker(memory, demand, record)
        self._act(live, live.group.join(worker, owner, now), now)
        self._demand(live, live.workers[worker], now)

    def _gone(self, live: _Claim, worker: str, now: float) -> None:
        w = live.workers.pop(worker)
        self._stop_resident(live, w, now)
        w.record.left = now
        live.timers.pop(worker, None)
        live.waiting_from.pop(worker, None)
        self._act(live, live.group.gone(worker, now), now)

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
            at = edges[index][is_end]
            if at > now:
                return
            w.next_change += 1
            when = max(at, w.record.joined)
            if is_end:
                if w.wants:
                    w.wants = False
                    live.waiting_from.pop(name, None)
                    self._act(live, live.group.idle(name, when), when)
            elif not w.wants and edges[index][1] > when:
                w.wants = True
                self._want(live, name, when)

    def _want(self, live: _Claim, name: str, now: float) -> None:
        if live.group.holder != name:
            live.waiting_from[name] = now
        self._act(live, live.group.want(name, now), now)

    def _next_edge(self, live: _Claim) -> float | None:
        times = [w.demand[w.next_change // 2][w.next_change % 2] for w in live.workers.values()
                 if w.demand is not None and w.next_change < 2 * len(w.demand)]
        return min(times) if times else None

    def _advance(self, live: _Claim, until: float) -> None:
        """Everything due on the claim up to ``until``, in time order."""
        group = live.group
        while True:
            times = [at for at, _ in live.timers.values()]
            deadline = group.next_deadline()
            if deadline is not None:
                times.append(deadline)
            edge = self._next_edge(live)
            if edge is not None:
                times.append(edge)
            if not times or min(times) > until:
                live.now = max(live.now, until)
                return
            now = max(live.now, min(times))
            live.now = now
            for worker, (at, what) in sorted(live.timers.items()):
                if at > now:
                    continue
                del live.timers[worker]
                w = live.workers[worker]
                if what == "restored":
                    w.resident_since = now
                    self._act(live, group.resident(worker, now), now)
                else:
                    if w.wants:
                        live.waiting_from[worker] = now
                    self._act(live, group.parked(worker, now), now)
            for w in list(live.workers.values()):
                self._demand(live, w, now)
            self._act(live, group.tick(now), now)

    def _act(self, live: _Claim, actions: list[Grant | Yield | Evict], now: float) -> None:
        for action in actions:
            name = action.member
            w = live.workers.get(name)
            if w is None:
                continue
            seconds = w.memory / live.result.bandwidth
            if isinstance(action, Grant):
                w.record.turns += 1
                since = live.waiting_from.pop(name, None)
                w.record.waits.append(now - since if since is not None else 0.0)
                if live.last_holder is not None and live.last_holder != name:
                    live.result.switches += 1
                live.last_holder = name
                self._switching(live, now, seconds)
                live.timers[name] = (now + seconds, "restored")
            elif isinstance(action, Yield):
                self._stop_resident(live, w, now)
                self._switching(live, now, min(seconds, action.grace))
                live.timers[name] = (now + seconds, "parked")
            else:
                # Evicted: its pod is deleted and recreated on the same claim at once.
                w.record.evictions += 1
                record, owner, memory, demand = w.record, w.record.owner, w.memory, w.demand
                self._gone(live, name, now)
                self.members.remove(record)
                self._enter(live, name, owner, memory, demand, now)
                back = live.workers[name].record
                back.joined, back.resident = record.joined, record.resident
                back.turns = record.turns
                back.evictions, back.waits = record.evictions, record.waits

    def _switching(self, live: _Claim, now: float, seconds: float) -> None:
        live.result.switching += seconds
        if live.result.intervals is not None:
            live.result.intervals.append((now, now + seconds, ""))

    def _stop_resident(self, live: _Claim, w: _Worker, now: float) -> None:
        if w.resident_since is None:
            return
        w.record.resident += now - w.resident_since
        if live.result.intervals is not None:
            live.result.intervals.append((w.resident_since, now, w.record.worker))
        w.resident_since = None
