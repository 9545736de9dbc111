"""The agent in --local mode, over real Unix sockets, with small fake workers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from placement.turns import EvictReason, TurnPhase, TurnSettings
from tests.unit.timeslicer.agent.workers import FakeWorker, no_overlap
from timeslicer.agent import Agent, Options, serve
from timeslicer.agent.local import RESCAN, LocalEffects

FAST = TurnSettings(quantum=0.05, min_resident=0.0, yield_grace=0.2)


def members(root: Path, group: str, owners: dict[str, str]) -> dict[str, Path]:
    paths = {}
    for name, owner in owners.items():
        home = root / group / name
        home.mkdir(parents=True)
        (home / "owner").write_text(owner)
        paths[name] = home / "turn.sock"
    return paths


async def with_agent(root: Path, settings: TurnSettings,
                     body: Callable[[Agent], Awaitable[None]]) -> None:
    stop = asyncio.Event()
    started: asyncio.Future[Agent] = asyncio.get_running_loop().create_future()
    options = Options(settings, local=root, metrics_address=None, nvml=False)
    agent_task = asyncio.create_task(serve(options, stop, started.set_result))
    try:
        # A story that stalls fails here rather than hanging the run.
        await asyncio.wait_for(body(await started), 20)
    finally:
        stop.set()
        await agent_task


def test_four_members_of_two_owners_take_turns_in_order_never_overlapping(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob", "a2": "alice", "b2": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        workers = [FakeWorker(path, log, name) for name, path in paths.items()]
        for worker in workers:
            worker.start()
        while sum(1 for what, _ in log if what == "resident") < 12:
            await asyncio.sleep(0.01)
        for worker in workers:
            worker.stop()
        assert stat.S_IMODE(paths["a1"].stat().st_mode) == 0o666

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert no_overlap(log)
    turns = [name for what, name in log if what == "resident"]
    # Owners alternate, and each owner's members take its turns in rotation.
    assert [t[0] for t in turns[:8]] == ["a", "b"] * 4
    assert {t for t in turns[1:9]} == {"a1", "a2", "b1", "b2"}


def test_a_holder_that_never_parks_is_evicted(tmp_path: Path) -> None:
    # Members join in their directories' order: the stubborn one is served first.
    paths = members(tmp_path, "claim-a", {"stubborn": "alice", "t-patient": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        FakeWorker(paths["stubborn"], log, "stubborn", stubborn=True).start()
        FakeWorker(paths["t-patient"], log, "patient").start()
        effects = agent.effects
        assert isinstance(effects, LocalEffects)
        while not effects.evicted:
            await asyncio.sleep(0.01)
        assert effects.evicted == [("claim-a/stubborn", EvictReason.TURN_OVERRUN)]
        assert (tmp_path / "claim-a/stubborn/evicted").read_text() == "TurnOverrun\n"
        # Still evicting (the pod is not gone yet): nobody else is granted.
        assert log == [("resident", "stubborn")]
        # The pod goes (its directory is removed): the turn passes.
        for item in (tmp_path / "claim-a/stubborn").iterdir():
            item.unlink()
        (tmp_path / "claim-a/stubborn").rmdir()
        while ("resident", "patient") not in log:
            await asyncio.sleep(0.01)

    asyncio.run(with_agent(tmp_path, FAST, body))


def test_after_a_restart_the_resident_keeps_the_turn_and_nothing_is_granted_until_all_report(
        tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"m1": "alice", "m2": "bob", "m3": "bob"})
    slow = TurnSettings(quantum=30, min_resident=0, yield_grace=30)
    log: list[tuple[str, str]] = []

    turns: dict[str, int] = {}

    async def first_agent(agent: Agent) -> None:
        m1 = FakeWorker(paths["m1"], log, "m1")
        m1.start()
        for name in ("m2", "m3"):
            FakeWorker(paths[name], log, name).start(want=False)
        while not log:
            await asyncio.sleep(0.01)
        turns["m1"] = m1.turn

    asyncio.run(with_agent(tmp_path, slow, first_agent))
    assert log == [("resident", "m1")]

    async def second_agent(agent: Agent) -> None:
        # m1 comes back resident; m2 says it holds nothing and wants; m3 says nothing yet.
        back = FakeWorker(paths["m1"], log, "m1")
        back.turn = turns["m1"]  # the worker remembers the turn it holds
        back.start(resident=True)
        FakeWorker(paths["m2"], log, "m2").start()
        group = agent.groups["claim-a"]
        while group.holder is None or len(log) < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert agent.effects.phases["claim-a/m3"] is TurnPhase.UNREPORTED  # type: ignore[attr-defined]
        assert agent.members["claim-a/m1"].id == group.holder
        assert log == [("resident", "m1")]  # nothing granted: m3 has not reported

    asyncio.run(with_agent(tmp_path, slow, second_agent))


def test_a_message_out_of_order_gets_an_error_and_the_connection_stays(tmp_path: Path) -> None:
    paths = members(tmp_path, "g", {"m": "o"})

    async def body(agent: Agent) -> None:
        while not paths["m"].exists():
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_unix_connection(str(paths["m"]))
        writer.write(b'{"op":"want"}\nnot json\n{"op":["want"]}\n{"op":"want","x":'
                     + b"[" * 1500 + b"]" * 1500 + b'}\n{"op":"hello","v":2,"resident":false}\n')
        # The answers in order; the agent's own asks (a recovering group's yield, which a
        # loaded machine may send before the first answer) are not answers: passed over.
        answers: list[bytes] = []
        while len(answers) < 5:
            line = await reader.readline()
            if not line.startswith(b'{"op":"yield"'):
                answers.append(line)
        assert b"first message is hello" in answers[0]
        assert b"not JSON" in answers[1]
        assert b'\\"op\\" must be a string' in answers[2]
        assert b"nested too deeply" in answers[3]
        assert b'"op":"welcome"' in answers[4] and b'"member":"m"' in answers[4]
        writer.close()
        bad = agent.metrics.registry.get_sample_value(
            "openrl_timeslicer_bad_messages_total", {"kind": "unreadable"})
        assert bad == 3

    asyncio.run(with_agent(tmp_path, FAST, body))


def test_a_parked_member_seen_holding_device_memory_is_evicted(tmp_path: Path) -> None:
    paths = members(tmp_path, "g", {"holder": "alice", "sneaky": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        FakeWorker(paths["holder"], log, "holder").start()
        FakeWorker(paths["sneaky"], log, "sneaky").start(want=False)
        while not log or agent.groups["g"].recovering:
            await asyncio.sleep(0.01)
        agent.holds_device("g/holder")  # the holder may: nothing happens
        agent.holds_device("g/sneaky")
        assert agent.effects.evicted == [  # type: ignore[attr-defined]
            ("g/sneaky", EvictReason.RESIDENT_WITHOUT_TURN)]

    asyncio.run(with_agent(tmp_path, TurnSettings(quantum=30, min_resident=0), body))


def test_a_member_added_to_a_settled_group_joins_and_one_removed_goes(tmp_path: Path) -> None:
    members(tmp_path, "claim-a", {"old": "alice"})
    hour_ago = time.time() - 3600
    os.utime(tmp_path / "claim-a", (hour_ago, hour_ago))  # listed once, then trusted

    async def body(agent: Agent) -> None:
        while "claim-a/old" not in agent.members:
            await asyncio.sleep(0.01)
        await asyncio.sleep(3 * RESCAN)
        members(tmp_path, "claim-a", {"new": "bob"})
        shutil.rmtree(tmp_path / "claim-a/old")
        while "claim-a/new" not in agent.members or "claim-a/old" in agent.members:
            await asyncio.sleep(0.01)
        assert agent.members["claim-a/new"].owner == "bob"

    asyncio.run(with_agent(tmp_path, FAST, body))


def test_a_member_silent_after_a_restart_is_evicted_and_the_group_goes_on(
        tmp_path: Path) -> None:
    # Both were there before the agent started; one never says a word (a pod that never
    # connects, a stopped process). Without NVML, silence ends in an eviction; with no
    # kubelet here, the eviction is its going: the talker is granted, the directory stays
    # out until it is made again (then a new member).
    paths = members(tmp_path, "claim-a", {"quiet": "alice", "talker": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        started = time.monotonic()
        FakeWorker(paths["talker"], log, "talker").start()
        effects = agent.effects
        assert isinstance(effects, LocalEffects)
        while ("resident", "talker") not in log:
            await asyncio.sleep(0.01)
        # The bound (one grace), the silent one's own grace, and a look of the directory.
        assert time.monotonic() - started < 2 * FAST.yield_grace + 3 * RESCAN + 0.5
        assert effects.evicted == [("claim-a/quiet", EvictReason.SILENT)]
        assert "claim-a/quiet" not in agent.members
        await asyncio.sleep(3 * RESCAN)
        assert "claim-a/quiet" not in agent.members  # still the evicted directory
        shutil.rmtree(tmp_path / "claim-a/quiet")
        members(tmp_path, "claim-a", {"quiet": "alice"})  # its pod made again
        while "claim-a/quiet" not in agent.members:
            await asyncio.sleep(0.01)
        FakeWorker(paths["quiet"], log, "quiet").start()
        while ("resident", "quiet") not in log:
            await asyncio.sleep(0.01)

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert no_overlap(log)


def _made_again(home: Path, owner: str) -> None:
    """The pod replaced: its directory removed and made again at once (within a look)."""
    shutil.rmtree(home)
    home.mkdir()
    (home / "owner").write_text(owner)


def test_a_member_made_again_between_two_looks_is_a_new_member(tmp_path: Path) -> None:
    # The old a1 holds the turn and stops (its process goes with its pod); its directory is
    # made again 0 ms later. The new one gets its own socket, holding nothing, owed nothing:
    # the old one's turn passes to b1, and nobody is evicted.
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        old = FakeWorker(paths["a1"], log, "a1")
        old.start()
        FakeWorker(paths["b1"], log, "b1").start()
        while ("resident", "a1") not in log:  # the first owner seen is served first
            await asyncio.sleep(0.01)
        first = agent.members["claim-a/a1"]
        old.stop()
        _made_again(tmp_path / "claim-a/a1", "alice")
        while agent.members.get("claim-a/a1") in (None, first):
            await asyncio.sleep(0.01)
        while ("resident", "b1") not in log:
            await asyncio.sleep(0.01)
        assert agent.groups["claim-a"].view(agent.members["claim-a/a1"].id, 0).turns == 0
        FakeWorker(paths["a1"], log, "a1-new").start()
        while ("resident", "a1-new") not in log:
            await asyncio.sleep(0.01)
        assert agent.effects.evicted == []  # type: ignore[attr-defined]

    # A quantum long enough that a1 holds the turn, b1 waiting, when its pod is replaced.
    asyncio.run(with_agent(tmp_path, TurnSettings(quantum=1.0, min_resident=0,
                                                  yield_grace=0.2), body))
    assert log[:2] == [("resident", "a1"), ("resident", "b1")]


def test_while_a_member_is_replaced_the_others_keep_their_turns(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob", "b2": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        for name in ("b1", "b2"):
            FakeWorker(paths[name], log, name).start()
        old = FakeWorker(paths["a1"], log, "a1")
        old.start()
        while ("resident", "a1") not in log:
            await asyncio.sleep(0.01)
        old.stop()
        shutil.rmtree(tmp_path / "claim-a/a1")  # gone a while: no worker, then a new pod
        log.append(("parked", "a1"))  # its process went with its pod
        granted = len(log)
        while sum(1 for what, _ in log[granted:] if what == "resident") < 4:
            await asyncio.sleep(0.01)
        members(tmp_path, "claim-a", {"a1": "alice"})
        granted = len(log)
        while sum(1 for what, _ in log[granted:] if what == "resident") < 4:
            await asyncio.sleep(0.01)  # the new a1 has not connected: the others go on
        FakeWorker(paths["a1"], log, "a1-new").start()
        while ("resident", "a1-new") not in log:
            await asyncio.sleep(0.01)
        assert agent.effects.evicted == []  # type: ignore[attr-defined]

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert no_overlap(log)


def test_a_flooding_member_is_dropped_and_the_others_keep_their_turns(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob"})
    members(tmp_path, "noisy", {"flood": "eve"})
    log: list[tuple[str, str]] = []

    async def flood() -> None:
        path = tmp_path / "noisy/flood/turn.sock"
        while not path.exists():
            await asyncio.sleep(0.01)
        _, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"op":"hello","v":2,"resident":false}\n')
        junk = b'{"op":["want"]}\n{"op":"dance"}\n' + b"[" * 3000 + b"\n"
        with contextlib.suppress(ConnectionError):
            for _ in range(2000):  # replies never read
                writer.write(junk)
                await writer.drain()
        writer.close()

    async def body(agent: Agent) -> None:
        for name, path in paths.items():
            FakeWorker(path, log, name).start()
        flooding = asyncio.create_task(flood())
        while len(log) < 40:
            await asyncio.sleep(0.01)
        await asyncio.wait_for(flooding, 15)
        sample = agent.metrics.registry.get_sample_value
        assert sample("openrl_timeslicer_bad_messages_total", {"kind": "backlog"}) >= 1
        assert sample("openrl_timeslicer_bad_messages_total", {"kind": "unreadable"}) > 100

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert no_overlap(log)


def test_grants_yields_parks_and_the_start_are_logged_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        for name, path in paths.items():
            FakeWorker(path, log, name).start()
        while len(log) < 4:
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.INFO, logger="openrl.timeslicer"):
        asyncio.run(with_agent(tmp_path, FAST, body))
    said = " | ".join(r.getMessage() for r in caplog.records)
    for words in ("agent started: 1 groups recovering", "granted turn", "asked a1 to yield turn",
                  "a1 parked turn"):
        assert words in said, said
