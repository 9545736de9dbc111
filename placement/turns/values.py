"""What the turn policy (``placement.turns``) reads and says: its settings, its actions,
a member's phase and view.

Plain values only, frozen, so the node agent and the simulator can keep, compare and
print them; the rules that produce them are all in ``placement.turns.policy``, carried out
by ``placement.turns.group``; the package re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Action", "Evict", "EvictReason", "Grant", "MemberView", "TurnPhase", "TurnSettings",
           "Yield"]


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """How long a turn lasts: all in seconds."""

    quantum: float = 120.0
    min_resident: float = 10.0
    yield_grace: float = 30.0

    def __post_init__(self) -> None:
        for name in ("quantum", "min_resident", "yield_grace"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, not {value!r}")
        if self.quantum <= 0:
            raise ValueError(f"quantum must be more than 0 seconds, not {self.quantum!r}")
        if self.min_resident > self.quantum:
            raise ValueError(f"min_resident ({self.min_resident}s) must not exceed quantum "
                             f"({self.quantum}s)")


class TurnPhase(Enum):
    """Where a member stands, as people read it."""

    UNREPORTED = "Unreported"  # recovering: has not said whether it is resident
    IDLE = "Idle"              # does not want a turn
    WAITING = "Waiting"
    GRANTED = "Granted"        # holds the turn, restoring
    RESIDENT = "Resident"
    YIELDING = "Yielding"      # asked to park, not yet confirmed
    EVICTING = "Evicting"      # its pod is being deleted, not yet gone
    INTRUDING = "Intruding"    # resident without the turn, asked to park
    SILENT = "Silent"          # recovering: not heard within the bound, may hold memory
    RETIRED = "Retired"        # parked for good: granted no more turns (it is to be moved)


class EvictReason(Enum):
    TURN_OVERRUN = "TurnOverrun"
    RESIDENT_WITHOUT_TURN = "ResidentWithoutTurn"
    SILENT = "Silent"  # not heard after a restart, and not shown free by the device


@dataclass(frozen=True, slots=True)
class Grant:
    """The member now holds turn number ``turn``: it may restore into device memory."""

    member: str
    turn: int = 0


@dataclass(frozen=True, slots=True)
class Yield:
    """The member is asked to park within ``grace`` seconds (by ``deadline``); ``turn`` is
    the turn it holds (or, intruding, the one it named)."""

    member: str
    grace: float
    deadline: float
    turn: int = 0


@dataclass(frozen=True, slots=True)
class Evict:
    """The member's pod is to be deleted; it keeps blocking the turn until gone."""

    member: str
    reason: EvictReason


Action = Grant | Yield | Evict


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member, read: for metrics, explain and the simulator's figures."""

    member: str
    owner: str
    phase: TurnPhase
    wants: bool
    waiting_since: float | None  # when it last began to wait, while it waits
    turns: int                   # grants (and resident reports that took the turn)
    held: float                  # seconds it has held the turn, so far
    turn: int = 0                # the turn number it holds or blocks under, else 0
    deadline: float | None = None  # when it must have parked, while asked to
