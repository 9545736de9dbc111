"""The operator's checks in the suite: hack/smoke.sh and hack/stress.sh on the session's cluster.

The scripts are the verification an operator runs by hand (``make smoke``,
``make stress``); running them here makes CI prove the same thing: the shipped
manifests, the scheduler as a local process with its own ServiceAccount's
token, real kube-scheduler allocation. They reuse the session's running
cluster and leave it running.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCAL_KUBECONFIG = REPO / ".cluster" / "admin.kubeconfig"

SCRIPT_TIMEOUT = 1200


def run_script(cluster: Any, name: str) -> str:
    env = dict(os.environ, KUBECONFIG=cluster.kubeconfig)
    if os.path.abspath(cluster.kubeconfig) != os.path.abspath(LOCAL_KUBECONFIG):
        env["OPENRL_EXTERNAL"] = "1"
    proc = subprocess.run(
        [str(REPO / "hack" / name)], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, check=False,
    )
    output = proc.stdout + proc.stderr
    # Shown with -rA or on failure: the books and the scheduler's own counts.
    print(output[-6000:])
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{output[-6000:]}"
    return output


@pytest.mark.e2e
def test_smoke_spreads_then_shares_with_every_claim_allocated(cluster: Any) -> None:
    output = run_script(cluster, "smoke.sh")
    assert "smoke: PASS" in output


@pytest.mark.e2e
def test_stress_keeps_the_books_through_churn_and_tears_down_clean(cluster: Any) -> None:
    output = run_script(cluster, "stress.sh")
    assert "stress: PASS" in output
