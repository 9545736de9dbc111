"""Playing the nodes a node autoscaler adds (hack/karpenter's KWOK nodes).

Karpenter's KWOK cloud provider creates Node objects and nothing else: no
kubelet keeps them Ready, no DRA driver publishes their devices, nothing runs
their pods. ``Adopter`` hands such nodes to a ``FakeNodes`` as they appear:

* a node is adopted when it matches the label selector (the NodePool's own
  label) and its instance type reads ``gpu-<N>x<M>gi``: N devices of M GiB,
  published at once as its ResourceSlice (pool = node name), the node kept
  Ready and its pods run, as for any fake node;
* a node that is gone (the autoscaler removed it) is forgotten, never
  registered again;
* a node whose instance type is not a GPU type is left alone.

Run as ``python -m hack.fakenodes.adopt --adopt SELECTOR --driver NAME``
(hack/karpenter.sh does): no nodes of its own, the DeviceClass of its driver
created, the adopted nodes' heartbeats and pods played until SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time
from typing import Any

from hack.fakenodes.fakenodes import PROFILES, FakeNodes, Profile, retry
from hack.lib.kube import NODES, KubeError

__all__ = ["INSTANCE_TYPE", "Adopter", "profile_for"]

log = logging.getLogger("fakenodes.adopt")

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_TYPE = re.compile(r"^gpu-(\d+)x(\d+)gi$")


def profile_for(labels: dict[str, str]) -> Profile | None:
    """The fake hardware a node of this instance type has; None: not a GPU type."""
    match = GPU_TYPE.match(labels.get(INSTANCE_TYPE, ""))
    if match is None:
        return None
    devices, gib = int(match.group(1)), int(match.group(2))
    return Profile(devices=devices, device_memory=f"{gib}Gi", product="Example GPU",
                   host_memory="1Ti", cpu="64")


class Adopter:
    """Adopts the nodes matching ``selector`` into ``fake``, one ``step`` at a time."""

    def __init__(self, fake: FakeNodes, selector: str, every: float = 1.0) -> None:
        self.fake = fake
        self.selector = selector
        self.every = every

    def step(self) -> None:
        k = self.fake.api()
        listed: dict[str, dict[str, Any]] = {
            node["metadata"]["name"]: node for node in k.list(NODES, selector=self.selector)
            if not node["metadata"].get("deletionTimestamp")}
        for name in list(self.fake.adopted):
            if name not in listed:
                self.fake.forget(name)
                log.info("node %s is gone; forgotten", name)
        for name, node in sorted(listed.items()):
            if name in self.fake.adopted:
                continue
            profile = profile_for(node["metadata"].get("labels") or {})
            if profile is None:
                continue
            self.fake.adopted.add(name)
            self.fake.add(name, profile, {})
            log.info("adopted node %s: %d x %s", name, profile.devices, profile.device_memory)

    def loop(self) -> None:
        while not self.fake.stop.wait(self.every):
            try:
                self.step()
            except KubeError as e:
                log.warning("adopting nodes failed: %s", e)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--adopt", required=True, metavar="SELECTOR",
                        help="the label selector of the nodes to play")
    parser.add_argument("--driver", default="gpu.example.com")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s",
                        stream=sys.stdout)
    fake = FakeNodes(args.kubeconfig, [], PROFILES["gpu80"], args.driver, {})

    def on_term(signum: int, frame: object) -> None:
        fake.stop.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    retry("the device class", fake.register, time.monotonic() + 60)
    adopter = Adopter(fake, args.adopt)
    for loop in (fake.heartbeat_loop, adopter.loop):
        threading.Thread(target=loop, name=loop.__name__, daemon=True).start()
    log.info("adopting nodes %s for driver %s", args.adopt, args.driver)
    fake.kubelet_loop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
