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

Then the first shape again beside one *flooding* member, in a group of its
own and a process of its own: it says hello and then writes ``want`` and
``idle`` lines (and now and then a malformed one) as fast as the socket
takes them, and never reads. Prints the honest members' p99 release to next
grant without and with it, and the ratio (target within 1.2x).

    python bench/timeslicer_bench.py                       # 8x32, 8x320, 80x32, flood
    python bench/timeslicer_bench.py --shapes 8x32 --switches 20000
    python bench/timeslicer_bench.py --shapes 8x32 --flood-only
    TIMESLICER_BENCH_SWITCHES=10000 python bench/timeslicer_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
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
    writer.write(b'{"op":"hello","v":2,"resident":false}\n{"op":"want"}\n')
    tally.connected += 1
    try:
        await serve_turns(reader, writer, group, tally)
    finally:
        writer.close()


async def serve_turns(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, group: int,
                      tally: Tally) -> None:
    turn = 0
    while line := await reader.readline():
        if b'"grant"' in line:
            tally.grants += 1
            if group in tally.released:
                tally.latencies.append(time.perf_counter() - tally.released.pop(group))
            turn = json.loads(line)["turn"]
            writer.write(b'{"op":"resident","turn":%d}\n' % turn)
        elif b'"yield"' in line:
            tally.released[group] = time.perf_counter()
            writer.write(b'{"op":"parked","turn":%d}\n' % turn)


async def agent_cpu(agent: asyncio.subprocess.Process) -> float:
    """The agent process's CPU seconds so far, as it reads them itself."""
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(b"cpu\n")
    return float(await agent.stdout.readline())


FLOOD = (b'{"op":"want"}\n{"op":"idle"}\n' * 200 + b'{"op":"want","turn":[[[[1]]]]}\n'
         + b"not json\n")


def flooder(path: Path) -> None:
    """The child: one member that writes lines as fast as its socket takes them, never
    reading (so the agent's replies to its malformed lines pile up), reconnecting whenever
    the agent drops it."""
    sent = {"lines": 0, "connections": 0}

    def report(*_: object) -> None:
        sys.stdout.write(f"{sent['lines']} {sent['connections']}\n")
        sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, report)
    lines = FLOOD.count(b"\n")
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            sent["connections"] += 1
            sock.sendall(b'{"op":"hello","v":2,"resident":false}\n')
            while True:
                sock.sendall(FLOOD)
                sent["lines"] += lines
        except OSError:
            time.sleep(0.01)
        finally:
            sock.close()


async def measure(groups: int, members: int, switches: int, quantum: float,
                  flood: bool = False) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="timeslicer-bench-"))
    flooding: asyncio.subprocess.Process | None = None
    flood_lines = flood_connections = 0
    try:
        for g in range(groups):
            for m in range(members):
                home = root / f"g{g}" / f"m{m:03d}"
                home.mkdir(parents=True)
                (home / "owner").write_text(f"owner{m % 2}")
        if flood:
            (root / "flood" / "m000").mkdir(parents=True)
        agent = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--agent", str(root), "--quantum", str(quantum),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert agent.stdout is not None and agent.stdin is not None
        await agent.stdout.readline()  # running
        if flood:
            flooding = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--flooder", str(root / "flood" / "m000" / "turn.sock"),
                stdout=asyncio.subprocess.PIPE)
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
        if flooding is not None:
            flooding.terminate()
            assert flooding.stdout is not None
            flood_lines, flood_connections = map(int, (await flooding.stdout.read()).split())
            await flooding.wait()
            flooding = None
        await asyncio.sleep(0.2)  # the agent sees every connection close before it stops
        agent.stdin.close()
        await agent.wait()
    finally:
        if flooding is not None:
            flooding.kill()
        shutil.rmtree(root, ignore_errors=True)
    ms = sorted(x * 1000 for x in tally.latencies)
    return {"p50": statistics.median(ms), "p99": ms[max(0, int(len(ms) * 0.99) - 1)],
            "max": ms[-1], "cpu": cpu / switched, "rate": switched / elapsed,
            "samples": len(ms), "flood_lines": flood_lines,
            "flood_connections": flood_connections}


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
    parser.add_argument("--flood-only", action="store_true",
                        help="only the flooding comparison, at the first shape")
    parser.add_argument("--agent", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--flooder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent is not None:
        asyncio.run(agent_main(args.agent, args.quantum))
        return
    if args.flooder is not None:
        flooder(args.flooder)
        return
    if not args.flood_only:
        shapes(args)
    groups, members = args.shapes[0]
    quantum = args.quantum * groups / BASE_GROUPS
    calm = asyncio.run(measure(groups, members, args.switches, quantum))
    flooded = asyncio.run(measure(groups, members, args.switches, quantum, flood=True))
    ratio = flooded["p99"] / calm["p99"]
    print(f"{groups}x{members} beside one flooding member: release -> next grant p99 "
          f"{calm['p99']:.2f} ms without, {flooded['p99']:.2f} ms with (p50 {calm['p50']:.2f} / "
          f"{flooded['p50']:.2f} ms); ratio {ratio:.2f}x (target <= 1.2x: "
          f"{'met' if ratio <= 1.2 else 'MISSED'}); the flooder's socket took "
          f"{flooded['flood_lines']:.0f} lines over {flooded['flood_connections']:.0f} "
          f"connection(s) (the agent reads them at its pace)", flush=True)


def shapes(args: argparse.Namespace) -> None:
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
