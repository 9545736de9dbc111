"""Turns on a shared claim: which worker is resident in device memory, and when that changes.

Several workers may share one claim; exactly one of them may be resident in
its devices at a time, the rest parked in host memory. This module is the
whole policy, for the node agent that enforces it and for the simulator that
plays it offline; neither decides a turn any other way. Rules:

* A *group* is one shared claim; its *members* are the worker pods on it, each
  with an *owner*. At most one member *holds the turn*. The holder is
  granted (restoring), resident, asked to yield (parking, not yet confirmed),
  or being evicted (its pod deleted, not yet gone).
* The turn passes only on proof that the holder freed the device: it says it
  parked, or it is *gone* (its pod deleted, or its container restarted). A
  dropped connection is no proof: the process may still hold the memory.
* Members that want a turn are served round-robin by owner (owners in the
  order they were first seen), then round-robin among that owner's members
  (in the order they joined). A member that leaves and comes back joins at
  the back.
* No switch without a reason: while nobody waits, the holder keeps the turn,
  however long past its quantum.
* While someone waits, the holder is asked to yield ``quantum`` after its
  grant (at once if that is already past), or ``min_resident`` after it when
  it no longer wants the turn; never sooner than ``min_resident``, because a
  switch costs seconds of copying. It then has ``yield_grace`` to park.
* A holder not parked ``yield_grace`` after it was asked is evicted
  (``TurnOverrun``): the caller deletes its pod. It still holds the turn until
  it is gone. Every overrun is evicted alike; the policy keeps no grudge, so
  a recreated pod rejoins at the back as any newcomer does.
* A member seen holding device memory without the turn is evicted
  (``ResidentWithoutTurn``), unless it is the holder or was just asked to park
  and is within its grace.
* Recovering (a group rebuilt after the agent restarted): members are
  unreported until they say whether they are resident, and nothing is granted
  while any member is unreported. A member that reports resident takes the
  turn, its quantum starting then; a second one that reports resident is
  asked to yield at once, and no one is granted until it has parked or gone.
* Time is the caller's clock, in seconds; the policy never reads a clock and
  holds no randomness, so the same calls at the same times give the same
  actions. Every call returns the actions it makes due; ``next_deadline``
  says when calling ``tick`` would next do something.

Under these rules a member that keeps wanting the turn, in a group whose
members park within their grace, is granted within
``(members * owners + 1) * (quantum + yield_grace)`` seconds, and under
constant demand each owner holds the turn within one quantum of an equal
share.
"""

from __future__ import annotations

from collections.abc import Iterator

from placement.turns.rotation import Rotation
from placement.turns.values import (
    Action,
    Evict,
    EvictReason,
    Grant,
    MemberView,
    TurnPhase,
    TurnSettings,
    Yield,
)

__all__ = [
    "Action",
    "Evict",
    "EvictReason",
    "Grant",
    "MemberView",
    "TurnGroup",
    "TurnPhase",
    "TurnSettings",
    "Yield",
]


class _Member:
    __slots__ = ("deadline", "evicting", "held", "held_since", "member", "owner", "reported",
                 "resident", "seq", "turns", "waiting_since", "wants")

    def __init__(self, member: str, owner: str, seq: int, reported: bool) -> None:
        self.member = member
        self.owner = owner
        self.seq = seq
        self.reported = reported
        self.wants = False
        self.resident = False         # says it finished restoring (holder only)
        self.waiting_since: float | None = None
        self.deadline: float | None = None  # asked to park by then (holder or intruder)
        self.evicting = False
        self.turns = 0
        self.held = 0.0
        self.held_since: float | None = None


class TurnGroup:
    """One shared claim's turns. Members are named by the caller (a pod's UID, say)."""

    def __init__(self, settings: TurnSettings | None = None, *, recovering: bool = False) -> None:
        self.settings = settings or TurnSettings()
        self._recovering = recovering
        self._members: dict[str, _Member] = {}
        self._owners: dict[str, int] = {}          # owner -> its place in the rotation
        self._holder: _Member | None = None
        self._intruders: dict[str, _Member] = {}   # resident without the turn
        self._seq = 0
        self._last_owner = -1                      # the rotation place last served
        self._last_member: dict[int, int] = {}     # owner's place -> its member last served
        # Kept alongside the members so no call walks them all: who waits, how many
        # members each owner has, how many have yet to report.
        self._waiting: Rotation[_Member] = Rotation()
        self._owned: dict[str, int] = {}
        self._unreported = 0

    # -- facts the caller observes -------------------------------------------------------

    def join(self, member: str, owner: str, now: float) -> list[Action]:
        """A worker pod on this claim appeared (recovering: it has yet to report)."""
        if member in self._members:
            raise ValueError(f"member {member!r} has already joined this group")
        self._seq += 1
        self._members[member] = _Member(member, owner, self._seq, reported=not self._recovering)
        self._unreported += self._recovering
        self._owned[owner] = self._owned.get(owner, 0) + 1
        if owner not in self._owners:
            self._owners[owner] = self._seq
        return self._advance(now)

    def hello(self, member: str, resident: bool, now: float) -> list[Action]:
        """The member (re)connected and said whether it holds device memory now."""
        m = self._get(member)
        self._unreported -= not m.reported
        m.reported = True
        if resident:
            if self._holder is None and not self._intruders:
                self._take(m, now, resident=True)
            elif self._holder is not m and member not in self._intruders:
                m.deadline = now + self.settings.yield_grace
                self._intruders[member] = m
                self._stop_waiting(m)
                return [Yield(member, self.settings.yield_grace, m.deadline), *self._advance(now)]
        else:
            self._freed(m, now)
        self._sync(m)
        return self._advance(now)

    def want(self, member: str, now: float) -> list[Action]:
        m = self._get(member)
        m.wants = True
        if m.waiting_since is None and self._waits(m):
            m.waiting_since = now
        self._sync(m)
        return self._advance(now)

    def idle(self, member: str, now: float) -> list[Action]:
        m = self._get(member)
        m.wants = False
        m.waiting_since = None
        self._sync(m)
        return self._advance(now)

    def resident(self, member: str, now: float) -> list[Action]:
        """The holder finished restoring. From anyone else, a claim to hold memory it has
        no turn for: treated as a resident report."""
        m = self._get(member)
        if m is self._holder:
            m.resident = True
            return self._advance(now)
        return self.hello(member, True, now)

    def parked(self, member: str, now: float) -> list[Action]:
        """The member holds no device memory: the turn passes if it held it."""
        m = self._get(member)
        self._freed(m, now)
        self._sync(m)
        return self._advance(now)

    def disconnected(self, member: str, now: float) -> list[Action]:
        """Its connection dropped. It cannot be granted, so it no longer wants a turn, but it
        keeps whatever it holds."""
        return self.idle(member, now)

    def gone(self, member: str, now: float) -> list[Action]:
        """Its pod is deleted or its container restarted: proof it holds nothing."""
        m = self._members.pop(member, None)
        if m is None:
            return self._advance(now)
        self._freed(m, now)
        self._sync(m)
        self._unreported -= not m.reported
        self._owned[m.owner] -= 1
        if not self._owner_has_members(m.owner):
            place = self._owners.pop(m.owner)
            del self._owned[m.owner]
            self._last_member.pop(place, None)
        return self._advance(now)

    def holds_device(self, member: str, now: float) -> list[Action]:
        """The device says this member's processes hold memory on it."""
        m = self._get(member)
        if m is self._holder or m.evicting:
            return self._advance(now)
        if member in self._intruders and m.deadline is not None and now < m.deadline:
            return self._advance(now)
        if not m.reported:
            return self.hello(member, True, now)
        self._intruders[member] = m
        self._stop_waiting(m)
        m.evicting = True
        return [Evict(member, EvictReason.RESIDENT_WITHOUT_TURN), *self._advance(now)]

    def tick(self, now: float) -> list[Action]:
        """Time passed: the actions due by ``now``."""
        return self._advance(now)

    # -- reading ---------------------------------------------------------------------------

    @property
    def holder(self) -> str | None:
        return self._holder.member if self._holder is not None else None

    @property
    def recovering(self) -> bool:
        return self._recovering

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def members(self) -> Iterator[str]:
        return iter(self._members)

    def view(self, member: str, now: float) -> MemberView:
        m = self._get(member)
        held = m.held + (now - m.held_since if m.held_since is not None else 0.0)
        return MemberView(m.member, m.owner, self._phase(m), m.wants,
                          m.waiting_since if self._waits(m) else None, m.turns, held)

    def views(self, now: float) -> list[MemberView]:
        return [self.view(member, now) for member in self._members]

    def next_deadline(self) -> float | None:
        """The earliest time at which ``tick`` would act, or None while nothing is due."""
        soonest = None
        if self._intruders:  # rare: no list to build on every call
            soonest = min((m.deadline for m in self._intruders.values()
                           if m.deadline is not None and not m.evicting), default=None)
        h = self._holder
        if h is None or h.evicting:
            return soonest
        due = h.deadline
        if due is None and self._anyone_waiting():
            due = self._yield_due(h)
        if due is None or (soonest is not None and soonest <= due):
            return soonest
        return due

    # -- the rules -------------------------------------------------------------------------

    def _get(self, member: str) -> _Member:
        m = self._members.get(member)
        if m is None:
            raise KeyError(f"member {member!r} is not in this group")
        return m

    def _phase(self, m: _Member) -> TurnPhase:
        if m.evicting:
            return TurnPhase.EVICTING
        if m.member in self._intruders:
            return TurnPhase.INTRUDING
        if m is self._holder:
            if m.deadline is not None:
                return TurnPhase.YIELDING
            return TurnPhase.RESIDENT if m.resident else TurnPhase.GRANTED
        if not m.reported:
            return TurnPhase.UNREPORTED
        return TurnPhase.WAITING if m.wants else TurnPhase.IDLE

    def _waits(self, m: _Member) -> bool:
        return (m.wants and m.reported and m is not self._holder
                and m.member not in self._intruders)

    def _anyone_waiting(self) -> bool:
        return len(self._waiting) > 0

    def _stop_waiting(self, m: _Member) -> None:
        m.waiting_since = None
        self._sync(m)

    def _sync(self, m: _Member) -> None:
        """Keep ``_waiting`` holding exactly the members that wait, after ``m`` changed."""
        waits = self._waits(m) and self._members.get(m.member) is m
        if waits != (m.seq in self._waiting):
            if waits:
                self._waiting.add(self._owners[m.owner], m.seq, m)
            else:
                self._waiting.remove(self._owners[m.owner], m.seq)

    # The tests hold the next three to plain walks over every member.

    def _owner_has_members(self, owner: str) -> bool:
        return self._owned[owner] > 0

    def _all_reported(self) -> bool:
        return self._unreported == 0

    def _yield_due(self, h: _Member) -> float:
        granted = h.held_since if h.held_since is not None else 0.0
        hold = self.settings.quantum if h.wants else 0.0
        return granted + max(hold, self.settings.min_resident)

    def _take(self, m: _Member, now: float, *, resident: bool) -> None:
        self._holder = m
        m.resident = resident
        m.deadline = None
        m.turns += 1
        m.held_since = now
        m.waiting_since = None
        self._sync(m)
        self._last_owner = self._owners[m.owner]
        self._last_member[self._last_owner] = m.seq

    def _freed(self, m: _Member, now: float) -> None:
        if m is self._holder:
            self._holder = None
            if m.held_since is not None:
                m.held += now - m.held_since
            m.held_since = None
            m.resident = False
        self._intruders.pop(m.member, None)
        m.deadline = None
        m.evicting = False
        if m.wants and m.waiting_since is None and m.member in self._members:
            m.waiting_since = now

    def _advance(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for m in self._intruders.values():
            if not m.evicting and m.deadline is not None and now >= m.deadline:
                m.evicting = True
                actions.append(Evict(m.member, EvictReason.TURN_OVERRUN))
        h = self._holder
        if h is not None and not h.evicting:
            if h.deadline is None and self._anyone_waiting() and now >= self._yield_due(h):
                h.deadline = now + self.settings.yield_grace
                actions.append(Yield(h.member, self.settings.yield_grace, h.deadline))
            elif h.deadline is not None and now >= h.deadline:
                h.evicting = True
                actions.append(Evict(h.member, EvictReason.TURN_OVERRUN))
        if self._recovering:
            if not self._all_reported():
                return actions
            self._recovering = False
        if self._holder is None and not self._intruders:
            nxt = self._next()
            if nxt is not None:
                self._take(nxt, now, resident=False)
                actions.append(Grant(nxt.member))
        return actions

    def _next(self) -> _Member | None:
        """Round-robin: the next owner after the last served, then its next member."""
        place = self._waiting.next_owner(self._last_owner)
        if place is None:
            return None
        return self._waiting.next_entry(place, self._last_member.get(place, -1))
