"""Lanes: what each process of a parallel test run (pytest-xdist) gets of its own.

``make test`` runs the suite in several processes at once (``-n``). The e2e
modules mostly wait on a cluster, so the gain is in running them side by
side; the price is that two of them must never share what they change.

Rules, one per thing a lane could share:

=====================  =========================================================
thing                  rule
=====================  =========================================================
control plane          each lane its own: ``CLUSTER_DIR`` (``.cluster/lanes/laneN``)
                       and ports of its own, in a range no other process on the
                       machine listens on when the run starts (a second
                       checkout's run, a developer's ``make cluster-up``, which
                       a run without lanes still uses as it always has)
Karpenter, Kueue      their ports follow the lane (the modules that run
                       Karpenter are one group: one lane at a time; one module
                       runs Kueue)
the real node          one host's kubelet, containerd and cgroups: every module
                       that brings it up is in one group, so one lane runs them
                       one after another, on that lane's control plane
builds (``hack/bin``)  shared, each behind its own lock: the first lane to ask
                       builds, the others wait and find it current
a cluster of the       ``KUBECONFIG`` naming a reachable cluster: the lanes
user's (KUBECONFIG)    would share it, so a run given one should not use lanes
                       (``make test LANES=0``); nothing here changes it
=====================  =========================================================

The run (xdist's controller) picks the port base before it starts its lanes;
each lane applies ``lane_env`` once, before anything reads it
(tests/conftest.py). A run without lanes changes nothing.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

# The groups whose modules must run in one lane, one after another.
GROUPS: dict[str, tuple[str, ...]] = {
    # One host's kubelet, containerd, CNI and cgroups (hack/node.sh).
    "real-node": ("test_node.py", "test_chart_node.py", "test_node_nvidia.py",
                  "test_timeslicer_node.py"),
    # One Karpenter per lane's control plane, built once; these two bring it up and down.
    "karpenter": ("test_autoscaling.py", "test_fidelity_groups.py"),
}

# Lane n takes ports base + STRIDE * n + offset, the base chosen by the run (free_base)
# above the kubelet's and the control plane's usual ports, below Linux's ephemeral range.
FIRST_BASE = 20000
LAST_BASE = 30000
STRIDE = 20
PORTS = {  # variable read by hack/cluster.sh or hack/karpenter.sh -> offset in the lane
    "KUBE_APISERVER_PORT": 0,
    "ETCD_CLIENT_PORT": 1,
    "ETCD_PEER_PORT": 2,
    "KUBE_SCHEDULER_PORT": 3,
    "KUBE_CONTROLLER_MANAGER_PORT": 4,
    "KARPENTER_METRICS_PORT": 5,
    "KARPENTER_HEALTH_PORT": 6,
    "KUEUE_WEBHOOK_PORT": 7,
    "KUEUE_METRICS_PORT": 8,
    "KUEUE_HEALTH_PORT": 9,
}
BASE_VAR = "OPENRL_TEST_PORT_BASE"  # the run's base, handed to its lanes


def lane_of(worker: str) -> int:
    """The lane of an xdist worker id (``gw3`` -> 3)."""
    found = re.fullmatch(r"gw(\d+)", worker)
    if found is None:
        raise ValueError(f"PYTEST_XDIST_WORKER={worker!r}: expected gw<number>")
    return int(found.group(1))


def lane_ports(lane: int, base: int) -> dict[str, int]:
    return {name: base + STRIDE * lane + offset for name, offset in PORTS.items()}


def lane_env(lane: int, root: Path, base: int) -> dict[str, str]:
    """What lane ``lane`` of a run with this port base sets in its environment."""
    env = {name: str(port) for name, port in lane_ports(lane, base).items()}
    env["CLUSTER_DIR"] = str(root / ".cluster" / "lanes" / f"lane{lane}")
    return env


def free_base(lanes: int, is_free: Callable[[int], bool]) -> int:
    """The first base at which every port of every lane is free."""
    for base in range(FIRST_BASE, LAST_BASE, STRIDE * lanes):
        if all(is_free(port) for lane in range(lanes)
               for port in lane_ports(lane, base).values()):
            return base
    raise RuntimeError(f"no {lanes} lanes of free ports between {FIRST_BASE} and {LAST_BASE}")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def group_of(module: str) -> str | None:
    """The group a test module runs in (its lane, one at a time), if any."""
    return next((group for group, modules in GROUPS.items() if module in modules), None)


# The e2e units (a group, or a module by its stem), longest first, so that the lanes
# start them first and the short ones fill in at the end. Karpenter's group comes after
# the long ones: on a cold machine its build (7 minutes here, begun by hack/early.sh)
# has had that long. A unit not named here comes after these, before the tests that
# need no cluster.
ORDER = (
    "real-node",
    "test_chaos",
    "karpenter",
    "test_seat_races",
    "test_controller",
    "test_smoke_and_stress",
    "test_node_loss",
    "test_fidelity",
    "test_burst",
)


def rank(module: str, e2e: bool) -> tuple[int, int]:
    """Where a test module's tests go in the session: e2e units in ORDER, then the rest
    (the lanes' gaps filled with tests that keep a core busy)."""
    if not e2e:
        return (1, 0)
    unit = group_of(module) or module.removesuffix(".py")
    return (0, ORDER.index(unit) if unit in ORDER else len(ORDER))


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: every test of an e2e module, or of a group's
    modules, is one unit (one lane, one after another, its module fixtures set up once);
    any other test is a unit of its own."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith("tests/e2e/"):
        return nodeid
    module = path.rsplit("/", 1)[-1]
    return group_of(module) or module.removesuffix(".py")
