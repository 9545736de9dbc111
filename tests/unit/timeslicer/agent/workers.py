"""Small fake workers for the agent's tests: stdlib asyncio clients on its sockets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

RUNNING: set[asyncio.Task[None]] = set()


class FakeWorker:
    """Connects, says hello, wants the turn; parks at once when asked unless stubborn."""

    def __init__(self, path: Path, log: list[tuple[str, str]], name: str,
                 stubborn: bool = False) -> None:
        self.path, self.log, self.name, self.stubborn = path, log, name, stubborn
        self.resident = False
        self.turn = 0
        self.received: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None

    async def run(self, *, resident: bool = False, want: bool = True) -> None:
        while True:  # until the agent has bound the socket and listens on it
            try:
                reader, writer = await asyncio.open_unix_connection(str(self.path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(0.01)
        self.resident = resident
        hello = {"op": "hello", "v": 2, "resident": resident, "turn": self.turn}
        writer.write(json.dumps(hello).encode() + b"\n")
        if want:
            writer.write(b'{"op":"want"}\n')
        await writer.drain()
        while line := await reader.readline():
            message = json.loads(line)
            self.received.append(message)
            if message["op"] == "grant" and message["turn"] > self.turn:
                self.resident, self.turn = True, message["turn"]
                self.log.append(("resident", self.name))
                writer.write(json.dumps({"op": "resident", "turn": self.turn}).encode() + b"\n")
            elif message["op"] == "yield" and not self.stubborn:
                self.resident = False
                self.log.append(("parked", self.name))
                writer.write(json.dumps({"op": "parked", "turn": self.turn}).encode() + b"\n")
            await writer.drain()
        writer.close()

    def start(self, **kwargs: bool) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(**kwargs))
        # The loop holds tasks weakly: a worker nobody keeps would be collected mid-story.
        RUNNING.add(self.task)
        self.task.add_done_callback(RUNNING.discard)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


def no_overlap(log: list[tuple[str, str]]) -> bool:
    holding: set[str] = set()
    for what, name in log:
        if what == "resident":
            if holding:
                return False
            holding.add(name)
        else:
            holding.discard(name)
    return True
