"""The simulator agrees with the cluster: generated scenarios played on both, step by step.

``hack/replay.py`` plays each scenario against the session's cluster (the
controller in its process, kube-scheduler and DRA for real) and compares
every settled step with ``simulate -o json`` of the same events. Every step
of every scenario must agree. Short here: ``FIDELITY_SCENARIOS`` (8) and
``FIDELITY_SEED`` (1) choose the set; ``make fidelity`` runs the same thing at 20.
With moves (``--moves``: rebalanceAfter set, most workers movable; the cluster
moves them as the simulator does): ``FIDELITY_MOVE_SCENARIOS`` (3) from
``FIDELITY_MOVE_SEED`` (37, a set whose steps make moves, one by a claim's cutter).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = int(os.environ.get("FIDELITY_SCENARIOS", "8"))
SEED = int(os.environ.get("FIDELITY_SEED", "1"))
MOVE_SCENARIOS = int(os.environ.get("FIDELITY_MOVE_SCENARIOS", "3"))
MOVE_SEED = int(os.environ.get("FIDELITY_MOVE_SEED", "37"))


def replay(cluster: Any, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=cluster.kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "hack.replay", *args], cwd=REPO, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)


def every_step_agrees(proc: subprocess.CompletedProcess[str], scenarios: int) -> str:
    """The run's line of what the steps showed, once its verdict says every step agreed."""
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    lines = proc.stdout.strip().splitlines()
    match = re.fullmatch(r"fidelity: (\d+)/(\d+) scenarios, (\d+)/(\d+) steps agree",
                         lines[-1] if lines else "")
    assert match, f"no verdict line:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    agreed, total, steps_agreed, steps = map(int, match.groups())
    assert total == scenarios and steps > 0
    assert (agreed, steps_agreed) == (total, steps), proc.stdout[-6000:]
    assert proc.returncode == 0
    return lines[-2]


def test_every_step_of_every_generated_scenario_agrees(cluster: Any) -> None:
    proc = replay(cluster, "--generate", str(SCENARIOS), "--seed", str(SEED), "--keep-going",
                  timeout=120 + 60 * SCENARIOS)
    every_step_agrees(proc, SCENARIOS)


def test_every_step_agrees_when_workers_move(cluster: Any) -> None:
    proc = replay(cluster, "--moves", "--generate", str(MOVE_SCENARIOS), "--seed",
                  str(MOVE_SEED), "--keep-going", timeout=120 + 90 * MOVE_SCENARIOS)
    shows = every_step_agrees(proc, MOVE_SCENARIOS)
    if (MOVE_SCENARIOS, MOVE_SEED) == (3, 37):  # the default set makes moves
        assert re.search(r"a move \d+", shows), shows


def test_a_deferred_scenario_is_refused_with_the_reason(cluster: Any, tmp_path: Path) -> None:
    scenario = tmp_path / "deferred.yaml"
    scenario.write_text("dra: deferred\nnodes: [{name: a, devices: 1, deviceMemory: 80Gi}]\n"
                        "events: [{arrive: {name: w, role: trainer, memory: 10Gi}}]\n")
    proc = replay(cluster, str(scenario), timeout=60)
    assert proc.returncode == 2
    assert "dra: deferred cannot be played against a cluster" in proc.stderr
    assert "Traceback" not in proc.stderr
