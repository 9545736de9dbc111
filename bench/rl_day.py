"""Seeded generator of an RL day: jobs of one trainer and k samplers, in alternate phases.

An RL job (one owner) runs a loop: its samplers generate rollouts while the
trainer waits, then the trainer updates the weights while the samplers wait.
So the samplers want the device in rollout windows and the trainer in the
training windows between them; neither wants it in the other's. Rules:

* The fleet: ``nodes`` nodes of 8 x 80Gi H100s (2Ti of host memory, any
  role, four workers per claim), fewer devices than the day's busiest hour
  has workers, so workers share claims and take turns.
* A job: a 60Gi trainer and ``k`` (2 to 4) 24Gi samplers of one owner
  (``job-NN``), arriving together (trainer first) at a time drawn over the
  first 18 hours, and leaving together 2 to 6 hours later.
* Its loop: a rollout of 4 to 8 minutes, then training of 2 to 5 minutes
  (drawn per job; each phase within 10% of its job's length, drawn per
  iteration), starting 0 to 3 minutes after the job arrives (loading). Jobs
  arrive at random times with loops of their own, so their phases are not
  in step with each other.
* The scenario plays turns at the policy's defaults, with an expectation per
  job that holds by construction: the fleet has a seat for every worker
  (every job's trainer is placed when it arrives).

``--yaml`` writes the form bundled as ``examples/rl-day.yaml``: one event a
line, with a header saying how it was made.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cli.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the repository root holds cli/

__all__ = ["compare", "rl_day", "to_yaml"]

DEVICES_PER_NODE = 8
TRAINER = "60Gi"
SAMPLER = "24Gi"
ARRIVALS = 18 * 3600  # jobs arrive over the first 18 hours
LASTS = (2 * 3600, 6 * 3600)
ROLLOUT = (4 * 60, 8 * 60)
TRAINING = (2 * 60, 5 * 60)
JITTER = 0.1  # each phase within 10% of its job's length
LOADING = 3 * 60


def rl_day(jobs: int, *, seed: int = 1, nodes: int | None = None) -> dict[str, Any]:
    """A day of ``jobs`` RL jobs on ``nodes`` nodes (one per eight jobs by default)."""
    if jobs < 1:
        raise ValueError(f"--rl-jobs must be at least 1, got {jobs}")
    rng = random.Random(f"rl-{seed}")
    count = nodes if nodes is not None else max(1, jobs // 8)
    fleet = [{"name": f"h100-{index + 1}", "devices": DEVICES_PER_NODE, "deviceMemory": "80Gi",
              "hostMemory": "2Ti", "maxWorkersPerClaim": 4,
              "product": "NVIDIA H100 80GB HBM3"} for index in range(count)]
    timed: list[tuple[int, int, dict[str, Any]]] = []  # (at, order, event)
    for number, arrives in enumerate(sorted(rng.randrange(ARRIVALS) for _ in range(jobs)), 1):
        job = f"job-{number:02d}"
        leaves = arrives + rng.randrange(*LASTS)
        rollouts, training = _loop(rng, arrives, leaves)
        samplers = rng.randint(2, 4)
        workers = [(f"{job}-trainer", "trainer", TRAINER, training)] + [
            (f"{job}-sampler-{index}", "sampler", SAMPLER, rollouts)
            for index in range(1, samplers + 1)]
        for name, role, memory, windows in workers:
            timed.append((arrives, 0, {"arrive": {
                "name": name, "role": role, "memory": memory, "owner": job,
                "demand": [{"from": start, "to": end} for start, end in windows]}}))
        timed.append((arrives, 1, {"expect": {"worker": f"{job}-trainer", "phase": "Placed"}}))
        timed.extend((leaves, 2, {"leave": name}) for name, *_ in workers)
    events = []
    for at, _, event in sorted(timed, key=lambda item: (item[0], item[1])):
        events.append({"at": at, **event})
    return {"dra": "instant", "turns": {}, "nodes": fleet, "events": events}


def _loop(rng: random.Random, start: int, end: int) -> tuple[list[tuple[int, int]],
                                                            list[tuple[int, int]]]:
    """The job's rollout and training windows, alternating from its start to its end."""
    rollout, training = rng.randrange(*ROLLOUT), rng.randrange(*TRAINING)
    rollouts: list[tuple[int, int]] = []
    trainings: list[tuple[int, int]] = []
    now = start + rng.randrange(LOADING)
    while now < end:
        for length, windows in ((rollout, rollouts), (training, trainings)):
            took = round(length * rng.uniform(1 - JITTER, 1 + JITTER))
            if now < end:
                windows.append((now, min(now + took, end)))
            now += took
    return rollouts, trainings


STORY = """\
An RL day: jobs of one trainer and 2 to 4 samplers of one owner (job-NN),
arriving over 18 hours and leaving 2 to 6 hours later, on two 8 x H100
nodes opted in to four workers per claim. Each job loops: its samplers want
the device for a rollout (4-8 minutes), then its trainer for training (2-5
minutes), never both; jobs are not in step with each other. Turns are
played at the policy's defaults, so the Turns section says what each worker
got of what it wanted (served share) and how much of each shared claim's
time a resident worker wanted the turn (useful busy share).

  openrl-place simulate examples/rl-day.yaml
  openrl-place compare examples/rl-day.yaml --set ownerAffinity=on,off
  openrl-place compare examples/rl-day.yaml --set strategy=spread,binpack

Written by bench/rl_day.py (docs/performance.md has the comparison):"""


def to_yaml(document: dict[str, Any], command: str) -> str:
    """The scenario as YAML, one node and one event a line, after a header of comments
    telling its story and the ``command`` that wrote it."""
    lines = [f"# {line}".rstrip() for line in [*STORY.splitlines(), f"  {command}"]]
    lines += [f"dra: {document['dra']}", "turns: {}   # the turn policy's defaults", "nodes:"]
    lines += [f"  - {_flow(node)}" for node in document["nodes"]]
    lines.append("events:")
    anchors: dict[str, str] = {}  # a demand written once, as an anchor the others alias
    for event in document["events"]:
        arrive = event.get("arrive")
        if arrive is None or "demand" not in arrive:
            lines.append(f"  - {_flow(event)}")
            continue
        demand = _flow(arrive["demand"])
        if demand in anchors:
            written = f"*{anchors[demand]}"
        else:
            anchors[demand] = f"{arrive['owner']}-{arrive['role']}"
            written = f"&{anchors[demand]} {demand}"
        fields = {key: _flow(value, key) for key, value in arrive.items() if key != "demand"}
        inner = ", ".join(f"{key}: {value}" for key, value in fields.items())
        at = _flow(event["at"], "at")
        lines.append(f"  - {{at: {at}, arrive: {{{inner},\n      demand: {written}}}}}")
    return "\n".join(lines) + "\n"


def _flow(value: object, key: str = "") -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}: {_flow(item, name)}" for name, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    if key in ("at", "from", "to") and isinstance(value, int):
        return _duration(value)
    return str(value)


def _duration(seconds: int) -> str:
    """Seconds as the scenario's durations read them: ``7h3m20s``, ``45s``."""
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return "".join(parts) or "0s"


# ------------------------------------------------------------------ comparison

VARIANTS = [("strategy", ["spread", "binpack"]), ("ownerAffinity", ["on", "off"])]


def compare(path: Path) -> list[str]:
    """The RL day under each strategy and owner affinity: what RL users judge sharing by.

    Per variant: devices held at the peak, switches, the median turn wait over every wait,
    each job's median turn wait (the median job's and the worst job's), the served share
    (over every worker, a worker alone on its claim served all it wanted; over the workers
    that shared a claim; the median job's, the worst job's) and the shared claims' useful
    busy share. A job's figures are those of the jobs that shared a claim."""
    from cli.compare import crossed
    from cli.options import file_kind
    from cli.render_table import columns
    from cli.replay import replay
    from cli.scenario import load_scenario
    from cli.timeline import build_timeline

    scenario = load_scenario(path.read_text(), kind=file_kind(path))
    rows = []
    for label, variant in crossed(scenario, VARIANTS, "*"):
        report = replay(variant, idle_allocations=True)
        turns = report.turns
        assert turns is not None and turns.note is None, "the RL day plays turns"
        timeline = build_timeline(variant, report)
        devices = max(sum(step) for step in zip(*timeline.devices.values(), strict=True))
        summary = turns.summary()
        waits = sorted(owner.median_wait for owner in turns.owners)
        # A worker alone on its claim is resident all it wants: it counts whole.
        wanted = _wanted(variant)
        alone = sum(wanting for name, wanting in wanted.items()
                    if name not in {worker.worker for worker in turns.workers})
        everyone = (sum(w.served for w in turns.workers) + alone) / sum(wanted.values())
        served = sorted(share for owner in turns.owners
                        if (share := owner.served_share) is not None)
        rows.append([label, str(devices), f"{summary.switches:,}",
                     _seconds(summary.median_wait), _seconds(statistics.median(waits)),
                     _seconds(waits[-1]), f"{everyone:.1%}", f"{summary.served_share or 0:.1%}",
                     f"{statistics.median(served):.1%}", f"{served[0]:.1%}",
                     f"{summary.useful_share:.1%}"])
    headers = ["variant", "devices (peak)", "switches", "turn wait (median)",
               "job's median wait (median job)", "(worst job)", "served (every job)",
               "served (sharing)", "served (median job)",
               "(worst job)", "useful busy"]
    return [f"{path.name} by strategy and owner affinity (a job's figures: the jobs that "
            "shared a claim)", "",
            *columns(headers, rows, right=set(range(1, len(headers))))]


def _wanted(scenario: Scenario) -> dict[str, float]:
    """Each worker's seconds wanting the device while it is there (placed on arrival)."""
    from cli.scenario import Arrive, Leave

    assert scenario.times is not None, "the RL day has a clock"
    end = scenario.times[-1]
    arrived: dict[str, tuple[float, tuple[tuple[float, float], ...]]] = {}
    stays: dict[str, tuple[float, float, tuple[tuple[float, float], ...]]] = {}
    for at, event in zip(scenario.times, scenario.events, strict=True):
        if isinstance(event, Arrive) and event.demand is not None:
            arrived[event.name] = (at, event.demand)
        elif isinstance(event, Leave) and event.worker in arrived:
            start, demand = arrived.pop(event.worker)
            stays[event.worker] = (start, at, demand)
    stays.update((name, (start, end, demand)) for name, (start, demand) in arrived.items())
    return {name: sum(max(0.0, min(stop, to) - max(start, since)) for since, to in demand)
            for name, (start, stop, demand) in stays.items()}


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 60 else f"{value / 60:.1f}m"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=ROOT / "examples" / "rl-day.yaml",
                        help="the RL day to compare (examples/rl-day.yaml by default)")
    args = parser.parse_args(argv)
    import click

    click.echo("\n".join(compare(args.file)))


if __name__ == "__main__":
    main()
