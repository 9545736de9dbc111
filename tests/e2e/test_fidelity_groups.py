"""The simulator's node groups agree with Karpenter: generated group scenarios, step by step.

``hack/replay.py --groups`` plays each generated scenario with its node group
as a NodePool of its own that Karpenter (hack/karpenter.sh) grows and shrinks,
the controller in autoscaling mode, and compares every settled step with
``simulate -o json`` (what is compared and what is not: hack/replay.py's
docstring). Every step of every scenario must agree.

Short by default: FIDELITY_GROUP_SCENARIOS (2) from FIDELITY_GROUP_SEED (1).
Skips, saying why, when hack/bin/karpenter is not built (test_autoscaling's
``karpenter`` fixture: ``hack/karpenter.sh build``, or
OPENRL_E2E_KARPENTER_BUILD=1 to build it here). Karpenter's own NodePool
``gpu`` is deleted for the run (it would take the scenarios' pods too); the
fixture's ``hack/karpenter.sh down`` ends it all, and the next ``up`` applies
it again.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_autoscaling import karpenter  # noqa: F401 (the fixture: built or skipped, up, down)
from test_fidelity import replay

SCENARIOS = int(os.environ.get("FIDELITY_GROUP_SCENARIOS", "2"))
SEED = int(os.environ.get("FIDELITY_GROUP_SEED", "1"))


@pytest.fixture(scope="module")
def no_other_pool(cluster: Any, karpenter: None) -> Iterator[None]:  # noqa: F811
    """Karpenter up without its own NodePool (hack/karpenter.sh down takes it all down)."""
    cluster.kubectl("delete", "nodepool", "gpu", "--ignore-not-found", "--wait=true")
    deadline = time.monotonic() + 120
    while cluster.kubectl("get", "nodes", "-l", "karpenter.sh/nodepool=gpu",
                          "-o", "name").stdout.strip():
        assert time.monotonic() < deadline, "the gpu NodePool's nodes did not go"
        time.sleep(2)
    yield


def test_every_step_of_every_generated_group_scenario_agrees(cluster: Any,
                                                              no_other_pool: None) -> None:
    proc = replay(cluster, "--groups", "--generate", str(SCENARIOS), "--seed", str(SEED),
                  "--keep-going", timeout=300 + 600 * SCENARIOS)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    verdict = re.search(r"^fidelity: (\d+)/(\d+) scenarios, (\d+)/(\d+) steps agree$",
                        proc.stdout, re.MULTILINE)
    assert verdict, f"no verdict line:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    scenarios, total, steps, all_steps = map(int, verdict.groups())
    assert (total, scenarios, steps) == (SCENARIOS, SCENARIOS, all_steps) and all_steps > 0, \
        proc.stdout[-6000:]
    assert proc.returncode == 0
