"""The worker's client against the real agent (``--local`` mode): turns pass, never overlap."""

from __future__ import annotations

import asyncio
from pathlib import Path

from placement.turns import TurnSettings
from tests.unit.timeslicer.agent.test_local import members, with_agent
from timeslicer import AsyncTurnClient, TurnClient
from timeslicer.agent import Agent

FAST = TurnSettings(quantum=0.05, min_resident=0.0, yield_grace=1.0)


async def _take_turns(path: Path, name: str, log: list[tuple[str, str]], turns: int) -> None:
    async with AsyncTurnClient(path, connect_timeout=5) as turn:
        await turn.want()
        for _ in range(turns):
            assert await turn.wait_for_turn(10)
            log.append(("resident", name))
            await turn.resident()
            # Asked to yield while the other waits; once it is done nobody asks: park anyway.
            if await turn.wait_for_yield(0.5) is not None:
                log.append(("asked", name))
            log.append(("parked", name))
            await turn.parked()
        await turn.idle()


def test_two_asyncio_clients_take_turns_through_the_agent(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        await asyncio.gather(*(_take_turns(path, name, log, 3) for name, path in paths.items()))

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert sum(1 for what, _ in log if what == "asked") >= 3, log
    log = [entry for entry in log if entry[0] != "asked"]
    holder = None
    for what, name in log:
        assert (holder is None) if what == "resident" else (holder == name), log
        holder = name if what == "resident" else None
    assert sorted(name for what, name in log if what == "resident") == ["a1"] * 3 + ["b1"] * 3


def test_the_blocking_client_is_welcomed_by_the_agent(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice"})

    async def body(agent: Agent) -> None:
        def worker() -> None:
            with TurnClient(paths["a1"], connect_timeout=5) as turn:
                assert turn.welcome is not None and turn.welcome.member.endswith("a1")
                turn.want()
                assert turn.wait_for_turn(5)
                turn.resident()
        await asyncio.to_thread(worker)

    asyncio.run(with_agent(tmp_path, FAST, body))


def test_a_parked_sent_while_its_grant_is_on_the_wire_frees_nothing(tmp_path: Path) -> None:
    # The sidecar's race made certain: the agent has granted b1, and b1, not having read the
    # grant, says parked (a server it found awake, parked). The turn must stay with b1, a1
    # must not be granted, and b1 restores on the grant it then reads.
    paths = members(tmp_path, "claim-a", {"a1": "alice", "b1": "bob"})

    async def body(agent: Agent) -> None:
        group = agent.groups["claim-a"]
        async with AsyncTurnClient(paths["a1"], connect_timeout=5) as a1, \
                AsyncTurnClient(paths["b1"], connect_timeout=5) as b1:
            await a1.want()
            assert await a1.wait_for_turn(5)
            await a1.resident()
            await b1.want()
            assert await a1.wait_for_yield(5) is not None
            await a1.parked()
            b1_id = agent.members["claim-a/b1"].id
            while group.holder != b1_id:  # granted: the grant is on the wire, unread
                await asyncio.sleep(0.001)
            await b1.parked()  # names turn 0: it never saw this grant
            await asyncio.sleep(0.2)
            assert group.holder == b1_id and not a1.holds_turn
            assert await b1.wait_for_turn(5) and b1.turn == group.view(b1_id, 0).turn
            await a1.want()
            assert await a1.wait_for_turn(0.3) is False  # b1 holds it

    asyncio.run(with_agent(tmp_path, FAST, body))
