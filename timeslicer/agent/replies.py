"""What the agent hears and says on a member's channel, without I/O.

Rules:

* A worker's message is one policy call, and nothing else moves the policy:
  ``hello`` is ``hello(resident, turn)``, ``resident`` and ``parked`` pass the
  turn they name (the fencing rule of ``timeslicer.protocol``), ``want`` and
  ``idle`` pass nothing.
* An action is at most one message, to the member it names: a grant is
  ``grant`` with its turn number, a yield is ``yield`` with its grace and the
  turn to give back; an eviction is no message (the pod is deleted).
* After a hello the member is told what it may have missed while away: the
  ``welcome`` (its phase, and its turn while it holds or blocks the turn),
  then ``grant`` if it holds the turn under a number the hello did not name
  (the grant went down a dropped connection), then ``yield`` with the grace
  *left* if it is asked to park. Telling twice is harmless: the worker acts on
  a grant only once and keeps the earlier deadline of a yield.
* The socket loop (``core``) and the interleaving proof in the tests both use
  these functions, so the proof plays the agent's own words.
"""

from __future__ import annotations

from placement.turns import Action, Grant, TurnGroup, TurnPhase, Yield
from timeslicer import protocol

__all__ = ["ASKED", "call", "catch_up", "message_for", "welcome"]

ASKED = frozenset({TurnPhase.YIELDING, TurnPhase.INTRUDING, TurnPhase.SILENT})
_HOLDING = frozenset({TurnPhase.GRANTED, TurnPhase.RESIDENT, TurnPhase.YIELDING})


def call(group: TurnGroup, member: str, message: protocol.Message, now: float) -> list[Action]:
    """The policy call a worker's message is."""
    if isinstance(message, protocol.Hello):
        return group.hello(member, message.resident, now, message.turn)
    if isinstance(message, protocol.Want):
        return group.want(member, now)
    if isinstance(message, protocol.Idle):
        return group.idle(member, now)
    if isinstance(message, protocol.Resident):
        return group.resident(member, now, message.turn)
    if isinstance(message, protocol.Parked):
        return group.parked(member, now, message.turn)
    raise ValueError(f"{message.op!r} is not a worker's message")


def catch_up(group: TurnGroup, member: str, named: int, now: float) -> list[protocol.Message]:
    """The grant and the yield a member that named turn ``named`` may have missed."""
    view = group.view(member, now)
    out: list[protocol.Message] = []
    if view.phase in _HOLDING and view.turn != named:
        out.append(protocol.Grant(turn=view.turn))
    if view.phase in ASKED and view.deadline is not None:
        out.append(protocol.Yield(grace=max(0.0, view.deadline - now), turn=view.turn))
    return out


def welcome(group: TurnGroup, member: str, hello: protocol.Hello, now: float, *,
            group_name: str, member_name: str) -> list[protocol.Message]:
    """The answer to a hello: the welcome, then what the member may have missed."""
    view = group.view(member, now)
    return [protocol.Welcome(group=group_name, member=member_name, state=view.phase.value,
                             turn=view.turn),
            *catch_up(group, member, hello.turn if hello.resident else -1, now)]


def message_for(action: Action) -> protocol.Message | None:
    """The message an action sends its member, if any."""
    if isinstance(action, Grant):
        return protocol.Grant(turn=action.turn)
    if isinstance(action, Yield):
        return protocol.Yield(grace=action.grace, turn=action.turn)
    return None
