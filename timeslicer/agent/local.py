"""``--local DIR``: the agent with no Kubernetes, over a directory of sockets.

Rules:

* Each ``DIR/<group>/<member>/`` is one member: its socket is ``turn.sock``
  in that directory, its owner the text of ``owner`` there (else the member's
  name), its role the text of ``role`` (else ``sampler``).
* The directory is read again every ``RESCAN`` seconds: a new member
  directory joins, a removed one is gone (the proof a pod's deletion gives
  on a node).
* An eviction writes the reason to ``evicted`` in the member's directory and
  closes its connection; removing the directory is what makes it gone, as
  the kubelet's deletion would. Used by tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from placement.turns import EvictReason, Phase
from timeslicer.agent.core import Agent, Member

__all__ = ["RESCAN", "LocalEffects", "scan", "watch_directory"]

RESCAN = 0.2
SOCKET = "turn.sock"


class LocalEffects:
    def __init__(self) -> None:
        self.evicted: list[tuple[str, EvictReason]] = []
        self.phases: dict[str, Phase] = {}

    def evict(self, member: Member, reason: EvictReason) -> None:
        self.evicted.append((member.key, reason))
        with contextlib.suppress(OSError):
            (member.socket.parent / "evicted").write_text(reason.value + "\n", encoding="utf-8")
        if member.writer is not None:
            member.writer.close()

    def publish(self, member: Member, phase: Phase, holder: str | None, turns: int) -> None:
        self.phases[member.key] = phase


def _text(path: Path, default: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or default
    except OSError:
        return default


def scan(directory: Path) -> dict[str, Member]:
    """Every member directory under ``directory``, by key ``group/member``."""
    found: dict[str, Member] = {}
    for group in sorted(p for p in directory.iterdir() if p.is_dir()):
        for home in sorted(p for p in group.iterdir() if p.is_dir()):
            key = f"{group.name}/{home.name}"
            found[key] = Member(key=key, group=group.name, name=home.name,
                                owner=_text(home / "owner", home.name),
                                role=_text(home / "role", "sampler"), socket=home / SOCKET)
    return found


async def watch_directory(agent: Agent, directory: Path, stop: asyncio.Event) -> None:
    """Keep the agent's members those the directory holds, until ``stop`` is set."""
    if not directory.is_dir():
        raise NotADirectoryError(f"--local {directory}: not a directory")
    while not stop.is_set():
        found = scan(directory)
        for key in [k for k in agent.members if k not in found]:
            agent.remove(key)
        for key, member in found.items():
            if key not in agent.members:
                agent.add(member)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RESCAN)
