"""The shipped image and Deployment on a real node (hack/node.sh).

A real kubelet, containerd, runc and a DRA kubelet plugin join the session's
control plane; `make image` builds the scheduler image from the Dockerfile and
manifests/overlays/node runs the Deployment on that node. Then, in order, on
one set of workers:

* the Deployment is 2/2 Ready, one replica holds the Lease, /metrics answers;
* smoke: devices + 1 workers, two seats per claim -- every worker's container
  really runs and prints the CDI environment of its claim, sharers print the
  same claim, no device is in two claims;
* the leader's pod is deleted while workers arrive: the standby takes over and
  no seat is promised twice;
* a rolling update of the Deployment while the last seats are asked for:
  every worker placed, nothing double-booked;
* the kubelet, then the DRA plugin, restart while shared claims are prepared:
  no container is restarted or replaced, and a claim freed after the restart
  leaves no CDI file behind;
* teardown: every claim unprepared, every CDI file gone; `hack/node.sh down`
  leaves no process, mount, cgroup or state behind.

Skips, saying why, where the machine cannot run a node (not root, no veth).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from controller.k8s import naming
from placement.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[2]
NODE_SH = REPO / "hack" / "node.sh"
NODE_DIR = REPO / ".node"
NODE = os.environ.get("NODE_NAME", "localhost")
NS = "openrl"
DEPLOYMENT = "open-rl-scheduler"
MAXW = 2
# Small workers: on a node that may share claims every worker counts against
# the host memory left to park in (and its pod requests its estimate), and
# this machine has 24 GiB, not the fake nodes' terabyte: twelve 1Gi workers fit.
# A cold machine builds containerd, the pause image and the scheduler image.
BUILD_TIMEOUT = float(os.environ.get("E2E_NODE_BUILD_TIMEOUT", "2400"))
RESOURCES = ("resource.k8s.io", "v1")


def node_sh(*args: str, timeout: float, check: bool = True, **env: str) -> str:
    proc = subprocess.run(
        ["bash", str(NODE_SH), *args], cwd=REPO, stdin=subprocess.DEVNULL,
        env=dict(os.environ, **env), capture_output=True, text=True, timeout=timeout,
        check=False)
    out = proc.stdout + proc.stderr
    if check and proc.returncode != 0:
        raise AssertionError(f"hack/node.sh {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{out[-6000:]}")
    return out


class Node:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.core = cluster.core
        self.custom = cluster.custom
        self.apps = client.AppsV1Api(cluster.api)
        self.coord = client.CoordinationV1Api(cluster.api)
        self.env = {"KUBECONFIG": cluster.kubeconfig}

    # ------------------------------------------------------------ reading

    def workers(self) -> list[dict[str, Any]]:
        return list(self.custom.list_namespaced_custom_object(
            naming.GROUP, naming.VERSION, NS, naming.PLURAL)["items"])

    def claims(self) -> dict[str, dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(*RESOURCES, NS, "resourceclaims")["items"]
        return {c["metadata"]["name"]: c for c in items}

    def worker_pods(self) -> list[Any]:
        return list(self.core.list_namespaced_pod(NS, label_selector=naming.LABEL_WORKER).items)

    def scheduler_pods(self) -> list[Any]:
        pods = self.core.list_namespaced_pod(NS, label_selector="app=open-rl-scheduler").items
        return [p for p in pods if not p.metadata.deletion_timestamp]

    def cdi_files(self) -> list[str]:
        return sorted(p.name for p in (NODE_DIR / "cdi").glob("*.json"))

    def holder(self) -> str:
        lease = self.coord.read_namespaced_lease(DEPLOYMENT, NS)
        return str(lease.spec.holder_identity or "")

    def leader_pod(self) -> str | None:
        holder = self.holder()
        for pod in self.scheduler_pods():
            logs = self.cluster.kubectl("logs", "-n", NS, pod.metadata.name, check=False).stdout
            if "became leader" in logs and holder and holder in logs:
                return str(pod.metadata.name)
        return None

    # ------------------------------------------------------------ writing

    def create_worker(self, name: str, memory: str = "1Gi") -> None:
        body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                "metadata": {"name": name},
                "spec": {"role": "trainer", "modelId": "e2e/real-node", "memory": memory}}
        self.custom.create_namespaced_custom_object(naming.GROUP, naming.VERSION, NS,
                                                    naming.PLURAL, body)

    def delete_worker(self, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(naming.GROUP, naming.VERSION, NS,
                                                        naming.PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise

    def tear_down(self, saved: dict[str, str | None]) -> None:
        """Every worker and claim gone, the Deployment deleted, the fake nodes back, the
        node down: what each real-node module leaves."""
        for w in self.workers():
            self.delete_worker(w["metadata"]["name"])
        try:
            self.cluster.wait_for(lambda: not self.workers(), timeout=120, what="workers gone")
            self.cluster.wait_for(lambda: not self.claims(), timeout=120, what="claims gone")
        finally:
            self.apps.delete_namespaced_deployment(DEPLOYMENT, NS)
            put_fake_nodes_back(self.core, saved)
            print(node_sh("down", timeout=300, **self.env))

    # ------------------------------------------------------------ waiting

    def wait_running(self, names: list[str], timeout: float = 180) -> None:
        def all_running() -> bool:
            phases = {w["metadata"]["name"]: (w.get("status") or {}).get("phase")
                      for w in self.workers()}
            pods = {p.metadata.labels.get(naming.LABEL_WORKER): p for p in self.worker_pods()}
            return all(phases.get(n) == "Running" and n in pods and container_running(pods[n])
                       for n in names)
        self.cluster.wait_for(all_running, timeout=timeout, interval=1,
                              what=f"workers {names} Running with their containers")

    def wait_deployment(self, timeout: float = 240) -> None:
        def ready() -> bool:
            d = self.apps.read_namespaced_deployment(DEPLOYMENT, NS)
            return (d.status.ready_replicas == 2 and d.status.updated_replicas == 2
                    and (d.status.replicas or 0) == 2)
        self.cluster.wait_for(ready, timeout=timeout, interval=1, what="Deployment 2/2 Ready")


def container_running(pod: Any) -> bool:
    statuses = pod.status.container_statuses or []
    return bool(statuses) and all(s.state and s.state.running for s in statuses)


def containers(pods: list[Any]) -> dict[str, tuple[str, int]]:
    """Pod name -> (container ID, restart count) of every worker container."""
    return {p.metadata.name: (s.container_id, s.restart_count)
            for p in pods for s in (p.status.container_statuses or [])}


def allocation(claim: dict[str, Any]) -> list[tuple[str, str]]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results") or []
    return [(r["pool"], r["device"]) for r in results]


def check_books(node: Node) -> dict[str, list[str]]:
    """Claim -> its workers' names; asserts nothing is double-booked."""
    by_claim: dict[str, list[str]] = {}
    for w in node.workers():
        status = w.get("status") or {}
        if status.get("phase") == "Running":
            by_claim.setdefault(status["claimName"], []).append(w["metadata"]["name"])
    claims = node.claims()
    seen: Counter[tuple[str, str]] = Counter()
    for name, holders in by_claim.items():
        assert len(holders) <= MAXW, f"claim {name} seats {holders}, more than {MAXW}"
        assert name in claims, f"workers {holders} run on claim {name}, which is gone"
        devices = allocation(claims[name])
        assert devices, f"claim {name} is not allocated"
        assert all(pool == NODE for pool, _ in devices), f"claim {name} is off the node: {devices}"
        seen.update(devices)
    twice = [d for d, n in seen.items() if n > 1]
    assert not twice, f"devices in two claims: {twice}"
    return by_claim


def skip_unless_a_node_can_run(cluster: Any) -> None:
    """Skips, saying why, where this machine or this cluster cannot have the real node."""
    can = subprocess.run(["bash", str(NODE_SH), "check"], capture_output=True, text=True,
                         check=False)
    if can.returncode == 4:
        pytest.skip(can.stdout.strip())
    if not cluster.is_local:
        pytest.skip("the real node joins this checkout's own cluster (hack/cluster.sh): it signs "
                    "its certificates with that cluster's CA")


def set_fake_nodes_aside(core: client.CoreV1Api, max_workers: int) -> dict[str, str | None]:
    """Only the real node takes workers: the fake ones lose the enabled label (their old
    values are returned for ``put_fake_nodes_back``)."""
    saved: dict[str, str | None] = {}
    for other in core.list_node().items:
        if other.metadata.name != NODE:
            saved[other.metadata.name] = (other.metadata.labels or {}).get(naming.NODE_ENABLED)
            core.patch_node(other.metadata.name,
                            {"metadata": {"labels": {naming.NODE_ENABLED: None}}})
    core.patch_node(NODE, {"metadata": {"labels": {
        naming.NODE_ENABLED: "true", naming.NODE_MAX_WORKERS: str(max_workers)}}})
    return saved


def put_fake_nodes_back(core: client.CoreV1Api, saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        try:
            core.patch_node(name, {"metadata": {"labels": {naming.NODE_ENABLED: value}}})
        except ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture(scope="module")
def node(cluster: Any) -> Iterator[Node]:
    skip_unless_a_node_can_run(cluster)
    n = Node(cluster)
    node_sh("image", timeout=BUILD_TIMEOUT, **n.env)
    node_sh("up", timeout=BUILD_TIMEOUT, **n.env)
    saved = set_fake_nodes_aside(n.core, MAXW)
    try:
        # Claims an earlier run left in the namespace still hold devices of this
        # node's pool (same name, same devices): give them back first.
        if n.claims():
            node_sh("deploy", timeout=120, **n.env)  # the namespace, if it is new
            for name in n.claims():
                n.custom.delete_namespaced_custom_object(*RESOURCES, NS, "resourceclaims", name)
            n.cluster.wait_for(lambda: not n.claims(), timeout=120, what="old claims gone")
        node_sh("deploy", timeout=120, **n.env)
        n.wait_deployment()
        yield n
    finally:
        n.tear_down(saved)
    left = node_sh("status", timeout=60, check=False)
    assert "running (pid" not in left, f"a node process outlived down:\n{left}"
    kept = {"cache", "logs", ".lock"}  # built images and the last run's logs
    left_files = sorted(p.name for p in NODE_DIR.iterdir()) if NODE_DIR.exists() else []
    assert set(left_files) <= kept, f"state left in {NODE_DIR}: {left_files}"
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split()[4].startswith(str(NODE_DIR) + "/")]
    assert not mounts, f"still mounted: {mounts}"
    ours = "openrl-node-" + hashlib.sha1(str(REPO).encode()).hexdigest()[:8]
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{ours}")]
    assert not cgroups, f"cgroups left: {cgroups}"
    assert "shims        0 running" in left, left


SMOKE = [f"smoke-{i}" for i in range(9)]  # one more than the node's devices: one shares
HANDOVER = [f"handover-{i}" for i in range(3)]


def goes_on_from(node: Node, names: list[str], test: str) -> None:
    """The tests below the smoke test go on from the workers the tests before them left
    (one story on one node): run alone, such a test skips, saying what to run."""
    have = {w["metadata"]["name"] for w in node.workers()}
    missing = [name for name in names if name not in have]
    if missing:
        pytest.skip(f"goes on from {test} (its workers {', '.join(missing)} are not here): "
                    "run tests/e2e/test_node.py whole")


def test_deployment_is_ready_with_one_leader_and_metrics(node: Node) -> None:
    pods = node.scheduler_pods()
    assert len(pods) == 2 and all(p.spec.node_name == NODE for p in pods), [
        (p.metadata.name, p.spec.node_name) for p in pods]
    leader = node.cluster.wait_for(node.leader_pod, timeout=60, what="a leader among the pods")
    leaders = [p.metadata.name for p in pods
               if "became leader" in node.cluster.kubectl("logs", "-n", NS, p.metadata.name).stdout]
    assert leaders == [leader], f"leaders: {leaders}"
    port = node.cluster.kubectl("exec", "-n", NS, leader, "--", "cat", "/tmp/http-port").stdout
    assert re.fullmatch(r"\d+\n?", port), port
    import urllib.request

    body = urllib.request.urlopen(f"http://127.0.0.1:{port.strip()}/metrics", timeout=5).read()
    assert b"openrl" in body, body[:500]
    # Bound to loopback only: the host network's other addresses do not answer.
    listen = Path("/proc/net/tcp").read_text()
    assert f"0100007F:{int(port):04X}" in listen, "the metrics port is not bound to 127.0.0.1"
    assert f"00000000:{int(port):04X}" not in listen, "the metrics port is bound to 0.0.0.0"


def test_smoke_every_container_runs_with_its_claims_devices(node: Node) -> None:
    slices = node.custom.list_cluster_custom_object(*RESOURCES, "resourceslices")["items"]
    devices = sum(len(s["spec"].get("devices") or []) for s in slices
                  if s["spec"].get("nodeName") == NODE)
    assert devices == len(SMOKE) - 1, f"{devices} devices published on {NODE}"
    for name in SMOKE:
        node.create_worker(name)
    node.wait_running(SMOKE)
    by_claim = check_books(node)
    assert len(by_claim) == devices, f"{len(by_claim)} claims for {devices} devices: {by_claim}"
    assert sorted(len(v) for v in by_claim.values()) == [1] * (devices - 1) + [2]
    # What each container saw: the CDI environment of its own claim, nothing else.
    for pod in node.worker_pods():
        claim = pod.spec.resource_claims[0].resource_claim_name
        logs = node.cluster.kubectl("logs", "-n", NS, pod.metadata.name).stdout
        seen = [line for line in logs.splitlines() if line.startswith("claim_")]
        want = "claim_" + re.sub(r"[^a-zA-Z0-9]", "_", claim) + "_"
        assert len(seen) == 1 and seen[0].startswith(want) and seen[0].endswith("=true"), (
            f"{pod.metadata.name} (claim {claim}) saw {seen}")
    assert len(node.cdi_files()) == devices, node.cdi_files()


def test_leader_pod_deleted_standby_takes_over_no_double_seat(node: Node) -> None:
    goes_on_from(node, SMOKE, "the smoke test")
    before = node.holder()
    leader = node.cluster.wait_for(node.leader_pod, timeout=60, what="the leader's pod")
    node.core.delete_namespaced_pod(leader, NS)
    for name in HANDOVER:
        node.create_worker(name)
    node.cluster.wait_for(lambda: node.holder() not in ("", before), timeout=90,
                          what="another replica holding the Lease")
    node.wait_running(HANDOVER)
    by_claim = check_books(node)
    assert sum(map(len, by_claim.values())) == 12
    node.wait_deployment()


def test_rolling_update_mid_burst_nothing_double_booked_nothing_lost(node: Node) -> None:
    # As many workers as this machine's host memory parks: the handover's three go,
    # three more come.
    goes_on_from(node, SMOKE + HANDOVER, "the leader hand-over test")
    leaving = HANDOVER
    for name in leaving:
        node.delete_worker(name)
    node.cluster.wait_for(
        lambda: not {w["metadata"]["name"] for w in node.workers()} & set(leaving),
        timeout=120, what="the handover workers gone")
    node.cluster.kubectl("-n", NS, "rollout", "restart", f"deployment/{DEPLOYMENT}")
    burst = [f"rollout-{i}" for i in range(3)]
    for name in burst:
        node.create_worker(name)
    node.wait_running(burst, timeout=300)
    by_claim = check_books(node)
    assert sum(map(len, by_claim.values())) == 12 and len(by_claim) == 8, by_claim
    node.wait_deployment()


def explain(node: Node, worker: str) -> dict[str, Any]:
    """``openrl-place explain WORKER -o json`` against the session's cluster."""
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "openrl-place"), "explain", worker, "-o", "json",
         "--namespace", NS, "--device-class", node.cluster.driver],
        env=dict(os.environ, **node.env), capture_output=True, text=True, timeout=60,
        check=True)
    return dict(json.loads(out.stdout))


def budget_on(node: Node, worker: str) -> dict[str, Any]:
    """The node's parking budget as ``explain`` accounts it (for a waiting worker)."""
    found = [v["hostBudget"] for v in explain(node, worker)["nodes"] if v["node"] == NODE]
    assert found and found[0] is not None, f"no host budget for {NODE}"
    return dict(found[0])


def test_another_pods_memory_request_leaves_that_much_less_to_park(node: Node) -> None:
    """A pod that is not a worker, bound to the node and requesting host memory (as a
    DaemonSet's would), takes exactly its request from the parking budget: a joiner that
    fit before waits, its reason naming host memory, until that pod goes. Every worker
    pod on this node (it may share claims) requests its memory estimate."""
    goes_on_from(node, SMOKE, "the smoke test")
    for pod in node.worker_pods():
        requests = pod.spec.containers[0].resources.requests or {}
        assert parse_quantity(requests.get("memory", "0")) >= parse_quantity("1Gi"), (
            pod.metadata.name, requests)
    # A worker no device holds waits for good: explain accounts every node's budget for it.
    node.create_worker("probe", memory="4000Gi")
    node.cluster.wait_for(
        lambda: any(w["metadata"]["name"] == "probe" and (w.get("status") or {}).get("reason")
                    for w in node.workers()), timeout=60, what="the probe waiting")
    before = budget_on(node, "probe")
    left = parse_quantity(before["left"])
    assert left >= parse_quantity("1Gi"), before  # room for one more 1Gi worker
    hog = left - parse_quantity("512Mi")  # leaves half what a 1Gi joiner needs
    node.core.create_namespaced_pod(NS, {
        "metadata": {"name": "host-memory-hog", "labels": {"e2e": "hog"}},
        "spec": {"nodeName": NODE, "restartPolicy": "Never",
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "hog", "image": "localhost/openrl-place:dev",
                                 "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                                 "resources": {"requests": {"memory": str(hog),
                                                            "cpu": "10m"}}}]}})
    try:
        after = node.cluster.wait_for(
            lambda: (b := budget_on(node, "probe"))["budget"] != before["budget"] and b,
            timeout=60, what="the hog's request read into the budget")
        taken = parse_quantity(before["budget"]) - parse_quantity(after["budget"])
        assert taken == hog, (before, after)
        node.create_worker("squeezed")

        def waits_on_host_memory() -> str | None:
            w = next((w for w in node.workers() if w["metadata"]["name"] == "squeezed"), None)
            status = (w or {}).get("status") or {}
            reason = str(status.get("reason", ""))
            return reason if status.get("phase") == "Pending" and "host memory" in reason \
                else None
        reason = node.cluster.wait_for(waits_on_host_memory, timeout=60,
                                       what="squeezed waiting on host memory")
        assert NODE in reason or "host memory" in reason, reason
    finally:
        node.core.delete_namespaced_pod("host-memory-hog", NS, grace_period_seconds=0)
    node.wait_running(["squeezed"], timeout=180)
    for name in ("squeezed", "probe"):
        node.delete_worker(name)
    node.cluster.wait_for(lambda: not {"squeezed", "probe"} & {w["metadata"]["name"]
                                                               for w in node.workers()},
                          timeout=120, what="squeezed and the probe gone")


def test_kubelet_and_plugin_restart_leave_containers_and_leak_nothing(node: Node) -> None:
    goes_on_from(node, SMOKE, "the smoke test")
    shared = [ws for ws in check_books(node).values() if len(ws) == MAXW]
    assert shared, "no shared claim to restart under"
    before = containers(node.worker_pods())
    for component in ("kubelet", "draplugin"):
        node_sh("restart", component, timeout=120, **node.env)
        after = containers(node.worker_pods())
        assert after == before, f"{component} restart changed containers: {before} {after}"
    # A shared claim freed after the plugin restarted: its CDI file goes with it.
    files = node.cdi_files()
    for name in shared[0]:
        node.delete_worker(name)
    node.cluster.wait_for(lambda: len(node.cdi_files()) == len(files) - 1, timeout=90,
                          what="the freed claim's CDI file removed")
    remaining = {p.metadata.name: v for p, v in
                 ((p, containers([p])[p.metadata.name]) for p in node.worker_pods())}
    assert all(before[k] == v for k, v in remaining.items())


def test_teardown_unprepares_everything(node: Node) -> None:
    for w in node.workers():
        node.delete_worker(w["metadata"]["name"])
    node.cluster.wait_for(lambda: not node.workers() and not node.worker_pods(), timeout=120,
                          what="workers and their pods gone")
    node.cluster.wait_for(lambda: not node.claims(), timeout=120, what="claims gone")
    node.cluster.wait_for(lambda: not node.cdi_files(), timeout=60, what="CDI files gone")
    # Minutes in, the standby has passed every liveness probe too.
    restarts = {p.metadata.name: [s.restart_count for s in p.status.container_statuses or []]
                for p in node.scheduler_pods()}
    assert all(counts == [0] for counts in restarts.values()), restarts
