"""The lanes of a parallel run share nothing they change (tests/lanes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import lanes

ROOT = Path("/checkout")


def test_a_worker_id_names_its_lane() -> None:
    assert lanes.lane_of("gw0") == 0
    assert lanes.lane_of("gw11") == 11
    with pytest.raises(ValueError, match="PYTEST_XDIST_WORKER='master'"):
        lanes.lane_of("master")


def test_each_lane_has_its_own_directory_and_ports() -> None:
    envs = [lanes.lane_env(lane, ROOT, lanes.FIRST_BASE) for lane in range(8)]
    ports = [int(v) for env in envs for k, v in env.items() if k != "CLUSTER_DIR"]
    assert len(ports) == len(set(ports)) == 8 * len(lanes.PORTS)
    assert len({env["CLUSTER_DIR"] for env in envs}) == 8
    assert all(env["CLUSTER_DIR"].startswith("/checkout/.cluster/lanes/") for env in envs)
    # Never the ports a control plane or a kubelet takes by default.
    assert not set(ports) & {6443, 2379, 2380, 10248, 10250, 10257, 10259, 18080, 18081}


def test_the_run_skips_a_range_where_any_port_is_taken() -> None:
    taken = {lanes.FIRST_BASE + lanes.STRIDE * 2 + 4}  # lane 2's controller-manager port
    base = lanes.free_base(4, lambda port: port not in taken)
    assert base == lanes.FIRST_BASE + lanes.STRIDE * 4
    for lane in range(4):
        assert not set(lanes.lane_ports(lane, base).values()) & taken
    with pytest.raises(RuntimeError, match="no 4 lanes of free ports"):
        lanes.free_base(4, lambda port: False)


def test_the_modules_sharing_one_host_resource_run_in_one_group() -> None:
    e2e = Path(__file__).parent / "e2e"
    for group, modules in lanes.GROUPS.items():
        for module in modules:
            assert (e2e / module).exists(), f"{group}: no tests/e2e/{module}"
            assert lanes.group_of(module) == group
    assert lanes.group_of("test_controller.py") is None


def test_e2e_units_come_first_longest_first_then_the_rest() -> None:
    assert lanes.rank("test_node.py", True) < lanes.rank("test_chaos.py", True)
    assert lanes.rank("test_chaos.py", True) < lanes.rank("test_unknown.py", True)
    assert lanes.rank("test_unknown.py", True) < lanes.rank("test_stories.py", False)
    assert set(lanes.ORDER) - set(lanes.GROUPS) <= {
        p.stem for p in (Path(__file__).parent / "e2e").glob("test_*.py")}


def test_an_e2e_module_or_group_is_one_unit_any_other_test_its_own() -> None:
    assert lanes.unit_of("tests/e2e/test_node.py::test_a") == "real-node"
    assert lanes.unit_of("tests/e2e/test_timeslicer_node.py::test_b[x]") == "real-node"
    assert lanes.unit_of("tests/e2e/test_controller.py::test_c") == "test_controller"
    assert lanes.unit_of("tests/e2e/test_controller.py::test_d") == "test_controller"
    other = "tests/unit/placement/test_spread.py::test_e"
    assert lanes.unit_of(other) == other
