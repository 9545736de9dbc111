"""Agent restarts and dropped connections cost a well-behaved worker nothing.

The agent runs in ``--local`` mode; four workers of two owners on one claim
take turns through the real asyncio client, parking whenever asked. Meanwhile
the agent is stopped and started again, several times, and each worker's
connection is dropped now and then. Counted from the workers' own logs: no
two of them ever hold at once, every one keeps being served, and none is
evicted (the count is printed, with ``-s``).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from placement.turns import TurnSettings
from tests.unit.timeslicer.agent.test_local import members
from timeslicer import AsyncTurnClient
from timeslicer.agent import Options, serve

SETTINGS = TurnSettings(quantum=0.05, min_resident=0.0, yield_grace=3.0)
RESTARTS = 4
DROPS = 15  # three between each two restarts


async def _worker(path: Path, name: str, log: list[tuple[str, str]], stop: asyncio.Event,
                  turn: AsyncTurnClient) -> None:
    """Wants the turn all along; restores on a grant, parks when asked."""
    async with turn:
        await turn.want()
        holding = False
        while not stop.is_set():
            if not holding:
                if await turn.wait_for_turn(0.1):
                    holding = True
                    log.append(("start", name))
                    await turn.resident()
            elif await turn.wait_for_yield(0.1) is not None:
                log.append(("end", name))
                holding = False
                await turn.parked()
        if holding:
            log.append(("end", name))


def test_restarts_and_drops_evict_no_well_behaved_holder(tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"a1": "alice", "a2": "alice", "b1": "bob",
                                          "b2": "bob"})
    log: list[tuple[str, str]] = []
    evicted: list[object] = []
    rng = random.Random(7)

    async def story() -> None:
        stop_workers = asyncio.Event()
        clients = {name: AsyncTurnClient(path, connect_timeout=10)
                   for name, path in paths.items()}
        agent_stop = asyncio.Event()
        started: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        options = Options(SETTINGS, local=tmp_path, metrics_address=None, nvml=False)

        def ready(agent: object) -> None:
            if not started.done():
                started.set_result(agent)

        agent_task = asyncio.create_task(serve(options, agent_stop, ready))
        agents = [await started]
        workers = [asyncio.create_task(_worker(paths[n], n, log, stop_workers, c))
                   for n, c in clients.items()]
        drops = 0
        for restart in range(RESTARTS + 1):
            for _ in range(DROPS // (RESTARTS + 1)):
                await asyncio.sleep(0.15)
                await clients[rng.choice(list(clients))]._drop()  # a connection lost
                drops += 1
            await asyncio.sleep(0.2)
            if restart == RESTARTS:
                break
            agent_stop.set()  # the agent goes (its sockets with it) and comes back
            agents_done = await agent_task
            evicted.extend(agents_done.effects.evicted)  # type: ignore[attr-defined]
            agent_stop = asyncio.Event()
            again: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            agent_task = asyncio.create_task(serve(options, agent_stop, again.set_result))
            agents.append(await again)
        await asyncio.sleep(0.5)
        stop_workers.set()
        await asyncio.gather(*workers)
        agent_stop.set()
        last = await agent_task
        evicted.extend(last.effects.evicted)  # type: ignore[attr-defined]
        assert drops == DROPS

    asyncio.run(asyncio.wait_for(story(), 60))
    holding: str | None = None
    for what, name in log:
        if what == "start":
            assert holding is None, f"{name} started while {holding} held: {log}"
            holding = name
        else:
            assert holding == name, log
            holding = None
    turns = {name: sum(1 for what, n in log if what == "start" and n == name) for name in paths}
    print(f"\n{RESTARTS} agent restarts, {DROPS} dropped connections, "
          f"{sum(turns.values())} turns ({turns}), well-behaved holders evicted: "
          f"{len(evicted)}")
    assert not evicted
    assert all(turns.values()), turns


def test_after_a_restart_a_member_that_never_connects_holds_up_nobody(tmp_path: Path) -> None:
    # Two workers take turns; a third member joins and its worker never connects. The agent
    # restarts: the silent member is asked to park at the bound (a grace), evicted a grace
    # later, and -- no kubelet in --local mode -- that is its going: turns resume within two
    # graces, not never.
    settings = TurnSettings(quantum=0.05, min_resident=0.0, yield_grace=0.3)
    paths = members(tmp_path, "g", {"a1": "alice", "b1": "bob"})
    log: list[tuple[str, str]] = []

    async def story() -> float:
        stop_workers = asyncio.Event()
        options = Options(settings, local=tmp_path, metrics_address=None, nvml=False)
        agent_stop = asyncio.Event()
        started: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        agent_task = asyncio.create_task(serve(options, agent_stop, started.set_result))
        await started
        workers = [asyncio.create_task(_worker(paths[n], n, log, stop_workers,
                                               AsyncTurnClient(paths[n], connect_timeout=10)))
                   for n in paths]
        members(tmp_path, "g", {"quiet": "carol"})  # a new pod whose worker never speaks
        while sum(1 for what, _ in log if what == "start") < 4:
            await asyncio.sleep(0.01)
        agent_stop.set()
        await agent_task
        agent_stop = asyncio.Event()
        again: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        agent_task = asyncio.create_task(serve(options, agent_stop, again.set_result))
        await again
        restarted, turns = time.monotonic(), len(log)
        while sum(1 for what, _ in log[turns:] if what == "start") < 4:
            await asyncio.sleep(0.01)
        resumed = time.monotonic() - restarted
        stop_workers.set()
        await asyncio.gather(*workers)
        agent_stop.set()
        await agent_task
        return resumed

    resumed = asyncio.run(asyncio.wait_for(story(), 20))
    # The bound, the silent one's grace, a look of the directory, four short turns.
    assert resumed < 2 * settings.yield_grace + 1.5, resumed
    assert (tmp_path / "g/quiet/evicted").read_text() == "Silent\n"
    holding: str | None = None
    for what, name in log:
        assert (holding is None) == (what == "start"), log
        holding = name if what == "start" else None
