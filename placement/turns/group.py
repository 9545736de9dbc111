"""``TurnGroup``: the turn policy of ``placement.turns.policy`` carried out on one shared claim.

The rules, the phase table and what entering a phase does are all the policy
module's; this one learns nothing new, it turns the caller's calls into the
table's events and keeps the books that make each call cheap. Rules:

* Each call is classified as one event for the member it names (``Event``),
  and the member takes the row of ``TRANSITIONS`` for its phase and that
  event, if there is one, with what entering its new phase does (``ROWS``).
  Then the group advances to the call's time: overruns, a yield come due,
  the end of recovering, and a grant while the turn is free::

      call           event for the member named
      join           none: it starts Unreported (recovering, not fresh) or Idle
      hello          claim (it says it is resident), else parked (or earlier)
      want           want, while it is connected
      idle           idle
      resident       restored (the holder naming its turn), else claim
      parked         parked, or earlier (the holder naming another turn)
      disconnected   disconnect
      gone           none: it leaves whatever phase it is in
      holds_device   claim while unreported, else seen holding
      device_free    device free
      retire         retire, the member marked retiring first (for good)
      tick           none: only the advance

* A claim is *free* (claim, free) when nobody holds the turn and no other
  member intrudes; a free claim under no turn number takes the next one.
* The advance, in order: intruders past their deadline overrun; a yielding
  holder past its deadline overruns, any other holder is asked to yield once
  someone waits, or it is retiring, and its time is up; recovering ends once every member has
  reported (or the bound passed: the silent ones become Silent); then, with
  no holder and no intruder, the next in the round-robin is granted.
* Who waits is kept in round-robin order (``Rotation``), with how many
  members each owner has and how many have yet to report, so no call walks
  every member. Reading (``view``, ``next_deadline``) changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from placement.turns.policy import (
    ENTER_ASK,
    ENTER_EVICT,
    ENTER_FREE,
    ENTER_GRANT,
    ENTER_QUEUE,
    ENTER_TAKE,
    EVICT_REASON,
    HOLDING,
    ROWS,
    Event,
    Member,
)
from placement.turns.rotation import Rotation
from placement.turns.values import Action, Evict, Grant, MemberView, TurnPhase, TurnSettings, Yield

__all__ = ["TurnGroup"]


# The phases and events as plain names: an Enum's members are slow to reach through its class.
(_E_WANT, _E_IDLE, _E_DISCONNECT, _E_GRANT, _E_CLAIM_FREE, _E_CLAIM_TAKEN, _E_RESTORED, _E_PARKED,
 _E_YIELD_DUE, _E_OVERRUN, _E_SEEN_HOLDING, _E_DEVICE_FREE, _E_BOUND, _E_RETIRE) = (
    Event.WANT, Event.IDLE, Event.DISCONNECT, Event.GRANT, Event.CLAIM_FREE, Event.CLAIM_TAKEN,
    Event.RESTORED, Event.PARKED, Event.YIELD_DUE, Event.OVERRUN, Event.SEEN_HOLDING,
    Event.DEVICE_FREE, Event.BOUND, Event.RETIRE)
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
        self._members: dict[str, Member] = {}
        self._owners: dict[str, int] = {}          # owner -> its place in the rotation
        self._holder: Member | None = None
        self._intruders: dict[str, Member] = {}   # blocking without the turn
        self._seq = 0
        self._turn = first_turn                    # the last turn number given or heard
        self._last_owner = -1                      # the rotation place last served
        self._last_member: dict[int, int] = {}     # owner's place -> its member last served
        # Kept alongside the members so no call walks them all: who waits, how many
        # members each owner has, how many have yet to report.
        self._waiting: Rotation[Member] = Rotation()
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
        self._members[member] = Member(
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
        if m.phase not in HOLDING:
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

    def retire(self, member: str, now: float) -> list[Action]:
        """The member is to be granted no more turns (it is to be moved): Retired now if it
        holds nothing, else once it parks -- a holder at the end of its turn, as though
        someone waited. For good: nothing takes it back."""
        m = self._get(member)
        m.retiring = True
        self._move(m, _E_RETIRE, now, [])
        return self._advance(now)

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
        if due is None and (h.retiring or self._anyone_waiting()):
            due = self._yield_due(h)
        if due is None or (soonest is not None and soonest <= due):
            return soonest
        return due

    # -- the rules -------------------------------------------------------------------------

    def _get(self, member: str) -> Member:
        m = self._members.get(member)
        if m is None:
            raise KeyError(f"member {member!r} is not in this group")
        return m

    def _claim(self, m: Member, turn: int, now: float, actions: list[Action]) -> None:
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

    def _park(self, m: Member, turn: int, now: float, actions: list[Action]) -> None:
        """``m`` says it holds nothing, as of ``turn``: the fencing rule."""
        if turn > self._turn:
            self._turn = turn
        if m is self._holder and turn != m.turn:
            return  # Event.EARLIER: it never saw this grant, which is on its way
        self._move(m, _E_PARKED, now, actions)

    def _move(self, m: Member, event: Event, now: float, actions: list[Action]) -> None:
        """``m`` takes the row of ``TRANSITIONS`` for its phase and ``event``, if any, with
        what entering its new phase does (``ROWS``, the table with that worked out)."""
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
        if enter == ENTER_FREE:
            self._leave(m, now)
            if m.retiring:  # the row Idle + retire, at once (before any want)
                m.phase, enter, m.rows = m.rows[_E_RETIRE]
            elif m.wants and m.connected:  # the row Idle + want, at once
                m.phase, enter, m.rows = _WAITING, ENTER_QUEUE, ROWS[_WAITING]
        if enter == ENTER_QUEUE:
            m.waiting_since = now
            self._waiting.add(self._owners[m.owner], m.seq, m)
        elif enter in (ENTER_GRANT, ENTER_TAKE):
            self._take(m, now)
            if enter == ENTER_GRANT:
                actions.append(Grant(m.member, m.turn))
        elif enter == ENTER_ASK:
            # Asked to park (a silent member is asked too: it hears it if it comes back).
            m.deadline = now + self.settings.yield_grace
            if m.phase is not _YIELDING:
                self._intruders[m.member] = m
            actions.append(Yield(m.member, self.settings.yield_grace, m.deadline, m.turn))
        elif enter == ENTER_EVICT:
            m.deadline = None
            if m is not self._holder:
                self._intruders[m.member] = m
            actions.append(Evict(m.member, EVICT_REASON[was]))

    def _leave(self, m: Member, now: float) -> None:
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

    def _take(self, m: Member, now: float) -> None:
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

    def _yield_due(self, h: Member) -> float:
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
            elif (h.phase is not _EVICTING and (h.retiring or self._anyone_waiting())
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

    def _next(self) -> Member | None:
        """Round-robin: the next owner after the last served, then its next member."""
        place = self._waiting.next_owner(self._last_owner)
        if place is None:
            return None
        return self._waiting.next_entry(place, self._last_member.get(place, -1))
