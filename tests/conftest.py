"""Session-wide: start the slow builds early when a selected test needs them.

Helm, kustomize and promtool (hack/gotool.sh), and the real node's
containerd, sandbox image and the scheduler's own image (``hack/node.sh
prebuild``) take minutes each to build on a cold machine. When the session's
selected tests include any that use them (``NEEDS_TOOLS``, ``NEEDS_NODE``),
their build starts at once in the background, at a lower CPU priority, so it
uses what the tests before them leave idle (the e2e suite spends much of its
time waiting on the cluster, the image build on downloads); those tests then
find everything built, or wait for the build under way (each build takes a
lock). ``GOTOOL_EARLY=0`` turns this off.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEEDS_TOOLS = ("test_chart.py", "test_chart_node.py", "test_monitoring.py")
TOOLS = ("helm", "kustomize", "promtool")
NEEDS_NODE = ("test_node.py", "test_chart_node.py", "test_node_nvidia.py",
              "test_timeslicer_node.py")


def early(name: str, script: str) -> None:
    log = ROOT / "hack" / "bin" / f"{name}-early.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        # Detached from the test process: a test that needs the output waits on its lock.
        subprocess.Popen(["nice", "-n", "10", "bash", "-c", script], cwd=ROOT, stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("GOTOOL_EARLY", "1") == "0":
        return
    selected = {Path(str(item.path)).name for item in session.items}
    if selected & set(NEEDS_TOOLS):
        early("gotool", " && ".join(f"hack/gotool.sh {name}" for name in TOOLS))
    # Only where a node can run here (check exits 4 where it cannot; the tests then skip).
    if selected & set(NEEDS_NODE) and (ROOT / "hack" / "node.sh").exists():
        early("node", "hack/node.sh check >/dev/null && hack/node.sh prebuild")
