"""Simulated GPU nodes for the local control plane (hack/cluster.sh).

One process plays, for N nodes at once:

* the node agent: registers Node objects with allocatable cpu, memory and
  pods, renews their Leases in kube-node-lease and keeps their Ready
  condition fresh, so kube-controller-manager's node-lifecycle controller
  never taints them;
* a DRA driver: publishes one ResourceSlice per node (pool = node name) with
  devices gpu-0..gpu-N-1 carrying a ``memory`` capacity and a ``productName``
  attribute, and the DeviceClass that selects them;
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

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

log = logging.getLogger("fakenodes")

LEASE_SECONDS = 40
LEASE_RENEW_EVERY = 10.0
STATUS_EVERY = 30.0
SLICES_EVERY = 30.0
FAKE_NODE_LABEL = "fake-gpu-node"


@dataclasses.dataclass(frozen=True)
class Profile:
    devices: int
    device_memory: str
    product: str
    host_memory: str
    cpu: str
    pods: str = "110"


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
        # Reported as the nodes' kubelet version: the API server's own.
        self.kubelet_version = "v0.0.0"

    def api(self) -> client.ApiClient:
        # One ApiClient per thread: the client's connection pool is shared,
        # its configuration objects are not meant to be.
        return config.new_client_from_config(config_file=self.kubeconfig)

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

    def register_node(self, core: client.CoreV1Api, name: str) -> None:
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
        try:
            node = core.create_node(body)
            log.info("registered node %s", name)
        except ApiException as e:
            if e.status != 409:
                raise
            # Re-registration (a restarted agent): refresh our labels, keep
            # anyone else's (the operator's openrl.io/* labels).
            node = core.patch_node(name, {"metadata": {"labels": labels}})
        self.node_uids[name] = node.metadata.uid
        self.post_status(core, name)

    def post_status(self, core: client.CoreV1Api, name: str) -> None:
        core.patch_node_status(name, {"status": self.node_status(name)})

    def renew_lease(self, coord: client.CoordinationV1Api, name: str) -> None:
        ns = "kube-node-lease"
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": now_micro(),
        }
        try:
            coord.patch_namespaced_lease(name, ns, {"spec": spec})
        except ApiException as e:
            if e.status != 404:
                raise
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
            coord.create_namespaced_lease(ns, body)

    def node_owner(self, name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self.node_uids[name]}

    # ------------------------------------------------------------ DRA driver

    def slice_body(self, name: str) -> dict[str, Any]:
        p = self.profile_of(name)
        devices = [
            {
                "name": f"gpu-{i}",
                "attributes": {"productName": {"string": p.product}},
                "capacity": {"memory": {"value": p.device_memory}},
            }
            for i in range(p.devices)
        ]
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

    def ensure_slice(self, custom: client.CustomObjectsApi, name: str) -> None:
        body = self.slice_body(name)
        args = ("resource.k8s.io", "v1", "resourceslices")
        try:
            custom.create_cluster_custom_object(*args, body)
            log.info("published ResourceSlice %s", body["metadata"]["name"])
        except ApiException as e:
            if e.status != 409:
                raise
            current = custom.get_cluster_custom_object(*args, body["metadata"]["name"])
            if current.get("spec") != body["spec"]:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                custom.replace_cluster_custom_object(*args, body["metadata"]["name"], body)
                log.info("updated ResourceSlice %s", body["metadata"]["name"])

    def ensure_device_class(self, custom: client.CustomObjectsApi) -> None:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": self.driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]},
        }
        try:
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", body)
            log.info("created DeviceClass %s", self.driver)
        except ApiException as e:
            if e.status != 409:
                raise

    # ------------------------------------------------------------ lifecycle

    def register(self) -> None:
        api = self.api()
        core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
        custom = client.CustomObjectsApi(api)
        self.kubelet_version = client.VersionApi(api).get_code().git_version
        self.ensure_device_class(custom)
        for name in list(self.names):
            self.register_node(core, name)
            self.renew_lease(coord, name)
            self.ensure_slice(custom, name)

    def add(self, name: str, profile: Profile, labels: dict[str, str]) -> None:
        """One more node, with its own geometry and labels, registered and published now."""
        self.profiles[name] = profile
        self.node_labels[name] = labels
        api = self.api()
        self.register_node(client.CoreV1Api(api), name)
        self.renew_lease(client.CoordinationV1Api(api), name)
        self.ensure_slice(client.CustomObjectsApi(api), name)
        self.names.append(name)

    def remove(self, name: str) -> None:
        """Stop playing a node and delete it (its slice and lease go with it: they are owned)."""
        if name in self.names:
            self.names.remove(name)
        core = client.CoreV1Api(self.api())
        try:
            core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise
        self.node_uids.pop(name, None)
        self.profiles.pop(name, None)
        self.node_labels.pop(name, None)

    def heartbeat_loop(self) -> None:
        api = self.api()
        core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
        custom = client.CustomObjectsApi(api)
        last_status = last_slices = time.monotonic()
        while not self.stop.wait(LEASE_RENEW_EVERY):
            t = time.monotonic()
            for name in list(self.names):
                if name not in self.names:
                    continue  # removed meanwhile: never bring it back
                try:
                    if name not in self.node_uids or not self.node_exists(core, name):
                        self.register_node(core, name)
                    self.renew_lease(coord, name)
                    if t - last_status >= STATUS_EVERY:
                        self.post_status(core, name)
                    if t - last_slices >= SLICES_EVERY:
                        self.ensure_slice(custom, name)
                except (ApiException, urllib3.exceptions.HTTPError) as e:
                    log.warning("heartbeat for %s failed: %s", name, e)
            if t - last_status >= STATUS_EVERY:
                last_status = t
            if t - last_slices >= SLICES_EVERY:
                try:
                    self.ensure_device_class(custom)
                except (ApiException, urllib3.exceptions.HTTPError) as e:
                    log.warning("device class check failed: %s", e)
                last_slices = t

    def node_exists(self, core: client.CoreV1Api, name: str) -> bool:
        try:
            node = core.read_node(name)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        if node.metadata.uid != self.node_uids.get(name):
            self.node_uids[name] = node.metadata.uid
            return False  # recreated by someone else: re-register to refresh
        return True

    # ------------------------------------------------------------ kubelet

    def handle_pod(self, core: client.CoreV1Api, pod: client.V1Pod) -> None:
        if pod.spec is None or pod.spec.node_name not in self.names:
            return
        meta = pod.metadata
        if meta.deletion_timestamp is not None:
            try:
                core.delete_namespaced_pod(
                    meta.name,
                    meta.namespace,
                    grace_period_seconds=0,
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0,
                        preconditions=client.V1Preconditions(uid=meta.uid),
                    ),
                )
                log.info("finished deleting pod %s/%s", meta.namespace, meta.name)
            except ApiException as e:
                if e.status not in (404, 409):
                    raise
            return
        phase = pod.status.phase if pod.status else None
        if phase in ("Running", "Succeeded", "Failed"):
            return
        core.patch_namespaced_pod_status(meta.name, meta.namespace, self.running_status(pod))
        log.info("pod %s/%s running on %s", meta.namespace, meta.name, pod.spec.node_name)

    @staticmethod
    def running_status(pod: client.V1Pod) -> dict[str, Any]:
        stamp = now()

        def cond(kind: str) -> dict[str, Any]:
            return {"type": kind, "status": "True", "lastTransitionTime": stamp}

        def started(c: client.V1Container) -> dict[str, Any]:
            return {
                "name": c.name,
                "image": c.image or "",
                "imageID": "",
                "containerID": f"fake://{pod.metadata.uid}/{c.name}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
            }

        def completed(c: client.V1Container) -> dict[str, Any]:
            return {
                "name": c.name,
                "image": c.image or "",
                "imageID": "",
                "containerID": f"fake://{pod.metadata.uid}/{c.name}",
                "ready": True,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": stamp,
                        "finishedAt": stamp,
                    }
                },
            }

        status: dict[str, Any] = {
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
            "containerStatuses": [started(c) for c in pod.spec.containers],
        }
        if pod.spec.init_containers:
            status["initContainerStatuses"] = [completed(c) for c in pod.spec.init_containers]
        return {"status": status}

    def kubelet_loop(self) -> None:
        api = self.api()
        core = client.CoreV1Api(api)
        selector = "spec.nodeName!="
        while not self.stop.is_set():
            try:
                pods = core.list_pod_for_all_namespaces(field_selector=selector)
                for pod in pods.items:
                    self.guard(core, pod)
                w = watch.Watch()
                for event in w.stream(
                    core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=pods.metadata.resource_version,
                    timeout_seconds=60,
                ):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.guard(core, event["object"])
            except ApiException as e:
                if e.status != 410:  # 410: watch expired, list again
                    log.warning("pod watch failed: %s", e)
                    self.stop.wait(1)
            except (urllib3.exceptions.HTTPError, OSError) as e:
                log.warning("pod watch failed: %s", e)
                self.stop.wait(1)

    def guard(self, core: client.CoreV1Api, pod: client.V1Pod) -> None:
        try:
            self.handle_pod(core, pod)
        except ApiException as e:
            log.warning("pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, e.reason)


def retry(what: str, fn: Callable[[], None], deadline: float) -> None:
    while True:
        try:
            fn()
            return
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            if time.monotonic() > deadline:
                raise
            log.info("%s not yet possible (%s); retrying", what, getattr(e, "reason", e))
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
