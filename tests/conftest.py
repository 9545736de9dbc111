"""Session-wide: the ``tools`` tier kept honest, and the slow builds started early.

Helm, kustomize and promtool (hack/gotool.sh), and the real node's containerd,
sandbox image and the scheduler's own image (``hack/node.sh prebuild``) take
minutes each to build on a cold machine. Every test that builds one of the
three tools is marked ``tools`` (``make test-fast`` leaves them out): a test
not so marked that asks tests/tools.py for one fails, naming the marker. When
the session's selected tests include any marked ``tools``, or any of
``NEEDS_NODE``, their build starts at once in the background, at a lower CPU
priority, so it uses what the tests before them leave idle (the e2e suite
spends much of its time waiting on the cluster, the image build on downloads);
those tests then find everything built, or wait for the build under way (each
build takes a lock). Karpenter, for the autoscaling tests, likewise when
``OPENRL_E2E_KARPENTER_BUILD=1`` (``make test`` sets it). ``GOTOOL_EARLY=0``
turns this off.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import tools

ROOT = Path(__file__).resolve().parent.parent
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
    if os.environ.get("GOTOOL_EARLY", "1") == "0" or session.config.option.collectonly:
        return  # nothing will run that needs them
    selected = {Path(str(item.path)).name for item in session.items}
    if any(item.get_closest_marker("tools") for item in session.items):
        early("gotool", " && ".join(f"hack/gotool.sh {name}" for name in TOOLS))
    # Only where a node can run here (check exits 4 where it cannot; the tests then skip).
    if selected & set(NEEDS_NODE) and (ROOT / "hack" / "node.sh").exists():
        early("node", "hack/node.sh check >/dev/null && hack/node.sh prebuild")
    # Karpenter for the autoscaling tests, where the session is told to build it.
    if "test_autoscaling.py" in selected and os.environ.get("OPENRL_E2E_KARPENTER_BUILD") == "1":
        early("karpenter", "hack/karpenter.sh build")


_build = tools.tool
_running_marked = False  # whether the test being set up or run is marked ``tools``


def _tool_for_marked_tests(name: str) -> Path:
    if not _running_marked:
        raise AssertionError(
            f"this test builds {name} (hack/gotool.sh): mark it @pytest.mark.tools, so that "
            "`make test-fast` (-m 'not e2e and not tools') builds nothing")
    return _build(name)


tools.tool = _tool_for_marked_tests  # tools.run looks it up at each call


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    global _running_marked
    _running_marked = item.get_closest_marker("tools") is not None
