"""``--local`` membership without sockets or time: a fake agent records what the directory
watcher does -- a member made again under its name is a new one, and one evicted for
silence goes at once and stays out until its directory is made again."""

from __future__ import annotations

import shutil
from pathlib import Path

from placement.turns import Evict, EvictReason, Grant, TurnGroup, TurnSettings, Yield
from tests.unit.timeslicer.agent.test_local import members
from timeslicer.agent.channels import Member
from timeslicer.agent.local import LocalEffects, _Listing, _Members


class FakeAgent:
    """What the watcher calls on the agent, recorded; a member is bound as it joins (the
    socket a plain file here: only its inode is read)."""

    def __init__(self) -> None:
        self.effects = LocalEffects()
        self.members: dict[str, Member] = {}
        self.calls: list[tuple[str, str]] = []

    def add(self, member: Member) -> None:
        self.members[member.key] = member
        member.socket.touch()
        member.socket_ino = member.socket.stat().st_ino
        self.calls.append(("add", member.key))

    def remove(self, key: str) -> None:
        del self.members[key]
        self.calls.append(("remove", key))


def _watch(root: Path) -> tuple[FakeAgent, _Members]:
    agent = FakeAgent()
    watcher = _Members(agent, _Listing(root))  # type: ignore[arg-type]
    watcher.update()
    return agent, watcher


def test_a_directory_made_again_under_its_name_is_a_new_member(tmp_path: Path) -> None:
    members(tmp_path, "g", {"a1": "alice", "b1": "bob"})
    agent, watcher = _watch(tmp_path)
    first = agent.members["g/a1"]
    watcher.update()
    assert agent.calls == [("add", "g/a1"), ("add", "g/b1")]  # the same directories
    shutil.rmtree(tmp_path / "g/a1")
    members(tmp_path, "g", {"a1": "alice"})  # at once: the same name, maybe the same inode
    watcher.update()
    assert agent.calls[2:] == [("remove", "g/a1"), ("add", "g/a1")]
    assert agent.members["g/a1"] is not first


def test_a_member_not_bound_yet_is_not_taken_for_a_new_one(tmp_path: Path) -> None:
    members(tmp_path, "g", {"a1": "alice"})
    agent, watcher = _watch(tmp_path)
    agent.members["g/a1"].socket_ino = None  # its socket still to be bound
    watcher.update()
    assert agent.calls == [("add", "g/a1")]


def test_a_member_evicted_for_silence_goes_and_stays_out_until_made_again(
        tmp_path: Path) -> None:
    members(tmp_path, "g", {"quiet": "carol", "a1": "alice"})
    agent, watcher = _watch(tmp_path)
    agent.effects.evict(agent.members["g/a1"], EvictReason.TURN_OVERRUN)
    agent.effects.evict(agent.members["g/quiet"], EvictReason.SILENT)
    watcher.update()
    # The overrun was heard (its process may hold memory): it stays until its directory goes.
    assert agent.calls[2:] == [("remove", "g/quiet")]
    members(tmp_path, "g", {"other": "bob"})  # the group listed again: quiet is still out
    watcher.update()
    assert agent.calls[3:] == [("add", "g/other")]
    shutil.rmtree(tmp_path / "g/quiet")
    members(tmp_path, "g", {"quiet": "carol"})
    watcher.update()
    assert agent.calls[4:] == [("add", "g/quiet")]


def test_a_member_that_never_connects_is_never_granted_and_after_a_restart_holds_up_two_graces(
        ) -> None:
    # The rules the agent leans on, on a fake clock: quantum 1 s, grace 1 s.
    settings = TurnSettings(quantum=1.0, min_resident=0.0, yield_grace=1.0)
    group = TurnGroup(settings)
    for member, owner in (("a", "alice"), ("b", "bob"), ("quiet", "carol")):
        group.join(member, owner, 0.0, fresh=True)
    granted: list[str] = []
    for member in ("a", "b"):
        group.hello(member, False, 0.0)
        granted += [g.member for g in group.want(member, 0.0) if isinstance(g, Grant)]
    for t in range(1, 10):  # two workers taking turns; quiet never connects, never granted
        for action in group.tick(float(t)):
            if isinstance(action, Yield):
                granted += [g.member for g in group.parked(action.member, float(t))
                            if isinstance(g, Grant)]
    assert granted == ["a", "b"] * 5 and "quiet" not in granted

    restarted = TurnGroup(settings, recovering=True, first_turn=100)
    for member, owner in (("a", "alice"), ("b", "bob"), ("quiet", "carol")):
        restarted.join(member, owner, 10.0)
    restarted.hello("a", False, 10.1)
    restarted.hello("b", False, 10.1)
    assert restarted.want("a", 10.1) == [] and restarted.want("b", 10.1) == []
    bound = restarted.tick(11.0)  # the bound: quiet asked to park
    assert bound == [Yield("quiet", 1.0, 12.0, 0)]
    assert restarted.tick(12.0) == [Evict("quiet", EvictReason.SILENT)]
    assert restarted.tick(12.5) == []  # it may hold memory: nobody until it is gone
    # --local mode takes that eviction as its going (the watcher removes it at its next look).
    assert [type(a) for a in restarted.gone("quiet", 12.6)] == [Grant]
