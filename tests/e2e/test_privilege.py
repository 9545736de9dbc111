"""Least privilege on the session's cluster, through hack/privilege.py.

Every attempt is made with a ServiceAccount token from the TokenRequest API:
the gateway's Role allows workers and their status and refuses pods, claims,
ConfigMaps and Secrets; the scheduler reads no Secrets and writes nothing
outside its namespace; a privileged pod in openrl is refused by admission;
the escalation through a planted template fails with a reason and no pod; the
time-slicer agent's node-bound token deletes and patches pods on its node only.
The table is printed (-rA shows it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def test_each_role_gets_what_it_needs_and_the_escalation_is_refused(cluster: Any) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hack.privilege", "--json",
         "--driver", cluster.driver],
        cwd=REPO, env={**os.environ, "KUBECONFIG": cluster.kubeconfig}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600, check=False)
    print(proc.stdout[-12000:], proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):proc.stdout.rindex("}") + 1])
    rows = {(r["who"], r["what"]): r for r in report["rows"]}
    assert rows[("gateway", "create openrlworkers")]["got"] == "allowed"
    assert rows[("gateway", "list secrets")]["got"] == "refused"
    assert rows[("scheduler", "list secrets")]["got"] == "refused"
    assert rows[("admin", "create a privileged pod in openrl")]["got"] == "refused by admission"
    # The time-slicer agent's node-bound token: its own node's pods only.
    assert rows[("agent", "delete a pod on its own node")]["got"] == "allowed"
    assert rows[("agent", "delete a pod on another node")]["got"] == "refused by admission"
    assert rows[("agent/none", "delete a pod on the node")]["got"] == "refused by admission"
    for step in report["escalation"]:
        assert step["phase"] == "Failed" and step["pods"] == 0, step
    assert "openrl.io/pod-template=true" in report["escalation"][0]["reason"]
