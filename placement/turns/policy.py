"""Turns on a shared claim: which worker is resident in device memory, and when that changes.

Several workers may share one claim; exactly one of them may be resident in
its devices at a time, the rest parked in host memory. This module is the
whole policy, for the node agent that enforces it and for the simulator that
plays it offline; neither decides a turn any other way. Rules:

* A *group* is one shared claim; its *members* are the worker pods on it, each
  with an *owner*. At most one member *holds the turn*. Each member is in one
  phase (``TurnPhase``) and moves only as ``TRANSITIONS`` below says.
* **Fencing.** Every grant carries a *turn number*, unique in its group: the
  count only grows, starts where the caller says (a restarted agent starts
  above any number its predecessor gave) and jumps past any higher number a
  member reports. ``resident``, ``parked`` and ``hello`` name the turn they
  refer to. A holder is freed only by a ``parked`` (or a hello saying it holds
  nothing) that names *its* turn: one naming an earlier turn was said before
  the member read its grant, which is still on its way and will be acted on,
  so it frees nothing. The worker's side keeps the mirror rule: it never
  restores on a grant whose number is not above the last turn it acted on.
* The turn passes only on proof that the holder freed the device: it says it
  parked (naming its turn), or it is *gone* (its pod deleted, or its container
  restarted). A dropped connection is no proof: the process may still hold
  the memory, so a holder whose connection drops keeps the turn, its want and
  its timers; a yield asked of it while away is asked again when it is back.
* Members that want a turn are served round-robin by owner (owners in the
  order they were first seen), then round-robin among that owner's members
  (in the order they joined). A member that leaves and comes back joins at
  the back. A member whose connection dropped waits no more until it is back.
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
  and is within its grace. One that *says* it holds memory without the turn is
  *intruding*: asked to park within its grace, and nobody is granted until it
  has.
* Recovering (a group rebuilt after the agent restarted): members are
  unreported until they say whether they are resident, and nothing is granted
  while any member is unreported -- for at most ``yield_grace`` after the
  group was rebuilt. A member still silent then is treated as possibly
  holding memory: it must report, park, or be shown free by the device
  (``device_free``) within one more grace, or it is evicted (``Silent``). A
  member that reports resident takes the turn, its quantum starting then; a
  second one that reports resident is asked to yield at once, and no one is
  granted until it has parked or gone.
* Time is the caller's clock, in seconds; the policy never reads a clock and
  holds no randomness, so the same calls at the same times give the same
  actions. Every call returns the actions it makes due; ``next_deadline``
  says when calling ``tick`` would next do something.

Under these rules a member that keeps wanting the turn, in a group whose
members park within their grace, is granted within
``(members * owners + 1) * (quantum + yield_grace)`` seconds, and under
constant demand each owner holds the turn within one quantum of an equal
share.

A member's phases and what moves them (a pair not listed leaves the phase as
it is; ``gone`` removes the member from any phase). A member left ``Idle``
that wants the turn and is connected goes on to ``Waiting`` at once (the row
Idle + want)::

    phase       event          next        why
    Unreported  claim, free    Resident    it held memory before the restart and nobody else does
    Unreported  claim, taken   Intruding   it holds memory while another does: it must park
    Unreported  parked         Idle        it says it holds nothing: reported
    Unreported  bound          Silent      not heard within a grace of the restart
    Idle        want           Waiting     connected and wanting: it queues
    Idle        claim, free    Resident    memory nobody else holds: the turn is its
    Idle        claim, taken   Intruding   memory while another holds the turn
    Idle        seen holding   Evicting    the device shows memory it has no turn for
    Waiting     idle           Idle        it no longer wants a turn
    Waiting     disconnect     Idle        a grant would reach no one
    Waiting     grant          Granted     its turn in the round-robin
    Waiting     claim, free    Resident    (recovering) it held memory and nobody else does
    Waiting     claim, taken   Intruding   memory while another holds the turn
    Waiting     seen holding   Evicting    the device shows memory it has no turn for
    Granted     restored       Resident    it says it restored under this turn
    Granted     parked         Idle        it parked this turn: the device is free
    Granted     yield due      Yielding    someone waits and its time is up
    Resident    parked         Idle        it parked this turn
    Resident    yield due      Yielding    someone waits and its time is up
    Yielding    parked         Idle        it parked in time
    Yielding    overrun        Evicting    the grace passed: its pod is deleted
    Intruding   parked         Idle        it let go of the memory
    Intruding   overrun        Evicting    it did not let go within the grace
    Silent      claim, free    Resident    heard at last, holding memory nobody else holds
    Silent      claim, taken   Intruding   heard at last, holding memory: park by the same deadline
    Silent      parked         Idle        heard at last, holding nothing
    Silent      device free    Idle        the device shows it holds nothing
    Silent      overrun        Evicting    still silent a grace after the bound
    Evicting    parked         Idle        it let go after all; its pod still goes

``earlier`` (a ``parked``, or a hello holding nothing, naming an older turn
than the holder's) is in no row: it never moves a holder, by the fencing rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum

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
    "TRANSITIONS",
    "Action",
    "Event",
    "Evict",
    "EvictReason",
    "Grant",
    "MemberView",
    "TurnGroup",
    "TurnPhase",
    "TurnSettings",
    "Yield",
]


class Event(IntEnum):
    """What happened to a member, as the policy classifies a call (numbered: looked up on
    every call, and an int hashes fast)."""

    WANT = 1
    IDLE = 2
    DISCONNECT = 3
    GRANT = 4
    CLAIM_FREE = 5      # says (or is seen) holding memory; nobody else does
    CLAIM_TAKEN = 6     # the same while another member holds or intrudes
    RESTORED = 7        # the holder says it restored under its turn
    PARKED = 8          # holds nothing (a holder: naming its turn)
    EARLIER = 9         # a holder's parked naming an older turn: no row
    YIELD_DUE = 10
    OVERRUN = 11        # its deadline to park passed
    SEEN_HOLDING = 12   # the device shows memory it has no turn for
    DEVICE_FREE = 13    # the device shows it holds none
    BOUND = 14          # still unreported a grace after a restart


P, E = TurnPhase, Event
TRANSITIONS: dict[tuple[TurnPhase, Event], tuple[TurnPhase, str]] = {
    (P.UNREPORTED, E.CLAIM_FREE): (P.RESIDENT, "it held memory before the restart and nobody "
                                               "else does"),
    (P.UNREPORTED, E.CLAIM_TAKEN): (P.INTRUDING, "it holds memory while another does"),
    (P.UNREPORTED, E.PARKED): (P.IDLE, "it says it holds nothing"),
    (P.UNREPORTED, E.BOUND): (P.SILENT, "not heard within a grace of the restart"),
    (P.IDLE, E.WANT): (P.WAITING, "connected and wanting: it queues"),
    (P.IDLE, E.CLAIM_FREE): (P.RESIDENT, "memory nobody else holds: the turn is its"),
    (P.IDLE, E.CLAIM_TAKEN): (P.INTRUDING, "memory while another holds the turn"),
    (P.IDLE, E.SEEN_HOLDING): (P.EVICTING, "the device shows memory it has no turn for"),
    (P.WAITING, E.IDLE): (P.IDLE, "it no longer wants a turn"),
    (P.WAITING, E.DISCONNECT): (P.IDLE, "a grant would reach no one"),
    (P.WAITING, E.GRANT): (P.GRANTED, "its turn in the round-robin"),
    (P.WAITING, E.CLAIM_FREE): (P.RESIDENT, "it held memory and nobody else does"),
    (P.WAITING, E.CLAIM_TAKEN): (P.INTRUDING, "memory while another holds the turn"),
    (P.WAITING, E.SEEN_HOLDING): (P.EVICTING, "the device shows memory it has no turn for"),
    (P.GRANTED, E.RESTORED): (P.RESIDENT, "it says it restored under this turn"),
    (P.GRANTED, E.PARKED): (P.IDLE, "it parked this turn: the device is free"),
    (P.GRANTED, E.YIELD_DUE): (P.YIELDING, "someone waits and its time is up"),
    (P.RESIDENT, E.PARKED): (P.IDLE, "it parked this turn"),
    (P.RESIDENT, E.YIELD_DUE): (P.YIELDING, "someone waits and its time is up"),
    (P.YIELDING, E.PARKED): (P.IDLE, "it parked in time"),
    (P.YIELDING, E.OVERRUN): (P.EVICTING, "the grace passed: its pod is deleted"),
    (P.INTRUDING, E.PARKED): (P.IDLE, "it let go of the memory"),
    (P.INTRUDING, E.OVERRUN): (P.EVICTING, "it did not let go within the grace"),
    (P.SILENT, E.CLAIM_FREE): (P.RESIDENT, "heard at last, holding memory nobody else holds"),
    (P.SILENT, E.CLAIM_TAKEN): (P.INTRUDING, "heard at last, holding memory: park by the "
                                             "same deadline"),
    (P.SILENT, E.PARKED): (P.IDLE, "heard at last, holding nothing"),
    (P.SILENT, E.DEVICE_FREE): (P.IDLE, "the device shows it holds nothing"),
    (P.SILENT, E.OVERRUN): (P.EVICTING, "still silent a grace after the bound"),
    (P.EVICTING, E.PARKED): (P.IDLE, "it let go after all; its pod still goes"),
}
del P, E

_HOLDING = frozenset({TurnPhase.GRANTED, TurnPhase.RESIDENT, TurnPhase.YIELDING})


# What entering a phase does, worked out once per row (the policy's hot path):
_NOTHING = 0
_FREE = 1     # holds nothing now (Idle): the turn is free if it held it; wanting, it waits
_QUEUE = 2    # Waiting: into the rotation
_GRANT = 3    # Granted: it takes the turn, a grant is sent
_TAKE = 4     # Resident from a claim: it takes the turn it says it holds
_ASK = 5      # Yielding, Intruding, Silent: asked to park within the grace
_EVICT = 6    # Evicting: its pod is to be deleted


def _enter(was: TurnPhase, new: TurnPhase) -> int:
    if new is TurnPhase.IDLE:
        return _FREE
    if new is TurnPhase.WAITING:
        return _QUEUE
    if new is TurnPhase.GRANTED:
        return _GRANT
    if new is TurnPhase.RESIDENT:
        return _NOTHING if was is TurnPhase.GRANTED else _TAKE
    if new is TurnPhase.EVICTING:
        return _EVICT
    # A silent member that comes back intruding keeps the deadline it had.
    return _NOTHING if was is TurnPhase.SILENT else _ASK


# Each phase's rows, keyed by event: (next phase, what entering it does, the next phase's
# rows). A member keeps its phase's rows at hand, so a move is one lookup by an int.
_Rows = dict[Event, tuple[TurnPhase, int, "_Rows"]]
_ROWS: dict[TurnPhase, _Rows] = {phase: {} for phase in TurnPhase}
for (_was, _event), (_new, _) in TRANSITIONS.items():
    _ROWS[_was][_event] = (_new, _enter(_was, _new), _ROWS[_new])
_EVICT_REASON = {TurnPhase.YIELDING: EvictReason.TURN_OVERRUN,
                 TurnPhase.INTRUDING: EvictReason.TURN_OVERRUN,
                 TurnPhase.SILENT: EvictReason.SILENT,
                 TurnPhase.IDLE: EvictReason.RESIDENT_WITHOUT_TURN,
                 TurnPhase.WAITING: EvictReason.RESIDENT_WITHOUT_TURN}


class _Member:
    __slots__ = ("connected", "deadline", "held", "held_since", "member", "owner", "phase",
                 "rows", "seq", "turn", "turns", "waiting_since", "wants")

    def __init__(self, member: str, owner: str, seq: int, phase: TurnPhase) -> None:
        self.member = member
        self.owner = owner
        self.seq = seq
        self.phase = phase
        self.rows = _ROWS[phase]            # its phase's rows of the table
        self.wants = False
        self.connected = phase is not TurnPhase.UNREPORTED
        self.turn = 0                       # the number of the turn it holds, or last named
        self.waiting_since: float | None = None
        self.deadline: float | None = None  # asked to park by then (yielding, intruding, silent)
        self.turns = 0
        self.held = 0.0
        self.held_since: float | None = None


# The phases and events as plain names: an Enum's members are slow to reach through its class.
(_E_WANT, _E_IDLE, _E_DISCONNECT, _E_GRANT, _E_CLAIM_FREE, _E_CLAIM_TAKEN, _E_RESTORED, _E_PARKED,
 _E_YIELD_DUE, _E_OVERRUN, _E_SEEN_HOLDING, _E_DEVICE_FREE, _E_BOUND) = (
    Event.WANT, Event.IDLE, Event.DISCONNECT, Event.GRANT, Event.CLAIM_FREE, Event.CLAIM_TAKEN,
    Event.RESTORED, Event.PARKED, Event.YIELD_DUE, Event.OVERRUN, Event.SEEN_HOLDING,
    Event.DEVICE_FREE, Event.BOUND)
_UNREPORTED, _IDLE, _WAITING = TurnPhase.UNREPORTED, TurnPhase.IDLE, TurnPhase.WAITING
_GRANTED, _RESIDENT, _YIELDING = TurnPhase.GRANTED, TurnPhase.RESIDENT, TurnPhase.YIELDING
_INTRUDING, _SILENT, _EVICTING = TurnPhase.INTRUDING, TurnPhase.SILENT, TurnPhase.EVICTING


class TurnGroup:
    """One shared claim's turns. Members are named by the caller (a pod's UID, say)."""

    def __init__(self, settings: TurnSettings | None = None, *, recovering: bool = False,
                 first_turn: int = 0) -> None:
        self.settings = settings or TurnSettings()
        self._recovering = recovering
        self._recover_by: float | None = None      # set by the first join while recovering
        self._members: dict[str, _Member] = {}
        self._owners: dict[str, int] = {}          # owner -> its place in the rotation
        self._holder: _Member | None = None
        self._intruders: dict[str, _Member] = {}   # blocking without the turn
        self._seq = 0
        self._turn = first_turn                    # the last turn number given or heard
        self._last_owner = -1                      # the rotation place last served
        self._last_member: dict[int, int] = {}     # owner's place -> its member last served
        # Kept alongside the members so no call walks them all: who waits, how many
        # members each owner has, how many have yet to report.
        self._waiting: Rotation[_Member] = Rotation()
        self._owned: dict[str, int] = {}
        self._unreported = 0

    # -- facts the caller observes -------------------------------------------------------

    def join(self, member: str, owner: str, now: float, *, fresh: bool = False) -> list[Action]:
        """A worker pod on this claim appeared. Recovering, it has yet to report unless
        ``fresh`` (the caller knows it is new since the restart, so holds nothing)."""
        if member in self._members:
            raise ValueError(f"member {member!r} has already joined this group")
        self._seq += 1
        unreported = self._recovering and not fresh
        if self._recovering and self._recover_by is None:
            self._recover_by = now + self.settings.yield_grace
        self._members[member] = _Member(
            member, owner, self._seq, _UNREPORTED if unreported else _IDLE)
        self._unreported += unreported
        self._owned[owner] = self._owned.get(owner, 0) + 1
        if owner not in self._owners:
            self._owners[owner] = self._seq
        return self._advance(now)

    def hello(self, member: str, resident: bool, now: float, turn: int = 0) -> list[Action]:
        """The member (re)connected and said whether it holds device memory now, and the
        turn that refers to (the one it holds, else the last it parked)."""
        m = self._get(member)
        m.connected = True
        actions: list[Action] = []
        if resident:
            self._claim(m, turn, now, actions)
        else:
            self._park(m, turn, now, actions)
        return self._advance(now, actions)

    def want(self, member: str, now: float) -> list[Action]:
        m = self._get(member)
        m.wants = True
        if m.connected:
            self._move(m, _E_WANT, now, [])
        return self._advance(now)

    def idle(self, member: str, now: float) -> list[Action]:
        m = self._get(member)
        m.wants = False
        self._move(m, _E_IDLE, now, [])
        return self._advance(now)

    def resident(self, member: str, now: float, turn: int | None = None) -> list[Action]:
        """The holder finished restoring under ``turn`` (None: whatever turn it holds, for a
        caller with no wire between). From anyone else, or naming another turn, a claim to
        hold memory: treated as a resident report."""
        m = self._get(member)
        if m is self._holder and (turn is None or turn == m.turn):
            self._move(m, _E_RESTORED, now, [])
            return self._advance(now)
        actions: list[Action] = []
        self._claim(m, turn or 0, now, actions)
        return self._advance(now, actions)

    def parked(self, member: str, now: float, turn: int | None = None) -> list[Action]:
        """The member holds no device memory, as of ``turn`` (None: the turn it holds, for a
        caller with no wire between). The turn passes if it held that turn."""
        m = self._get(member)
        actions: list[Action] = []
        self._park(m, m.turn if turn is None else turn, now, actions)
        return self._advance(now, actions)

    def disconnected(self, member: str, now: float) -> list[Action]:
        """Its connection dropped. It cannot be granted, so it waits no more; a holder keeps
        the turn, its want and its timers (whatever it holds, it still holds)."""
        m = self._get(member)
        m.connected = False
        if m.phase not in _HOLDING:
            m.wants = False
        self._move(m, _E_DISCONNECT, now, [])
        return self._advance(now)

    def gone(self, member: str, now: float) -> list[Action]:
        """Its pod is deleted or its container restarted: proof it holds nothing."""
        m = self._members.pop(member, None)
        if m is None:
            return self._advance(now)
        self._unreported -= m.phase is _UNREPORTED
        self._leave(m, now)
        self._owned[m.owner] -= 1
        if not self._owner_has_members(m.owner):
            place = self._owners.pop(m.owner)
            del self._owned[m.owner]
            self._last_member.pop(place, None)
        return self._advance(now)

    def holds_device(self, member: str, now: float) -> list[Action]:
        """The device says this member's processes hold memory on it."""
        m = self._get(member)
        actions: list[Action] = []
        if m.phase is _UNREPORTED:
            self._claim(m, 0, now, actions)
        else:
            self._move(m, _E_SEEN_HOLDING, now, actions)
        return self._advance(now, actions)

    def device_free(self, member: str, now: float) -> list[Action]:
        """The device says this member's processes hold no memory on it: taken as parked
        only for a member silent since a restart (one that reported speaks for itself)."""
        m = self._get(member)
        actions: list[Action] = []
        self._move(m, _E_DEVICE_FREE, now, actions)
        return self._advance(now, actions)

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

    @property
    def last_turn(self) -> int:
        """The highest turn number given or heard so far."""
        return self._turn

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def members(self) -> Iterator[str]:
        return iter(self._members)

    def view(self, member: str, now: float) -> MemberView:
        m = self._get(member)
        held = m.held + (now - m.held_since if m.held_since is not None else 0.0)
        turn = m.turn if m is self._holder or m.member in self._intruders else 0
        return MemberView(m.member, m.owner, m.phase, m.wants, m.waiting_since, m.turns, held,
                          turn, m.deadline)

    def views(self, now: float) -> list[MemberView]:
        return [self.view(member, now) for member in self._members]

    def next_deadline(self) -> float | None:
        """The earliest time at which ``tick`` would act, or None while nothing is due."""
        soonest = None
        if self._intruders:  # rare: no list to build on every call
            soonest = min((m.deadline for m in self._intruders.values()
                           if m.deadline is not None and m.phase is not _EVICTING),
                          default=None)
        if self._recovering and self._unreported and self._recover_by is not None:
            soonest = self._recover_by if soonest is None else min(soonest, self._recover_by)
        h = self._holder
        if h is None or h.phase is _EVICTING:
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

    def _claim(self, m: _Member, turn: int, now: float, actions: list[Action]) -> None:
        """``m`` says (or is seen) holding memory under ``turn``."""
        self._turn = max(self._turn, turn)
        if m is self._holder or m.phase is _EVICTING:
            return  # its memory is the turn's, or it is going anyway
        free = self._holder is None and all(i is m for i in self._intruders.values())
        if free and m.phase is not _INTRUDING:
            m.turn = turn if turn > 0 else self._turn + 1
            self._turn = max(self._turn, m.turn)
            self._move(m, _E_CLAIM_FREE, now, actions)
        elif not free:
            m.turn = turn
            self._move(m, _E_CLAIM_TAKEN, now, actions)

    def _park(self, m: _Member, turn: int, now: float, actions: list[Action]) -> None:
        """``m`` says it holds nothing, as of ``turn``: the fencing rule."""
        if turn > self._turn:
            self._turn = turn
        if m is self._holder and turn != m.turn:
            return  # Event.EARLIER: it never saw this grant, which is on its way
        self._move(m, _E_PARKED, now, actions)

    def _move(self, m: _Member, event: Event, now: float, actions: list[Action]) -> None:
        """``m`` takes the row of ``TRANSITIONS`` for its phase and ``event``, if any, with
        what entering its new phase does (``_ROWS``, the table with that worked out)."""
        step = m.rows.get(event)
        if step is None:
            return
        was = m.phase
        m.phase, enter, m.rows = step
        if was is _WAITING:
            m.waiting_since = None
            self._waiting.remove(self._owners[m.owner], m.seq)
        elif was is _UNREPORTED:
            self._unreported -= 1
        if enter == _FREE:
            self._leave(m, now)
            if m.wants and m.connected:  # the row Idle + want, at once
                m.phase, enter, m.rows = _WAITING, _QUEUE, _ROWS[_WAITING]
        if enter == _QUEUE:
            m.waiting_since = now
            self._waiting.add(self._owners[m.owner], m.seq, m)
        elif enter in (_GRANT, _TAKE):
            self._take(m, now)
            if enter == _GRANT:
                actions.append(Grant(m.member, m.turn))
        elif enter == _ASK:
            # Asked to park (a silent member is asked too: it hears it if it comes back).
            m.deadline = now + self.settings.yield_grace
            if m.phase is not _YIELDING:
                self._intruders[m.member] = m
            actions.append(Yield(m.member, self.settings.yield_grace, m.deadline, m.turn))
        elif enter == _EVICT:
            m.deadline = None
            if m is not self._holder:
                self._intruders[m.member] = m
            actions.append(Evict(m.member, _EVICT_REASON[was]))

    def _leave(self, m: _Member, now: float) -> None:
        """``m`` holds nothing now: the turn, if it held it, is free."""
        if m is self._holder:
            self._holder = None
            if m.held_since is not None:
                m.held += now - m.held_since
            m.held_since = None
        if m.phase is _WAITING and m.member not in self._members:
            self._waiting.remove(self._owners[m.owner], m.seq)
        if self._intruders:
            self._intruders.pop(m.member, None)
        m.deadline = None

    def _take(self, m: _Member, now: float) -> None:
        self._holder = m
        if self._intruders:
            self._intruders.pop(m.member, None)
        m.deadline = None
        m.turns += 1
        m.held_since = now
        self._last_owner = self._owners[m.owner]
        self._last_member[self._last_owner] = m.seq

    def _anyone_waiting(self) -> bool:
        return len(self._waiting) > 0

    # The tests hold the next three to plain walks over every member.

    def _owner_has_members(self, owner: str) -> bool:
        return self._owned[owner] > 0

    def _all_reported(self) -> bool:
        return self._unreported == 0

    def _yield_due(self, h: _Member) -> float:
        granted = h.held_since if h.held_since is not None else 0.0
        hold = self.settings.quantum if h.wants else 0.0
        return granted + max(hold, self.settings.min_resident)

    def _advance(self, now: float, actions: list[Action] | None = None) -> list[Action]:
        actions = [] if actions is None else actions
        if self._intruders:
            for m in [i for i in self._intruders.values() if i.deadline is not None
                      and now >= i.deadline and i.phase is not _EVICTING]:
                self._move(m, _E_OVERRUN, now, actions)
        h = self._holder
        if h is not None:
            if h.phase is _YIELDING:
                if h.deadline is not None and now >= h.deadline:
                    self._move(h, _E_OVERRUN, now, actions)
            elif (h.phase is not _EVICTING and self._anyone_waiting()
                  and now >= self._yield_due(h)):
                self._move(h, _E_YIELD_DUE, now, actions)
        if self._recovering:
            if not self._all_reported():
                if self._recover_by is None or now < self._recover_by:
                    return actions
                for m in [m for m in self._members.values()
                          if m.phase is _UNREPORTED]:
                    self._move(m, _E_BOUND, self._recover_by, actions)
            self._recovering = False
        if self._holder is None and not self._intruders:
            nxt = self._next()
            if nxt is not None:
                self._turn += 1
                nxt.turn = self._turn
                self._move(nxt, _E_GRANT, now, actions)
        return actions

    def _next(self) -> _Member | None:
        """Round-robin: the next owner after the last served, then its next member."""
        place = self._waiting.next_owner(self._last_owner)
        if place is None:
            return None
        return self._waiting.next_entry(place, self._last_member.get(place, -1))
