"""Every OpenRLWorker gets an answer: a short seeded fuzz run through hack/fuzz.py.

FUZZ_COUNT (default 200 here) and FUZZ_SEED scale and vary it; the counts are
printed (-rA shows them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def test_hostile_workers_are_refused_by_field_or_answered(cluster: Any) -> None:
    count = os.environ.get("FUZZ_COUNT", "200")
    proc = subprocess.run(
        [sys.executable, "-m", "hack.fuzz", "--count", count, "--json",
         "--driver", cluster.driver],
        cwd=REPO, env={**os.environ, "KUBECONFIG": cluster.kubeconfig},
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=300 + 3 * int(count), check=False)
    print(proc.stdout[-12000:], proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-4000:]
    figures = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    assert figures["stuck"] == 0 and figures["refusals_not_naming_a_field"] == 0
    assert figures["refused_by_api_server"] + figures["answered"] == figures["tried"]
    assert figures["steady_placed"] > 0 and figures["steady_late"] == 0
