"""The time-slicer on a real node: one resident worker per shared claim, through faults.

The real node of hack/node.sh publishes one device, so four workers (owner A
with one, owner B with three, at most four per claim) share one claim. The
scheduler runs as its Deployment and the agent as the shipped DaemonSet
(manifests/overlays/node-timeslicer), both from the image. Each worker is
turn_worker.py: it takes turns through the client and logs when it may hold
device memory; turn_log.py reads those logs back through the API server and
checks, after every step, that no two intervals of the claim overlap. Then,
in order, with turns switching all along:

* turns go round and each owner holds about half the time;
* a worker that never parks when asked is evicted (its pod deleted, a
  ``TurnOverrun`` Event on it) and comes back on the same claim;
* the agent is killed with SIGKILL while a worker holds the turn;
* the agent's DaemonSet is rolled;
* the resident worker's pod is deleted;
* the resident worker's process is killed and its container restarts;
* a waiting worker keeps saying parked while it waits, so that its grant and
  its parked cross on the wire (the fencing makes the parked free nothing);
* a worker floods its own socket with lines, most of them malformed;

and after each, turns go round again: nothing stuck, nothing overlapping.
Each test passes run alone: the ``turning`` fixture creates the four workers
(and waits for their turns to go round) when the module's earlier tests have
not.
``E2E_TURN_SWITCHES`` (default 150) is how many switches the run makes at
least; the faults repeat, in rounds, until it has (1000 for the long run).

Skips, saying why, where the machine cannot run a node.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import turn_log
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_node import (
    BUILD_TIMEOUT,
    NODE,
    NODE_DIR,
    RESOURCES,
    Node,
    node_sh,
    put_fake_nodes_back,
    set_fake_nodes_aside,
    skip_unless_a_node_can_run,
)

from controller.k8s import naming

REPO = Path(__file__).resolve().parents[2]
NS = "openrl"
AGENT_NS = "openrl-timeslicer"
AGENT = "openrl-timeslicer"
TEMPLATE = "openrl-template-turn-proof"
SWITCHES = int(os.environ.get("E2E_TURN_SWITCHES", "150"))
# Short turns, so that the run makes many switches in little time; the grace
# is what a stubborn worker is given before its pod is deleted.
QUANTUM, MIN_RESIDENT, GRACE = "250ms", "100ms", "3s"
OWNERS = {"turn-a": "owner-a", "turn-b1": "owner-b", "turn-b2": "owner-b", "turn-b3": "owner-b"}
# Every wanting worker is served within (members * owners + 1) turns; a few
# seconds each at worst on a busy 2-core machine.
STUCK_AFTER = 60.0
SETTLE = 3.0


def template() -> dict[str, Any]:
    script = (Path(__file__).parent / "turn_worker.py").read_text()
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {"app.kubernetes.io/name": "openrl-worker"}},
        "spec": {
            # A killed worker process restarts its container, as a crash would.
            "restartPolicy": "OnFailure",
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 5,
            "dnsPolicy": "Default",
            "securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "worker", "image": "localhost/openrl-place:dev",
                "imagePullPolicy": "Never",
                "command": ["python3", "-c", script],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": TEMPLATE, "namespace": NS,
                         "labels": {"openrl.io/pod-template": "true"}},
            "data": {"pod.yaml": yaml.safe_dump(pod)}}


class Proof:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.core: client.CoreV1Api = cluster.core
        self.custom: client.CustomObjectsApi = cluster.custom
        self.apps = client.AppsV1Api(cluster.api)
        self.env = {"KUBECONFIG": cluster.kubeconfig}
        self.logs = turn_log.Logs(self.core, NS)
        self.faults: list[str] = []
        self.evictions = 0

    # ------------------------------------------------------------ the agent

    def deploy_agent(self) -> None:
        overlay = REPO / "manifests" / "overlays" / "node-timeslicer"
        text = self.cluster.kubectl("kustomize", str(overlay)).stdout
        port = self.cluster.kubectl("config", "view", "--minify", "-o",
                                    "jsonpath={.clusters[0].cluster.server}").stdout
        port = port.rsplit(":", 1)[1].strip("/")
        docs = [d for d in yaml.safe_load_all(text.replace(
            "NODE_KUBELET_PODS", str(NODE_DIR / "kubelet" / "pods"))) if d]
        for doc in docs:
            if doc["kind"] == "DaemonSet":
                agent = doc["spec"]["template"]["spec"]["containers"][0]
                for env in agent["env"]:
                    if env["name"] == "KUBERNETES_SERVICE_PORT":
                        env["value"] = port
                agent["env"] += [{"name": "TIMESLICER_QUANTUM", "value": QUANTUM},
                                 {"name": "TIMESLICER_MIN_RESIDENT", "value": MIN_RESIDENT},
                                 {"name": "TIMESLICER_YIELD_GRACE", "value": GRACE}]
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def agent_pods(self) -> list[Any]:
        pods = self.core.list_namespaced_pod(AGENT_NS, label_selector=f"app={AGENT}").items
        return [p for p in pods if not p.metadata.deletion_timestamp]

    def wait_agent(self, timeout: float = 180) -> Any:
        def ready() -> Any:
            ds = self.apps.read_namespaced_daemon_set(AGENT, AGENT_NS)
            pods = self.agent_pods()
            if (ds.status.number_ready == 1 and ds.status.updated_number_scheduled == 1
                    and len(pods) == 1):
                return pods[0]
            return None
        return self.cluster.wait_for(ready, timeout=timeout, interval=1, what="the agent Ready")

    # ------------------------------------------------------------ workers

    def create_worker(self, name: str) -> None:
        body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                "metadata": {"name": name},
                "spec": {"role": "sampler", "modelId": "e2e/turns", "memory": "2Gi",
                         "ownerId": OWNERS[name], "podTemplate": {"name": TEMPLATE}}}
        self.custom.create_namespaced_custom_object(naming.GROUP, naming.VERSION, NS,
                                                    naming.PLURAL, body)
        self.logs.follow(name, naming.pod_name(name))

    delete_worker = Node.delete_worker  # it needs only ``custom``

    def workers(self) -> dict[str, dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(
            naming.GROUP, naming.VERSION, NS, naming.PLURAL)["items"]
        return {w["metadata"]["name"]: w for w in items}

    def pod(self, worker: str) -> Any:
        try:
            return self.core.read_namespaced_pod(naming.pod_name(worker), NS)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def claims(self) -> set[str]:
        return {str((w.get("status") or {}).get("claimName")) for w in self.workers().values()}

    # ------------------------------------------------------------ what the logs say

    def check(self, settle: float = SETTLE) -> list[turn_log.Interval]:
        """No overlap among the intervals begun ``settle`` seconds ago or earlier.

        Each worker's log is read by its own stream, so the line that closes one
        interval may arrive after the line that opens the next; by ``settle``
        seconds later both have.
        """
        cutoff = time.monotonic() - settle
        spans = [s for s in turn_log.all_intervals(self.logs) if s.start <= cutoff]
        bad = turn_log.overlaps(spans)
        assert not bad, f"resident intervals overlap: {bad[:5]}"
        return spans

    def switches(self) -> int:
        return turn_log.count(self.logs, "start")

    def holder(self) -> str | None:
        """The worker whose last line is a start (resident by its own account)."""
        spans = turn_log.all_intervals(self.logs)
        open_ = [s for s in spans if s.end == turn_log.FOREVER]
        return open_[-1].worker if open_ else None

    def ensure_turning(self) -> None:
        """The four workers on one claim, taking turns: created unless they are there."""
        if set(self.workers()) >= set(OWNERS):
            return
        for name in OWNERS:
            if name not in self.workers():
                self.create_worker(name)

        def all_running() -> bool:
            ws = self.workers()
            return len(ws) == len(OWNERS) and all(
                (w.get("status") or {}).get("phase") == "Running" for w in ws.values())
        self.cluster.wait_for(all_running, timeout=240, interval=1, what="four workers Running")
        assert len(self.claims()) == 1, f"the workers are on claims {self.claims()}, not one"
        self.go_round(40, "the first workers arrived")

    def touch(self, worker: str, path: str) -> None:
        self.cluster.kubectl("exec", "-n", NS, naming.pod_name(worker), "-c", "worker", "--",
                             "touch", path)

    def remove(self, worker: str, path: str) -> None:
        self.cluster.kubectl("exec", "-n", NS, naming.pod_name(worker), "-c", "worker", "--",
                             "rm", "-f", path, check=False)

    def go_round(self, turns: int, what: str) -> None:
        """Wait for ``turns`` more switches, each worker among them; checking as it goes."""
        first = self.switches()
        since = time.monotonic()
        seen: set[str] = set()
        deadline = time.monotonic() + STUCK_AFTER + turns * 2
        while True:
            self.check()
            for w in self.logs.workers():
                if any(e["ev"] == "start" and e["t"] >= since for e in self.logs.events(w)):
                    seen.add(w)
            if self.switches() - first >= turns and seen >= set(OWNERS):
                return
            assert time.monotonic() < deadline, (
                f"after {what}: {self.switches() - first} switches in "
                f"{time.monotonic() - since:.0f}s, turns seen by {sorted(seen)} only")
            time.sleep(0.5)

    def wait_holder(self) -> str:
        return self.cluster.wait_for(self.holder, timeout=STUCK_AFTER, interval=0.05,
                                     what="a worker resident")


def pod_pids(pod: Any, match: Any) -> list[int]:
    """The host PIDs of this pod's processes (its cgroup names the pod's UID) that ``match``
    takes: nothing else on the machine (another checkout's agent, a developer's own
    ``--local`` agent) is ever counted, or signalled."""
    uid = pod.metadata.uid
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cgroup = (proc / "cgroup").read_text()
            if uid not in cgroup and uid.replace("-", "_") not in cgroup:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if match(proc, argv):
                out.append(int(proc.name))
        except OSError:
            continue
    return out


def agent_pid(pod: Any) -> int:
    """The agent's process in its pod."""
    pids = pod_pids(pod, lambda _, argv: any(a.endswith(b"openrl-place") for a in argv)
                    and b"timeslicer" in argv)
    assert len(pids) == 1, f"agent processes in pod {pod.metadata.name}: {pids}"
    return pids[0]


def worker_child_pid(pod: Any) -> int:
    """The fake worker's child (the process taking turns) of this pod, in the host's PIDs."""
    def match(proc: Path, argv: list[bytes]) -> bool:
        if not argv or not argv[0].endswith(b"python3") or b"-c" not in argv:
            return False
        nspid = next(line for line in (proc / "status").read_text().splitlines()
                     if line.startswith("NSpid:")).split()
        return nspid[-1] != "1"

    pids = pod_pids(pod, match)
    assert len(pids) == 1, f"worker processes of pod {pod.metadata.name}: {pids}"
    return pids[0]


@pytest.fixture(scope="module")
def proof(cluster: Any) -> Iterator[Proof]:
    skip_unless_a_node_can_run(cluster)
    p = Proof(cluster)
    node_sh("image", timeout=BUILD_TIMEOUT, **p.env)
    node_sh("up", timeout=BUILD_TIMEOUT, NODE_GPU_COUNT="1", **p.env)
    saved = set_fake_nodes_aside(p.core, len(OWNERS))
    try:
        node_sh("deploy", timeout=120, **p.env)
        old = p.custom.list_namespaced_custom_object(*RESOURCES, NS, "resourceclaims")["items"]
        for claim in old:  # an earlier run's claims hold this pool's device
            p.custom.delete_namespaced_custom_object(*RESOURCES, NS, "resourceclaims",
                                                     claim["metadata"]["name"])
        for name in OWNERS:  # an earlier run's workers, if it stopped half-way
            p.delete_worker(name)
        p.cluster.wait_for(lambda: not set(p.workers()) & set(OWNERS), timeout=120,
                           what="an earlier run's workers gone")
        p.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(template()))
        p.deploy_agent()
        p.wait_agent()
        yield p
    finally:
        p.logs.stop()
        for name in OWNERS:
            p.delete_worker(name)
        try:
            p.cluster.wait_for(lambda: not p.workers(), timeout=120, what="workers gone")
        finally:
            p.cluster.kubectl("delete", "namespace", AGENT_NS, "--wait=true", check=False,
                              timeout=180)
            p.cluster.kubectl("delete", "configmap", "-n", NS, TEMPLATE, check=False)
            p.apps.delete_namespaced_deployment("open-rl-scheduler", NS)
            # With the scheduler gone no sweep takes the workers' claim: leave the cluster
            # as found (a smoke or chaos run after this one, in the same lane, needs the
            # namespace free of managed claims).
            p.cluster.kubectl("delete", "resourceclaims", "-n", NS, "-l",
                              "openrl.io/managed=true", "--wait=true", check=False,
                              timeout=120)
            put_fake_nodes_back(p.core, saved)
            p.core.patch_node(NODE, {"metadata": {"labels": {naming.NODE_MAX_WORKERS: None}}})
            print(node_sh("down", timeout=300, **p.env))
    print(f"\nturns: {p.switches()} switches, {p.evictions} evictions, faults: {p.faults}")


@pytest.fixture
def turning(proof: Proof) -> Proof:
    """The proof with its four workers taking turns, whichever test runs first."""
    proof.ensure_turning()
    return proof


def test_four_workers_on_one_claim_take_turns_owners_half_each(turning: Proof) -> None:
    proof = turning
    since = time.monotonic()
    proof.go_round(60, "turns went round")
    spans = proof.check()
    share = turn_log.shares(spans, OWNERS, since, time.monotonic())
    print(f"\nowner shares over {proof.switches()} switches: "
          + ", ".join(f"{o} {s:.1%}" for o, s in sorted(share.items())))
    assert abs(share["owner-a"] - 0.5) <= 0.05, share


def test_a_worker_that_never_parks_is_evicted_and_comes_back(turning: Proof) -> None:
    proof = turning
    stubborn = proof.wait_holder()
    before = proof.pod(stubborn)
    proof.cluster.kubectl("exec", "-n", NS, before.metadata.name, "-c", "worker", "--",
                          "touch", "/tmp/stubborn")

    def replaced() -> bool:
        now = proof.pod(stubborn)
        return now is not None and now.metadata.uid != before.metadata.uid
    proof.cluster.wait_for(replaced, timeout=STUCK_AFTER, interval=0.5,
                           what=f"{stubborn}'s pod deleted for overrunning and recreated")
    events = proof.core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={stubborn},reason=TurnOverrun").items
    assert events, f"no TurnOverrun Event on {stubborn}"
    proof.evictions += 1
    proof.faults.append("overrun")
    assert len(proof.claims()) == 1, proof.claims()
    proof.go_round(20, f"{stubborn} was evicted")


def kill_agent(proof: Proof, fault: str) -> None:
    """SIGKILL the agent while a worker is resident; back once its container restarted."""
    proof.wait_holder()
    agent = proof.wait_agent()
    restarts = agent.status.container_statuses[0].restart_count
    os.kill(agent_pid(agent), signal.SIGKILL)
    proof.faults.append(fault)

    def restarted() -> bool:
        pods = proof.agent_pods()
        return bool(pods) and pods[0].status.container_statuses[0].restart_count > restarts
    proof.cluster.wait_for(restarted, timeout=120, interval=0.5, what="the agent restarted")


def test_agent_killed_mid_turn(turning: Proof) -> None:
    kill_agent(turning, "agent SIGKILL")
    turning.go_round(20, "the agent was killed")


def test_a_member_that_never_speaks_holds_nobody_up_after_the_agent_restarts(
        turning: Proof) -> None:
    """A fifth worker joins the claim and its process never connects; the agent is then
    killed and restarts: the four others take turns again within the bound, not waiting
    on the silent one (a member whose pod is being replaced looks the same)."""
    proof = turning
    silent = "turn-silent"
    proof.core.patch_node(NODE, {"metadata": {"labels": {
        naming.NODE_MAX_WORKERS: str(len(OWNERS) + 1)}}})
    try:
        body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                "metadata": {"name": silent},
                "spec": {"role": "sampler", "modelId": "e2e/turns", "memory": "2Gi",
                         "ownerId": "owner-silent", "podTemplate": {"name": TEMPLATE}}}
        proof.custom.create_namespaced_custom_object(naming.GROUP, naming.VERSION, NS,
                                                     naming.PLURAL, body)
        proof.cluster.wait_for(
            lambda: (proof.workers().get(silent, {}).get("status") or {}).get("phase")
            == "Running", timeout=120, interval=1, what=f"{silent} Running")
        assert len(proof.claims()) == 1, f"{silent} is not on the others' claim"
        proof.go_round(10, f"{silent} joined")
        kill_agent(proof, "agent SIGKILL beside a silent member")
        proof.go_round(20, "the agent restarted beside a silent member")
    finally:
        proof.delete_worker(silent)
        proof.cluster.wait_for(lambda: silent not in proof.workers(), timeout=120,
                               what=f"{silent} gone")
        proof.core.patch_node(NODE, {"metadata": {"labels": {
            naming.NODE_MAX_WORKERS: str(len(OWNERS))}}})


def test_agent_rollout(turning: Proof) -> None:
    proof = turning
    proof.wait_holder()
    old = proof.wait_agent().metadata.uid
    proof.cluster.kubectl("rollout", "restart", "-n", AGENT_NS, f"daemonset/{AGENT}")
    proof.faults.append("agent rollout")
    proof.go_round(0, "the rollout began")
    proof.cluster.wait_for(lambda: proof.wait_agent().metadata.uid != old, timeout=180,
                           what="the new agent Ready")
    proof.go_round(20, "the agent was rolled")


def test_resident_worker_pod_deleted(turning: Proof) -> None:
    proof = turning
    holder = proof.wait_holder()
    pod = proof.pod(holder)
    proof.core.delete_namespaced_pod(pod.metadata.name, NS)
    proof.faults.append("resident pod deleted")
    proof.cluster.wait_for(lambda: (p := proof.pod(holder)) is not None
                           and p.metadata.uid != pod.metadata.uid,
                           timeout=STUCK_AFTER, what=f"{holder}'s pod recreated")
    proof.go_round(20, f"{holder}'s pod was deleted while resident")


def test_resident_worker_container_restarts(turning: Proof) -> None:
    proof = turning
    holder = proof.wait_holder()
    pod = proof.pod(holder)
    restarts = pod.status.container_statuses[0].restart_count
    os.kill(worker_child_pid(pod), signal.SIGKILL)
    proof.faults.append("resident container restarted")

    def restarted() -> bool:
        now = proof.pod(holder)
        return now is not None and now.metadata.uid == pod.metadata.uid and \
            now.status.container_statuses[0].restart_count > restarts
    proof.cluster.wait_for(restarted, timeout=STUCK_AFTER, what=f"{holder}'s container restarted")
    proof.go_round(20, f"{holder}'s process was killed")


def test_a_waiting_worker_whose_grant_and_parked_cross(turning: Proof) -> None:
    """A waiting worker says parked over and over (as the sidecar does for a server it
    finds awake): now and then its parked is on the wire while its grant is, and frees
    nothing, so it still restores on the grant and nobody overlaps."""
    proof = turning
    holder = proof.wait_holder()
    crosser = next(w for w in OWNERS if w != holder)
    proof.touch(crosser, "/tmp/cross")
    proof.faults.append("grant and parked crossing")
    try:
        proof.go_round(40, f"{crosser} kept saying parked while waiting")
        starts = [e for e in proof.logs.events(crosser) if e["ev"] == "start"]
        assert starts, f"{crosser} never restored while crossing its grants"
    finally:
        proof.remove(crosser, "/tmp/cross")


def test_a_flooding_worker_slows_nobody_else(turning: Proof) -> None:
    """One worker writes floods of lines to its own socket, most of them malformed; the
    agent answers each with an error, drops it when it leaves them unread, and the others'
    turns go round as before."""
    proof = turning
    flooder = next(w for w in OWNERS if w != proof.wait_holder())
    proof.touch(flooder, "/tmp/flood")
    proof.faults.append("flooding worker")
    try:
        proof.go_round(40, f"{flooder} flooded its socket")
    finally:
        proof.remove(flooder, "/tmp/flood")
    proof.go_round(10, f"{flooder} stopped flooding")


def test_long_run_every_fault_in_rounds(turning: Proof) -> None:
    """Repeats the faults until the run has made E2E_TURN_SWITCHES switches."""
    proof = turning
    rounds = 0
    while proof.switches() < SWITCHES:
        rounds += 1
        for fault in (test_a_worker_that_never_parks_is_evicted_and_comes_back,
                      test_agent_killed_mid_turn, test_agent_rollout,
                      test_resident_worker_pod_deleted, test_resident_worker_container_restarts,
                      test_a_waiting_worker_whose_grant_and_parked_cross,
                      test_a_flooding_worker_slows_nobody_else):
            fault(proof)
        proof.go_round(100, f"round {rounds}")
    # The last word: every worker gone, so every stream has read its container's end,
    # and every interval is judged, the last seconds' too.
    for name in OWNERS:
        proof.delete_worker(name)
    proof.cluster.wait_for(lambda: not set(proof.workers()) & set(OWNERS), timeout=120,
                           what="the workers gone")

    still: list[turn_log.Interval] = []

    def all_closed() -> bool:
        still[:] = [s for s in turn_log.all_intervals(proof.logs) if s.end == turn_log.FOREVER]
        return not still
    # Each stream reads its container's end on its own time: wait for every interval to
    # close, instead of a fixed pause; one that never does, its worker gone, fails here.
    try:
        proof.cluster.wait_for(all_closed, timeout=60, interval=0.2, what="intervals closed")
    except AssertionError:
        raise AssertionError(
            f"intervals never closed though their workers are gone: {still}") from None
    spans = proof.check(settle=0.0)
    print(f"\n{proof.switches()} switches, {len(spans)} intervals, 0 overlapping, "
          f"{proof.evictions} evictions, {rounds} extra rounds of faults")


REBALANCE_AFTER = 10.0


def test_a_movable_worker_moves_to_a_freed_device_at_its_turns_end(proof: Proof) -> None:
    """Two movable workers take turns on the node's one device; a device frees on another
    node (a fake one, enabled): within rebalanceAfter + 30 s one of them runs there (the
    rule's pick), its old pod deleted only once the time-slicer marked it drained (its
    last turn ended: no open interval, no overlap), nothing Failed, the other now alone."""
    move_story(proof, "move", agent_killed=False)


def test_the_agent_killed_mid_drain_still_ends_the_turn_before_the_move(proof: Proof) -> None:
    """The same, with the agent stopped before the ask reaches it and killed once the ask
    is on the pod: the restarted agent finds the ask, retires the member and marks it
    drained; the move goes on from there (the controller's bound never met)."""
    move_story(proof, "kmove", agent_killed=True)


def move_story(proof: Proof, prefix: str, *, agent_killed: bool) -> None:
    movers = {f"{prefix}-a": "owner-a", f"{prefix}-b": "owner-b"}
    for name in OWNERS:  # the turn proof's workers, if the module's other tests left them
        proof.delete_worker(name)
    proof.cluster.wait_for(lambda: not set(proof.workers()) & set(OWNERS), timeout=120,
                           what="the turn proof's workers gone")
    proof.cluster.kubectl("set", "env", "-n", NS, "deployment/open-rl-scheduler",
                          f"OPEN_RL_REBALANCE_AFTER={REBALANCE_AFTER:.0f}s",
                          "OPEN_RL_DRAIN_TIMEOUT=60s")
    proof.cluster.kubectl("rollout", "status", "-n", NS, "deployment/open-rl-scheduler",
                          "--timeout=180s", timeout=200)
    spare = next(n.metadata.name for n in proof.core.list_node().items
                 if n.metadata.name != NODE)
    try:
        for name, owner in movers.items():
            body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
                    "metadata": {"name": name},
                    "spec": {"role": "sampler", "modelId": "e2e/turns", "memory": "2Gi",
                             "ownerId": owner, "movable": True,
                             "podTemplate": {"name": TEMPLATE}}}
            proof.custom.create_namespaced_custom_object(naming.GROUP, naming.VERSION, NS,
                                                         naming.PLURAL, body)
            proof.logs.follow(name, naming.pod_name(name))
            proof.cluster.wait_for(
                lambda n=name: (proof.workers().get(n, {}).get("status") or {}).get("phase")
                == "Running", timeout=120, interval=1, what=f"{name} Running")
        statuses = {n: proof.workers()[n]["status"] for n in movers}
        claim = statuses[f"{prefix}-a"]["claimName"]
        assert statuses[f"{prefix}-b"]["claimName"] == claim, statuses
        # Both take turns before anything frees.
        since = time.monotonic()
        proof.cluster.wait_for(lambda: all(
            any(e["ev"] == "start" and e["t"] >= since for e in proof.logs.events(n))
            for n in movers), timeout=60, interval=0.5, what="both movers taking turns")
        stopped = 0
        if agent_killed:  # the ask will reach a stopped agent, and be found by its successor
            agent = proof.wait_agent()
            restarts = agent.status.container_statuses[0].restart_count
            stopped = agent_pid(agent)
            os.kill(stopped, signal.SIGSTOP)
        proof.core.patch_node(spare, {"metadata": {"labels": {naming.NODE_ENABLED: "true"}}})
        freed = time.monotonic()
        if agent_killed:
            proof.cluster.wait_for(lambda: any(
                (p := proof.pod(n)) is not None
                and (p.metadata.annotations or {}).get(naming.ANNOTATION_DRAIN)
                for n in movers), timeout=REBALANCE_AFTER + 30, interval=0.3,
                what="the ask to drain on a mover's pod")
            os.kill(stopped, signal.SIGKILL)
            proof.faults.append("agent SIGKILL mid-drain")
            proof.cluster.wait_for(
                lambda: bool(pods := proof.agent_pods())
                and pods[0].status.container_statuses[0].restart_count > restarts,
                timeout=120, interval=0.5, what="the agent restarted")
        seen: dict[str, dict[str, str]] = {}  # the old pod's annotations, last seen

        def moved() -> str | None:
            for name in movers:
                pod = proof.pod(name)
                if pod is not None and pod.spec.node_name == NODE:
                    seen[name] = dict(pod.metadata.annotations or {})
                status = proof.workers()[name].get("status") or {}
                if status.get("phase") == "Running" and status.get("nodeName") == spare:
                    return name
            proof.check()
            return None
        try:
            mover = proof.cluster.wait_for(moved, timeout=REBALANCE_AFTER + 30 + 15
                                           + (60 if agent_killed else 0),
                                           interval=0.3, what=f"a mover Running on {spare}")
        except AssertionError:
            for name, w in proof.workers().items():
                print(f"{name}: {w.get('spec')} {w.get('status')}")
            print(proof.cluster.kubectl("logs", "-n", NS, "deployment/open-rl-scheduler",
                                        "--tail=80", check=False).stdout)
            print(proof.cluster.kubectl("logs", "-n", AGENT_NS, "daemonset/" + AGENT,
                                        "--tail=80", check=False).stdout)
            print({n: (proof.pod(n).metadata.annotations if proof.pod(n) else None)
                   for n in movers})
            raise
        took = time.monotonic() - freed
        stayer = next(n for n in movers if n != mover)
        workers = proof.workers()
        print(f"\nmove: {mover} Running on {spare} {took:.1f}s after the device freed "
              f"(rebalanceAfter {REBALANCE_AFTER:.0f}s); {workers[mover]['status']['moves']}")
        assert agent_killed or took <= REBALANCE_AFTER + 30, (
            f"{mover} moved {took:.0f}s after the device freed")
        assert workers[stayer]["status"]["claimName"] == claim, "the cutter stays"
        assert workers[mover]["status"]["claimName"] != claim
        assert workers[mover]["status"]["moves"][-1]["reason"] == "OwnDevices"
        notes = seen.get(mover, {})
        assert notes.get(naming.ANNOTATION_DRAIN) and notes.get(naming.ANNOTATION_DRAINED), (
            f"the old pod went without the time-slicer's word: {notes}")
        assert all((w.get("status") or {}).get("phase") != "Failed" for w in workers.values())
        # Its last turn on the old claim ended before its pod went: nothing left open.
        proof.cluster.wait_for(lambda: all(s.end != turn_log.FOREVER for s in
                                           turn_log.intervals(proof.logs.events(mover), mover)),
                               timeout=30, interval=0.5, what=f"{mover}'s last turn closed")
        proof.check()
        notes_said = [e.message or "" for e in proof.core.list_namespaced_event(
            NS, field_selector=f"involvedObject.name={mover}").items]
        assert any(f"moved from claim {claim}" in m for m in notes_said), notes_said
    finally:
        for name in movers:
            proof.delete_worker(name)
        proof.cluster.wait_for(lambda: not set(proof.workers()) & set(movers), timeout=120,
                               what="the movers gone")
        proof.core.patch_node(spare, {"metadata": {"labels": {naming.NODE_ENABLED: None}}})
