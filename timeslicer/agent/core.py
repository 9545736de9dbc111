"""The agent's event loop: policy calls in, actions out, one timer.

Rules:

* A thin shell around :class:`placement.turns.TurnGroup`; it decides nothing
  the policy does not. One asyncio loop runs every group; the only timer is
  the earliest ``next_deadline()`` of any group.
* A message costs the same however many members its group has and however
  many groups the node has: only the members a call names (the caller, and
  each one an action names) can change phase, so only they are published,
  and the earliest deadline comes from a heap (``deadlines``), not a scan.
* A member is one worker pod; what it may say on its socket, and how fast,
  is its channel's (``channels``); this module acts on what it says.
* A fresh agent builds every group it finds at start recovering: nothing is
  granted until each member has said whether it is resident, or has gone, or
  the policy's bound has passed. Members that appear after the first listing
  are new pods and hold nothing. Turn numbers start at the wall clock's
  milliseconds, so a restarted agent numbers above its predecessor.
* A group never waits on a member that never speaks. A member that has not
  connected is never granted (the policy grants only the connected), and
  after a restart one still silent is asked to park at the bound and evicted
  (``Silent``) a grace later; until it is gone nobody is granted (it may hold
  memory). What makes it gone is the mode's: in the cluster the pod's
  deletion, or a device sample showing it holds nothing; in ``--local``
  mode, with neither a kubelet nor a device to ask, the eviction itself
  (``local``). So a group recovers within two graces of a restart, plus, in
  the cluster, the pod's deletion.
* A member is one incarnation of one pod: a pod replaced (deleted, then made
  again under the same name) is a new member -- the old one is gone (its
  turn passes, its state goes) and the new one joins holding nothing and owed
  nothing. The cluster tells them apart by the pod's UID, ``--local`` by the
  agent's own mark in the member's directory.
* A drain (a move asks it: the pod's annotation, or ``--local``'s file) is the
  policy's ``retire``: the member finishes the turn it holds, parks, and is
  granted nothing more, while the others' turns go on. It is *drained* once
  Retired, or once evicted for silence (a group never waits on a silent
  member, and neither does a move); the effects say so where the asker reads
  it, in the same write as the phase that made it so. A drain is never taken
  back, and holds for a restarted container's new incarnation too.
* Every grant, yield request, park, eviction, restart and drain is logged at info.
* Effects outside the sockets (evicting a pod, publishing a phase) go through
  the ``Effects`` the caller gives; they must not block the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from placement.turns import (
    Action,
    Evict,
    EvictReason,
    Grant,
    TurnGroup,
    TurnPhase,
    TurnSettings,
    Yield,
)
from timeslicer import protocol
from timeslicer.agent import replies
from timeslicer.agent.channels import Channels, Member, log_fields
from timeslicer.agent.deadlines import Deadlines
from timeslicer.agent.metrics import AgentMetrics

__all__ = ["Agent", "Effects", "touched"]

log = logging.getLogger("openrl.timeslicer.agent")


class Effects(Protocol):
    def evict(self, member: Member, reason: EvictReason) -> None: ...

    # Also how a drained member (``member.drained``) is said to be: in the same write.
    def publish(self, member: Member, phase: TurnPhase, holder: str | None, turns: int) -> None: ...


class _NoEffects:
    def evict(self, member: Member, reason: EvictReason) -> None:
        log.warning("evict %s (%s): no effect in this mode", member.name, reason.value)

    def publish(self, member: Member, phase: TurnPhase, holder: str | None, turns: int) -> None:
        pass


class Agent:
    def __init__(self, settings: TurnSettings, *, effects: Effects | None = None,
                 metrics: AgentMetrics | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 first_turn: int | None = None) -> None:
        self.settings = settings
        self.effects: Effects = effects or _NoEffects()
        self.metrics = metrics or AgentMetrics()
        self.clock = clock
        # Above any number an earlier agent gave: it started earlier and gave fewer than
        # one a millisecond per group.
        self.first_turn = time.time_ns() // 1_000_000 if first_turn is None else first_turn
        self.groups: dict[str, TurnGroup] = {}
        self.members: dict[str, Member] = {}       # by key
        self._by_id: dict[str, Member] = {}        # by policy member id
        self._silent: set[str] = set()             # policy ids silent since the restart
        self._synced = False                       # the first listing is in
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._deadlines = Deadlines()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channels = Channels(self.members, self.metrics, heard=self._heard,
                                  dropped=self._dropped)

    # -- membership (from the pod watch or the local directory) --------------------------

    def add(self, member: Member, *, fresh: bool | None = None) -> None:
        """A pod appeared: join its group; its socket is bound once its directory exists.
        ``fresh``: it holds nothing for sure (by default: once the first listing is in)."""
        if member.key in self.members:
            raise ValueError(f"member {member.key!r} is already known")
        self._loop = asyncio.get_running_loop()
        self.members[member.key] = member
        self.metrics.members.set(len(self.members))
        self._join(member, fresh=self._synced if fresh is None else fresh)
        self._channels.open(member)

    def synced(self) -> None:
        """The first listing is in: every member added from now on is a new pod."""
        if not self._synced:
            self._synced = True
            log.info("agent started: %d groups recovering, %d members", len(self.groups),
                     len(self.members))

    def _join(self, member: Member, fresh: bool) -> None:
        group = self.groups.get(member.group)
        if group is None:
            group = self.groups[member.group] = TurnGroup(
                self.settings, recovering=not fresh, first_turn=self.first_turn)
        self._by_id[member.id] = member
        now = self.clock()
        actions = group.join(member.id, member.owner, now, fresh=fresh)
        if member.draining:  # a new incarnation of a pod asked to drain: drained as well
            actions += group.retire(member.id, now)
        self._apply(member.group, actions, member.id)

    def drain(self, key: str) -> None:
        """Its pod is asked to drain (to be moved): it finishes the turn it holds and parks,
        and is granted no more; drained at once if it holds nothing. Asked again: nothing."""
        member = self.members.get(key)
        if member is None or member.draining:
            return
        member.draining = True
        log.info("asked to drain %s", member.name, extra=log_fields(member))
        group = self.groups[member.group]
        self._apply(member.group, group.retire(member.id, self.clock()), member.id)

    def restarted(self, key: str) -> None:
        """Its container restarted: the old incarnation is gone, a new one joins."""
        member = self.members.get(key)
        if member is None:
            return
        log.info("container restarted in %s: it rejoins", member.name,
                 extra=log_fields(member))
        self._leave(member)
        member.incarnation += 1
        member.hello = False
        self._channels.disconnect(member)
        self._join(member, fresh=True)

    def remove(self, key: str) -> None:
        """Its pod is gone: the turn passes if it held it; its socket goes."""
        member = self.members.pop(key, None)
        if member is None:
            return
        self.metrics.members.set(len(self.members))
        self._channels.unbind(member)
        self._leave(member)
        if not self.groups[member.group]:
            del self.groups[member.group]
            self._deadlines.set(member.group, None)

    def _leave(self, member: Member) -> None:
        self._by_id.pop(member.id, None)
        self._silent.discard(member.id)
        self._apply(member.group, self.groups[member.group].gone(member.id, self.clock()))

    def holds_device(self, key: str) -> None:
        """The device says this pod's processes hold memory on it."""
        member = self.members.get(key)
        if member is not None:
            group = self.groups[member.group]
            self._apply(member.group, group.holds_device(member.id, self.clock()), member.id)

    def device_sample(self, holding: set[str]) -> None:
        """A whole sample of the device: ``holding`` are the pods whose processes hold
        memory; every other pod holds none. Members silent since the restart and not in it
        are taken as parked (the device attributes every process to its pod)."""
        for key in holding:
            self.holds_device(key)
        for member_id in [i for i in self._silent if self._by_id[i].key not in holding]:
            member = self._by_id[member_id]
            group = self.groups[member.group]
            self._apply(member.group, group.device_free(member_id, self.clock()), member_id)

    def close(self) -> None:
        self._channels.close()
        if self._timer is not None:
            self._timer.cancel()

    # -- what a member says (its channel has checked the order: hello first) -------------

    def _heard(self, member: Member, writer: asyncio.StreamWriter,
               message: protocol.Message) -> None:
        group, now = self.groups[member.group], self.clock()
        if isinstance(message, protocol.Resident) and member.granted_at is not None:
            self.metrics.restore.observe(now - member.granted_at)
            member.granted_at = None
        elif isinstance(message, protocol.Parked):
            self._parked(member, group, message.turn, now)
        actions = replies.call(group, member.id, message, now)
        if isinstance(message, protocol.Hello):
            member.hello = True
            for reply in replies.welcome(group, member.id, message, now,
                                         group_name=member.group.rpartition("/")[2],
                                         member_name=member.name):
                self._channels.send(member, reply, writer)
        elif isinstance(message, protocol.Resident):
            for reply in replies.catch_up(group, member.id, message.turn, now):
                self._channels.send(member, reply, writer)
        self._apply(member.group, actions, member.id)

    def _parked(self, member: Member, group: TurnGroup, turn: int, now: float) -> None:
        view = group.view(member.id, now)
        frees = view.turn == turn or group.holder != member.id
        if frees and member.yielded_at is not None:
            self.metrics.park.observe(now - member.yielded_at)
            member.yielded_at = None
        if frees and view.phase not in (TurnPhase.IDLE, TurnPhase.WAITING):
            log.info("%s parked turn %d", member.name, turn, extra=log_fields(member, turn=turn))
        elif not frees:
            log.info("%s parked turn %d while holding turn %d: its grant is on the way, "
                     "nothing freed", member.name, turn, view.turn,
                     extra=log_fields(member, turn=turn))

    def _dropped(self, member: Member) -> None:
        """Its live connection ended (a member still): the policy hears it, if it knows it."""
        if member.id in self._by_id:
            group = self.groups[member.group]
            self._apply(member.group, group.disconnected(member.id, self.clock()), member.id)

    # -- actions and the timer -----------------------------------------------------------

    def _apply(self, name: str, actions: list[Action], caller: str | None = None) -> None:
        """Carry out a call's actions; ``caller`` is the member the call was about."""
        now = self.clock()
        for action in actions:
            member = self._by_id.get(action.member)
            if member is None:
                continue
            message = replies.message_for(action)
            if isinstance(action, Grant):
                self.metrics.switches.inc()
                if member.waiting_at is not None:
                    self.metrics.wait.labels(member.role).observe(now - member.waiting_at)
                member.granted_at = now
                log.info("granted turn %d to %s", action.turn, member.name,
                         extra=log_fields(member, turn=action.turn))
            elif isinstance(action, Yield):
                member.yielded_at = now
                log.info("asked %s to yield turn %d within %.1fs", member.name, action.turn,
                         action.grace, extra=log_fields(member, turn=action.turn))
            elif isinstance(action, Evict):
                if action.reason is EvictReason.TURN_OVERRUN:
                    self.metrics.overruns.inc()
                self.metrics.evictions.labels(action.reason.value).inc()
                if action.reason is EvictReason.SILENT and member.draining:
                    self._drained(member)  # said as its eviction is published, below
                log.warning("evicting %s: %s", member.name, action.reason.value,
                            extra=log_fields(member, reason=action.reason.value))
                self.effects.evict(member, action.reason)
            if message is not None:
                self._channels.send(member, message)
        group = self.groups.get(name)
        if group is not None:
            self._publish(group, touched(caller, actions), now)
        self._deadlines.set(name, group.next_deadline() if group is not None else None)
        self._arm()

    def _publish(self, group: TurnGroup, ids: list[str], now: float) -> None:
        holder = self._by_id.get(group.holder or "")
        for member_id in ids:
            member = self._by_id.get(member_id)
            if member is None or member_id not in group:
                continue
            view = group.view(member_id, now)
            if view.phase is TurnPhase.WAITING and member.waiting_at is None:
                member.waiting_at = now
            elif view.phase is not TurnPhase.WAITING:
                member.waiting_at = None
            if member.phase is TurnPhase.RESIDENT and view.phase is not TurnPhase.RESIDENT:
                self.metrics.resident.labels(member.owner).inc(now - member.phase_since)
            if view.phase is TurnPhase.SILENT:
                self._silent.add(member_id)
            else:
                self._silent.discard(member_id)
            if view.phase is TurnPhase.RETIRED and not member.drained:
                self._drained(member)
            if view.phase is not member.phase:
                member.phase, member.phase_since = view.phase, now
                self.effects.publish(member, view.phase, holder.name if holder else None,
                                     view.turns)

    def _drained(self, member: Member) -> None:
        member.drained = True
        log.info("%s drained: parked, and granted no more turns", member.name,
                 extra=log_fields(member))

    def _arm(self) -> None:
        if self._loop is None:
            return
        when = self._deadlines.earliest()
        if self._timer is not None and when == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = when
        if when is not None:
            self._timer = self._loop.call_later(max(0.0, when - self.clock()), self._tick)

    def _tick(self) -> None:
        self._timer = self._timer_at = None
        now = self.clock()
        for name in self._deadlines.due(now):
            group = self.groups.get(name)
            if group is not None:
                self._apply(name, group.tick(now))
        self._arm()


def touched(caller: str | None, actions: list[Action]) -> list[str]:
    """The members whose phase a policy call can have changed: the one it was about and
    those its actions name (a grant, a yield, an eviction). No other member's phase moves."""
    ids = [caller] if caller is not None else []
    ids += (a.member for a in actions if a.member != caller)
    return list(dict.fromkeys(ids))
