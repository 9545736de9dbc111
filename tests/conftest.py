"""Session-wide: start building the operator tools early when a selected test needs them.

Helm, kustomize and promtool take minutes to build on a cold machine
(hack/gotool.sh). When the session's selected tests include any that run them
(``NEEDS_TOOLS``), the build starts at once in the background, at a lower CPU
priority, so it uses what the tests before them leave idle (the e2e suite
spends much of its time waiting on the cluster); those tests then find the
tools built, or wait for the build already under way (gotool.sh takes a lock
per tool). ``GOTOOL_EARLY=0`` turns this off.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEEDS_TOOLS = ("test_chart.py", "test_chart_node.py", "test_monitoring.py")
TOOLS = ("helm", "kustomize", "promtool")


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("GOTOOL_EARLY", "1") == "0":
        return
    if not any(Path(str(item.path)).name in NEEDS_TOOLS for item in session.items):
        return
    log = ROOT / "hack" / "bin" / "gotool-early.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    script = " && ".join(f"hack/gotool.sh {name}" for name in TOOLS)
    with log.open("w") as out:
        # Detached from the test process: a test that needs a tool waits on its lock.
        subprocess.Popen(["nice", "-n", "10", "bash", "-c", script], cwd=ROOT, stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
