"""What moves buy, and what they cost to simulate: days replayed with and without.

Figures (the default): each day replayed with ``rebalanceAfter`` off, 2m and
5m, every sampler marked movable (``--movable all``: every worker), turns
played at the policy's defaults when the day sets none. Per variant: the
stranded device-hours (devices free while a worker sharing a claim could
have had them as a newcomer: ``placement.simulator.mover``), how much of
the off figure is gone, the moves, the most moves of one worker within an
hour, the median over workers that shared of their served share through
their whole stay (alone counts as served, a move's restart as wanted and
not served), and the GPU-hours paid for when the day has node groups.

The days: ``examples/day.yaml``, the RL day of the issue (``bench/generate.py
--rl-jobs 80 --nodes 8 --seed 7``), two more RL days of other seeds and
sizes, ``examples/autoscaled.yaml`` and an RL day with a node group under
binpack; or the files given.

``--cpu``: the CPU a replay costs with moves on (2m, every worker movable)
against off, on the bench's timed 1,000-node day (``bench/simulate_bench.py``),
and at ``--scale`` times its fleet and events; least of ``--repeat`` runs,
both in this process, taking turns.

    .venv/bin/python bench/moves.py
    .venv/bin/python bench/moves.py examples/day.yaml --movable all
    .venv/bin/python bench/moves.py --cpu [--scale 10] [--repeat 3]

A measurement, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import node_groups  # noqa: E402
from bench.rl_day import rl_day  # noqa: E402
from cli.compare import MoveSummary, _moves  # noqa: E402
from cli.replay import replay  # noqa: E402
from cli.scenario import Arrive, Scenario, build_scenario, load_scenario  # noqa: E402
from cli.timeline import build_timeline  # noqa: E402
from placement.turns import TurnSettings  # noqa: E402

AFTER = (("off", 0.0), ("2m", 120.0), ("5m", 300.0))


def _days() -> list[tuple[str, Scenario]]:
    days = [("examples/day.yaml", load_scenario((ROOT / "examples/day.yaml").read_text(),
                                                 kind="yaml"))]
    for jobs, nodes, seed in ((80, 8, 7), (120, 12, 11), (60, 6, 3)):
        days.append((f"RL day {jobs} jobs / {nodes} nodes, seed {seed}",
                     build_scenario(rl_day(jobs, seed=seed, nodes=nodes))))
    days.append(("examples/autoscaled.yaml",
                 load_scenario((ROOT / "examples/autoscaled.yaml").read_text(), kind="yaml")))
    grouped = rl_day(80, seed=7, nodes=1)
    grouped["strategy"] = "binpack"
    grouped["nodes"] = []  # every node the group's: the autoscaler sizes the fleet
    grouped["nodeGroups"] = node_groups(1, 16, random.Random("moves"))
    days.append(("RL day 80 jobs, a group of up to 16, binpack", build_scenario(grouped)))
    return days


def _marked(scenario: Scenario, every: bool) -> Scenario:
    events = tuple(attrs.evolve(e, movable=True)
                   if isinstance(e, Arrive) and (every or e.role == "sampler") else e
                   for e in scenario.events)
    return attrs.evolve(scenario, events=events, turns=scenario.turns or TurnSettings())


def figures(days: list[tuple[str, Scenario]], every: bool) -> None:
    print(f"{'day':<46} {'moves':<6} {'stranded dev-h':>14} {'gone':>6} {'moves':>6} "
          f"{'most/h':>6} {'served (stay)':>13} {'GPU-hours':>9}")
    for name, scenario in days:
        marked = _marked(scenario, every)
        base: MoveSummary | None = None
        for label, after in AFTER:
            variant = attrs.evolve(marked, rebalance_after=after)
            report = replay(variant, idle_allocations=True, measure_stranded=True)
            summary = _moves(report)
            gpu = build_timeline(variant, report).summary().gpu_hours
            if base is None:
                base = summary
            gone = (1 - summary.stranded_hours / base.stranded_hours
                    if base.stranded_hours > 0 else 0.0)
            share = "-" if summary.placed_share is None else f"{summary.placed_share:.1%}"
            print(f"{name:<46} {label:<6} {summary.stranded_hours:>14.1f} {gone:>6.0%} "
                  f"{summary.moves:>6} {summary.most_in_an_hour:>6} {share:>13} "
                  f"{'-' if gpu is None else f'{gpu:.1f}':>9}")


def cpu(scale: int, repeat: int) -> None:
    from bench.simulate_bench import timed_file
    for factor in sorted({1, scale}):
        path = timed_file(1000 * factor, 30_000 * factor, 1, turns=False)
        scenario = _marked(load_scenario(path.read_text(), kind="json"), True)
        scenario = attrs.evolve(scenario, turns=None)
        cases = {"off": attrs.evolve(scenario, rebalance_after=0.0),
                 "on": attrs.evolve(scenario, rebalance_after=120.0)}
        best = dict.fromkeys(cases, float("inf"))
        moves = 0
        for _ in range(repeat):
            for label, case in cases.items():
                start = time.process_time()
                report = replay(case)
                best[label] = min(best[label], time.process_time() - start)
                if label == "on":
                    moves = _moves(report).moves
        print(json.dumps({"nodes": 1000 * factor, "events": 30_000 * factor,
                          "off_s": round(best["off"], 3), "on_s": round(best["on"], 3),
                          "ratio": round(best["on"] / best["off"], 3), "moves": moves}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--movable", choices=("samplers", "all"), default="samplers")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.cpu:
        cpu(args.scale, args.repeat)
        return
    days = ([(str(p), load_scenario(p.read_text(), kind=p.suffix.lstrip(".")))
             for p in args.files] if args.files else _days())
    figures(days, args.movable == "all")


if __name__ == "__main__":
    main()
