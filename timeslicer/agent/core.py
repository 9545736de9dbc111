"""The agent's event loop: sockets in, policy calls, actions out.

Rules:

* A thin shell around :class:`placement.turns.TurnGroup`; it decides nothing
  the policy does not. One asyncio loop runs every group; the only timer is
  the earliest ``next_deadline()`` of any group.
* A message costs the same however many members its group has and however
  many groups the node has: only the members a call names (the caller, and
  each one an action names) can change phase, so only they are published,
  and the earliest deadline comes from a heap (``deadlines``), not a scan.
* A member is one worker pod (one incarnation of it: a restarted container
  rejoins under a new member id). Its socket is bound inside the pod's own
  directory, which must already exist (the kubelet makes it); nothing is
  created outside it. The socket is mode 0666 so a non-root worker connects.
* Whoever connects to a member's socket is that member. One live connection
  per member: a newer one closes the older. The first message must be
  ``hello``; anything out of order, unreadable or too long gets an ``error``
  (counted in ``openrl_timeslicer_bad_messages_total``), never a traceback,
  and the connection stays. What is said on the channel is ``replies``'s.
* No member can slow another: a connection is read ``READ_SLICE`` bytes at a
  time and at most ``LINES_PER_SLICE`` lines are handled before the loop
  turns to others; past ``LINE_BURST`` lines at once or ``LINE_RATE`` a
  second (a worker says a few a turn) the connection is not read until its
  allowance comes back, so a flood costs its sender, not the loop; replies
  are written without waiting, and a member that lets more than
  ``MAX_BACKLOG`` bytes of them pile up unread is disconnected (a dropped
  connection, nothing more).
* A fresh agent builds every group it finds at start recovering: nothing is
  granted until each member has said whether it is resident, or has gone, or
  the policy's bound has passed. Members that appear after the first listing
  are new pods and hold nothing. Turn numbers start at the wall clock's
  milliseconds, so a restarted agent numbers above its predecessor.
* Every grant, yield request, park, eviction and restart is logged at info.
* Effects outside the sockets (evicting a pod, publishing a phase) go through
  the ``Effects`` the caller gives; they must not block the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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
from timeslicer.agent.deadlines import Deadlines
from timeslicer.agent.metrics import AgentMetrics
from timeslicer.agent.sockets import bind_in

__all__ = ["LINES_PER_SLICE", "LINE_BURST", "LINE_RATE", "MAX_BACKLOG", "MAX_LINE",
           "PROTOCOL_VERSION", "READ_SLICE", "Agent", "Effects", "Member"]

log = logging.getLogger("openrl.timeslicer.agent")

PROTOCOL_VERSION = protocol.VERSION
MAX_LINE = protocol.MAX_LINE
READ_SLICE = MAX_LINE          # bytes read from one connection before others are served
LINES_PER_SLICE = 8            # lines handled from one connection before others are served
MAX_BACKLOG = 64 * 1024        # unread reply bytes a member may leave before it is dropped
LINE_RATE = 1000.0             # lines a second one connection may have handled, sustained...
LINE_BURST = 256               # ...and at once; past them its socket is not read for a while


@dataclass(eq=False)
class Member:
    """One worker pod on a group, as the agent keeps it."""

    key: str                 # the pod (its UID; in local mode group/member)
    group: str
    name: str                # the pod's name, as people read it
    owner: str
    role: str
    socket: Path
    incarnation: int = 0
    server: asyncio.AbstractServer | None = None
    writer: asyncio.StreamWriter | None = None
    hello: bool = False
    phase: TurnPhase | None = None
    phase_since: float = 0.0
    granted_at: float | None = None
    yielded_at: float | None = None
    waiting_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.key}#{self.incarnation}"


class Effects(Protocol):
    def evict(self, member: Member, reason: EvictReason) -> None: ...

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
        self._binding: set[asyncio.Task[None]] = set()

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
        task = self._loop.create_task(self._bind(member))
        self._binding.add(task)
        task.add_done_callback(self._bound)

    def synced(self) -> None:
        """The first listing is in: every member added from now on is a new pod."""
        if not self._synced:
            self._synced = True
            log.info("agent started: %d groups recovering, %d members", len(self.groups),
                     len(self.members))

    def _bound(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not bind a socket: %s", task.exception())

    def _join(self, member: Member, fresh: bool) -> None:
        group = self.groups.get(member.group)
        if group is None:
            group = self.groups[member.group] = TurnGroup(
                self.settings, recovering=not fresh, first_turn=self.first_turn)
        self._by_id[member.id] = member
        self._apply(member.group, group.join(member.id, member.owner, self.clock(), fresh=fresh),
                    member.id)

    def restarted(self, key: str) -> None:
        """Its container restarted: the old incarnation is gone, a new one joins."""
        member = self.members.get(key)
        if member is None:
            return
        log.info("container restarted in %s: it rejoins", member.name,
                 extra=_fields(member))
        self._leave(member)
        member.incarnation += 1
        member.hello = False
        self._close(member)
        self._join(member, fresh=True)

    def remove(self, key: str) -> None:
        """Its pod is gone: the turn passes if it held it; its socket goes."""
        member = self.members.pop(key, None)
        if member is None:
            return
        self.metrics.members.set(len(self.members))
        self._unbind(member)
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
        for member in self.members.values():
            self._unbind(member)
        for task in self._binding:
            task.cancel()
        if self._timer is not None:
            self._timer.cancel()

    def _unbind(self, member: Member) -> None:
        self._close(member)
        if member.server is not None:
            member.server.close()
            member.server = None
            with contextlib.suppress(FileNotFoundError):
                member.socket.unlink()

    # -- the socket --------------------------------------------------------------------

    async def _bind(self, member: Member) -> None:
        directory = member.socket.parent
        while not directory.is_dir():
            if self.members.get(member.key) is not member:
                return
            await asyncio.sleep(0.2)
        if self.members.get(member.key) is not member:
            return
        sock = bind_in(directory, member.socket.name)
        member.server = await asyncio.start_unix_server(
            lambda r, w: self._serve(member, r, w), sock=sock, limit=READ_SLICE)

    async def _serve(self, member: Member, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        if self.members.get(member.key) is not member:
            writer.close()
            return
        self._close(member)
        member.writer, member.hello = writer, False
        with contextlib.suppress(OSError, TypeError):
            peer = writer.get_extra_info("socket").getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            member.extra["pid"] = struct.unpack("3i", peer)[0]
        pace = _Pace()
        try:
            lines = protocol.LineReader()
            while member.writer is writer:
                data = await reader.read(READ_SLICE)
                if not data:
                    break
                lines.feed(data)
                await self._handle(member, writer, lines, pace)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # the agent stopping: the connection ends here, not as an error in the log
        finally:
            writer.close()
            if member.writer is writer:
                member.writer = None
                if self.members.get(member.key) is member and member.id in self._by_id:
                    group = self.groups[member.group]
                    self._apply(member.group, group.disconnected(member.id, self.clock()),
                                member.id)

    async def _handle(self, member: Member, writer: asyncio.StreamWriter,
                      lines: protocol.LineReader, pace: _Pace) -> None:
        """Every whole line read so far, a few at a time, at the connection's pace."""
        handled = 0
        while member.writer is writer:
            try:
                line = lines.next_line()
            except protocol.ProtocolError as exc:
                self._refuse(member, writer, "too_long", str(exc))
                continue
            if line is None:
                break
            wait = pace.take()
            if wait:  # a flood: this connection waits, nobody else does
                await asyncio.sleep(wait)
            self._message(member, writer, line)
            handled += 1
            if handled % LINES_PER_SLICE == 0:
                await asyncio.sleep(0)  # let every other member's lines in
        await asyncio.sleep(0)

    def _refuse(self, member: Member, writer: asyncio.StreamWriter, kind: str,
                why: str) -> None:
        self.metrics.bad_messages.labels(kind).inc()
        log.debug("refused a line from %s: %s", member.name, why, extra=_fields(member))
        self._send(member, protocol.Error(message=why[:200]), writer)

    def _message(self, member: Member, writer: asyncio.StreamWriter, line: bytes) -> None:
        try:
            message = protocol.decode(line, protocol.FROM_WORKER)
        except protocol.ProtocolError as exc:
            self._refuse(member, writer, "unreadable", str(exc))
            return
        if isinstance(message, protocol.Hello) == member.hello:
            why = "hello comes once, first" if member.hello else "the first message is hello"
            self._refuse(member, writer, "order", why)
            return
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
                self._send(member, reply, writer)
        elif isinstance(message, protocol.Resident):
            for reply in replies.catch_up(group, member.id, message.turn, now):
                self._send(member, reply, writer)
        self._apply(member.group, actions, member.id)

    def _parked(self, member: Member, group: TurnGroup, turn: int, now: float) -> None:
        view = group.view(member.id, now)
        frees = view.turn == turn or group.holder != member.id
        if frees and member.yielded_at is not None:
            self.metrics.park.observe(now - member.yielded_at)
            member.yielded_at = None
        if frees and view.phase not in (TurnPhase.IDLE, TurnPhase.WAITING):
            log.info("%s parked turn %d", member.name, turn, extra=_fields(member, turn=turn))
        elif not frees:
            log.info("%s parked turn %d while holding turn %d: its grant is on the way, "
                     "nothing freed", member.name, turn, view.turn,
                     extra=_fields(member, turn=turn))

    def _close(self, member: Member) -> None:
        if member.writer is not None:
            member.writer.close()
            member.writer = None

    def _send(self, member: Member, message: protocol.Message,
              writer: asyncio.StreamWriter | None = None) -> None:
        """Write without waiting; a member that leaves too much unread is disconnected."""
        writer = writer or member.writer
        if writer is None or writer.is_closing():
            return
        writer.write(protocol.encode(message))
        if writer.transport.get_write_buffer_size() > MAX_BACKLOG:
            self.metrics.bad_messages.labels("backlog").inc()
            log.warning("%s leaves its replies unread (over %d bytes): disconnected",
                        member.name, MAX_BACKLOG, extra=_fields(member))
            writer.transport.abort()

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
                         extra=_fields(member, turn=action.turn))
            elif isinstance(action, Yield):
                member.yielded_at = now
                log.info("asked %s to yield turn %d within %.1fs", member.name, action.turn,
                         action.grace, extra=_fields(member, turn=action.turn))
            elif isinstance(action, Evict):
                if action.reason is EvictReason.TURN_OVERRUN:
                    self.metrics.overruns.inc()
                self.metrics.evictions.labels(action.reason.value).inc()
                log.warning("evicting %s: %s", member.name, action.reason.value,
                            extra=_fields(member, reason=action.reason.value))
                self.effects.evict(member, action.reason)
            if message is not None:
                self._send(member, message)
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
            if view.phase is not member.phase:
                member.phase, member.phase_since = view.phase, now
                self.effects.publish(member, view.phase, holder.name if holder else None,
                                     view.turns)

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


class _Pace:
    """One connection's allowance of lines: ``LINE_BURST`` at once, ``LINE_RATE`` a second."""

    __slots__ = ("allowance", "since")

    def __init__(self) -> None:
        self.allowance, self.since = float(LINE_BURST), time.monotonic()

    def take(self) -> float:
        """Take one line's allowance: the seconds to wait first (0 within it)."""
        now = time.monotonic()
        self.allowance = min(float(LINE_BURST), self.allowance + (now - self.since) * LINE_RATE)
        self.since = now
        wait = 0.0
        if self.allowance < 1:
            wait = (1 - self.allowance) / LINE_RATE
            self.allowance, self.since = 1.0, now + wait
        self.allowance -= 1
        return wait


def _fields(member: Member, **more: Any) -> dict[str, Any]:
    return {"fields": {"pod": member.name, "group": member.group, **more}}


def touched(caller: str | None, actions: list[Action]) -> list[str]:
    """The members whose phase a policy call can have changed: the one it was about and
    those its actions name (a grant, a yield, an eviction). No other member's phase moves."""
    ids = [caller] if caller is not None else []
    ids += (a.member for a in actions if a.member != caller)
    return list(dict.fromkeys(ids))
