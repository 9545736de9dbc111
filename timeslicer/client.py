"""The worker's side of the turn channel: wait for the turn, park when asked.

Several workers share one claim; exactly one may hold device memory at a time.
The node agent decides whose turn it is and talks to each worker pod over a
Unix socket in the pod's own volume (its path in ``OPENRL_TURN_SOCKET``). The
contract, from the worker's side:

* Say whether you hold device memory when you connect (``resident=``): the
  agent trusts it, and after its own restart grants nothing until everyone
  has said. Never say parked while you still hold memory: the next worker
  would be restored on top of you.
* ``want()`` the turn, then ``wait_for_turn()``. On the turn, restore into
  device memory and call ``resident()``.
* While resident, watch ``yield_requested()`` (or block in
  ``wait_for_yield()``): when asked, park within the grace it carries and call
  ``parked()``. A holder that overruns the grace has its pod deleted.
* ``idle()`` when you no longer want turns; you keep the turn until asked.

The connection comes back by itself: when the agent restarts (it re-creates
the socket), the client reconnects and says hello again with what it last
reported (resident after a grant or ``resident()``, parked after ``parked()``)
and its want. One client per pod: the agent keeps only the newest connection.

Messages are read while you call the client (any method), so call one
regularly. Standard library only. ``TurnClient`` blocks; ``AsyncTurnClient``
is the same for asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from timeslicer import protocol as wire

__all__ = [
    "AgentError",
    "AgentUnavailable",
    "AsyncTurnClient",
    "TurnClient",
    "TurnError",
    "YieldRequest",
]

HOLDING = frozenset({"Granted", "Resident", "Yielding"})  # the agent's phases of a holder
_RETRY_FIRST, _RETRY_MOST = 0.05, 1.0
_Check = Callable[[], bool]


class TurnError(Exception):
    """The base of the client's errors."""


class AgentUnavailable(TurnError):
    """No agent answered on the socket within the time given."""


class AgentError(TurnError):
    """The agent refused something this client sent, or sent a line it could not read."""


@dataclass(frozen=True, slots=True)
class YieldRequest:
    """The agent asks you to park: within ``grace`` seconds of ``received`` (monotonic)."""

    grace: float
    received: float

    @property
    def deadline(self) -> float:
        return self.received + self.grace

    def remaining(self) -> float:
        """Seconds left of the grace, never below 0."""
        return max(0.0, self.deadline - time.monotonic())


def socket_path(path: str | os.PathLike[str] | None) -> str:
    """The socket to use: ``path``, else ``$OPENRL_TURN_SOCKET``."""
    if path is None:
        path = os.environ.get(wire.SOCKET_ENV)
        if not path:
            raise TurnError(f"no socket path given and ${wire.SOCKET_ENV} is not set (the "
                            "scheduler sets it in every worker pod)")
    return os.fspath(path)


class _Session:
    """What the client knows and has said, without I/O: both clients share it."""

    def __init__(self, resident: bool) -> None:
        self.resident = resident
        self.wanted = False
        self.holds_turn = False
        self.yielding: YieldRequest | None = None
        self.welcome: wire.Welcome | None = None
        self.wait_reason = ""
        self.reader = wire.LineReader()
        self.problems: list[str] = []

    def hello(self) -> bytes:
        """The lines that open a connection, and the state reset it implies."""
        self.reader, self.welcome, self.yielding = wire.LineReader(), None, None
        # A grant may have started a restore: until parked, say resident (the safe side).
        lines = wire.encode(wire.Hello(resident=self.resident or self.holds_turn))
        self.holds_turn = False
        return lines + (wire.encode(wire.Want()) if self.wanted else b"")

    def sent(self, message: wire.Message) -> bytes:
        if isinstance(message, wire.Want | wire.Idle):
            self.wanted = isinstance(message, wire.Want)
        elif isinstance(message, wire.Resident):
            self.resident = True
        elif isinstance(message, wire.Parked):
            self.resident = self.holds_turn = False
            self.yielding = None
        return wire.encode(message)

    def received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                line = self.reader.next_line()
                if line is None:
                    return
                self._apply(wire.decode(line, wire.FROM_AGENT))
            except wire.ProtocolError as exc:
                self.problems.append(f"unreadable line from the agent: {exc}")

    def _apply(self, message: wire.Message) -> None:
        if isinstance(message, wire.Welcome):
            self.welcome = message
            self.holds_turn = message.state in HOLDING
        elif isinstance(message, wire.Grant):
            self.holds_turn = True
        elif isinstance(message, wire.Yield):
            self.yielding = YieldRequest(message.grace, time.monotonic())
        elif isinstance(message, wire.Wait):
            self.wait_reason = message.reason
        elif isinstance(message, wire.Error):
            self.problems.append(f"the agent refused a message: {message.message}")

    def raise_problems(self) -> None:
        if self.problems:
            problems, self.problems = self.problems, []
            raise AgentError("; ".join(problems))


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


class _Client:
    """What both clients hold: the socket's path and the session."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, resident: bool = False,
                 connect_timeout: float | None = None) -> None:
        self.path = socket_path(path)
        self.connect_timeout = connect_timeout
        self._session = _Session(resident)
        self._closed = False

    @property
    def welcome(self) -> wire.Welcome | None:
        """The agent's last welcome (group, member, state), ``None`` while disconnected."""
        return self._session.welcome

    @property
    def holds_turn(self) -> bool:
        """Whether the turn is yours: granted (or kept on reconnect) and not parked since."""
        return self._session.holds_turn


class TurnClient(_Client):
    """The blocking client. ``with TurnClient() as turn: turn.want(); ...``"""

    _sock: socket.socket | None = None

    def yield_requested(self) -> YieldRequest | None:
        """Whether the agent asks you to park, without blocking (reads what arrived)."""
        self._pump(0.0)
        return self._session.yielding

    # -- connection
    def connect(self, timeout: float | None = None) -> wire.Welcome:
        """Connect and say hello; waits for the socket to appear (``AgentUnavailable``
        past ``timeout``)."""
        deadline = _deadline(timeout)
        while True:
            self._ensure_connected(deadline)
            welcome = self._session.welcome
            if welcome is not None:
                return welcome
            self._pump(_left(deadline), until=lambda: self._session.welcome is not None)
            if self._session.welcome is None and deadline is not None \
                    and time.monotonic() >= deadline:
                raise AgentUnavailable(f"{self.path}: no welcome from the agent in {timeout}s")

    def close(self) -> None:
        self._closed = True
        self._drop()

    def __enter__(self) -> TurnClient:
        self.connect(self.connect_timeout)
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- what it says
    def want(self) -> None:
        """Ask for a turn (it stays asked for until ``idle()``)."""
        self._send(wire.Want())

    def idle(self) -> None:
        self._send(wire.Idle())

    def resident(self) -> None:
        """Say you restored into device memory after the grant."""
        self._send(wire.Resident())

    def parked(self) -> None:
        """Say you hold no device memory now; this gives the turn back."""
        self._send(wire.Parked())

    # -- waiting
    def wait_for_turn(self, timeout: float | None = None) -> bool:
        """True once you hold the turn, False if ``timeout`` passes first (also while the
        agent is away: the client keeps trying to reconnect on every call)."""
        return self._wait(timeout, lambda: self._session.holds_turn)

    def wait_for_yield(self, timeout: float | None = None) -> YieldRequest | None:
        """The request to park once it comes, ``None`` if ``timeout`` passes first."""
        self._wait(timeout, lambda: self._session.yielding is not None)
        return self._session.yielding

    def _wait(self, timeout: float | None, done: _Check) -> bool:
        deadline = _deadline(timeout)
        while not done():
            try:
                self._ensure_connected(deadline)
            except AgentUnavailable:
                break  # the agent is away (restarting): not the turn, not a yield
            self._pump(_left(deadline), until=done)
            if deadline is not None and time.monotonic() >= deadline:
                break
        return done()

    # -- I/O
    def _send(self, message: wire.Message) -> None:
        line = self._session.sent(message)
        if self._sock is not None:
            try:
                self._sock.sendall(line)
            except OSError:
                self._drop()  # the next call reconnects; hello carries what was said
        self._pump(0.0)

    def _ensure_connected(self, deadline: float | None) -> None:
        if self._closed:
            raise TurnError("the client is closed")
        pause = _RETRY_FIRST
        while self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
                sock.sendall(self._session.hello())
                self._sock = sock
            except OSError as exc:
                sock.close()
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise AgentUnavailable(f"{self.path}: {exc.strerror or exc}") from None
                time.sleep(pause if left is None else min(pause, left))
                pause = min(pause * 2, _RETRY_MOST)

    def _pump(self, timeout: float | None, until: _Check | None = None) -> None:
        """Read what the agent sent, for up to ``timeout`` or until ``until()``."""
        deadline = _deadline(timeout)
        while self._sock is not None:
            left = _left(deadline)
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65536)
            except (TimeoutError, BlockingIOError):
                break
            except OSError:
                data = b""
            if not data:
                self._drop()
                break
            self._session.received(data)
            if (until is not None and until()) or left == 0:
                break
        self._session.raise_problems()

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._session.welcome = None


class AsyncTurnClient(_Client):
    """The asyncio client: the same calls, awaited (``yield_requested`` stays plain)."""

    _streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def yield_requested(self) -> YieldRequest | None:
        """Whether a request to park has been read (await any call to read more)."""
        return self._session.yielding

    async def connect(self, timeout: float | None = None) -> wire.Welcome:
        deadline = _deadline(timeout)
        if not await self._wait(deadline, lambda: self._session.welcome is not None):
            raise AgentUnavailable(f"{self.path}: no welcome from the agent in {timeout}s")
        assert self._session.welcome is not None
        return self._session.welcome

    async def close(self) -> None:
        self._closed = True
        await self._drop()

    async def __aenter__(self) -> AsyncTurnClient:
        await self.connect(self.connect_timeout)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def want(self) -> None:
        await self._send(wire.Want())

    async def idle(self) -> None:
        await self._send(wire.Idle())

    async def resident(self) -> None:
        await self._send(wire.Resident())

    async def parked(self) -> None:
        await self._send(wire.Parked())

    async def wait_for_turn(self, timeout: float | None = None) -> bool:
        return await self._wait(_deadline(timeout), lambda: self._session.holds_turn)

    async def wait_for_yield(self, timeout: float | None = None) -> YieldRequest | None:
        await self._wait(_deadline(timeout), lambda: self._session.yielding is not None)
        return self._session.yielding

    async def _send(self, message: wire.Message) -> None:
        line = self._session.sent(message)
        if self._streams is not None:
            try:
                self._streams[1].write(line)
                await self._streams[1].drain()
            except OSError:
                await self._drop()

    async def _wait(self, deadline: float | None, done: _Check) -> bool:
        while not done():
            left = _left(deadline)
            if left == 0:
                break
            try:
                await self._ensure_connected(deadline)
            except AgentUnavailable:
                break  # the agent is away (restarting): not the turn, not a yield
            if self._streams is None:
                break
            try:
                data = await asyncio.wait_for(self._streams[0].read(65536), left)
            except TimeoutError:
                break
            except OSError:
                data = b""
            if not data:
                await self._drop()
                continue
            self._session.received(data)
            self._session.raise_problems()
        return done()

    async def _ensure_connected(self, deadline: float | None) -> None:
        if self._closed:
            raise TurnError("the client is closed")
        pause = _RETRY_FIRST
        while self._streams is None:
            try:
                reader, writer = await asyncio.open_unix_connection(self.path)
                writer.write(self._session.hello())
                await writer.drain()
                self._streams = (reader, writer)
            except OSError as exc:
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise AgentUnavailable(f"{self.path}: {exc.strerror or exc}") from None
                await asyncio.sleep(pause if left is None else min(pause, left))
                pause = min(pause * 2, _RETRY_MOST)

    async def _drop(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self._session.welcome = None
