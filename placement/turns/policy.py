"""Turns on a shared claim: which worker is resident in device memory, and when that changes.

Several workers may share one claim; exactly one of them may be resident in
its devices at a time, the rest parked in host memory. This module is the
whole policy, stated: its rules, its table of phases and what entering each
phase does. ``TurnGroup`` (``placement.turns.group``) carries it out, for the
node agent that enforces it and for the simulator that plays it offline;
neither decides a turn any other way. Rules:

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
  however long past its quantum -- unless it is retiring (below).
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
* **Retiring** (``retire``: the member is to be stopped and started again
  elsewhere, a move): it is granted no more turns, and the others' turns go
  on. Holding nothing (Idle, Waiting) it is *Retired* at once, out of the
  rotation. A holder finishes the turn it holds: it is asked to yield when
  its time is up as though someone waited (``quantum`` after its grant while
  it wants the turn, ``min_resident`` when it does not), has its grace to
  park as any holder, and is Retired once it parks (or evicted if it
  overruns). One that may hold memory without the turn (unreported, silent,
  intruding, evicting) is Retired when it says it holds nothing. A Retired
  member leaves only by going; seen or saying it holds memory it is asked
  to park, or evicted, like anyone without the turn. A retire cannot be
  taken back.
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
Idle + want); one left Idle that is retiring goes on to ``Retired`` instead
(the row Idle + retire), whatever it wants::

    phase       event          next        why
    Unreported  claim, free    Resident    it held memory before the restart and nobody else does
    Unreported  claim, taken   Intruding   it holds memory while another does: it must park
    Unreported  parked         Idle        it says it holds nothing: reported
    Unreported  bound          Silent      not heard within a grace of the restart
    Idle        want           Waiting     connected and wanting: it queues
    Idle        claim, free    Resident    memory nobody else holds: the turn is its
    Idle        claim, taken   Intruding   memory while another holds the turn
    Idle        seen holding   Evicting    the device shows memory it has no turn for
    Idle        retire         Retired     it holds nothing: out of the rotation for good
    Waiting     idle           Idle        it no longer wants a turn
    Waiting     disconnect     Idle        a grant would reach no one
    Waiting     grant          Granted     its turn in the round-robin
    Waiting     claim, free    Resident    (recovering) it held memory and nobody else does
    Waiting     claim, taken   Intruding   memory while another holds the turn
    Waiting     seen holding   Evicting    the device shows memory it has no turn for
    Waiting     retire         Retired     it holds nothing: out of the rotation for good
    Granted     restored       Resident    it says it restored under this turn
    Granted     parked         Idle        it parked this turn: the device is free
    Granted     yield due      Yielding    someone waits (or it retires) and its time is up
    Resident    parked         Idle        it parked this turn
    Resident    yield due      Yielding    someone waits (or it retires) and its time is up
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
    Retired     claim, free    Intruding   memory it will never have a turn for: it must park
    Retired     claim, taken   Intruding   memory while another holds the turn
    Retired     seen holding   Evicting    the device shows memory it has no turn for

``retire`` from a holding phase (Granted, Resident, Yielding) or from one that may
hold memory (Unreported, Silent, Intruding, Evicting) is in no row: it marks the
member retiring, and the phase it parks into is Retired (above).

``earlier`` (a ``parked``, or a hello holding nothing, naming an older turn
than the holder's) is in no row: it never moves a holder, by the fencing rule.

What entering a phase does, besides the move (``ENTER_*``, worked out once per
row of ``TRANSITIONS`` into ``ROWS``; an ``Evict`` names the reason of the phase
it left, ``EVICT_REASON``)::

    phase entered   from        effect
    Idle            any         the turn is free if it held it; retiring, it goes on
                                to Retired (Idle + retire), else still wanting and
                                connected, to Waiting (Idle + want)
    Waiting         any         into the rotation, waiting since now
    Granted         Waiting     it takes the turn under the next number: a Grant
    Resident        Granted     nothing: it holds the turn already
    Resident        any other   it takes the turn it says it holds
    Yielding        any         asked to park within the grace: a Yield
    Intruding       Silent      nothing: it keeps the deadline it had
    Intruding       any other   asked to park within the grace: a Yield
    Silent          Unreported  asked to park within the grace (heard if it comes back)
    Retired         any         nothing: it holds nothing and waits for nothing
    Evicting        any         its pod is to be deleted: an Evict, TurnOverrun from
                                Yielding or Intruding, Silent from Silent,
                                ResidentWithoutTurn from Idle, Waiting or Retired
"""

from __future__ import annotations

from enum import IntEnum

from placement.turns.values import EvictReason, TurnPhase

# The rest (HOLDING, ENTER_*, ROWS, EVICT_REASON, Member) is the table compiled for
# placement.turns.group, which carries the policy out.
__all__ = ["TRANSITIONS", "Event"]


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
    RETIRE = 15         # to be granted no more turns (it is to be moved)


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
    (P.IDLE, E.RETIRE): (P.RETIRED, "it holds nothing: out of the rotation for good"),
    (P.WAITING, E.IDLE): (P.IDLE, "it no longer wants a turn"),
    (P.WAITING, E.DISCONNECT): (P.IDLE, "a grant would reach no one"),
    (P.WAITING, E.GRANT): (P.GRANTED, "its turn in the round-robin"),
    (P.WAITING, E.CLAIM_FREE): (P.RESIDENT, "it held memory and nobody else does"),
    (P.WAITING, E.CLAIM_TAKEN): (P.INTRUDING, "memory while another holds the turn"),
    (P.WAITING, E.SEEN_HOLDING): (P.EVICTING, "the device shows memory it has no turn for"),
    (P.WAITING, E.RETIRE): (P.RETIRED, "it holds nothing: out of the rotation for good"),
    (P.GRANTED, E.RESTORED): (P.RESIDENT, "it says it restored under this turn"),
    (P.GRANTED, E.PARKED): (P.IDLE, "it parked this turn: the device is free"),
    (P.GRANTED, E.YIELD_DUE): (P.YIELDING, "someone waits (or it retires) and its time is up"),
    (P.RESIDENT, E.PARKED): (P.IDLE, "it parked this turn"),
    (P.RESIDENT, E.YIELD_DUE): (P.YIELDING, "someone waits (or it retires) and its time is "
                                             "up"),
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
    (P.RETIRED, E.CLAIM_FREE): (P.INTRUDING, "memory it will never have a turn for: it "
                                             "must park"),
    (P.RETIRED, E.CLAIM_TAKEN): (P.INTRUDING, "memory while another holds the turn"),
    (P.RETIRED, E.SEEN_HOLDING): (P.EVICTING, "the device shows memory it has no turn for"),
}
del P, E

HOLDING = frozenset({TurnPhase.GRANTED, TurnPhase.RESIDENT, TurnPhase.YIELDING})


# What entering a phase does, worked out once per row (the group's hot path):
ENTER_NOTHING = 0
ENTER_FREE = 1     # holds nothing now (Idle): the turn is free if it held it; wanting, it waits
ENTER_QUEUE = 2    # Waiting: into the rotation
ENTER_GRANT = 3    # Granted: it takes the turn, a grant is sent
ENTER_TAKE = 4     # Resident from a claim: it takes the turn it says it holds
ENTER_ASK = 5      # Yielding, Intruding, Silent: asked to park within the grace
ENTER_EVICT = 6    # Evicting: its pod is to be deleted


def _enter(was: TurnPhase, new: TurnPhase) -> int:
    if new is TurnPhase.IDLE:
        return ENTER_FREE
    if new is TurnPhase.WAITING:
        return ENTER_QUEUE
    if new is TurnPhase.GRANTED:
        return ENTER_GRANT
    if new is TurnPhase.RESIDENT:
        return ENTER_NOTHING if was is TurnPhase.GRANTED else ENTER_TAKE
    if new is TurnPhase.EVICTING:
        return ENTER_EVICT
    if new is TurnPhase.RETIRED:
        return ENTER_NOTHING  # from Idle or Waiting: it holds nothing, and waits no more
    # A silent member that comes back intruding keeps the deadline it had.
    return ENTER_NOTHING if was is TurnPhase.SILENT else ENTER_ASK


# Each phase's rows, keyed by event: (next phase, what entering it does, the next phase's
# rows). A member keeps its phase's rows at hand, so a move is one lookup by an int.
Rows = dict[Event, tuple[TurnPhase, int, "Rows"]]
ROWS: dict[TurnPhase, Rows] = {phase: {} for phase in TurnPhase}
for (_was, _event), (_new, _) in TRANSITIONS.items():
    ROWS[_was][_event] = (_new, _enter(_was, _new), ROWS[_new])
EVICT_REASON = {TurnPhase.YIELDING: EvictReason.TURN_OVERRUN,
                TurnPhase.INTRUDING: EvictReason.TURN_OVERRUN,
                TurnPhase.SILENT: EvictReason.SILENT,
                TurnPhase.IDLE: EvictReason.RESIDENT_WITHOUT_TURN,
                TurnPhase.WAITING: EvictReason.RESIDENT_WITHOUT_TURN,
                TurnPhase.RETIRED: EvictReason.RESIDENT_WITHOUT_TURN}


class Member:
    """A member as the table moves it: its phase, with that phase's rows at hand."""

    __slots__ = ("connected", "deadline", "held", "held_since", "member", "owner", "phase",
                 "retiring", "rows", "seq", "turn", "turns", "waiting_since", "wants")

    def __init__(self, member: str, owner: str, seq: int, phase: TurnPhase) -> None:
        self.member = member
        self.owner = owner
        self.seq = seq
        self.phase = phase
        self.rows = ROWS[phase]             # its phase's rows of the table
        self.wants = False
        self.retiring = False               # granted no more turns: Retired once it parks
        self.connected = phase is not TurnPhase.UNREPORTED
        self.turn = 0                       # the number of the turn it holds, or last named
        self.waiting_since: float | None = None
        self.deadline: float | None = None  # asked to park by then (yielding, intruding, silent)
        self.turns = 0
        self.held = 0.0
        self.held_since: float | None = None
