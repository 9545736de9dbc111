"""A scenario's node group played by Karpenter, for hack/replay.py.

hack/replay.py plays a scenario that declares a node group against the local
control plane with Karpenter running (hack/karpenter.sh up): the group
becomes a NodePool of the scenario's own, Karpenter adds and removes its
nodes, hack/fakenodes/adopt.py (started by hack/karpenter.sh) keeps them Ready
and publishes their devices. This module holds the rules of that mapping and
the test of Karpenter being done.

The group as a NodePool (``nodepool_body``):

    the group's               the NodePool's
    ------------------------  ---------------------------------------------------
    template devices,         one instance type of hack/karpenter's list, whose
      deviceMemory              name is gpu-<devices>x<GiB>gi; hostMemory and pods,
                                if the template gives them, must be the type's
                                memory and pods (a node of it has those)
    template roles,           node labels (openrl.io/<role>,
      maxWorkersPerClaim        openrl.io/max-workers-per-claim), as on a fixed node
    max                       limits: cpu = max x the type's cpu, so Karpenter
                                adds no node past max
    min                       must be 0: Karpenter keeps no floor of nodes
    idleTime                  consolidationPolicy WhenEmpty after
                                FIDELITY_CONSOLIDATE_AFTER (10s): the time is not
                                the scenario's (see hack/replay.py's docstring)
    bootTime                  none: a KWOK node is up in seconds

One group per scenario, and no other NodePool on the cluster (the one
hack/karpenter.sh applies, ``gpu``, would take the scenario's pods too and
ignore the group's max): ``check_cluster`` refuses to play otherwise. The
controller is told the pool (``declared_pool``), so a worker no node and no
pool node fits is NoCapacity, as the simulator says.

Karpenter is done (``PoolWatch.busy`` returns ""; anything else says what it
still does) when every NodeClaim of the pool has its Node, every such Node is
Ready, not being deleted, publishes its devices and is in the controller's
books, no node of the pool holds no claim (WhenEmpty removes it), every
standing pod not yet on a node has been looked at by Karpenter (an Event of
its: Nominated or FailedScheduling), and the pool's NodeClaims and Nodes have
not changed for FIDELITY_KARPENTER_QUIET seconds (4; Karpenter batches
pending pods for 2s).
"""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.model import NodeGroupSpec, NodeSpec
from cli.scenario import Scenario
from controller.k8s import naming
from hack.lib import kube as testbed
from placement.model import Role
from placement.quantity import format_quantity, parse_quantity

__all__ = ["DRIVER", "NODECLAIMS", "NODEPOOLS", "InstanceType", "PoolWatch", "check_cluster",
           "declared_pool", "horizon", "instance_type", "instance_types", "nodepool_body",
           "pool_name", "refusal"]

ROOT = Path(__file__).resolve().parents[1]
INSTANCE_TYPES = ROOT / "hack" / "karpenter" / "instance_types.json"
# hack/karpenter.sh's KARPENTER_DRIVER: the driver Karpenter sizes its types in, and
# adopt.py publishes the added nodes' devices in. The scenario's fixed nodes use it too.
DRIVER = os.environ.get("KARPENTER_DRIVER", "gpu-autoscaled.example.com")
CONSOLIDATE_AFTER = os.environ.get("FIDELITY_CONSOLIDATE_AFTER", "10s")
QUIET = float(os.environ.get("FIDELITY_KARPENTER_QUIET", "4"))
NODEPOOLS = testbed.Resource("karpenter.sh", "v1", "nodepools", namespaced=False)
NODECLAIMS = testbed.Resource("karpenter.sh", "v1", "nodeclaims", namespaced=False)
EVENTS = testbed.Resource("", "v1", "events")
POOL_LABEL = "karpenter.sh/nodepool"
AUTOSCALED = "openrl.io/autoscaled"  # adopt.py plays the nodes so labelled (hack/karpenter.sh)
STANDING = "openrl.io/standing"  # the controller's standing pods and claims
# Karpenter's KWOK node names grow from the NodePool's (kwok-<pool>-<5>-<word>-<n>-<10>-<10>)
# and must fit a 63-character label value (kubernetes.io/hostname): a pool name stays short.
POOL_PREFIX = "fid"
_GPU_TYPE = re.compile(r"^gpu-(\d+)x(\d+)gi$")


@dataclass(frozen=True)
class InstanceType:
    name: str
    devices: int
    device_memory: int  # bytes
    cpu: int
    memory: int  # bytes: the node's allocatable memory (adopt.py's host memory)
    pods: int


def instance_types(path: Path = INSTANCE_TYPES) -> dict[str, InstanceType]:
    """The GPU instance types Karpenter is given (hack/karpenter/instance_types.json)."""
    found = {}
    for entry in json.loads(path.read_text(encoding="utf-8")):
        match = _GPU_TYPE.match(entry["name"])
        if match is None:
            continue
        resources = entry["resources"]
        found[entry["name"]] = InstanceType(
            entry["name"], int(match.group(1)), int(match.group(2)) << 30,
            int(parse_quantity(resources["cpu"])), parse_quantity(resources["memory"]),
            int(resources["pods"]))
    return found


def instance_type(template: NodeSpec) -> InstanceType | str:
    """The type a group's template is a node of; else why none is (a sentence)."""
    if template.device_groups or template.left_out:
        return "a template of mixed devices matches no instance type"
    for kind in instance_types().values():
        if (kind.devices, kind.device_memory) != (template.devices, template.device_memory):
            continue
        if template.host_memory not in (None, kind.memory):
            return (f"template hostMemory {format_quantity(template.host_memory)} is not "
                    f"{kind.name}'s {format_quantity(kind.memory)}")
        if template.pods not in (None, kind.pods):
            return f"template pods {template.pods} is not {kind.name}'s {kind.pods}"
        return kind
    kinds = ", ".join(sorted(instance_types()))
    return (f"template {template.devices} x {format_quantity(template.device_memory)} "
            f"matches no Karpenter instance type ({kinds})")


def horizon(scenario: Scenario) -> float:
    """Seconds after an event by which the simulated group is done: twice a node's boot
    and idle time (a node removed when idle may let a waiting worker ask for another)."""
    return 2 * max((group.boot + group.idle for group in scenario.groups), default=0.0)


def refusal(scenario: Scenario) -> str | None:
    """Why a scenario's node groups cannot be played with Karpenter; None if they can."""
    if len(scenario.groups) > 1:
        return "one node group per scenario: Karpenter's choice between NodePools is not " \
               "the simulator's (the first group that fits)"
    group = scenario.groups[0]
    if group.min != 0:
        return f"group {group.name}: min must be 0 (Karpenter keeps no floor of nodes)"
    kind = instance_type(group.template)
    if isinstance(kind, str):
        return f"group {group.name}: {kind}"
    times = scenario.times or ()
    need = horizon(scenario)
    for index in range(1, len(times)):
        if times[index] - times[index - 1] <= need:
            return (f"events[{index}] comes {times[index] - times[index - 1]:.0f}s after the "
                    f"one before: with a node group, events must be more than {need:.0f}s "
                    "apart (twice bootTime plus idleTime) so each step settles in the simulator "
                    "as it does on the cluster")
    return None


def declared_pool(template: NodeSpec) -> str:
    """The controller's --autoscale-pools entry for the group (controller.fleet.pools)."""
    roles = "+".join(sorted(template.roles))
    return f"{template.devices}x{format_quantity(template.device_memory)}" + (
        f":{roles}" if roles else "")


def nodepool_body(name: str, group: NodeGroupSpec, kind: InstanceType) -> dict[str, Any]:
    labels = {naming.NODE_ENABLED: "true", AUTOSCALED: "true",
              naming.NODE_MAX_WORKERS: str(group.template.max_workers_per_claim)}
    for role in group.template.roles:
        labels[naming.NODE_ROLE_LABELS[Role(role)]] = "true"
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {"metadata": {"labels": labels}, "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                 "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": [kind.name]}],
                "expireAfter": "Never"}},
            "limits": {"cpu": str(group.max * kind.cpu)},
            "disruption": {"consolidationPolicy": "WhenEmpty",
                           "consolidateAfter": CONSOLIDATE_AFTER},
        },
    }


def pool_name(tag: str) -> str:
    """The scenario's NodePool: ``fid`` and five digits of its tag's checksum."""
    return f"{POOL_PREFIX}{zlib.crc32(tag.encode()) % 100000:05d}"


def check_cluster(admin: testbed.Kube) -> str | None:
    """Why the cluster cannot play a group now (no Karpenter, a NodePool already there);
    None if it can."""
    try:
        pools = admin.list(NODEPOOLS)
    except testbed.KubeError as error:
        if error.status == 404:
            return "Karpenter is not installed on this cluster: run hack/karpenter.sh up"
        raise
    others = sorted(p["metadata"]["name"] for p in pools)
    if others:
        return (f"NodePool {', '.join(others)} would take the scenario's pods too (and ignore "
                f"its group's max): delete it for the run (kubectl delete nodepool "
                f"{' '.join(others)}; hack/karpenter.sh up applies gpu again)")
    return None


class PoolWatch:
    """The scenario's NodePool as the cluster has it, and whether Karpenter is done."""

    def __init__(self, admin: testbed.Kube, name: str, namespace: str) -> None:
        self.admin = admin
        self.name = name
        self.namespace = namespace
        self.signature: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self.changed = time.monotonic()

    @property
    def selector(self) -> str:
        return f"{POOL_LABEL}={self.name}"

    def nodes(self) -> list[str]:
        """The pool's nodes, being deleted or not."""
        return sorted(n["metadata"]["name"] for n in self.admin.list(testbed.NODES,
                                                                     selector=self.selector))

    def busy(self, holding: set[str], usable: Callable[[str], bool]) -> str:
        """What Karpenter (or a node it added) still does; "" once done. ``holding``: the
        nodes an allocated claim is on; ``usable``: whether the controller books a node
        with its devices."""
        claims = self.admin.list(NODECLAIMS, selector=self.selector)
        nodes = {n["metadata"]["name"]: n for n in self.admin.list(testbed.NODES,
                                                                  selector=self.selector)}
        signature = (tuple(sorted(c["metadata"]["name"] for c in claims)), tuple(sorted(nodes)))
        if signature != self.signature:
            self.signature, self.changed = signature, time.monotonic()
        for claim in claims:
            name = claim["metadata"]["name"]
            if claim["metadata"].get("deletionTimestamp"):
                return f"nodeclaim {name} is being deleted"
            if not (claim.get("status") or {}).get("nodeName"):
                return f"nodeclaim {name} has no node yet"
        published = {s["spec"].get("nodeName") for s in self.admin.list(testbed.SLICES)
                     if s["spec"].get("driver") == DRIVER}
        for name, node in nodes.items():
            if node["metadata"].get("deletionTimestamp"):
                return f"node {name} is being deleted"
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (node.get("status") or {}).get("conditions") or [])
            if not ready or name not in published:
                return f"node {name}: ready={ready}, devices published={name in published}"
            if not usable(name):
                return f"node {name} is not in the controller's books yet"
            if name not in holding:
                return f"node {name} holds no claim: Karpenter removes it once empty"
        waiting = self._unseen_standing_pods()
        if waiting:
            return f"Karpenter has not looked at standing pods {waiting} yet"
        quiet = time.monotonic() - self.changed
        if quiet < QUIET:
            return f"the pool's nodes changed {quiet:.1f}s ago"
        return ""

    def _unseen_standing_pods(self) -> list[str]:
        pods = [p for p in self.admin.list(testbed.PODS, namespace=self.namespace,
                                           selector=f"{STANDING}=true")
                if not (p.get("spec") or {}).get("nodeName")
                and not p["metadata"].get("deletionTimestamp")]
        if not pods:
            return []
        seen = {(e.get("involvedObject") or {}).get("uid")
                for e in self.admin.list(EVENTS, namespace=self.namespace)
                if "karpenter" in ((e.get("source") or {}).get("component", ""),
                                   e.get("reportingComponent", ""))}
        return sorted(p["metadata"]["name"] for p in pods if p["metadata"]["uid"] not in seen)

    def remove(self, timeout: float = 120) -> None:
        """Delete the NodePool and wait for its nodes to go (Karpenter removes them)."""
        self.admin.delete(NODEPOOLS, self.name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.admin.list(NODECLAIMS, selector=self.selector) and not self.nodes():
                return
            time.sleep(1)
