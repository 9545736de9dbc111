"""The turn policy: who on one shared claim may hold the device, and for how long.

Pure like the rest of ``placement`` (standard library, no I/O). The node agent
(``openrl-place timeslicer``) runs it against real workers; the simulator runs
it against well-behaved ones over a scenario's clock.

- ``policy``: the rules, and the one state machine of a member as a table.
- ``group``: ``TurnGroup``, the policy carried out on one shared claim.
- ``values``: the plain values it reads and says (``TurnSettings``, ``Grant``,
  ``Yield``, ``Evict``, ``TurnPhase``, ``MemberView``).
- ``rotation``: who waits, in round-robin order by owner, then member.
- ``play``: ``TurnPlay``, every shared claim of a scenario played offline.
- ``cycles``: a claim's repeating turns found once and counted, not played.
- ``books``: what a play keeps and hands back, on its clock of whole nanoseconds.
- ``log``: a claim's resident and switching intervals, repeats kept once.
"""

from placement.turns.group import TurnGroup
from placement.turns.policy import TRANSITIONS, Event
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
