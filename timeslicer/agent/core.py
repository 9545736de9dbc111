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
  ``hello``; anything out of order gets an ``error`` and the connection stays.
* A fresh agent builds every group recovering: nothing is granted until each
  live member has said whether it is resident, or has gone.
* Effects outside the sockets (evicting a pod, publishing a phase) go through
  the ``Effects`` the caller gives; they must not block the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from timeslicer.agent.deadlines import Deadlines
from timeslicer.agent.metrics import AgentMetrics
from timeslicer.agent.sockets import bind_in

__all__ = ["MAX_LINE", "PROTOCOL_VERSION", "Agent", "Effects", "Member"]

log = logging.getLogger("openrl.timeslicer.agent")

PROTOCOL_VERSION = protocol.VERSION
MAX_LINE = protocol.MAX_LINE
_OPS = {"hello", "want", "idle", "resident", "parked"}


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
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.effects: Effects = effects or _NoEffects()
        self.metrics = metrics or AgentMetrics()
        self.clock = clock
        self.groups: dict[str, TurnGroup] = {}
        self.members: dict[str, Member] = {}       # by key
        self._by_id: dict[str, Member] = {}        # by policy member id
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._deadlines = Deadlines()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._binding: set[asyncio.Task[None]] = set()

    # -- membership (from the pod watch or the local directory) --------------------------

    def add(self, member: Member) -> None:
        """A pod appeared: join its group; its socket is bound once its directory exists."""
        if member.key in self.members:
            raise ValueError(f"member {member.key!r} is already known")
        self._loop = asyncio.get_running_loop()
        self.members[member.key] = member
        self.metrics.members.set(len(self.members))
        self._join(member)
        task = self._loop.create_task(self._bind(member))
        self._binding.add(task)
        task.add_done_callback(self._bound)

    def _bound(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not bind a socket: %s", task.exception())

    def _join(self, member: Member) -> None:
        group = self.groups.get(member.group)
        if group is None:
            group = self.groups[member.group] = TurnGroup(self.settings, recovering=True)
        self._by_id[member.id] = member
        self._apply(member.group, group.join(member.id, member.owner, self.clock()), member.id)

    def restarted(self, key: str) -> None:
        """Its container restarted: the old incarnation is gone, a new one joins."""
        member = self.members.get(key)
        if member is None:
            return
        self._leave(member)
        member.incarnation += 1
        member.hello = False
        self._close(member)
        self._join(member)

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
        self._apply(member.group, self.groups[member.group].gone(member.id, self.clock()))

    def holds_device(self, key: str) -> None:
        """The device says this pod's processes hold memory on it."""
        member = self.members.get(key)
        if member is not None:
            group = self.groups[member.group]
            self._apply(member.group, group.holds_device(member.id, self.clock()), member.id)

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
            lambda r, w: self._serve(member, r, w), sock=sock, limit=MAX_LINE + 1)

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
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.LimitOverrunError:
                    self._send(writer, {"op": "error",
                                        "message": f"a message is at most {MAX_LINE} bytes"})
                    break
                except asyncio.IncompleteReadError:
                    break
                if member.writer is not writer:
                    break
                self._message(member, writer, line)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            if member.writer is writer:
                member.writer = None
                if self.members.get(member.key) is member and member.id in self._by_id:
                    group = self.groups[member.group]
                    self._apply(member.group, group.disconnected(member.id, self.clock()),
                                member.id)

    def _message(self, member: Member, writer: asyncio.StreamWriter, line: bytes) -> None:
        try:
            message = json.loads(line)
            op = message.get("op") if isinstance(message, dict) else None
        except ValueError:
            self._send(writer, {"op": "error", "message": "not one JSON object on a line"})
            return
        if op not in _OPS:
            self._send(writer, {"op": "error", "message": f"unknown op {op!r}"})
            return
        if (op == "hello") == member.hello:
            why = "hello comes once, first" if member.hello else "the first message is hello"
            self._send(writer, {"op": "error", "message": why})
            return
        group, now = self.groups[member.group], self.clock()
        if op == "hello":
            resident = message.get("resident")
            if not isinstance(resident, bool):
                self._send(writer, {"op": "error", "message": "hello needs resident: true|false"})
                return
            member.hello = True
            actions = group.hello(member.id, resident, now)
            self._send(writer, {"op": "welcome", "v": PROTOCOL_VERSION,
                                "group": member.group.rpartition("/")[2], "member": member.name,
                                "state": group.view(member.id, now).phase.value})
        elif op == "want":
            actions = group.want(member.id, now)
        elif op == "idle":
            actions = group.idle(member.id, now)
        elif op == "resident":
            if member.granted_at is not None:
                self.metrics.restore.observe(now - member.granted_at)
                member.granted_at = None
            actions = group.resident(member.id, now)
        else:
            if member.yielded_at is not None:
                self.metrics.park.observe(now - member.yielded_at)
                member.yielded_at = None
            actions = group.parked(member.id, now)
        self._apply(member.group, actions, member.id)

    def _close(self, member: Member) -> None:
        if member.writer is not None:
            member.writer.close()
            member.writer = None

    @staticmethod
    def _send(writer: asyncio.StreamWriter | None, message: dict[str, Any]) -> None:
        if writer is not None and not writer.is_closing():
            writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    # -- actions and the timer -----------------------------------------------------------

    def _apply(self, name: str, actions: list[Action], caller: str | None = None) -> None:
        """Carry out a call's actions; ``caller`` is the member the call was about."""
        now = self.clock()
        for action in actions:
            member = self._by_id.get(action.member)
            if member is None:
                continue
            if isinstance(action, Grant):
                self.metrics.switches.inc()
                if member.waiting_at is not None:
                    self.metrics.wait.labels(member.role).observe(now - member.waiting_at)
                member.granted_at = now
                self._send(member.writer, {"op": "grant"})
            elif isinstance(action, Yield):
                member.yielded_at = now
                self._send(member.writer, {"op": "yield", "grace": action.grace})
            elif isinstance(action, Evict):
                if action.reason is EvictReason.TURN_OVERRUN:
                    self.metrics.overruns.inc()
                self.metrics.evictions.labels(action.reason.value).inc()
                log.warning("evicting %s: %s", member.name, action.reason.value)
                self.effects.evict(member, action.reason)
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


def touched(caller: str | None, actions: list[Action]) -> list[str]:
    """The members whose phase a policy call can have changed: the one it was about and
    those its actions name (a grant, a yield, an eviction). No other member's phase moves."""
    ids = [caller] if caller is not None else []
    ids += (a.member for a in actions if a.member != caller)
    return list(dict.fromkeys(ids))
