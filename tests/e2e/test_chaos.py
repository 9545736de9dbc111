"""The chaos harness in the suite: its checker's self-test, then a short seeded run.

``make chaos`` is the long version (``CHAOS_ROUNDS``, ``CHAOS_SEED``,
``CHAOS_WORKERS`` scale it); here a few rounds on the session's cluster keep
CI honest in a few minutes. The run restarts the API server and etcd of the
local control plane, so it is skipped on an external cluster.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def run_chaos(cluster: Any, timeout: float, **env: str) -> str:
    if not cluster.is_local:
        pytest.skip("chaos restarts the local control plane's components")
    return str(cluster.run_hack("chaos.sh", timeout=timeout, **env))


@pytest.mark.e2e
def test_the_checker_catches_every_kind_of_violation(cluster: Any) -> None:
    assert "chaos self-test: PASS" in run_chaos(cluster, 300, CHAOS_SELF_TEST="1")


@pytest.mark.e2e
def test_a_short_seeded_chaos_run_keeps_every_invariant(cluster: Any) -> None:
    output = run_chaos(cluster, 1200, CHAOS_ROUNDS=os.environ.get("CHAOS_ROUNDS", "5"),
                       CHAOS_SEED=os.environ.get("CHAOS_SEED", "1"),
                       CHAOS_WORKERS=os.environ.get("CHAOS_WORKERS", "24"))
    assert output.strip().splitlines()[-1].startswith("chaos: PASS") or "chaos: PASS" in output
