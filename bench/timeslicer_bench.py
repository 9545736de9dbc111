"""The agent's own overhead: release to next grant, CPU per switch, and how both grow.

The agent runs in ``--local`` mode in a child process of its own (so its CPU
time is its alone and no lock is shared with the workers); fake workers in
this process want the turn all the time and park the moment they are asked.
A release is the holder's ``parked`` leaving the worker; the next grant is
that group's ``grant`` arriving at its next member. Each shape (groups x
members per group) runs in a fresh agent; the quantum grows with the number
of groups so every shape asks the agent for about the same switches per
second, and what changes between shapes is only how many members and groups
there are. Prints, per shape, p50/p99/max release to next grant (target p99
<= 5 ms at 8x32) and the agent process's CPU seconds per switch, then the
ratios of the bigger shapes to the first, measured in the same run.

    python bench/timeslicer_bench.py                       # 8x32, 8x320, 80x32
    python bench/timeslicer_bench.py --shapes 8x32 --switches 20000
    TIMESLICER_BENCH_SWITCHES=10000 python bench/timeslicer_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placement.turns import TurnSettings
from timeslicer.agent import Options, serve

BASE_GROUPS = 8


@dataclass
class Tally:
    released: dict[int, float] = field(default_factory=dict)  # group -> its last park sent
    latencies: list[float] = field(default_factory=list)
    grants: int = 0
    connected: int = 0


async def worker(path: Path, group: int, tally: Tally) -> None:
    while True:
        try:  # the socket's name appears at bind, a moment before it listens
            reader, writer = await asyncio.open_unix_connection(str(path))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            await asyncio.sleep(0.05)
    writer.write(b'{"op":"hello","v":1,"resident":false}\n{"op":"want"}\n')
    tally.connected += 1
    try:
        await serve_turns(reader, writer, group, tally)
    finally:
        writer.close()


async def serve_turns(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, group: int,
                      tally: Tally) -> None:
    while line := await reader.readline():
        if b'"grant"' in line:
            tally.grants += 1
            if group in tally.released:
                tally.latencies.append(time.perf_counter() - tally.released.pop(group))
            writer.write(b'{"op":"resident"}\n')
        elif b'"yield"' in line:
            tally.released[group] = time.perf_counter()
            writer.write(b'{"op":"parked"}\n')


async def agent_cpu(agent: asyncio.subprocess.Process) -> float:
    """The agent process's CPU seconds so far, as it reads them itself."""
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(b"cpu\n")
    return float(await agent.stdout.readline())


async def measure(groups: int, members: int, switches: int, quantum: float) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="timeslicer-bench-"))
    try:
        for g in range(groups):
            for m in range(members):
                home = root / f"g{g}" / f"m{m:03d}"
                home.mkdir(parents=True)
                (home / "owner").write_text(f"owner{m % 2}")
        agent = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--agent", str(root), "--quantum", str(quantum),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert agent.stdout is not None and agent.stdin is not None
        await agent.stdout.readline()  # running
        tally = Tally()
        tasks = [asyncio.create_task(worker(root / f"g{g}" / f"m{m:03d}" / "turn.sock", g, tally))
                 for g in range(groups) for m in range(members)]
        while tally.connected < groups * members or tally.grants < 20 * groups:  # warm-up
            await asyncio.sleep(0.01)
        tally.latencies.clear()
        grants0, cpu0, t0 = tally.grants, await agent_cpu(agent), time.perf_counter()
        while len(tally.latencies) < switches:
            await asyncio.sleep(0.02)
        cpu, elapsed = await agent_cpu(agent) - cpu0, time.perf_counter() - t0
        switched = tally.grants - grants0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0.2)  # the agent sees every connection close before it stops
        agent.stdin.close()
        await agent.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ms = sorted(x * 1000 for x in tally.latencies)
    return {"p50": statistics.median(ms), "p99": ms[max(0, int(len(ms) * 0.99) - 1)],
            "max": ms[-1], "cpu": cpu / switched, "rate": switched / elapsed,
            "samples": len(ms)}


async def agent_main(root: Path, quantum: float) -> None:
    """The child: the agent over ``root``, answering "cpu" lines on stdin with its CPU time."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def answer() -> None:
        line = sys.stdin.buffer.readline()
        if not line:
            loop.remove_reader(sys.stdin.fileno())
            stop.set()
            return
        sys.stdout.write(f"{time.process_time()}\n")
        sys.stdout.flush()

    def ready(_: object) -> None:
        loop.add_reader(sys.stdin.fileno(), answer)
        sys.stdout.write("running\n")
        sys.stdout.flush()

    settings = TurnSettings(quantum=quantum, min_resident=0.0, yield_grace=5.0)
    await serve(Options(settings, local=root, metrics_address=None, nvml=False), stop, ready)


def shape(text: str) -> tuple[int, int]:
    groups, _, members = text.partition("x")
    if not (groups.isdigit() and members.isdigit() and int(groups) and int(members)):
        raise argparse.ArgumentTypeError(f"a shape is GROUPSxMEMBERS such as 8x32, not {text!r}")
    return int(groups), int(members)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=lambda s: [shape(x) for x in s.split(",")],
                        default=[(8, 32), (8, 320), (80, 32)],
                        help="comma-separated GROUPSxMEMBERS; ratios are to the first")
    parser.add_argument("--switches", type=int,
                        default=int(os.environ.get("TIMESLICER_BENCH_SWITCHES", "3000")),
                        help="releases measured per shape (env TIMESLICER_BENCH_SWITCHES)")
    parser.add_argument("--quantum", type=float, default=0.005,
                        help="seconds, at 8 groups; scaled with the number of groups")
    parser.add_argument("--agent", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent is not None:
        asyncio.run(agent_main(args.agent, args.quantum))
        return
    results = []
    for groups, members in args.shapes:
        quantum = args.quantum * groups / BASE_GROUPS
        r = asyncio.run(measure(groups, members, args.switches, quantum))
        results.append(r)
        print(f"{groups:>3} groups x {members:>3} members (quantum {quantum * 1000:.0f} ms): "
              f"release -> next grant p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, "
              f"max {r['max']:.2f} ms; agent CPU {r['cpu'] * 1e6:.0f} us/switch; "
              f"{r['rate']:.0f} switches/s, {r['samples']:.0f} releases", flush=True)
    first = results[0]
    print(f"target: p99 <= 5 ms at {args.shapes[0][0]}x{args.shapes[0][1]}: "
          f"{'met' if first['p99'] <= 5 else 'MISSED'}")
    for (groups, members), r in zip(args.shapes[1:], results[1:], strict=True):
        print(f"growth {groups}x{members} / {args.shapes[0][0]}x{args.shapes[0][1]}: "
              f"CPU per switch {r['cpu'] / first['cpu']:.2f}x, p50 {r['p50'] / first['p50']:.2f}x, "
              f"p99 {r['p99'] / first['p99']:.2f}x")


if __name__ == "__main__":
    main()
