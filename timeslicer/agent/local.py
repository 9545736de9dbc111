"""``--local DIR``: the agent with no Kubernetes, over a directory of sockets.

Rules:

* Each ``DIR/<group>/<member>/`` is one member: its socket is ``turn.sock``
  in that directory, its owner the text of ``owner`` there (else the member's
  name), its role the text of ``role`` (else ``sampler``).
* The directory is read again every ``RESCAN`` seconds: a new member
  directory joins, a removed one is gone (the proof a pod's deletion gives
  on a node). A group directory is listed again only when its modification
  time moved (or is too recent to trust: a change within the clock's coarse
  tick keeps the same time), and ``owner`` and ``role`` are read once, when
  the member joins, so a rescan of thousands of members does not stall the
  loop that serves their turns.
* What the first look finds was there before the agent started (it
  recovers); a member directory that appears later is a new pod.
* An eviction writes the reason to ``evicted`` in the member's directory and
  closes its connection; removing the directory is what makes it gone, as
  the kubelet's deletion would. Used by tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from placement.turns import EvictReason, TurnPhase
from timeslicer.agent.channels import Member
from timeslicer.agent.core import Agent

__all__ = ["RESCAN", "LocalEffects", "scan", "watch_directory"]

RESCAN = 0.2
SOCKET = "turn.sock"
_SETTLED_NS = 2_000_000_000  # a listing older than its directory's time by this is trusted


class LocalEffects:
    def __init__(self) -> None:
        self.evicted: list[tuple[str, EvictReason]] = []
        self.phases: dict[str, TurnPhase] = {}

    def evict(self, member: Member, reason: EvictReason) -> None:
        self.evicted.append((member.key, reason))
        with contextlib.suppress(OSError):
            (member.socket.parent / "evicted").write_text(reason.value + "\n", encoding="utf-8")
        if member.writer is not None:
            member.writer.close()

    def publish(self, member: Member, phase: TurnPhase, holder: str | None, turns: int) -> None:
        self.phases[member.key] = phase


def _text(path: Path, default: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() or default
    except OSError:
        return default


def _member(group: str, home: Path) -> Member:
    return Member(key=f"{group}/{home.name}", group=group, name=home.name,
                  owner=_text(home / "owner", home.name), role=_text(home / "role", "sampler"),
                  socket=home / SOCKET)


def _subdirectories(directory: Path) -> list[str]:
    with os.scandir(directory) as entries:
        return sorted(e.name for e in entries if e.is_dir())


def scan(directory: Path) -> dict[str, Member]:
    """Every member directory under ``directory``, by key ``group/member``."""
    return {f"{group}/{name}": _member(group, directory / group / name)
            for group in _subdirectories(directory)
            for name in _subdirectories(directory / group)}


class _Listing:
    """The member directories under a directory, each group listed again only when it changed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._groups: dict[str, tuple[int, dict[str, Path]]] = {}  # group -> (mtime_ns, homes)
        self.found: dict[str, tuple[str, Path]] = {}  # key -> (group, home)

    def update(self) -> bool:
        """Look again; whether ``found`` changed."""
        now, changed = time.time_ns(), False
        listed: dict[str, tuple[int, dict[str, Path]]] = {}
        groups = _subdirectories(self.directory)
        for group in groups:
            home = self.directory / group
            kept = self._groups.get(group)
            try:
                mtime = home.stat().st_mtime_ns
                if kept is None or kept[0] != mtime:
                    homes = {f"{group}/{n}": home / n for n in _subdirectories(home)}
                    changed = changed or kept is None or homes.keys() != kept[1].keys()
                    kept = (mtime, homes)
            except OSError:  # removed while being read: gone at the next look
                continue
            # A time too recent to trust is kept under a time no directory has, so the
            # group is listed again next time.
            listed[group] = kept if now - mtime > _SETTLED_NS else (-1, kept[1])
        changed = changed or listed.keys() != self._groups.keys()
        self._groups = listed
        if changed:
            self.found = {key: (group, home) for group, (_, homes) in listed.items()
                          for key, home in homes.items()}
        return changed


async def watch_directory(agent: Agent, directory: Path, stop: asyncio.Event) -> None:
    """Keep the agent's members those the directory holds, until ``stop`` is set."""
    if not directory.is_dir():
        raise NotADirectoryError(f"--local {directory}: not a directory")
    listing = _Listing(directory)
    while not stop.is_set():
        if listing.update():
            found = listing.found
            for key in [k for k in agent.members if k not in found]:
                agent.remove(key)
            for key, (group, home) in found.items():
                if key not in agent.members:
                    agent.add(_member(group, home))
        agent.synced()  # what the first look found was there before: the rest is new
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RESCAN)
