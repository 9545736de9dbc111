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
turns this off; ``make test`` starts them itself before its set-up and lint
(hack/early.sh) and says so with ``GOTOOL_EARLY=started``. Under lanes
(pytest-xdist, tests/lanes.py) the first lane starts them, once; every lane
collects the whole session.

Hypothesis runs from a profile: ``ci`` (the default, what ``make test`` uses)
plays the same examples every run and keeps no example database, so a run
that passes here passes in CI; ``random`` (``HYPOTHESIS_PROFILE=random``,
``make test-random``) explores new examples and remembers the failures it
finds, outside the tree. Neither puts a time limit on an example: how long a
test takes is the machine's business (benchmarks print speed; a timed test
only fails on a loaded machine).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests import lanes, tools

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["tests.timing"]

# Before anything reads them: this lane's control plane directory and ports.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
LANE = lanes.lane_of(_WORKER) if _WORKER else 0
if _WORKER:
    os.environ.update(lanes.lane_env(LANE, ROOT, int(os.environ.get(lanes.BASE_VAR)
                                                     or lanes.FIRST_BASE)))

_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, database=None, **_UNTIMED)
settings.register_profile("random", database=DirectoryBasedExampleDatabase(
    str(Path.home() / ".cache" / "openrl-place" / "hypothesis")), **_UNTIMED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
NEEDS_NODE = lanes.GROUPS["real-node"]


def pytest_configure(config: pytest.Config) -> None:
    # The run with lanes, before it starts them: a port range free for all of them.
    lanes_asked = getattr(config.option, "numprocesses", None)
    if lanes_asked and not _WORKER and lanes.BASE_VAR not in os.environ:
        count = lanes_asked if isinstance(lanes_asked, int) else os.cpu_count() or 1
        os.environ[lanes.BASE_VAR] = str(lanes.free_base(count, lanes.port_free))


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The lanes' scheduler: xdist's load-by-scope, its scope our unit (tests/lanes.py).
    A test's scope is computed from its node id here, on the run's side, so nothing
    depends on rewriting node ids in the lanes (which newer pytest no longer allows)."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return lanes.unit_of(nodeid)

    return Lanes(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("GOTOOL_EARLY", "1") in ("0", "started") or \
            session.config.option.collectonly:
        return  # nothing will run that needs them, or hack/early.sh started them already
    if LANE != 0:
        return  # every lane collects the whole session: the first starts the builds
    selected = {Path(str(item.path)).name for item in session.items}
    builds = []
    # The control plane, which every e2e test waits for, unless a cluster is given.
    if any(item.get_closest_marker("e2e") for item in session.items) and not os.environ.get(
            "KUBECONFIG"):
        builds.append("cluster")
    if any(item.get_closest_marker("tools") for item in session.items):
        builds.append("gotool")
    # Only where a node can run here (check exits 4 where it cannot; the tests then skip).
    if selected & set(NEEDS_NODE) and (ROOT / "hack" / "node.sh").exists():
        builds.append("node")
    # Karpenter for the autoscaling tests, where the session is told to build it.
    if "test_autoscaling.py" in selected and os.environ.get("OPENRL_E2E_KARPENTER_BUILD") == "1":
        builds.append("karpenter")
    # Kueue for the team quota tests, unless the session is told not to build it.
    if "test_kueue.py" in selected and os.environ.get("OPENRL_E2E_KUEUE_BUILD", "1") == "1":
        builds.append("kueue")
    if builds:  # hack/early.sh starts them detached and returns at once
        subprocess.run([str(ROOT / "hack" / "early.sh"), *builds], cwd=ROOT, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


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
