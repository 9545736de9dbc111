"""The RL day: the bundled example is the generator's, its jobs alternate, and its figures
keep their meaning (a claim's useful time and its switching never overlap)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from click.testing import CliRunner

from bench.rl_day import compare, rl_day, to_yaml
from cli.main import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rl-day.yaml"
COMMAND = "bench/generate.py --rl-jobs 20 --yaml"


def test_the_bundled_example_is_what_the_generator_writes() -> None:
    assert EXAMPLE.read_text() == to_yaml(rl_day(20), COMMAND)


def test_a_jobs_samplers_want_the_device_exactly_when_its_trainer_does_not() -> None:
    day = rl_day(12, seed=3)
    jobs: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for event in day["events"]:
        if "arrive" in event:
            arrive = event["arrive"]
            windows = [(w["from"], w["to"]) for w in arrive["demand"]]
            jobs.setdefault(arrive["owner"], {})[arrive["role"]] = windows
    starts = set()
    for roles in jobs.values():
        rollouts, training = roles["sampler"], roles["trainer"]
        # Rollout, training, rollout, ...: each phase starts where the other ended.
        phases = [window for pair in zip(rollouts, training, strict=False) for window in pair]
        phases += rollouts[len(training):]
        assert len(phases) == len(rollouts) + len(training)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(phases))
        starts.add(rollouts[0][0] % 600)
    assert len(starts) > len(jobs) // 2  # not in step with each other


def test_useful_time_and_switching_never_overlap_on_a_claim() -> None:
    result = CliRunner().invoke(main, ["simulate", "-o", "json", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    turns = json.loads(result.stdout)["turns"]
    assert turns["claims"] and 0 < turns["usefulShare"] <= 1
    for claim in turns["claims"].values():
        assert claim["usefulShare"] + claim["switchingShare"] <= 1 + 1e-9
    for figures in [*turns["workers"].values(), *turns["owners"].values()]:
        assert figures["servedSeconds"] <= figures["wantingSeconds"] + 1e-6
        assert figures["servedSeconds"] <= figures["residentSeconds"] + 1e-6


def test_the_comparison_has_a_row_per_strategy_and_affinity() -> None:
    lines = compare(EXAMPLE)
    rows = [line.split(",")[0].split()[0] for line in lines[3:]]
    assert rows == ["strategy=spread", "strategy=spread", "strategy=binpack", "strategy=binpack"]
