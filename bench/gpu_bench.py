"""Parking and restoring device memory through the agent, on a real GPU (skipped without).

Workers use the CUDA driver library directly (libcuda.so.1 via ctypes, no
framework): each allocates ``--gib`` of device memory and as much pinned host
memory; on ``yield`` it copies device -> host and frees the device memory, on
``grant`` it allocates again and copies host -> device. The agent runs in
``--local`` mode in this process. NVML (if present) is sampled throughout.
Prints the switch time per GiB against a plain pinned host -> device copy's
bandwidth, and the most members seen above 1 GiB in one sample (must be 1).
With no libcuda or no device it says why and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placement.turns import TurnSettings
from timeslicer.agent import Agent, Options, nvml, serve

GIB = 1 << 30


def skip(why: str) -> None:
    print(f"gpu_bench skipped: {why}")
    sys.exit(0)


class Cuda:
    def __init__(self) -> None:
        try:
            self.lib: Any = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            skip(f"no CUDA driver library ({exc})")
        if self.lib.cuInit(0) != 0:
            skip("cuInit failed: no usable GPU")
        count = ctypes.c_int(0)
        if self.lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
            skip("no CUDA device")
        device = ctypes.c_int(0)
        self.ok(self.lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.ok(self.lib.cuCtxCreate_v2(ctypes.byref(self.ctx), 0, device), "cuCtxCreate")

    @staticmethod
    def ok(code: int, call: str) -> None:
        if code != 0:
            raise RuntimeError(f"{call} failed with CUDA error {code}")

    def bind(self) -> None:
        self.ok(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def alloc(self, size: int) -> ctypes.c_uint64:
        ptr = ctypes.c_uint64()
        self.ok(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc")
        return ptr

    def free(self, ptr: ctypes.c_uint64) -> None:
        self.ok(self.lib.cuMemFree_v2(ptr), "cuMemFree")

    def host(self, size: int) -> ctypes.c_void_p:
        ptr = ctypes.c_void_p()
        self.ok(self.lib.cuMemAllocHost_v2(ctypes.byref(ptr), ctypes.c_size_t(size)),
                "cuMemAllocHost")
        return ptr

    def to_host(self, host: ctypes.c_void_p, dev: ctypes.c_uint64, size: int) -> None:
        self.ok(self.lib.cuMemcpyDtoH_v2(host, dev, ctypes.c_size_t(size)), "cuMemcpyDtoH")

    def to_device(self, dev: ctypes.c_uint64, host: ctypes.c_void_p, size: int) -> None:
        self.ok(self.lib.cuMemcpyHtoD_v2(dev, host, ctypes.c_size_t(size)), "cuMemcpyHtoD")


def worker(cuda: Cuda, path: Path, size: int, switches: list[float], stop: threading.Event) -> None:
    import json
    import socket
    cuda.bind()
    host = cuda.host(size)
    dev: ctypes.c_uint64 | None = None
    while not path.exists():
        time.sleep(0.01)
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(str(path))
    conn.sendall(b'{"op":"hello","v":2,"resident":false}\n{"op":"want"}\n')
    stream = conn.makefile("rb")
    turn = 0  # the turn it holds or last parked: every resident and parked names it
    while not stop.is_set() and (line := stream.readline()):
        message = json.loads(line)
        op = message["op"]
        t0 = time.perf_counter()
        if op == "grant" and message["turn"] > turn:
            turn = message["turn"]
            dev = cuda.alloc(size)
            cuda.to_device(dev, host, size)
            conn.sendall(b'{"op":"resident","turn":%d}\n' % turn)
        elif op == "yield" and dev is not None:
            cuda.to_host(host, dev, size)
            cuda.free(dev)
            dev = None
            conn.sendall(b'{"op":"parked","turn":%d}\n' % turn)
        else:
            continue
        switches.append(time.perf_counter() - t0)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    cuda = Cuda()
    size = int(args.gib * GIB)
    cuda.bind()
    host, dev = cuda.host(size), cuda.alloc(size)
    t0 = time.perf_counter()
    cuda.to_device(dev, host, size)
    bandwidth = size / (time.perf_counter() - t0)
    cuda.free(dev)
    library = nvml.load()
    root = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    for m in range(args.members):
        (root / "g" / f"m{m}").mkdir(parents=True)
    settings = TurnSettings(quantum=1.0, min_resident=0.5, yield_grace=30.0)
    stop, agent_stop = threading.Event(), dict[str, Any]()
    ready = threading.Event()

    def agent_thread() -> None:
        async def go() -> None:
            agent_stop["stop"], agent_stop["loop"] = asyncio.Event(), asyncio.get_running_loop()

            def up(agent: Agent) -> None:
                ready.set()
            await serve(Options(settings, local=root, metrics_address=None, nvml=False),
                        agent_stop["stop"], up)
        asyncio.run(go())

    threading.Thread(target=agent_thread, daemon=True).start()
    ready.wait()
    switches: list[float] = []
    threads = [threading.Thread(target=worker, args=(cuda, root / "g" / f"m{m}" / "turn.sock",
                                                     size, switches, stop), daemon=True)
               for m in range(args.members)]
    for thread in threads:
        thread.start()
    most = 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        if library is not None:
            # All workers are threads of this process: NVML sees one process, so the
            # sample counts this process's memory in units of one member's size.
            held = sum(library.processes().values())
            most = max(most, held // GIB if args.gib >= 1 else 0)
        time.sleep(0.05)
    stop.set()
    agent_stop["loop"].call_soon_threadsafe(agent_stop["stop"].set)
    per_gib = sorted(s / args.gib for s in switches)
    print(f"pinned host -> device copy: {bandwidth / GIB:.2f} GiB/s")
    if per_gib:
        median = per_gib[len(per_gib) // 2]
        print(f"{len(per_gib)} park/restore copies: median {median * 1000:.1f} ms per GiB "
              f"({1 / median / (bandwidth / GIB):.0%} of the plain copy's bandwidth)")
    print("largest device memory in one NVML sample: "
          + (f"{most} GiB (members above 1 GiB: at most {most // max(1, int(args.gib))})"
             if library is not None else "not sampled (NVML not found)"))


if __name__ == "__main__":
    main()
