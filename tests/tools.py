"""The operator tools the chart and monitoring tests run: Helm, kustomize and promtool.

Each is built from its Go module by ``hack/gotool.sh`` on first use (minutes on a
cold machine, a hash check afterwards) and run with a bounded time. A tool that
cannot be built is a failure with the build's own output, never a skip: these
tests are what keeps the chart, the rules and the dashboard honest.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOTOOL = ROOT / "hack" / "gotool.sh"
BUILD_TIMEOUT = float(os.environ.get("GOTOOL_BUILD_TIMEOUT", "2400"))


@functools.cache
def tool(name: str) -> Path:
    """The path of hack/bin/NAME, built if it is missing or stale."""
    proc = subprocess.run([str(GOTOOL), name], capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"hack/gotool.sh {name} failed ({proc.returncode}):\n"
                             f"{proc.stdout}{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1])


def run(name: str, *args: str, check: bool = True, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a tool from the repository root; with ``check``, a failure shows its output."""
    proc = subprocess.run([str(tool(name)), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=ROOT,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}{proc.stderr}")
    return proc
