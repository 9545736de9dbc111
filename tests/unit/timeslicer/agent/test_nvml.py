"""The device-memory check through a fake NVML library (ctypes calls, no GPU figures)."""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import Any

import pytest

from timeslicer.agent import nvml


class FakeNvml:
    """Answers the calls the check makes, as the library would, for given processes."""

    def __init__(self, devices: list[list[tuple[int, int]]]) -> None:
        self.devices = devices

    def nvmlInit_v2(self) -> int:
        return 0

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        count._obj.value = len(self.devices)
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        handle._obj.value = index + 1
        return 0

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any,
                                                infos: Any) -> int:
        procs = self.devices[handle.value - 1]
        if count._obj.value < len(procs):
            count._obj.value = len(procs)
            return 7
        count._obj.value = len(procs)
        for slot, (pid, used) in zip(infos, procs, strict=False):
            slot.pid, slot.usedGpuMemory = pid, used
        return 0


def test_processes_on_every_device_are_summed_per_pid() -> None:
    many = [(1000 + i, 1) for i in range(70)]  # more than the first buffer holds
    lib = nvml.load(lambda name: FakeNvml([[(7, 100), *many], [(7, 5)]]))
    assert lib is not None
    held = lib.processes()
    assert held[7] == 105 and len(held) == 71


def test_without_the_library_the_check_is_off_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    def missing(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    with caplog.at_level(logging.WARNING):
        assert nvml.load(missing) is None
    assert "NVML not found: the device-memory check is off" in caplog.text
    assert nvml.load(lambda name: ctypes.CDLL(None)) is None  # no NVML symbols


def test_a_process_maps_to_its_pod_through_its_cgroup(tmp_path: Path) -> None:
    (tmp_path / "41").mkdir()
    (tmp_path / "41" / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
        "1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-abc.scope\n")
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cgroup").write_text("0::/system.slice/sshd.service\n")
    assert nvml.pod_of(41, tmp_path) == "1b2c3d4e-0000-1111-2222-333344445555"
    assert nvml.pod_of(42, tmp_path) is None
    assert nvml.pod_of(43, tmp_path) is None
