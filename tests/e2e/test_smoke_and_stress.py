"""The operator's checks in the suite: hack/smoke.sh and hack/stress.sh on the session's cluster.

The scripts are the verification an operator runs by hand (``make smoke``,
``make stress``); running them here makes CI prove the same thing: the shipped
manifests, the scheduler as a local process with its own ServiceAccount's
token, real kube-scheduler allocation. They reuse the session's running
cluster and leave it running.
"""

from __future__ import annotations

from typing import Any

import pytest

SCRIPT_TIMEOUT = 1200


def run_script(cluster: Any, name: str) -> str:
    # On a cluster other than ours the scripts run against it as it stands.
    env = {} if cluster.is_local else {"OPENRL_EXTERNAL": "1"}
    return str(cluster.run_hack(name, timeout=SCRIPT_TIMEOUT, **env))


@pytest.mark.e2e
def test_smoke_spreads_then_shares_with_every_claim_allocated(cluster: Any) -> None:
    output = run_script(cluster, "smoke.sh")
    assert "smoke: PASS" in output


@pytest.mark.e2e
def test_stress_keeps_the_books_through_churn_and_tears_down_clean(cluster: Any) -> None:
    output = run_script(cluster, "stress.sh")
    assert "stress: PASS" in output
