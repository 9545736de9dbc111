"""The replay of one timed day, checkout against checkout: CPU seconds, or instructions.

For comparing the placement code of two commits on the same scenario: the
bench's timed 1,000-node day (``bench/simulate_bench.py``'s timed copy: 30,000
events, seed 1, no turns), made by this checkout and replayed by each
checkout ROOT given (``git worktree add /tmp/base <commit>`` gives an old
one). With ``--affinity-off`` the same day with ``ownerAffinity: false``; a
checkout from before that key replays the plain day, which decides the same.
With ``--groups`` the same day with the bench's node group added
(``simulate_bench.groups_file``: the autoscaler asks for nodes and removes
idle ones), for checkouts that read ``nodeGroups``. With ``--moves`` the day
with every worker movable and ``rebalanceAfter: 2m`` (checkouts that read
them), to set against the plain day's figure from the same checkout.

* CPU seconds (the default): each ROOT in a fresh interpreter, the roots
  taking turns ``--rounds`` times so a shared machine's load hits them alike;
  each run loads the scenario and times the replay alone (process time,
  ``--repeat`` times, least kept). Prints each root's least and every run's.
* ``--callgrind``: each ROOT once under valgrind's callgrind (deterministic,
  the figure to trust on a noisy machine): the replay's instructions are the
  run's minus those of a run that only loads the scenario.

    git worktree add /tmp/base e6097a3
    .venv/bin/python bench/replay_cpu.py . /tmp/base [--rounds 8] [--affinity-off]
    .venv/bin/python bench/replay_cpu.py . /tmp/base --callgrind
    .venv/bin/python bench/replay_cpu.py . /tmp/base --callgrind --groups
    .venv/bin/python bench/replay_cpu.py . --callgrind --moves

A measurement, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def moves_file(events: int, seed: int, nodes: int = 1000) -> Path:
    """The bench's timed day with every worker movable and moves due after two minutes."""
    sys.path.insert(0, str(ROOT))
    from bench.simulate_bench import timed_file

    plain = timed_file(nodes, events, seed, turns=False)
    moving = plain.with_name(plain.stem + "-moves.json")
    if not moving.exists():
        document = json.loads(plain.read_text())
        document["rebalanceAfter"] = "2m"
        for event in document["events"]:
            if "arrive" in event:
                event["arrive"]["movable"] = True
        moving.write_text(json.dumps(document))
    return moving


def day_files(events: int, seed: int) -> tuple[Path, Path, Path]:
    """The bench's timed 1,000-node day, the same with owner affinity off, and with the
    bench's node group."""
    sys.path.insert(0, str(ROOT))
    from bench.simulate_bench import groups_file, timed_file

    plain = timed_file(1000, events, seed, turns=False)
    off = plain.with_name(plain.stem + "-affinity-off.json")
    if not off.exists():
        document = json.loads(plain.read_text())
        document["ownerAffinity"] = False
        off.write_text(json.dumps(document))
    return plain, off, groups_file(1000, events, seed)


def child(root: str, path: str, fallback: str, mode: str, repeat: int) -> None:
    """In a fresh interpreter: replay ``path`` with ``root``'s code; print CPU seconds."""
    sys.path.insert(0, root)
    from cli.document import ScenarioError
    from cli.replay import replay
    from cli.scenario import load_scenario

    try:
        text = Path(path).read_text()
        load_scenario(text)
    except ScenarioError:  # an old checkout: no ownerAffinity key, so no affinity at all
        text = Path(fallback).read_text()
    best = float("inf")
    for _ in range(repeat):
        scenario = load_scenario(text)
        if mode == "load":
            return
        start = time.process_time()
        replay(scenario)
        best = min(best, time.process_time() - start)
    print(f"{best:.4f}")


def _run(root: str, path: Path, plain: Path, mode: str, repeat: int,
         under: list[str] | None = None) -> str:
    done = subprocess.run([*(under or []), sys.executable, __file__, "--child", root,
                           str(path), str(plain), mode, str(repeat)],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    return done.stdout + done.stderr


def cpu(roots: list[str], path: Path, plain: Path, rounds: int, repeat: int) -> None:
    seen: dict[str, list[float]] = {root: [] for root in roots}
    for _ in range(rounds):
        for root in roots:
            seen[root].append(float(_run(root, path, plain, "replay", repeat).split()[-1]))
    base = min(seen[roots[-1]])
    for root in roots:
        runs = sorted(seen[root])
        print(f"{root}: replay {runs[0]:.3f} s CPU (least of {rounds} x {repeat}; "
              f"{runs[0] / base:.2f}x the last root); runs "
              + " ".join(f"{seconds:.3f}" for seconds in runs))


def callgrind(roots: list[str], path: Path, plain: Path) -> None:
    figures = {}
    with tempfile.TemporaryDirectory() as out:
        under = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p"]
        for root in roots:
            counts = []
            for mode in ("replay", "load"):
                text = _run(root, path, plain, mode, 1, under)
                found = re.search(r"Collected : (\d+)", text)
                assert found is not None, text
                counts.append(int(found.group(1)))
            figures[root] = counts[0] - counts[1]
    base = figures[roots[-1]]
    for root, count in figures.items():
        print(f"{root}: replay {count / 1e6:,.0f}M instructions ({count / base:.3f}x the "
              f"last root)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=["."],
                        help="checkouts to compare; ratios are to the last")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="replays per run; least kept")
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--affinity-off", action="store_true")
    parser.add_argument("--groups", action="store_true", help="the day with a node group")
    parser.add_argument("--moves", action="store_true",
                        help="the day with every worker movable, rebalanceAfter 2m")
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        root, path, fallback, mode, repeat = args.child
        child(root, path, fallback, mode, int(repeat))
        return 0
    roots = [str(Path(root).resolve()) for root in args.roots]
    plain, off, grouped = day_files(args.events, args.seed)
    path, label = ((moves_file(args.events, args.seed), "every worker movable, moves after 2m")
                   if args.moves else
                   (grouped, "the bench day with a node group") if args.groups else
                   (off, "owner affinity off") if args.affinity_off else (plain, "the bench day"))
    print(f"{path.name}: {label}")
    if args.callgrind:
        callgrind(roots, path, plain)
    else:
        cpu(roots, path, plain, args.rounds, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
