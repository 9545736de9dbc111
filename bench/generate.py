"""Seeded generator of large, realistic ``openrl-place simulate`` scenarios (JSON).

The fleet: ``nodes`` nodes of 8 x 80Gi (the fake DRA driver's shape), with
host memory drawn from 512Gi / 1Ti / 2Ti, a quarter trainer-only, a quarter
sampler-only, the rest open to both, and sharing opted in at two workers per
claim (a fifth of the nodes at four). One percent of the nodes join later
through ``addNode`` events.

The workers: the estimator's tiers -- 10Gi LoRA, 24Gi, 45Gi, 60Gi 8B full
fine-tunes, plus wide 140Gi (two devices) and 300Gi (four devices) workers
and a rare 700Gi worker no node can ever hold -- owned by a few dozen models.
Arrivals fill the fleet to ``live`` workers, then arrivals and departures
alternate at random around that level, so the fleet sits under contention:
workers share, some wait, departures let them in.

With ``groups`` (opt-in; ``--groups N``) the scenario also declares N node
groups of the same nodes (none up at the start, up to half the fleet each,
five minutes to come up, ten idle before going) for the simulated
autoscaler, and since groups need a clock every event gets a time,
``seconds_apart`` after the one before. Without it the output is what it
always was for a seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

DEVICES_PER_NODE = 8
DEVICE_MEMORY = "80Gi"
HOST_MEMORY = ("512Gi", "1Ti", "2Ti")
ROLE_POLICIES: tuple[list[str], ...] = (["trainer"], ["sampler"], [], [])
# (memory, weight): the estimator's tier table and a tail of wide and impossible workers.
TIERS = (("10Gi", 35), ("24Gi", 15), ("45Gi", 14), ("60Gi", 25), ("140Gi", 7), ("300Gi", 3.9),
         ("700Gi", 0.1))
LIVE_PER_NODE = 12


def generate(nodes: int, events: int, *, seed: int = 1, live: int | None = None,
             groups: int = 0, seconds_apart: float = 3) -> dict[str, Any]:
    """A scenario of ``nodes`` nodes and exactly ``events`` events around ``live`` workers;
    with ``groups``, that many node groups and an event every ``seconds_apart`` seconds."""
    rng = random.Random(seed)
    # A fleet ten times larger cannot be filled by the same number of events:
    # keep at most 40% of the events as the initial fill.
    target = live if live is not None else min(LIVE_PER_NODE * nodes, int(events * 0.4))
    fleet = [_node(rng, index) for index in range(nodes)]
    late_count = nodes // 100
    late = fleet[len(fleet) - late_count:] if late_count else []
    initial = fleet[: len(fleet) - late_count]
    late_at = sorted(rng.sample(range(events), len(late))) if late else []

    memories = [memory for memory, _ in TIERS]
    weights = [weight for _, weight in TIERS]
    owners = [f"model-{i:02d}" for i in range(40)]
    present: list[str] = []
    out: list[dict[str, Any]] = []
    serial = 0
    for index in range(events):
        if late_at and late_at[0] == index:
            late_at.pop(0)
            out.append({"addNode": late.pop(0)})
            continue
        fill = len(present) < target
        if present and not fill and rng.random() < 0.5:
            # Swap-remove keeps a departure O(1) whatever the number of live workers.
            slot = rng.randrange(len(present))
            present[slot], present[-1] = present[-1], present[slot]
            out.append({"leave": present.pop()})
            continue
        serial += 1
        name = f"w{serial:06d}"
        present.append(name)
        out.append({"arrive": {
            "name": name,
            "role": rng.choice(("trainer", "sampler")),
            "memory": rng.choices(memories, weights)[0],
            "owner": rng.choice(owners),
        }})
    document: dict[str, Any] = {"dra": "instant", "nodes": initial, "events": out}
    if groups:
        for index, event in enumerate(out):
            event["at"] = index * seconds_apart
        document["nodeGroups"] = node_groups(groups, max(1, nodes // 2),
                                             random.Random(f"groups-{seed}"))
    return document


def node_groups(count: int, most: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` groups of the fleet's nodes, from a stream of their own (the rest of a
    seed's scenario is unchanged): none up at first, at most ``most`` nodes each."""
    out = []
    for index in range(count):
        template = {key: value for key, value in _node(rng, index).items() if key != "name"}
        out.append({"name": f"pool-{index}", "template": template, "min": 0, "max": most,
                    "bootTime": "5m", "idleTime": "10m"})
    return out


def _node(rng: random.Random, index: int) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": f"node-{index:05d}",
        "devices": DEVICES_PER_NODE,
        "deviceMemory": DEVICE_MEMORY,
        "hostMemory": rng.choice(HOST_MEMORY),
        "maxWorkersPerClaim": 4 if rng.random() < 0.2 else 2,
        "product": "NVIDIA H100 80GB HBM3",
    }
    roles = rng.choice(ROLE_POLICIES)
    if roles:
        node["roles"] = roles
    return node


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=None,
                        help="1000 by default; with --rl-jobs, one per eight jobs")
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--live", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--groups", type=int, default=0,
                        help="declare this many node groups (and give every event a time)")
    parser.add_argument("--rl-jobs", type=int, default=0, metavar="N",
                        help="instead, an RL day of N jobs (bench/rl_day.py)")
    parser.add_argument("--yaml", action="store_true",
                        help="with --rl-jobs: YAML, one event a line (examples/rl-day.yaml)")
    args = parser.parse_args(argv)
    if args.rl_jobs < 0:
        parser.error(f"--rl-jobs must be at least 1 (0: no RL day), got {args.rl_jobs}")
    if args.rl_jobs:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script
        from bench.rl_day import rl_day, to_yaml

        day = rl_day(args.rl_jobs, seed=args.seed, nodes=args.nodes)
        if args.yaml:
            sys.stdout.write(to_yaml(day, " ".join(["bench/generate.py", *(argv or sys.argv[1:])])))
        else:
            json.dump(day, sys.stdout)
        return
    json.dump(generate(1000 if args.nodes is None else args.nodes, args.events, seed=args.seed,
                       live=args.live, groups=args.groups), sys.stdout)


if __name__ == "__main__":
    main()
