"""A tiny stand-in for the node agent: one Unix socket, every line it reads kept."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


class FakeAgent:
    """Welcomes each hello (``state`` as set), records the worker's messages, sends lines."""

    def __init__(self, state: str = "Waiting") -> None:
        # A short directory: a Unix socket's path has a small length limit.
        self.dir = Path(tempfile.mkdtemp(prefix="turn-", dir="/tmp"))
        self.path = self.dir / "turn.sock"
        self.state = state
        self.turn = 0  # the turn the welcome names
        self.after_hello: list[dict[str, Any]] = []  # sent after each welcome
        self.received: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self._conn: socket.socket | None = None
        self._lock = threading.Condition()
        self.start()

    def start(self) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(4)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                if self._conn is not None:
                    self._conn.close()  # the newest connection wins, as the agent's does
                self._conn = conn
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        for line in conn.makefile("rb"):
            with self._lock:
                self.raw.append(line)
                try:
                    message = json.loads(line)
                except ValueError:
                    message = {"op": "?"}
                self.received.append(message)
                self._lock.notify_all()
            if message.get("op") == "hello":
                self.send({"op": "welcome", "v": 2, "group": "claim-a", "member": "pod-1",
                           "state": self.state, "turn": self.turn})
                for extra in self.after_hello:
                    self.send(extra)

    def send(self, message: dict[str, Any] | bytes) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        with self._lock:
            assert self._conn is not None, "no worker connected"
            self._conn.sendall(line)

    def ops(self) -> list[str]:
        with self._lock:
            return [m.get("op", "?") for m in self.received]

    def wait_for(self, op: str, count: int = 1, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [m for m in self.received if m.get("op") == op]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                assert left > 0, f"no {op!r} #{count} from the worker; got {self.ops()}"
                self._lock.wait(left)

    def restart(self) -> None:
        """Gone and back, as a restarted agent is: the socket file re-created."""
        self.stop()
        self.start()

    def stop(self) -> None:
        self._listener.close()
        with self._lock:
            if self._conn is not None:
                self._conn.shutdown(socket.SHUT_RDWR)
                self._conn.close()
                self._conn = None
        os.unlink(self.path)
