"""Running the agent: the loop, its mode (Kubernetes or ``--local``), NVML, /metrics.

Rules:

* One asyncio loop; the pod watch runs on a thread and posts into it.
* ``/readyz`` is ready once the node's pods are listed (local: at once);
  ``/healthz`` fails if the loop stops turning. They and ``/metrics`` are
  served only where ``prometheus_client`` is installed: the plain install
  runs ``--local`` without them. The Kubernetes client is imported only for
  the cluster mode.
* The device-memory check runs every ``NVML_EVERY`` seconds while NVML loads.
  In the cluster mode each sample is whole (every process is attributed to
  its pod through its cgroup), so a pod it does not list holds no memory:
  that is what frees a member silent since a restart. In ``--local`` mode a
  process is known only by a live connection, so a sample says nothing of
  the silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from placement.turns import TurnSettings
from timeslicer.agent import nvml
from timeslicer.agent.core import Agent, Effects
from timeslicer.agent.local import LocalEffects, watch_directory
from timeslicer.agent.metrics import AgentMetrics

if TYPE_CHECKING:
    from controller import metrics as controller_metrics

__all__ = ["NVML_EVERY", "Options", "run"]

log = logging.getLogger("openrl.timeslicer")

NVML_EVERY = 5.0


@dataclass(frozen=True, slots=True)
class Options:
    settings: TurnSettings
    node: str = ""
    kubelet_root: Path = Path("/var/lib/kubelet")
    local: Path | None = None
    metrics_address: tuple[str, int] | None = ("", 9478)
    nvml: bool = True
    kubeconfig: str | None = None


async def _beat(health: controller_metrics.Health, stop: asyncio.Event) -> None:
    while not stop.is_set():
        health.beat()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 5.0)


async def _check_devices(agent: Agent, lib: nvml.Nvml, owner_of: Callable[[int], str | None],
                         whole: bool, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        try:
            held: dict[int, int] | None = await loop.run_in_executor(None, lib.processes)
        except OSError as exc:
            log.warning("NVML check failed: %s", exc)
            held = None
        keys = {key for pid in held or {} if (key := owner_of(pid)) is not None}
        if held is not None and whole:
            agent.device_sample(keys)
        else:
            for key in keys:
                agent.holds_device(key)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), NVML_EVERY)


async def serve(options: Options, stop: asyncio.Event,
                ready: Callable[[Agent], None] | None = None) -> Agent:
    """Run until ``stop`` is set; ``ready`` is called with the agent once it runs."""
    loop = asyncio.get_running_loop()
    metrics = AgentMetrics()
    health: controller_metrics.Health | None = None
    tasks: list[asyncio.Task[Any]] = []
    if metrics.registry is not None and options.metrics_address is not None:
        from controller import metrics as controller_metrics
        health = controller_metrics.Health()
        # The controller's server reads only ``.registry`` of what it is given.
        controller_metrics.serve(options.metrics_address,
                                 cast(controller_metrics.Metrics, metrics), health)
        tasks.append(loop.create_task(_beat(health, stop)))
    elif options.metrics_address is not None:
        log.warning("no /metrics, /healthz or /readyz: prometheus_client is not installed "
                    "(the controller extra)")

    def set_ready() -> None:
        if health is not None:
            health.set_ready(True)

    watcher_stop = threading.Event()
    effects: Effects
    if options.local is not None:
        effects = LocalEffects()
        agent = Agent(options.settings, effects=effects, metrics=metrics)
        tasks.append(loop.create_task(watch_directory(agent, options.local, stop)))
        set_ready()

        def owner_of(pid: int) -> str | None:
            return next((k for k, m in agent.members.items() if m.extra.get("pid") == pid), None)
    else:
        from controller.k8s import kube as controller_kube
        from timeslicer.agent import kube

        api = controller_kube.Kube(controller_kube.load_api_client(options.kubeconfig), "default")
        def submit(write: Callable[[], None]) -> None:
            loop.run_in_executor(None, write)

        effects = kube.NodeEffects(api, options.node, submit)
        agent = Agent(options.settings, effects=effects, metrics=metrics)
        pods = kube.NodePods(agent, options.kubelet_root, set_ready)
        threading.Thread(target=kube.follow, args=(api, options.node, loop, pods, watcher_stop),
                         name="pod-watch", daemon=True).start()

        def owner_of(pid: int) -> str | None:
            uid = nvml.pod_of(pid)
            return uid if uid in agent.members else None
    lib = nvml.load() if options.nvml else None
    metrics.nvml.set(1 if lib is not None else 0)
    if lib is not None:
        tasks.append(loop.create_task(_check_devices(agent, lib, owner_of,
                                                     options.local is None, stop)))
    elif not options.nvml:
        log.info("the device-memory check is off (--nvml off)")
    if ready is not None:
        ready(agent)
    try:
        await stop.wait()
    finally:
        watcher_stop.set()
        for task in tasks:
            task.cancel()
        agent.close()
    return agent


def run(options: Options) -> None:
    """The command's body: serve until SIGTERM or SIGINT."""
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(options, stop)

    asyncio.run(main())
