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
* A member is its directory, not its name (as a pod is its UID): a directory
  removed and made again under the same name is a new member, even between
  two looks. What tells them apart is the agent's own mark in it -- the
  socket it bound there (its inode), or the ``evicted`` it wrote: a directory
  made again holds neither. Not the directory's inode (ext4 hands a removed
  directory's inode to the next one made at once) nor its times (coarse, and
  moved by every file made in it). Whenever a group is listed again, each of
  its members is checked for the mark; the old member is gone (its turn
  passes, its state dropped), the new one joins with its own socket, holding
  nothing, owed nothing.
* What the first look finds was there before the agent started (it
  recovers); a member directory that appears later is a new pod.
* An eviction writes the reason to ``evicted`` in the member's directory and
  closes its connection; removing the directory is what makes it gone, as
  the kubelet's deletion would. Used by tests and benchmarks. One exception:
  an eviction for silence (``Silent``: not a word since the agent started)
  deletes the member at once, as far as the agent goes -- no kubelet here
  will, and no process of it is known (a process is known here only by its
  connection) -- so the group goes on; its directory, marked ``evicted``,
  stays out until it is made again. The price: a process that held memory
  before the restart and says nothing for two graces (a client reconnects
  within a second) is run beside, where the cluster would wait for its pod.
* A drain (a move) is two files in the member's directory, as the pod's two
  annotations are in the cluster: whoever asks writes ``drain`` (any text);
  the agent, once the member is drained (parked for good, or evicted for
  silence), writes ``drained`` (the time, RFC 3339, written whole under a
  temporary name first), once. Each rescan looks for ``drain`` in
  ``DRAIN_SLICE`` member directories, taking them in turn, so an ask is seen
  within a rescan among 128 members and within 20 (4 s) among 2,560, where
  looking in all of them would stall the loop a millisecond every rescan
  (about 0.35 ms a rescan this way).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
import os
import time
from pathlib import Path

from controller.k8s.objects import format_time
from placement.turns import EvictReason, TurnPhase
from timeslicer.agent.channels import Member
from timeslicer.agent.core import Agent

__all__ = ["DRAIN", "DRAINED", "RESCAN", "LocalEffects", "scan", "watch_directory"]

log = logging.getLogger("openrl.timeslicer.agent")

RESCAN = 0.2
SOCKET = "turn.sock"
EVICTED = "evicted"
DRAIN = "drain"        # written by whoever asks the member to drain
DRAINED = "drained"    # written by the agent once it is drained
DRAIN_SLICE = 128      # member directories looked at for a drain per rescan
_SETTLED_NS = 2_000_000_000  # a listing older than its directory's time by this is trusted


class LocalEffects:
    def __init__(self) -> None:
        self.evicted: list[tuple[str, EvictReason]] = []
        self.phases: dict[str, TurnPhase] = {}
        self.deleted: list[Member] = []  # evicted for silence: the watcher takes them out

    def evict(self, member: Member, reason: EvictReason) -> None:
        self.evicted.append((member.key, reason))
        with contextlib.suppress(OSError):
            (member.socket.parent / EVICTED).write_text(reason.value + "\n", encoding="utf-8")
        if member.writer is not None:
            member.writer.close()
        if reason is EvictReason.SILENT:
            self.deleted.append(member)

    def publish(self, member: Member, phase: TurnPhase, holder: str | None, turns: int) -> None:
        self.phases[member.key] = phase
        if member.drained and "drained_at" not in member.extra:
            member.extra["drained_at"] = stamp = format_time(dt.datetime.now(dt.UTC))
            home = member.socket.parent
            with contextlib.suppress(OSError):  # its directory gone: nobody waits for it
                (home / f".{DRAINED}.tmp").write_text(stamp + "\n", encoding="utf-8")
                os.replace(home / f".{DRAINED}.tmp", home / DRAINED)


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

    def update(self) -> set[str]:
        """Look again: the groups listed again (their member directories may have been made
        again under the same names), and those gone."""
        now, relisted = time.time_ns(), set()
        listed: dict[str, tuple[int, dict[str, Path]]] = {}
        groups = _subdirectories(self.directory)
        for group in groups:
            home = self.directory / group
            kept = self._groups.get(group)
            try:
                mtime = home.stat().st_mtime_ns
                if kept is None or kept[0] != mtime:
                    homes = {f"{group}/{n}": home / n for n in _subdirectories(home)}
                    kept = (mtime, homes)
                    relisted.add(group)
            except OSError:  # removed while being read: gone at the next look
                continue
            # A time too recent to trust is kept under a time no directory has, so the
            # group is listed again next time.
            listed[group] = kept if now - mtime > _SETTLED_NS else (-1, kept[1])
        relisted |= self._groups.keys() - listed.keys()
        self._groups = listed
        return relisted

    def homes(self, group: str) -> dict[str, Path]:
        """The member directories of ``group`` as last listed, by key."""
        kept = self._groups.get(group)
        return kept[1] if kept is not None else {}


def _replaced(member: Member) -> bool:
    """Its directory no longer holds the socket the agent bound there: made again."""
    if member.socket_ino is None:
        return False  # not bound yet: whichever directory is there gets the socket
    try:
        return os.lstat(member.socket).st_ino != member.socket_ino
    except OSError:
        return True


class _Members:
    """The agent's members kept to the directory: joined, gone, made again, deleted."""

    def __init__(self, agent: Agent, listing: _Listing) -> None:
        self.agent, self.listing = agent, listing
        self.known: dict[str, set[str]] = {}  # group -> its members' keys, as last listed
        self.out: set[str] = set()  # keys deleted for silence, their directories not made again
        self._next_drain = 0  # where the next look for a drain starts, among those not draining

    def update(self) -> None:
        effects, agent = self.agent.effects, self.agent
        if isinstance(effects, LocalEffects):
            while effects.deleted:
                member = effects.deleted.pop()
                if agent.members.get(member.key) is member:
                    agent.remove(member.key)
                    self.out.add(member.key)
        for group in self.listing.update():
            homes = self.listing.homes(group)
            for key in self.known.pop(group, set()) - homes.keys():
                agent.remove(key)
                self.out.discard(key)
            if homes:
                self.known[group] = set(homes)
            for key, home in homes.items():
                self._check(key, group, home)
        self._look_for_drains()

    def _look_for_drains(self) -> None:
        """``DRAIN_SLICE`` members in turn: a ``drain`` in the directory of one not yet
        draining drains it. Plain strings and one stat each: this runs every rescan."""
        members = self.agent.members
        keys = list(members)
        if not keys:
            return
        start = self._next_drain % len(keys)
        for key in itertools.islice(itertools.chain(keys[start:], keys[:start]), DRAIN_SLICE):
            member = members[key]
            if member.draining:
                continue
            ask = member.extra.get(DRAIN)
            if ask is None:
                ask = member.extra[DRAIN] = os.path.join(member.socket.parent, DRAIN)
            if os.path.exists(ask):
                self.agent.drain(key)
        self._next_drain = start + DRAIN_SLICE

    def _check(self, key: str, group: str, home: Path) -> None:
        member = self.agent.members.get(key)
        if member is not None and _replaced(member):
            log.info("%s was made again: a new member", key)
            self.agent.remove(key)
            member = None
        if key in self.out:
            if (home / EVICTED).exists():
                return  # still the directory deleted for silence
            self.out.discard(key)
        if member is None:
            self.agent.add(_member(group, home))


async def watch_directory(agent: Agent, directory: Path, stop: asyncio.Event) -> None:
    """Keep the agent's members those the directory holds, until ``stop`` is set."""
    if not directory.is_dir():
        raise NotADirectoryError(f"--local {directory}: not a directory")
    members = _Members(agent, _Listing(directory))
    while not stop.is_set():
        members.update()
        agent.synced()  # what the first look found was there before: the rest is new
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RESCAN)
