"""How fast ``openrl-place simulate`` replays large scenarios, and how that scales.

For each fleet size (100, 1,000 and 10,000 nodes of 8 x 80Gi by default) it
generates one seeded scenario of the same number of events (bench/generate.py)
and measures:

* end to end: ``openrl-place simulate --output json FILE`` as a subprocess,
  interpreter start-up, imports and printing included (best of --repeat).
  The package's bytecode is compiled first, as ``pip install`` does: an
  editable checkout run with PYTHONDONTWRITEBYTECODE set would otherwise
  compile every module from source on every run;
* in process: parsing (text -> checked scenario), replay (every decision),
  and rendering the JSON document, so we can see where the time goes.

It then prints the per-event cost ratio of the largest fleet to the 1,000-node
one. With the same events, a larger fleet is also a less contended one, so
last it times one decision on a saturated fleet of each size (every seat
blocked by host memory), the case where a scan of the fleet would show.

Then turns: the 1,000-node scenario with times (an event every 3 seconds, a
day), replayed as it is and with a top-level ``turns: {}`` so every shared
claim's turns are played, the two alternating (best of --turns-repeat); it
prints both rates by the wall clock and per CPU-second (the run's user+sys,
which other work on a shared machine disturbs far less) and judges the
ratio on CPU seconds. With
``--turns-growth`` (or SIMULATE_BENCH_TURNS_GROWTH=1) it does the same at
ten times the fleet, and prints how the cost of the turns grew.

Then node groups: the same timed 1,000-node day as it is and with one node
group added (``bench/generate.py``'s, up to half the fleet more: under spread
a worker a group could seat waits for a node rather than share, and a pool
capped at a tenth stalls two thousand of them), so the simulated autoscaler
asks for nodes for waiting workers and removes idle ones; it prints both
rates and their ratio, measured in one run. With ``--groups-growth`` (or
SIMULATE_BENCH_GROUPS_GROWTH=1) it also prints how the cost per event grows
with and without the group, all cases alternating in one run: a tenth of the
fleet, ten times the fleet (with the same events it is barely contended: the
group is not asked for a node), ten times the fleet and the events (as
contended as the 1,000-node day), and the 1,000-node fleet under a burst far
beyond it (a sixth more live workers: the group reaches its max and about ten
times as many wait at once, each considered for a node to add).

With ``--blocked-growth`` (or SIMULATE_BENCH_BLOCKED_GROWTH=1; ``--only-blocked``
for it alone) it times the shape where a removed node meets a long blocked
queue: two groups, trainers only on one (at its max of two nodes, with 0, 200
or 2,000 trainers waiting that it is full for, none leaving) and samplers only
on the other, whose waves of 32 ask for four nodes, leave, and let them go
idle and be removed, four removals per wave. A node of the full group could
not go idle instead: the pending retry seats a waiting worker it fits as soon
as a seat frees. Each removal has the blocked workers considered again, so
it prints the CPU cost per event at each queue and the ratio of 2,000 to
200, all alternating in one run, and the files' paths for callgrind.

Targets: >= 20,000 events/s end to end at 1,000 nodes, a ten times larger
fleet costing at most twice as much per event, turns costing at most 1.3x
the events per second without them, and a node group keeping at least 0.8x
the events per second without one. This is a measurement, not a test: it
exits 0 unless --strict is given and a target is missed.

    .venv/bin/python bench/simulate_bench.py [--nodes 100 1000 10000] [--events 30000]
    .venv/bin/python bench/simulate_bench.py --nodes 1000 --repeat 1   # the short run
    .venv/bin/python bench/simulate_bench.py --only-turns [--turns-growth]
    .venv/bin/python bench/simulate_bench.py --only-groups [--groups-growth]
    .venv/bin/python bench/simulate_bench.py --only-blocked   # a long blocked queue
    .venv/bin/python bench/simulate_bench.py --profile 1000   # where replay time goes
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import json
import os
import pstats
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import attrs

# Run as a script from anywhere: the repository root holds bench/, cli/ and placement/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import LIVE_PER_NODE, generate, node_groups
from cli.eventlog import ArriveStep, AskNodeStep, LeaveStep, LoseNodeStep, RemoveNodeStep
from cli.render_json import render_json
from cli.replay import Report, replay
from cli.scenario import load_scenario
from placement import Booking, Claim, Fleet, GiB, Node, Request, Role, decide
from placement.simulator.simulation import Seating

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
TARGET_EVENTS_PER_SECOND = 20_000
TARGET_RATIO = 2.0
TARGET_TURNS = 1.3  # events/s without turns over events/s with them, at most
TARGET_GROUPS = 0.8  # events/s with a node group over events/s without, at least
SECONDS_APART = 3  # the timed copy: 30,000 events make a day
QUEUE_LIVE = 7 / 6  # the burst: live workers over the plain day's (14,000 at 1,000 nodes)
BLOCKED = (0, 200, 2000)  # the blocked-growth cases: trainers waiting for a full group


@attrs.frozen
class Measurement:
    nodes: int
    events: int
    live: int
    pending: int
    end_to_end: float
    parse: float
    replay: float
    output: float

    @property
    def per_event_us(self) -> float:
        return self.end_to_end / self.events * 1e6

    @property
    def rate(self) -> float:
        return self.events / self.end_to_end


def scenario_file(nodes: int, events: int, seed: int, live: int | None = None) -> Path:
    """``live``: the generator's live workers, when not its default."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"scenario-{nodes}n-{events}e-s{seed}{_live(live)}.json"
    if not path.exists():
        path.write_text(json.dumps(generate(nodes, events, seed=seed, live=live)))
    return path


def _live(live: int | None) -> str:
    return "" if live is None else f"-l{live}"


def timed_file(nodes: int, events: int, seed: int, *, turns: bool,
               live: int | None = None) -> Path:
    """The scenario with an event every ``SECONDS_APART`` seconds; ``turns``: and a
    top-level ``turns: {}``, the policy's defaults on every shared claim."""
    path = OUT / (f"scenario-{nodes}n-{events}e-s{seed}{_live(live)}-timed"
                  f"{'-turns' if turns else ''}.json")
    if not path.exists():
        document = json.loads(scenario_file(nodes, events, seed, live).read_text())
        for index, event in enumerate(document["events"]):
            event["at"] = index * SECONDS_APART
        if turns:
            document["turns"] = {}
        path.write_text(json.dumps(document))
    return path


def groups_file(nodes: int, events: int, seed: int, live: int | None = None) -> Path:
    """The timed scenario with one node group of the fleet's nodes (up to half more)."""
    most = max(1, nodes // 2)
    path = OUT / f"scenario-{nodes}n-{events}e-s{seed}{_live(live)}-timed-groups-{most}.json"
    if not path.exists():
        document = json.loads(timed_file(nodes, events, seed, turns=False,
                                         live=live).read_text())
        document["nodeGroups"] = node_groups(1, most, random.Random(f"groups-{seed}"))
        path.write_text(json.dumps(document))
    return path


def print_groups(args: argparse.Namespace) -> bool:
    """The rates without and with a node group, and their ratio; True when the target is
    missed. The two cases alternate, ``--groups-repeat`` times each, best kept; the target
    is judged on CPU seconds (the process's and its children's), which other work on a
    shared machine disturbs far less than the wall clock."""
    nodes = 1000
    plain = timed_file(nodes, args.events, args.seed, turns=False)
    grouped = groups_file(nodes, args.events, args.seed)
    wall, cpu = alternating((plain, grouped), args.groups_repeat)
    report = replay(load_scenario(grouped.read_text()))
    changes = sum(1 for step in report.steps if step.__class__.__name__ in (
        "AskNodeStep", "RemoveNodeStep"))
    print(f"\nnode groups: {args.events:,} timed events ({SECONDS_APART}s apart), {nodes:,} "
          f"nodes, best of {args.groups_repeat}; the group's asks and removals: {changes:,}")
    print(f"{'groups':>7} {'events/s':>9} {'events/CPU-s':>13}")
    for label, path in (("none", plain), ("one", grouped)):
        print(f"{label:>7} {args.events / wall[path]:>9,.0f} {args.events / cpu[path]:>13,.0f}")
    ratio = cpu[plain] / cpu[grouped]
    verdict = "ok" if ratio >= TARGET_GROUPS else "MISSED"
    print(f"target: with a node group >= {TARGET_GROUPS}x the events per CPU-second "
          f"without: {ratio:.2f}x: {verdict} ({wall[plain] / wall[grouped]:.2f}x by the wall "
          f"clock; load average {os.getloadavg()[0]:.2f})")
    return verdict != "ok"


@attrs.frozen
class GrowthCase:
    label: str
    nodes: int
    events: int
    live: int | None  # the generator's live workers; None: its default


def growth_cases(base: int, events: int) -> tuple[GrowthCase, ...]:
    """The node-group growth cases around a ``base``-node day of ``events`` events."""
    # The generator's default live workers (bench/generate.py), a sixth more for the burst.
    live = min(LIVE_PER_NODE * base, int(events * 0.4))
    return (GrowthCase("tenth", max(1, base // 10), events, None),
            GrowthCase("base", base, events, None),
            GrowthCase("10x fleet", base * 10, events, None),
            GrowthCase("10x both", base * 10, events * 10, None),
            GrowthCase("burst", base, events, round(live * QUEUE_LIVE)))


def waiting_queue(report: Report) -> tuple[float, int]:
    """How many workers wait after each step, on average over the steps, and at most."""
    waiting: set[str] = set()
    total = peak = 0
    for step in report.steps:
        for seat in getattr(step, "placed", ()):
            waiting.discard(seat.worker)
        if isinstance(step, ArriveStep):
            if step.reason is not None:
                waiting.add(step.worker)
        elif isinstance(step, LeaveStep):  # a finish too
            waiting.discard(step.worker)
        elif isinstance(step, LoseNodeStep):
            waiting.update(moved.worker for moved in step.moved if moved.reason is not None)
        total += len(waiting)
        peak = max(peak, len(waiting))
    return total / max(1, len(report.steps)), peak


def print_groups_growth(args: argparse.Namespace) -> None:
    """CPU microseconds per event (end to end, best of ``--groups-repeat``) of each growth
    case without and with the node group, all alternating in one run, and how the cost
    grows: ten times the fleet over the base, and the burst over the base."""
    cases = growth_cases(args.groups_base, args.events)
    files = {case: (timed_file(case.nodes, case.events, args.seed, turns=False,
                               live=case.live),
                    groups_file(case.nodes, case.events, args.seed, case.live))
             for case in cases}
    _, cpu = alternating(tuple(path for pair in files.values() for path in pair),
                         args.groups_repeat)
    print(f"\nnode groups, growth: timed events ({SECONDS_APART}s apart), CPU us per event "
          f"end to end (start-up included), best of {args.groups_repeat}, all alternating; "
          "waiting: workers waiting after each step, mean / peak")
    print(f"{'case':>9} {'nodes':>7} {'events':>8} {'live':>7} | {'none us/ev':>10} "
          f"{'waiting':>13} | {'one us/ev':>10} {'waiting':>13} {'asks+removals':>14}")
    cost: dict[tuple[str, bool], float] = {}
    for case, (plain, grouped) in files.items():
        row = f"{case.label:>9} {case.nodes:>7,} {case.events:>8,} {case.live or '-':>7} |"
        for grouped_day, path in ((False, plain), (True, grouped)):
            report = replay(load_scenario(path.read_text()))
            mean, peak = waiting_queue(report)
            cost[case.label, grouped_day] = us = cpu[path] / len(report.steps) * 1e6
            row += f" {us:>10.1f} {f'{mean:,.0f} / {peak:,}':>13}"
            if grouped_day:
                changes = sum(1 for step in report.steps
                              if isinstance(step, AskNodeStep | RemoveNodeStep))
                row += f" {changes:>14,}"
            else:
                row += " |"
        print(row)
    for top, bottom, what in (("10x fleet", "base", "ten times the fleet, same events"),
                              ("10x both", "base", "ten times the fleet and the events"),
                              ("burst", "base", "the burst over the base day")):
        print(f"{what}: per-event cost {cost[top, True] / cost[bottom, True]:.2f}x with the "
              f"group, {cost[top, False] / cost[bottom, False]:.2f}x without")
    print(f"(load average {os.getloadavg()[0]:.2f})")


def blocked_file(blocked: int, waves: int) -> Path:
    """Two node groups of 8 x 80Gi: ``big`` takes trainers only and is at its max of 2
    nodes with ``blocked`` 80Gi trainers waiting for it (16 seated, none leaving);
    ``small`` takes samplers only, and ``waves`` waves of 32 80Gi samplers, 1,000 s
    apart, each ask for 4 of its nodes, leave 600 s after they came, and leave the nodes
    idle: 4 removals a wave, each with the whole blocked queue waiting."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"scenario-blocked-{blocked}-w{waves}.json"
    if path.exists():
        return path
    template = {"devices": 8, "deviceMemory": "80Gi", "hostMemory": "2Ti",
                "maxWorkersPerClaim": 2, "product": "NVIDIA H100 80GB HBM3"}
    groups = [{"name": name, "template": {**template, "roles": [role]}, "min": 0, "max": most,
               "bootTime": "1m", "idleTime": "2m"}
              for name, role, most in (("big", "trainer", 2), ("small", "sampler", 100))]
    events: list[dict[str, object]] = [
        {"at": 0, "arrive": {"name": f"t{index:05d}", "role": "trainer", "memory": "80Gi",
                             "owner": "train"}}
        for index in range(16 + blocked)]
    serial = 0
    for wave in range(waves):
        start = 200 + wave * 1000
        names = [f"s{serial + index:06d}" for index in range(1, 33)]
        serial += 32
        events += [{"at": start + index, "arrive": {"name": name, "role": "sampler",
                                                    "memory": "80Gi", "owner": "sample"}}
                   for index, name in enumerate(names)]
        events += [{"at": start + 600 + index, "leave": name}
                   for index, name in enumerate(names)]
    path.write_text(json.dumps({"dra": "instant", "nodes": [], "nodeGroups": groups,
                                "events": events}))
    return path


def print_blocked_growth(args: argparse.Namespace) -> None:
    """CPU microseconds per event end to end (best of ``--groups-repeat``, alternating)
    with 0, 200 and 2,000 workers blocked while the other group's nodes are removed."""
    files = {blocked: blocked_file(blocked, args.blocked_waves) for blocked in BLOCKED}
    _, cpu = alternating(tuple(files.values()), args.groups_repeat)
    print(f"\nnode groups, a blocked queue: {args.blocked_waves} waves of 32 samplers on one "
          "group while the other is at its max, CPU end to end (start-up included), best of "
          f"{args.groups_repeat}, alternating")
    print(f"{'blocked':>8} {'events':>7} {'removals':>9} {'us/event':>9} "
          f"{'events/CPU-s':>13}")
    cost = {}
    for blocked, path in files.items():
        text = path.read_text()
        report = replay(load_scenario(text))
        events = len(json.loads(text)["events"])
        removals = sum(1 for step in report.steps if isinstance(step, RemoveNodeStep))
        cost[blocked] = cpu[path] / events
        print(f"{blocked:>8,} {events:>7,} {removals:>9,} {cost[blocked] * 1e6:>9.1f} "
              f"{events / cpu[path]:>13,.0f}")
    low, high = BLOCKED[1], BLOCKED[-1]
    print(f"per-event cost, {high:,} blocked over {low:,}: {cost[high] / cost[low]:.2f}x "
          f"(load average {os.getloadavg()[0]:.2f})")
    print("instructions, deterministic: PYTHONHASHSEED=0 valgrind --tool=callgrind "
          ".venv/bin/openrl-place simulate -o json FILE, on " +
          ", ".join(str(path.relative_to(ROOT)) for path in files.values()))


def alternating(paths: tuple[Path, ...], repeat: int) -> tuple[dict[Path, float],
                                                                dict[Path, float]]:
    """Best wall seconds and best CPU seconds (the run's children's user+sys) of each
    path end to end, ``repeat`` runs each, the paths taking turns so the machine's
    load hits them alike: on a shared machine the wall clock swings far more."""
    wall = dict.fromkeys(paths, float("inf"))
    cpu = dict(wall)
    for _ in range(repeat):
        for path in paths:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[path] = min(wall[path], end_to_end(path, 1))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[path] = min(cpu[path], after.ru_utime - before.ru_utime
                            + after.ru_stime - before.ru_stime)
    return wall, cpu


def print_turns(args: argparse.Namespace) -> bool:
    """The turns-off / turns-on rates; True when the target is missed. Judged on CPU
    seconds, the two cases alternating (``alternating``); wall rates printed beside."""
    sizes = [1000, 10_000] if args.turns_growth else [1000]
    print(f"\nturns: {args.events:,} timed events ({SECONDS_APART}s apart), "
          f"best of {args.turns_repeat}, alternating")
    print(f"{'nodes':>7} {'off events/s':>13} {'on events/s':>12} {'off events/CPU-s':>17} "
          f"{'on events/CPU-s':>16} {'off/on CPU':>11}")
    ratios = {}
    for nodes in sizes:
        off = timed_file(nodes, args.events, args.seed, turns=False)
        on = timed_file(nodes, args.events, args.seed, turns=True)
        wall, cpu = alternating((off, on), args.turns_repeat)
        ratios[nodes] = cpu[on] / cpu[off]
        n = args.events
        print(f"{nodes:>7,} {n / wall[off]:>13,.0f} {n / wall[on]:>12,.0f} "
              f"{n / cpu[off]:>17,.0f} {n / cpu[on]:>16,.0f} {ratios[nodes]:>10.2f}x")
    verdict = "ok" if ratios[1000] <= TARGET_TURNS else "MISSED"
    print(f"1,000 nodes: turns cost {ratios[1000]:.2f}x (target <= {TARGET_TURNS}x): {verdict}")
    if 10_000 in ratios:
        print(f"10,000 / 1,000 nodes: the turns' cost ratio grew "
              f"{ratios[10_000] / ratios[1000]:.2f}x")
    return verdict != "ok"


def command() -> list[str]:
    script = Path(sys.executable).parent / "openrl-place"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from cli.main import main; main()"]


def compile_package() -> None:
    for package in ("placement", "cli"):
        compileall.compile_dir(ROOT / package, quiet=1)


def end_to_end(path: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([*command(), "simulate", "--output", "json", str(path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode not in (0, 1):
            raise SystemExit(f"simulate failed on {path}: {done.stderr.decode()}")
        best = min(best, elapsed)
    return best


def in_process(path: Path) -> tuple[float, float, float, Report]:
    start = time.perf_counter()
    scenario = load_scenario(path.read_text())
    parsed = time.perf_counter()
    report = replay(scenario)
    replayed = time.perf_counter()
    render_json(report)
    rendered = time.perf_counter()
    return parsed - start, replayed - parsed, rendered - replayed, report


def measure(nodes: int, events: int, seed: int, repeat: int) -> Measurement:
    path = scenario_file(nodes, events, seed)
    wall = end_to_end(path, repeat)
    parse, replay_time, output, report = in_process(path)
    pending = sum(1 for state in report.workers if state.phase is Seating.PENDING)
    return Measurement(nodes, len(report.steps), len(report.workers), pending, wall,
                       parse, replay_time, output)


def saturated_fleet(nodes: int) -> Fleet:
    """Every device claimed; half the claims shared to the node's host-memory limit.

    Each node: 8 one-device claims, 4 shared by two 20Gi workers (160Gi parked
    of 200Gi), 4 with one worker and a free seat. A 60Gi worker fits every
    free seat's device but no node can park it: it must wait, and finding
    that out must not take time proportional to the fleet.
    """
    fleet_nodes = [Node(f"n{i:05d}", 8, 80 * GiB, 200 * GiB, frozenset(), 2) for i in range(nodes)]
    claims = []
    for i in range(nodes):
        for device in range(8):
            workers = ("a", "b") if device < 4 else ("a",)
            claims.append(Claim(f"c{i:05d}-{device}", f"n{i:05d}", 1, allocated=True,
                                bookings=tuple(Booking(f"w{i}-{device}{w}", "o", 20 * GiB)
                                      for w in workers)))
    return Fleet(fleet_nodes, claims)


def one_decision(nodes: int, repeat: int = 20) -> float:
    """Seconds for one decision about a worker that must wait on a saturated fleet."""
    fleet = saturated_fleet(nodes)
    request = Request("probe", Role.TRAINER, 60 * GiB)
    start = time.perf_counter()
    for _ in range(repeat):
        decide(request, fleet)
    return (time.perf_counter() - start) / repeat


def profile(nodes: int, events: int, seed: int) -> None:
    scenario = load_scenario(scenario_file(nodes, events, seed).read_text())
    profiler = cProfile.Profile()
    profiler.runcall(replay, scenario)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark openrl-place simulate.")
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="end-to-end runs; best is kept")
    parser.add_argument("--profile", type=int, metavar="NODES",
                        help="profile the in-process replay at this fleet size instead")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--only-turns", action="store_true",
                        help="only the turns-off / turns-on pair")
    parser.add_argument("--turns-growth", action="store_true",
                        default=os.environ.get("SIMULATE_BENCH_TURNS_GROWTH") == "1",
                        help="the turns pair at 10,000 nodes too")
    parser.add_argument("--turns-repeat", type=int, default=3,
                        help="end-to-end runs of each turns case (alternating); best is kept")
    parser.add_argument("--only-groups", action="store_true",
                        help="only the without / with a node group pair")
    parser.add_argument("--groups-repeat", type=int, default=3,
                        help="end-to-end runs of each node-group case; best is kept")
    parser.add_argument("--groups-growth", action="store_true",
                        default=os.environ.get("SIMULATE_BENCH_GROUPS_GROWTH") == "1",
                        help="the node-group growth cases too (a tenth, ten times the fleet, "
                             "a burst)")
    parser.add_argument("--groups-base", type=int, default=1000,
                        help="the growth cases' base fleet (nodes)")
    parser.add_argument("--blocked-growth", action="store_true",
                        default=os.environ.get("SIMULATE_BENCH_BLOCKED_GROWTH") == "1",
                        help="0, 200 and 2,000 workers blocked on a full group while the "
                             "other group's nodes are removed")
    parser.add_argument("--only-blocked", action="store_true",
                        help="only the blocked-queue cases")
    parser.add_argument("--blocked-waves", type=int, default=150,
                        help="the blocked-queue cases' waves of samplers (4 removals each)")
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.profile, args.events, args.seed)
        return 0

    compile_package()
    if args.only_blocked:
        print_blocked_growth(args)
        return 0
    if args.only_turns:
        return 1 if print_turns(args) and args.strict else 0
    if args.only_groups:
        missed = print_groups(args)
        if args.groups_growth:
            print_groups_growth(args)
        if args.blocked_growth:
            print_blocked_growth(args)
        return 1 if missed and args.strict else 0
    print(f"openrl-place simulate --output json, {args.events:,} events per scenario "
          f"(seed {args.seed}), 8 x 80Gi per node, best of {args.repeat}")
    print(f"{'nodes':>7} {'live':>7} {'pending':>8} {'end-to-end':>11} {'events/s':>9} "
          f"{'us/event':>9} | {'parse':>7} {'replay':>7} {'output':>7}")
    results = {}
    for nodes in args.nodes:
        m = measure(nodes, args.events, args.seed, args.repeat)
        results[nodes] = m
        print(f"{m.nodes:>7,} {m.live:>7,} {m.pending:>8,} {m.end_to_end:>10.3f}s "
              f"{m.rate:>9,.0f} {m.per_event_us:>9.1f} | {m.parse:>6.3f}s {m.replay:>6.3f}s "
              f"{m.output:>6.3f}s")

    missed = []
    if 1000 in results:
        rate = results[1000].rate
        verdict = "ok" if rate >= TARGET_EVENTS_PER_SECOND else "MISSED"
        print(f"\n1,000 nodes: {rate:,.0f} events/s end to end "
              f"(target >= {TARGET_EVENTS_PER_SECOND:,}): {verdict}")
        if verdict != "ok":
            missed.append("rate")
    largest = max(results)
    if 1000 in results and largest > 1000:
        ratio = results[largest].per_event_us / results[1000].per_event_us
        replay_ratio = results[largest].replay / results[1000].replay
        verdict = "ok" if ratio <= TARGET_RATIO else "MISSED"
        print(f"per-event cost {largest:,} / 1,000 nodes: {ratio:.2f}x end to end, "
              f"{replay_ratio:.2f}x replay only (target <= {TARGET_RATIO}x): {verdict}")
        if verdict != "ok":
            missed.append("ratio")

    print("\none decision on a saturated fleet (a worker every free seat's node is too short of "
          "host memory to park):")
    decisions = {nodes: one_decision(nodes) for nodes in args.nodes}
    for nodes, seconds in decisions.items():
        print(f"{nodes:>7,} nodes: {seconds * 1e6:>10.1f} us")
    if 1000 in decisions and largest > 1000:
        print(f"  {largest:,} / 1,000 nodes: {decisions[largest] / decisions[1000]:.1f}x")
    if print_turns(args):
        missed.append("turns")
    if print_groups(args):
        missed.append("groups")
    if args.groups_growth:
        print_groups_growth(args)
    if args.blocked_growth:
        print_blocked_growth(args)
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
