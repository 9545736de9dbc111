"""Each member's channel: its socket, its one connection, and how much it may say.

Rules:

* A member is one worker pod (one incarnation of it: a restarted container
  rejoins under a new member id). Its socket is bound inside the pod's own
  directory, which must already exist (the kubelet makes it); nothing is
  created outside it. The socket is mode 0666 so a non-root worker connects.
* Whoever connects to a member's socket is that member. One live connection
  per member: a newer one closes the older. What its messages do is the
  agent's (``core``); what is said back, ``replies``'s. Nothing a member sends
  is ever a traceback; each row below is a rule of the channel, and each
  refusal is counted in ``openrl_timeslicer_bad_messages_total`` by its kind:

    what the member sends                      the channel
    -----------------------------------------  ----------------------------------------
    a line past ``MAX_LINE`` bytes             ``error``, kind ``too_long``; the
                                               connection stays
    a line that is no message from a worker    ``error``, kind ``unreadable``; it stays
    a first message other than ``hello``, or   ``error``, kind ``order``; it stays
      a second ``hello``
    more than ``LINE_BURST`` lines at once,    not read until its allowance comes back
      or ``LINE_RATE`` a second, sustained     (a worker says a few a turn)
    replies left unread past ``MAX_BACKLOG``   disconnected, kind ``backlog`` (a dropped
      bytes                                    connection, nothing more)
    anything else                              handed to the agent

* No member can slow another: a connection is read ``READ_SLICE`` bytes at a
  time and at most ``LINES_PER_SLICE`` lines are handled before the loop
  turns to others; a flood costs its sender, not the loop (the pause above
  holds up its connection alone); replies are written without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.turns import TurnPhase
from timeslicer import protocol
from timeslicer.agent.metrics import AgentMetrics
from timeslicer.agent.sockets import bind_in

__all__ = ["LINES_PER_SLICE", "LINE_BURST", "LINE_RATE", "MAX_BACKLOG", "MAX_LINE",
           "PROTOCOL_VERSION", "READ_SLICE", "Channels", "Member", "log_fields"]

# The agent's one logger, shared with ``core``: a member's story reads as one stream.
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
    socket_ino: int | None = None   # the inode of the socket bound for it (local mode's mark)
    server: asyncio.AbstractServer | None = None
    writer: asyncio.StreamWriter | None = None
    hello: bool = False
    phase: TurnPhase | None = None
    phase_since: float = 0.0
    granted_at: float | None = None
    yielded_at: float | None = None
    waiting_at: float | None = None
    draining: bool = False   # asked to drain (a move): it is granted no more turns
    drained: bool = False    # parked for good, or evicted for silence: the effects say so
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.key}#{self.incarnation}"


# A message read off a member's connection, in order (hello first), for the agent to act on;
# the writer is the connection it came on, where its replies go.
Heard = Callable[[Member, asyncio.StreamWriter, protocol.Message], None]


class Channels:
    """Every member's socket and its one connection. ``members`` is the agent's own map: a
    member no longer in it (removed, or replaced under its key) is served no more."""

    def __init__(self, members: Mapping[str, Member], metrics: AgentMetrics, *,
                 heard: Heard, dropped: Callable[[Member], None]) -> None:
        self._members = members
        self.metrics = metrics
        self._heard = heard
        self._dropped = dropped  # its live connection ended, and it is still a member
        self._binding: set[asyncio.Task[None]] = set()

    def open(self, member: Member) -> None:
        """Bind the member's socket once its directory exists (a task on the running loop)."""
        task = asyncio.get_running_loop().create_task(self._bind(member))
        self._binding.add(task)
        task.add_done_callback(self._bound)

    def close(self) -> None:
        """Every socket unbound, every binding still waiting for its directory given up."""
        for member in self._members.values():
            self.unbind(member)
        for task in self._binding:
            task.cancel()

    def _bound(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not bind a socket: %s", task.exception())

    def unbind(self, member: Member) -> None:
        self.disconnect(member)
        if member.server is not None:
            member.server.close()
            member.server = None
            with contextlib.suppress(FileNotFoundError):
                member.socket.unlink()

    def disconnect(self, member: Member) -> None:
        if member.writer is not None:
            member.writer.close()
            member.writer = None

    def send(self, member: Member, message: protocol.Message,
             writer: asyncio.StreamWriter | None = None) -> None:
        """Write without waiting; a member that leaves too much unread is disconnected."""
        writer = writer or member.writer
        if writer is None or writer.is_closing():
            return
        writer.write(protocol.encode(message))
        if writer.transport.get_write_buffer_size() > MAX_BACKLOG:
            self.metrics.bad_messages.labels("backlog").inc()
            log.warning("%s leaves its replies unread (over %d bytes): disconnected",
                        member.name, MAX_BACKLOG, extra=log_fields(member))
            writer.transport.abort()

    async def _bind(self, member: Member) -> None:
        directory = member.socket.parent
        while not directory.is_dir():
            if self._members.get(member.key) is not member:
                return
            await asyncio.sleep(0.2)
        if self._members.get(member.key) is not member:
            return
        sock = bind_in(directory, member.socket.name)
        with contextlib.suppress(OSError):  # gone already: the next look finds it replaced
            member.socket_ino = os.lstat(member.socket).st_ino
        member.server = await asyncio.start_unix_server(
            lambda r, w: self._serve(member, r, w), sock=sock, limit=READ_SLICE)

    async def _serve(self, member: Member, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        if self._members.get(member.key) is not member:
            writer.close()
            return
        self.disconnect(member)
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
                if self._members.get(member.key) is member:
                    self._dropped(member)

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
            self._line(member, writer, line)
            handled += 1
            if handled % LINES_PER_SLICE == 0:
                await asyncio.sleep(0)  # let every other member's lines in
        await asyncio.sleep(0)

    def _line(self, member: Member, writer: asyncio.StreamWriter, line: bytes) -> None:
        try:
            message = protocol.decode(line, protocol.FROM_WORKER)
        except protocol.ProtocolError as exc:
            self._refuse(member, writer, "unreadable", str(exc))
            return
        if isinstance(message, protocol.Hello) == member.hello:
            why = "hello comes once, first" if member.hello else "the first message is hello"
            self._refuse(member, writer, "order", why)
            return
        self._heard(member, writer, message)

    def _refuse(self, member: Member, writer: asyncio.StreamWriter, kind: str,
                why: str) -> None:
        self.metrics.bad_messages.labels(kind).inc()
        log.debug("refused a line from %s: %s", member.name, why, extra=log_fields(member))
        self.send(member, protocol.Error(message=why[:200]), writer)


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


def log_fields(member: Member, **more: Any) -> dict[str, Any]:
    """A log line's structured fields about ``member`` (the ``extra`` of a log call)."""
    return {"fields": {"pod": member.name, "group": member.group, **more}}
