"""The agent's own overhead: release to next grant, and CPU per switch.

The agent runs in ``--local`` mode in this process (its own loop on a
thread); 8 groups of 32 fake workers in a second thread's loop want the turn
all the time and park the moment they are asked. A release is the holder's
``parked`` leaving the worker; the next grant is that group's ``grant``
arriving at its next member. Prints p50/p99 (target p99 <= 5 ms) and the
agent thread's CPU per switch.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placement.turns import TurnSettings
from timeslicer.agent import Agent, Options, serve


async def worker(path: Path, group: int, released: dict[int, float], latencies: list[float],
                 done: asyncio.Event) -> None:
    while not path.exists():
        await asyncio.sleep(0.01)
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b'{"op":"hello","v":1,"resident":false}\n{"op":"want"}\n')
    while not done.is_set() and (line := await reader.readline()):
        if b'"grant"' in line:
            if group in released:
                latencies.append(time.perf_counter() - released.pop(group))
            writer.write(b'{"op":"resident"}\n')
        elif b'"yield"' in line:
            released[group] = time.perf_counter()
            writer.write(b'{"op":"parked"}\n')
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--members", type=int, default=32)
    parser.add_argument("--switches", type=int, default=4000)
    parser.add_argument("--quantum", type=float, default=0.005)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="timeslicer-bench-"))
    for g in range(args.groups):
        for m in range(args.members):
            home = root / f"g{g}" / f"m{m:02d}"
            home.mkdir(parents=True)
            (home / "owner").write_text(f"owner{m % 2}")
    settings = TurnSettings(quantum=args.quantum, min_resident=0.0, yield_grace=5.0)
    started, stop_box = threading.Event(), dict[str, Any]()
    cpu: dict[str, float] = {}
    thread: threading.Thread

    def agent_thread() -> None:
        async def run() -> None:
            stop = asyncio.Event()
            stop_box["stop"], stop_box["loop"] = stop, asyncio.get_running_loop()

            def ready(agent: Agent) -> None:
                stop_box["agent"] = agent
                started.set()
            await serve(Options(settings, local=root, metrics_address=None, nvml=False), stop,
                        ready)
        asyncio.run(run())

    thread = threading.Thread(target=agent_thread)
    thread.start()
    started.wait()
    latencies: list[float] = []

    async def workers() -> float:
        done = asyncio.Event()
        released: dict[int, float] = {}
        tasks = [asyncio.create_task(worker(root / f"g{g}" / f"m{m:02d}" / "turn.sock", g,
                                            released, latencies, done))
                 for g in range(args.groups) for m in range(args.members)]
        while len(latencies) < 100:  # warm-up: every socket bound, every hello in
            await asyncio.sleep(0.01)
        latencies.clear()
        agent: Agent = stop_box["agent"]
        switches0 = agent.metrics.switches._value.get()
        clock = time.pthread_getcpuclockid(thread.ident or 0)
        cpu["agent0"] = time.clock_gettime(clock)
        t0 = time.perf_counter()
        while len(latencies) < args.switches:
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - t0
        cpu["agent"] = time.clock_gettime(clock) - cpu["agent0"]
        switched: float = agent.metrics.switches._value.get() - switches0
        done.set()
        for task in tasks:
            task.cancel()
        return switched / elapsed

    rate = asyncio.run(workers())
    stop_box["loop"].call_soon_threadsafe(stop_box["stop"].set)
    thread.join()
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[int(len(ms) * 0.99) - 1]
    print(f"{args.groups} groups x {args.members} members, {len(ms)} switches measured, "
          f"{rate:.0f} switches/s")
    print(f"release -> next grant: p50 {statistics.median(ms):.2f} ms, p99 {p99:.2f} ms "
          f"(target p99 <= 5 ms), max {ms[-1]:.2f} ms")
    print(f"agent CPU per switch: {cpu['agent'] / max(1, len(ms)) * 1e6:.0f} us "
          "(its loop thread; the fake workers run in another thread of this process)")


if __name__ == "__main__":
    main()
