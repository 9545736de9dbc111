"""The device-memory check: which processes hold memory on NVIDIA devices, and whose pods.

Rules:

* NVIDIA's management library is loaded with ctypes if the node has it
  (``libnvidia-ml.so.1``); no Python package is needed. Without it the check
  is off: said once in the log and as a gauge, never guessed around.
* A process is mapped to its pod through ``/proc/<pid>/cgroup``: the kubelet
  names each pod's cgroup after its UID (``pod<uid>``, dashes or
  underscores). A process found in no pod is not ours to judge.
* Only what the library reports is used: a figure the driver does not know
  (in a container, often) counts as holding memory, since the process is
  listed as running on the device at all.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["LIBRARY", "Nvml", "load", "pod_of"]

log = logging.getLogger("openrl.timeslicer.nvml")

LIBRARY = "libnvidia-ml.so.1"
_SUCCESS, _INSUFFICIENT_SIZE = 0, 7
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t as the _v3 (and _v2) calls fill it."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """A loaded library: ``processes()`` -> {pid: bytes held, summed over devices}."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self._check(lib.nvmlInit_v2(), "nvmlInit_v2")

    def _check(self, code: int, call: str) -> None:
        if code != _SUCCESS:
            raise OSError(f"{call} failed with NVML error {code}")

    def devices(self) -> list[Any]:
        count = ctypes.c_uint(0)
        self._check(self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), "nvmlDeviceGetCount_v2")
        handles = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)),
                        "nvmlDeviceGetHandleByIndex_v2")
            handles.append(handle)
        return handles

    def processes(self) -> dict[int, int]:
        held: dict[int, int] = {}
        for handle in self.devices():
            size = 64
            while True:
                count = ctypes.c_uint(size)
                infos = (ProcessInfo * size)()
                code = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(
                    handle, ctypes.byref(count), infos)
                if code == _INSUFFICIENT_SIZE and count.value > size:
                    size = count.value
                    continue
                self._check(code, "nvmlDeviceGetComputeRunningProcesses_v3")
                break
            for info in infos[:count.value]:
                held[info.pid] = held.get(info.pid, 0) + int(info.usedGpuMemory)
        return held


def load(loader: Callable[[str], Any] = ctypes.CDLL) -> Nvml | None:
    """The library if the node has it, else None (logged once: the check is off)."""
    try:
        return Nvml(loader(LIBRARY))
    except (OSError, AttributeError) as exc:
        log.warning("NVML not found: the device-memory check is off (%s)", exc)
        return None


def pod_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The UID of the pod whose cgroup holds ``pid``, or None."""
    try:
        text = (proc / str(pid) / "cgroup").read_text(encoding="utf-8")
    except OSError:
        return None
    found = _POD.search(text)
    return found.group(1).replace("_", "-") if found else None
