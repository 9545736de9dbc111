"""What ``--report`` costs next to plain ``simulate``, and how big the page gets.

On the benchmark's scenario (bench/generate.py: 30,000 events on 1,000
nodes by default) it times, end to end as subprocesses (best of --repeat):

* ``openrl-place simulate -o json FILE > /dev/null``
* ``openrl-place simulate --report PAGE.html FILE``

then prints both, their ratio (target: under 3x) and the page's size
(target: under 5 MB, however long the scenario). It does the same on a
copy of the scenario with times (one event every 3 seconds), where waits are
durations, and times ``openrl-place compare`` with three variants next to
one plain replay. A measurement, not a test: it exits 0 unless --strict is
given and a target is missed.

    .venv/bin/python bench/report_bench.py [--nodes 1000] [--events 30000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.simulate_bench import OUT, command, compile_package, scenario_file

TARGET_RATIO = 3.0
TARGET_BYTES = 5 * 10**6


def best(argv: list[str], repeat: int) -> float:
    fastest = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              check=False)
        fastest = min(fastest, time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return fastest


def timed_copy(path: Path, seconds_apart: int) -> Path:
    copy = path.with_name(path.stem + "-timed.json")
    if not copy.exists():
        document = json.loads(path.read_text())
        for index, event in enumerate(document["events"]):
            event["at"] = index * seconds_apart
        copy.write_text(json.dumps(document))
    return copy


def measure(path: Path, repeat: int) -> tuple[float, float, int]:
    page = OUT / f"{path.stem}.html"
    plain = best([*command(), "simulate", "-o", "json", str(path)], repeat)
    report = best([*command(), "simulate", "--report", str(page), str(path)], repeat)
    return plain, report, page.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark simulate --report and compare.")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best is kept")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    compile_package()
    base = scenario_file(args.nodes, args.events, args.seed)
    missed = False
    print(f"{args.events:,} events on {args.nodes:,} nodes (seed {args.seed}), "
          f"best of {args.repeat}, {os.cpu_count()} cores")
    print(f"{'scenario':<22} {'simulate -o json':>17} {'--report':>9} {'ratio':>6} {'page':>9}")
    plain_times = []
    for label, path in (("as generated", base), ("with times (3s apart)", timed_copy(base, 3))):
        plain, report, size = measure(path, args.repeat)
        plain_times.append(plain)
        ratio = report / plain
        missed |= ratio >= TARGET_RATIO or size >= TARGET_BYTES
        print(f"{label:<22} {plain:>16.2f}s {report:>8.2f}s {ratio:>5.2f}x "
              f"{size / 1e6:>7.2f}MB")
    print(f"targets: --report under {TARGET_RATIO:g}x plain, page under "
          f"{TARGET_BYTES / 1e6:g} MB")
    compare = best([*command(), "compare", str(base), "--set", "maxWorkersPerClaim=1,2,4",
                    "-o", "json"], args.repeat)
    print(f"compare, 3 variants of maxWorkersPerClaim: {compare:.2f}s "
          f"({compare / plain_times[0]:.2f}x one plain simulate -o json)")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
