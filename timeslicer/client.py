"""The worker's side of the turn channel: wait for the turn, park when asked.

Several workers share one claim; exactly one may hold device memory at a time.
The node agent decides whose turn it is and talks to each worker pod over a
Unix socket in the pod's own volume (its path in ``OPENRL_TURN_SOCKET``). The
contract, from the worker's side:

* Say whether you hold device memory when you connect (``resident=``): the
  agent trusts it, and after its own restart grants nothing until everyone
  has said -- for at most its yield grace: a worker silent past that must
  park within one more grace or is evicted (unless the device shows it
  holds nothing). Never say parked while you still hold memory: the next
  worker would be restored on top of you.
* ``want()`` the turn, then ``wait_for_turn()``. On the turn, restore into
  device memory and call ``resident()``.
* While resident, watch ``yield_requested()`` (or block in
  ``wait_for_yield()``): when asked, park within the grace it carries and call
  ``parked()``. A holder that overruns the grace has its pod deleted.
* ``idle()`` when you no longer want turns; you keep the turn until asked.

The connection comes back by itself: when the agent restarts (it re-creates
the socket), the client reconnects and says hello again with what it last
reported (resident after a grant or ``resident()``, parked after ``parked()``),
the turn that refers to, and its want. A yield asked stays asked across the
reconnect. One client per pod: the agent keeps only the newest connection.

Every grant is numbered; ``resident()`` and ``parked()`` name the turn they
are about, so a ``parked()`` said while a grant is still on its way frees
nothing, and a grant never numbered above the last turn parked (a duplicate,
or an old one) is never taken for a new turn (``timeslicer.protocol``).

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
    """The agent asks you to park: within ``grace`` seconds of ``received`` (monotonic), the
    turn numbered ``turn``."""

    grace: float
    received: float
    turn: int = 0

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
    """What the client knows and has said, without I/O: both clients share it (and the
    interleaving proof plays it against the agent's own replies)."""

    def __init__(self, resident: bool) -> None:
        self.resident = resident   # holds memory by its own word: restored, or started so
        self.holding = False       # told to restore under ``turn``, not parked since
        self.turn = 0              # the latest turn it acted on: holds it, or parked it
        self.wanted = False
        self.yielding: YieldRequest | None = None
        self.welcome: wire.Welcome | None = None
        self.wait_reason = ""
        self.reader = wire.LineReader()
        self.problems: list[str] = []

    def hello(self) -> bytes:
        """The lines that open a connection. Whatever came on the old connection and was
        not read is gone with it; what the worker holds and was asked is kept: until it
        says parked it says resident (a grant may have started a restore), and a yield
        asked stays asked (the agent tells it again, with the time left)."""
        self.reader, self.welcome = wire.LineReader(), None
        lines = wire.encode(wire.Hello(resident=self.resident or self.holding, turn=self.turn))
        return lines + (wire.encode(wire.Want()) if self.wanted else b"")

    def say(self, op: str) -> bytes:
        """The line for ``op`` (want, idle, resident, parked), the state it implies kept."""
        message: wire.Message
        if op in ("want", "idle"):
            self.wanted = op == "want"
            message = wire.Want() if self.wanted else wire.Idle()
        elif op == "resident":
            self.resident = True
            message = wire.Resident(turn=self.turn)
        else:
            self.resident = self.holding = False
            self.yielding = None
            message = wire.Parked(turn=self.turn)
        return wire.encode(message)

    def received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                line = self.reader.next_line()
                if line is None:
                    return
                self.apply(wire.decode(line, wire.FROM_AGENT))
            except wire.ProtocolError as exc:
                self.problems.append(f"unreadable line from the agent: {exc}")

    def apply(self, message: wire.Message) -> None:
        if isinstance(message, wire.Welcome):
            self.welcome = message
        elif isinstance(message, wire.Grant):
            # Fencing: a grant not above the last turn acted on is a duplicate or stale.
            if message.turn > self.turn:
                self.turn, self.holding, self.yielding = message.turn, True, None
        elif isinstance(message, wire.Yield):
            # Only for the turn it holds (or, holding memory without one, the turn it named).
            if message.turn == self.turn and (self.holding or self.resident):
                asked = YieldRequest(message.grace, time.monotonic(), message.turn)
                if self.yielding is None or asked.deadline < self.yielding.deadline:
                    self.yielding = asked
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
        """Whether the turn is yours: granted and not parked since (kept across reconnects)."""
        return self._session.holding

    @property
    def turn(self) -> int:
        """The number of the turn you hold, or last parked (0 before any)."""
        return self._session.turn


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
        self._send("want")

    def idle(self) -> None:
        self._send("idle")

    def resident(self) -> None:
        """Say you restored into device memory after the grant."""
        self._send("resident")

    def parked(self) -> None:
        """Say you hold no device memory now; this gives the turn back."""
        self._send("parked")

    # -- waiting
    def wait_for_turn(self, timeout: float | None = None) -> bool:
        """True once you hold the turn, False if ``timeout`` passes first (also while the
        agent is away: the client keeps trying to reconnect on every call)."""
        return self._wait(timeout, lambda: self._session.holding)

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
    def _send(self, op: str) -> None:
        line = self._session.say(op)
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
        await self._send("want")

    async def idle(self) -> None:
        await self._send("idle")

    async def resident(self) -> None:
        await self._send("resident")

    async def parked(self) -> None:
        await self._send("parked")

    async def wait_for_turn(self, timeout: float | None = None) -> bool:
        return await self._wait(_deadline(timeout), lambda: self._session.holding)

    async def wait_for_yield(self, timeout: float | None = None) -> YieldRequest | None:
        await self._wait(_deadline(timeout), lambda: self._session.yielding is not None)
        return self._session.yielding

    async def _send(self, op: str) -> None:
        line = self._session.say(op)
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
