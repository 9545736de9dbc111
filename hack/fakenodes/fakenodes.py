"""Simulated GPU nodes for the local control plane (hack/cluster.sh).

One process plays, for N nodes at once:

* the node agent: registers Node objects with allocatable cpu, memory and
  pods, renews their Leases in kube-node-lease and keeps their Ready
  condition fresh, so kube-controller-manager's node-lifecycle controller
  never taints them;
* a DRA driver: publishes one ResourceSlice per node (pool = node name) with
  devices gpu-0..gpu-N-1 carrying a ``memory`` capacity and a ``productName``
  attribute, and the DeviceClass that selects them; a node whose profile
  names ``tainted`` devices publishes that many more after them, each with a
  ``NoSchedule`` taint, so DRA never allocates them (a mixed node; no profile
  of its own has any);
* a kubelet that does no work: pods the real kube-scheduler bound to one of
  these nodes are reported Running, and pods being deleted there are finished
  off (deleted with grace period 0), as a kubelet would once the containers
  stopped.

A program may also import this module and play nodes of its own
(``FakeNodes.add`` / ``remove``: each node with its own geometry, host
memory and labels), as hack/replay.py does for heterogeneous fleets.

Nothing here schedules or allocates: kube-scheduler binds pods and allocates
claims. Configuration comes from flags, falling back to the environment:

  FAKE_GPU_NODES        number of nodes (default 1)
  FAKE_GPU_PROFILE      gpu80 (8 x 80Gi, 1Ti host memory; default) | devbox
                        (2 x 24Gi NVIDIA L4, 94Gi host memory)
  FAKE_GPU_DRIVER       DRA driver and DeviceClass name (gpu.example.com)
  FAKE_GPU_NODE_PREFIX  node name prefix (gpu-node-), names are <prefix><i>
  FAKE_GPU_NODE_LABELS  extra node labels, "k=v,k2=v2"
  FAKE_GPU_COUNT, FAKE_GPU_MEMORY, FAKE_GPU_PRODUCT, FAKE_GPU_HOST_MEMORY,
  FAKE_GPU_CPU          override one figure of the profile
  FAKE_GPU_PODS         allocatable pods per node (default 110, the kubelet's):
                        a small limit is cheap to reach
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.lib import kube
from hack.lib.kube import DEVICECLASSES, LEASES, NODES, PODS, SLICES, KubeError, Obj
from hack.lib.names import FAKE_NODE_LABEL

log = logging.getLogger("fakenodes")

LEASE_SECONDS = 40
TAINT_KEY = "fidelity.example.com/unhealthy"
TAINT_EFFECT = "NoSchedule"
# Set by us, not left to the API server: a slice it stamps would differ from ours at every
# check and be rewritten, waking every controller that watches slices.
TAINT_ADDED = "2026-01-01T00:00:00Z"
TAINT_REASON = f"tainted {TAINT_KEY}:{TAINT_EFFECT}"  # as snapshot and explain say it
LEASE_RENEW_EVERY = 10.0
STATUS_EVERY = 30.0
SLICES_EVERY = 30.0


@dataclasses.dataclass(frozen=True)
class Profile:
    devices: int
    device_memory: str
    product: str
    host_memory: str
    cpu: str
    pods: str = "110"
    # Devices published after the ordinary ones with a NoSchedule taint: DRA never
    # allocates them, so a node with some is a mixed node. Opt-in per node.
    tainted: int = 0


PROFILES = {
    "gpu80": Profile(
        devices=8, device_memory="80Gi", product="Example GPU 80GB", host_memory="1Ti", cpu="128"
    ),
    "devbox": Profile(
        devices=2, device_memory="24Gi", product="NVIDIA L4", host_memory="94Gi", cpu="16"
    ),
}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad label {item!r}: want key=value")
        labels[key.strip()] = value.strip()
    return labels


class FakeNodes:
    def __init__(
        self,
        kubeconfig: str | None,
        names: list[str],
        profile: Profile,
        driver: str,
        labels: dict[str, str],
    ) -> None:
        self.kubeconfig = kubeconfig
        self.names = list(names)
        self.profile = profile
        self.driver = driver
        self.labels = labels
        # Nodes added later (``add``) may each have their own geometry and labels.
        self.profiles: dict[str, Profile] = {}
        self.node_labels: dict[str, dict[str, str]] = {}
        self.stop = threading.Event()
        self.node_uids: dict[str, str] = {}
        # Nodes someone else created and we play (hack/fakenodes/adopt.py): never
        # registered again once gone.
        self.adopted: set[str] = set()
        # Reported as the nodes' kubelet version: the API server's own.
        self.kubelet_version = "v0.0.0"

    def api(self) -> kube.Kube:
        # One client per thread: the client's connection pool is shared,
        # its configuration objects are not meant to be.
        return kube.Kube.connect(self.kubeconfig)

    # ------------------------------------------------------------ node agent

    def profile_of(self, name: str) -> Profile:
        return self.profiles.get(name, self.profile)

    def node_status(self, name: str) -> dict[str, Any]:
        p = self.profile_of(name)
        resources = {
            "cpu": p.cpu,
            "memory": p.host_memory,
            "pods": p.pods,
            "ephemeral-storage": "1Ti",
        }
        stamp = now()

        def cond(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }

        return {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "fake node"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "fake node"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "fake node"),
                cond("Ready", "True", "KubeletReady", "fake kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {
                "machineID": "fake",
                "systemUUID": "fake",
                "bootID": "fake",
                "kernelVersion": "fake",
                "osImage": "fake GPU node (openrl-place hack/fakenodes)",
                "containerRuntimeVersion": "fake://0",
                "kubeletVersion": self.kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }

    def register_node(self, k: kube.Kube, name: str) -> None:
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            FAKE_NODE_LABEL: "true",
            **self.labels,
            **self.node_labels.get(name, {}),
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": self.node_status(name),
        }
        node = k.create(NODES, body)
        if node is not None:
            log.info("registered node %s", name)
        else:
            # Re-registration (a restarted agent): refresh our labels, keep
            # anyone else's (the operator's openrl.io/* labels).
            node = k.patch(NODES, name, {"metadata": {"labels": labels}})
            if node is None:
                raise KubeError(404, "NotFound", f"node {name} vanished while registering")
        self.node_uids[name] = node["metadata"]["uid"]
        self.post_status(k, name)

    def post_status(self, k: kube.Kube, name: str) -> None:
        # A strategic merge (the typed API's), as a kubelet's: conditions merge by type.
        k.call(k.core.patch_node_status, name, {"status": self.node_status(name)})

    def renew_lease(self, k: kube.Kube, name: str) -> None:
        ns = "kube-node-lease"
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": now_micro(),
        }
        if k.patch(LEASES, name, {"spec": spec}, namespace=ns) is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "ownerReferences": [self.node_owner(name)],
                },
                "spec": spec,
            }
            k.create(LEASES, body, namespace=ns)

    def node_owner(self, name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self.node_uids[name]}

    # ------------------------------------------------------------ DRA driver

    def slice_body(self, name: str) -> dict[str, Any]:
        p = self.profile_of(name)
        devices: list[dict[str, Any]] = [
            {
                "name": f"gpu-{i}",
                "attributes": {"productName": {"string": p.product}},
                "capacity": {"memory": {"value": p.device_memory}},
            }
            for i in range(p.devices + p.tainted)
        ]
        taint = {"key": TAINT_KEY, "effect": TAINT_EFFECT, "timeAdded": TAINT_ADDED}
        for device in devices[p.devices:]:
            device["taints"] = [taint]
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"{name}-{self.driver}",
                "ownerReferences": [self.node_owner(name)],
            },
            "spec": {
                "driver": self.driver,
                "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }

    def ensure_slice(self, k: kube.Kube, name: str) -> None:
        body = self.slice_body(name)
        slice_name = body["metadata"]["name"]
        if k.create(SLICES, body) is not None:
            log.info("published ResourceSlice %s", slice_name)
            return
        current = k.get(SLICES, slice_name)
        if current is not None and current.get("spec") != body["spec"]:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if k.replace(SLICES, slice_name, body) is not None:  # else: next round
                log.info("updated ResourceSlice %s", slice_name)

    def ensure_device_class(self, k: kube.Kube) -> None:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": self.driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]},
        }
        if k.create(DEVICECLASSES, body) is not None:
            log.info("created DeviceClass %s", self.driver)

    # ------------------------------------------------------------ lifecycle

    def register(self) -> None:
        k = self.api()
        self.kubelet_version = k.version()
        self.ensure_device_class(k)
        for name in list(self.names):
            self.register_node(k, name)
            self.renew_lease(k, name)
            self.ensure_slice(k, name)

    def add(self, name: str, profile: Profile, labels: dict[str, str]) -> None:
        """One more node, with its own geometry and labels, registered and published now."""
        self.profiles[name] = profile
        self.node_labels[name] = labels
        k = self.api()
        self.register_node(k, name)
        self.renew_lease(k, name)
        self.ensure_slice(k, name)
        self.names.append(name)

    def remove(self, name: str) -> None:
        """Stop playing a node and delete it (its slice and lease go with it: they are owned)."""
        if name in self.names:
            self.names.remove(name)
        self.api().delete(NODES, name)
        self.node_uids.pop(name, None)
        self.profiles.pop(name, None)
        self.node_labels.pop(name, None)

    def forget(self, name: str) -> None:
        """Stop playing an adopted node that is gone (nothing deleted: it is)."""
        self.adopted.discard(name)
        if name in self.names:
            self.names.remove(name)
        self.node_uids.pop(name, None)
        self.profiles.pop(name, None)
        self.node_labels.pop(name, None)

    def heartbeat_loop(self) -> None:
        k = self.api()
        last_status = last_slices = time.monotonic()
        while not self.stop.wait(LEASE_RENEW_EVERY):
            t = time.monotonic()
            for name in list(self.names):
                if name not in self.names:
                    continue  # removed meanwhile: never bring it back
                try:
                    if name not in self.node_uids or not self.node_exists(k, name):
                        if name in self.adopted:
                            self.forget(name)  # the autoscaler took it away
                            continue
                        self.register_node(k, name)
                    self.renew_lease(k, name)
                    if t - last_status >= STATUS_EVERY:
                        self.post_status(k, name)
                    if t - last_slices >= SLICES_EVERY:
                        self.ensure_slice(k, name)
                except KubeError as e:
                    log.warning("heartbeat for %s failed: %s", name, e)
            if t - last_status >= STATUS_EVERY:
                last_status = t
            if t - last_slices >= SLICES_EVERY:
                try:
                    self.ensure_device_class(k)
                except KubeError as e:
                    log.warning("device class check failed: %s", e)
                last_slices = t

    def node_exists(self, k: kube.Kube, name: str) -> bool:
        node = k.get(NODES, name)
        if node is None:
            return False
        if node["metadata"]["uid"] != self.node_uids.get(name):
            self.node_uids[name] = node["metadata"]["uid"]
            return False  # recreated by someone else: re-register to refresh
        return True

    # ------------------------------------------------------------ kubelet

    def handle_pod(self, k: kube.Kube, pod: Obj) -> None:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        if spec.get("nodeName") not in self.names:
            return
        if meta.get("deletionTimestamp"):
            if k.delete(PODS, meta["name"], namespace=meta["namespace"], grace=0,
                        uid=meta["uid"]):
                log.info("finished deleting pod %s/%s", meta["namespace"], meta["name"])
            return
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            return
        k.patch(PODS, meta["name"], self.running_status(pod), namespace=meta["namespace"],
                subresource="status")
        log.info("pod %s/%s running on %s", meta["namespace"], meta["name"], spec["nodeName"])

    @staticmethod
    def running_status(pod: Obj) -> Obj:
        stamp = now()
        uid, spec = pod["metadata"]["uid"], pod["spec"]

        def cond(kind: str) -> Obj:
            return {"type": kind, "status": "True", "lastTransitionTime": stamp}

        def container(c: Obj, state: Obj, started: bool) -> Obj:
            return {
                "name": c["name"],
                "image": c.get("image") or "",
                "imageID": "",
                "containerID": f"fake://{uid}/{c['name']}",
                "ready": True,
                "started": started,
                "restartCount": 0,
                "state": state,
            }

        status: Obj = {
            "phase": "Running",
            "startTime": stamp,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "conditions": [
                cond("PodReadyToStartContainers"),
                cond("Initialized"),
                cond("ContainersReady"),
                cond("Ready"),
                cond("PodScheduled"),
            ],
            "containerStatuses": [
                container(c, {"running": {"startedAt": stamp}}, started=True)
                for c in spec.get("containers") or []
            ],
        }
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp,
                               "finishedAt": stamp}}
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                container(c, done, started=False) for c in spec["initContainers"]
            ]
        return {"status": status}

    def kubelet_loop(self) -> None:
        k = self.api()
        selector = "spec.nodeName!="
        while not self.stop.is_set():
            try:
                listed = k.raw(k.core.list_pod_for_all_namespaces, field_selector=selector)
                for pod in listed["items"]:
                    self.guard(k, pod)
                for kind, pod in k.watch(
                    k.core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=60,
                ):
                    if kind in ("ADDED", "MODIFIED"):
                        self.guard(k, pod)
            except KubeError as e:
                if e.status != 410:  # 410: watch expired, list again
                    log.warning("pod watch failed: %s", e)
                    self.stop.wait(1)

    def resync(self, name: str) -> None:
        """Handle every pod bound to ``name`` now, as a kubelet does when it comes back: the
        watch told of them while the node was not played, and would not again until its
        next list (up to a minute later)."""
        k = self.api()
        try:
            listed = k.raw(k.core.list_pod_for_all_namespaces,
                           field_selector=f"spec.nodeName={name}")
        except KubeError as e:
            log.warning("pods of %s not listed (the next list handles them): %s", name, e)
            return
        for pod in listed["items"]:
            self.guard(k, pod)

    def guard(self, k: kube.Kube, pod: Obj) -> None:
        try:
            self.handle_pod(k, pod)
        except KubeError as e:
            meta = pod["metadata"]
            log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), e)


def retry(what: str, fn: Callable[[], None], deadline: float) -> None:
    while True:
        try:
            fn()
            return
        except KubeError as e:
            if time.monotonic() > deadline:
                raise
            log.info("%s not yet possible (%s); retrying", what, e)
            time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    parser.add_argument("--nodes", type=int, default=int(env("FAKE_GPU_NODES", "1")))
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), default=env("FAKE_GPU_PROFILE", "gpu80")
    )
    parser.add_argument("--driver", default=env("FAKE_GPU_DRIVER", "gpu.example.com"))
    parser.add_argument("--node-prefix", default=env("FAKE_GPU_NODE_PREFIX", "gpu-node-"))
    parser.add_argument("--labels", default=env("FAKE_GPU_NODE_LABELS", ""))
    parser.add_argument("--ready-file", help="written once every node is registered and published")
    parser.add_argument("--register-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout
    )
    profile = PROFILES[args.profile]
    overrides = {
        "devices": ("FAKE_GPU_COUNT", int),
        "device_memory": ("FAKE_GPU_MEMORY", str),
        "product": ("FAKE_GPU_PRODUCT", str),
        "host_memory": ("FAKE_GPU_HOST_MEMORY", str),
        "cpu": ("FAKE_GPU_CPU", str),
        "pods": ("FAKE_GPU_PODS", str),
    }
    changes = {f: conv(env(var)) for f, (var, conv) in overrides.items() if env(var)}
    profile = dataclasses.replace(profile, **changes)
    if args.nodes < 1 or profile.devices < 1:
        parser.error("need at least one node and one device per node")
    try:
        labels = parse_labels(args.labels)
    except ValueError as e:
        parser.error(str(e))
    names = [f"{args.node_prefix}{i}" for i in range(args.nodes)]
    fake = FakeNodes(args.kubeconfig, names, profile, args.driver, labels)

    def on_term(signum: int, frame: object) -> None:
        fake.stop.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    log.info("nodes %s, profile %s, driver %s", ",".join(names), profile, args.driver)
    retry("registration", fake.register, time.monotonic() + args.register_timeout)
    threading.Thread(target=fake.heartbeat_loop, name="heartbeat", daemon=True).start()
    if args.ready_file:
        Path(args.ready_file).write_text(",".join(names) + "\n")
    log.info("ready")
    fake.kubelet_loop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
