"""The turn channel's wire: one JSON object per line over the pod's Unix socket.

Rules:

* Each message is one JSON object on one line, UTF-8, ending in ``\\n``, at
  most ``MAX_LINE`` bytes with the newline. Every message has ``"op"``;
  fields a side does not know are ignored, so either side may add some.
* The worker says ``hello`` first on every connection (``resident``: whether
  it holds device memory right now; ``turn``: the turn that refers to), then
  ``want`` / ``idle`` (whether it wants a turn), ``resident`` (restored after
  a grant) and ``parked`` (no device memory held; this frees the turn).
* The agent answers ``welcome`` (its view of the member: ``state``, and
  ``turn`` while it holds or blocks the turn), then ``grant`` (restore, then
  say ``resident``), ``yield`` (park within ``grace`` seconds, then say
  ``parked``), ``wait`` (why no turn yet, informational) and ``error`` (a
  line it refused; the connection stays open).
* **Fencing.** Every ``grant`` carries a turn number, unique in the group, and
  ``yield`` the number of the turn to give back. ``resident`` and ``parked``
  name the turn they are about, and ``hello`` the turn the worker holds (when
  resident) or last parked. The agent frees a holder only on a ``parked`` (or
  a hello holding nothing) naming the holder's own turn: one naming an
  earlier turn crossed its grant on the wire, and frees nothing. The worker
  acts only on a grant numbered above the last turn it acted on, and on a
  yield of the turn it holds; any other is a duplicate or stale, and ignored.
  A hello after a reconnect is answered with the grant and the yield (with
  the grace left) the member may have missed.
* Standard library only: the worker side imports this with nothing else
  installed. A bad line raises ``ProtocolError`` naming what is wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

__all__ = [
    "FROM_AGENT",
    "FROM_WORKER",
    "MAX_LINE",
    "MAX_TURN",
    "SOCKET_ENV",
    "VERSION",
    "Error",
    "Grant",
    "Hello",
    "Idle",
    "LineReader",
    "Message",
    "Parked",
    "ProtocolError",
    "Resident",
    "Wait",
    "Want",
    "Welcome",
    "Yield",
    "decode",
    "encode",
]

VERSION = 2
MAX_LINE = 4096
MAX_TURN = 2**63  # turn numbers are counts: any JSON integer below this
SOCKET_ENV = "OPENRL_TURN_SOCKET"


class ProtocolError(ValueError):
    """A line that is not a message of this protocol; the text says what is wrong."""


@dataclass(frozen=True, slots=True)
class Hello:
    op: ClassVar[str] = "hello"
    resident: bool
    turn: int = 0
    v: int = VERSION


@dataclass(frozen=True, slots=True)
class Want:
    op: ClassVar[str] = "want"


@dataclass(frozen=True, slots=True)
class Idle:
    op: ClassVar[str] = "idle"


@dataclass(frozen=True, slots=True)
class Resident:
    op: ClassVar[str] = "resident"
    turn: int


@dataclass(frozen=True, slots=True)
class Parked:
    op: ClassVar[str] = "parked"
    turn: int


@dataclass(frozen=True, slots=True)
class Welcome:
    op: ClassVar[str] = "welcome"
    group: str
    member: str
    state: str
    turn: int = 0
    v: int = VERSION


@dataclass(frozen=True, slots=True)
class Grant:
    op: ClassVar[str] = "grant"
    turn: int


@dataclass(frozen=True, slots=True)
class Yield:
    op: ClassVar[str] = "yield"
    grace: float
    turn: int


@dataclass(frozen=True, slots=True)
class Wait:
    op: ClassVar[str] = "wait"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Error:
    op: ClassVar[str] = "error"
    message: str


Message = Hello | Want | Idle | Resident | Parked | Welcome | Grant | Yield | Wait | Error
FROM_WORKER: frozenset[type[Message]] = frozenset({Hello, Want, Idle, Resident, Parked})
FROM_AGENT: frozenset[type[Message]] = frozenset({Welcome, Grant, Yield, Wait, Error})
_BY_OP: dict[str, type[Message]] = {kind.op: kind for kind in FROM_WORKER | FROM_AGENT}


def encode(message: Message) -> bytes:
    """``message`` as one line, newline included."""
    body: dict[str, Any] = {"op": message.op}
    body.update((f.name, getattr(message, f.name)) for f in fields(message))
    line = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    if len(line) > MAX_LINE:
        raise ProtocolError(f"{message.op}: {len(line)} bytes encoded, over the "
                            f"{MAX_LINE}-byte line limit")
    return line


def decode(line: bytes, accept: frozenset[type[Message]] = FROM_WORKER | FROM_AGENT) -> Message:
    """One line (with or without its newline) as a message of a kind in ``accept``."""
    if len(line) > MAX_LINE:
        raise ProtocolError(f"line of {len(line)} bytes, over the {MAX_LINE}-byte limit")
    try:
        body = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ProtocolError("nested too deeply") from None
    if not isinstance(body, dict):
        raise ProtocolError(f"must be a JSON object, not {type(body).__name__}")
    op = body.get("op")
    if not isinstance(op, str):
        raise ProtocolError('has no "op" string' if op is None else f'"op" must be a string, '
                            f"not {_shown(op)}")
    kind = _BY_OP.get(op)
    if kind is None or kind not in accept:
        known = ", ".join(sorted(k.op for k in accept))
        raise ProtocolError(f"unknown op {op[:40]!r} (expected one of {known})")
    values = {}
    for f in fields(kind):
        if f.name not in body:
            if f.default is MISSING:
                raise ProtocolError(f"{op}: missing {f.name!r}")
            continue
        values[f.name] = _checked(op, f.name, body[f.name])
    return kind(**values)


def _checked(op: str, name: str, value: Any) -> Any:
    shown = _shown(value)
    if name == "resident":
        if not isinstance(value, bool):
            raise ProtocolError(f"{op}: 'resident' must be true or false, not {shown}")
    elif name == "v":
        if value != VERSION or isinstance(value, bool):
            raise ProtocolError(f"{op}: version {shown} is not supported (this side speaks "
                                f"{VERSION})")
    elif name == "turn":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_TURN:
            raise ProtocolError(f"{op}: 'turn' must be a whole number >= 0, not {shown}")
    elif name == "grace":
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value < 0):
            raise ProtocolError(f"{op}: 'grace' must be a number of seconds >= 0, not {shown}")
        return float(value)
    elif not isinstance(value, str):
        raise ProtocolError(f"{op}: {name!r} must be a string, not {shown}")
    return value


def _shown(value: Any) -> str:
    """A value as JSON, cut short for a message (however it nests)."""
    try:
        return json.dumps(value)[:40]
    except (RecursionError, ValueError):
        return type(value).__name__


class LineReader:
    """Bytes from a stream in, whole lines out; a line past ``MAX_LINE`` is refused once
    and skipped up to its newline, so the stream stays usable after it."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_line(self) -> bytes | None:
        """The next whole line, ``None`` until one is complete; ``ProtocolError`` for one
        too long."""
        while True:
            end = self._buffer.find(b"\n")
            if self._skipping:
                if end < 0:
                    self._buffer.clear()
                    return None
                del self._buffer[:end + 1]
                self._skipping = False
                continue
            if end < 0:
                if len(self._buffer) >= MAX_LINE:
                    self._buffer.clear()
                    self._skipping = True
                    raise ProtocolError(f"line longer than the {MAX_LINE}-byte limit")
                return None
            line = bytes(self._buffer[:end + 1])
            del self._buffer[:end + 1]
            if len(line) > MAX_LINE:
                raise ProtocolError(f"line of {len(line)} bytes, over the {MAX_LINE}-byte limit")
            return line
