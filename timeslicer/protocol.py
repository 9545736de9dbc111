"""The turn channel's wire: one JSON object per line over the pod's Unix socket.

Rules:

* Each message is one JSON object on one line, UTF-8, ending in ``\\n``, at
  most ``MAX_LINE`` bytes with the newline. Every message has ``"op"``;
  fields a side does not know are ignored, so either side may add some.
* The worker says ``hello`` first on every connection (``resident``: whether
  it holds device memory right now), then ``want`` / ``idle`` (whether it
  wants a turn), ``resident`` (restored after a grant) and ``parked`` (no
  device memory held; this frees the turn).
* The agent answers ``welcome``, then ``grant`` (restore, then say
  ``resident``), ``yield`` (park within ``grace`` seconds, then say
  ``parked``), ``wait`` (why no turn yet, informational) and ``error`` (a
  line it refused; the connection stays open).
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

VERSION = 1
MAX_LINE = 4096
SOCKET_ENV = "OPENRL_TURN_SOCKET"


class ProtocolError(ValueError):
    """A line that is not a message of this protocol; the text says what is wrong."""


@dataclass(frozen=True, slots=True)
class Hello:
    op: ClassVar[str] = "hello"
    resident: bool
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


@dataclass(frozen=True, slots=True)
class Parked:
    op: ClassVar[str] = "parked"


@dataclass(frozen=True, slots=True)
class Welcome:
    op: ClassVar[str] = "welcome"
    group: str
    member: str
    state: str
    v: int = VERSION


@dataclass(frozen=True, slots=True)
class Grant:
    op: ClassVar[str] = "grant"


@dataclass(frozen=True, slots=True)
class Yield:
    op: ClassVar[str] = "yield"
    grace: float


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
    if not isinstance(body, dict):
        raise ProtocolError(f"must be a JSON object, not {type(body).__name__}")
    op = body.get("op")
    if not isinstance(op, str):
        raise ProtocolError('has no "op" string' if op is None else f'"op" must be a string, '
                            f"not {json.dumps(op)[:40]}")
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
    shown = json.dumps(value)[:40]
    if name == "resident":
        if not isinstance(value, bool):
            raise ProtocolError(f"{op}: 'resident' must be true or false, not {shown}")
    elif name == "v":
        if value != VERSION or isinstance(value, bool):
            raise ProtocolError(f"{op}: version {shown} is not supported (this side speaks "
                                f"{VERSION})")
    elif name == "grace":
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value) or value < 0):
            raise ProtocolError(f"{op}: 'grace' must be a number of seconds >= 0, not {shown}")
        return float(value)
    elif not isinstance(value, str):
        raise ProtocolError(f"{op}: {name!r} must be a string, not {shown}")
    return value


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
