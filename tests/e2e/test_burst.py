"""A short burst on the session's cluster, through hack/burst.py as ``make burst`` runs it.

It counts, never times: every worker placed, at most seven API requests per
placed worker (the finalizer, the claim, the pod, two status writes, two
Events), and no LIST after start-up. The comparison with kube-scheduler alone
is printed (shown with -rA), not asserted: a ratio on a shared machine is a
measurement. BURST_WORKERS scales it up (default: one worker per device).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_a_burst_places_everyone_with_at_most_seven_requests_each(cluster: Any) -> None:
    from kubernetes import client

    from controller.fleet.reader import read_slices

    slices = client.CustomObjectsApi(cluster.api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices")["items"]
    hardware, _, _ = read_slices(slices, cluster.driver)
    devices = sum(h.devices for h in hardware.values())
    workers = int(os.environ.get("BURST_WORKERS", str(devices)))
    proc = subprocess.run(
        [sys.executable, "-m", "hack.burst", "--workers", str(workers),
         "--maxw", "1", "--baseline", "--subprocess", "--json", "--timeout", "600",
         "--driver", cluster.driver],
        cwd=REPO, env=dict(os.environ, KUBECONFIG=cluster.kubeconfig),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    figures = json.loads(proc.stdout[proc.stdout.index("{"):])
    print(json.dumps(figures, indent=2))
    assert figures["phases"] == {"Running": min(workers, devices)}
    assert figures["api_requests_per_placed_worker"] <= 7
    assert figures["lists"] == 0
    assert figures["baseline_seconds"] > 0
