"""The time-slicer agent's rights, proven with its own tokens (``make privilege``).

hack/privilege.py runs this part after the scheduler's rows. It applies
manifests/timeslicer's RBAC and admission policy (not its DaemonSet), binds a
pod to a node as the agent's carrier and asks the TokenRequest API for the
agent's ServiceAccount tokens as the kubeconfig of each caller:

* agent (a token bound to that pod, as the kubelet issues it, so it names the
  pod's node): may read pods, patch the turn annotation of and delete a pod
  on its own node, mark ``openrl.io/drained`` a pod of its node the scheduler
  asked to drain, read workers, record Events; is refused, by the admission
  policy, any delete or patch of a pod on another node and any other change
  to its own node's pods (marking a pod not asked to drain, writing the ask,
  removing the mark); by RBAC, creating pods, reading Secrets, writing
  workers or nodes.
* agent/node (a token bound to the Node itself): names the node too, and is
  held to it the same way.
* agent/none (a token bound to nothing, so it names no node): refused, by the
  admission policy, every delete or patch of a pod, on any node.

The other node is a Node object of this run's own, with a pod bound to it and
no kubelet. What this run made is removed after (``Agent.remove``), and
manifests/timeslicer's objects only if this run made their namespace: else
they are someone's install, and stay.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Callable
from typing import Any

import yaml

from hack.lib import kube
from hack.lib.attempts import ADMISSION, ALLOWED, RBAC, Row, plain_pod, row, worker_body
from hack.lib.install import ROOT, Install
from hack.lib.kube import NAMESPACES, NODES, PODS, SERVICEACCOUNTS, WORKERS, Kube
from hack.lib.names import API_VERSION, DRAIN, DRAINED, KIND

__all__ = ["AGENT", "AGENT_NS", "Agent", "agent_rows", "install_timeslicer"]

AGENT, AGENT_NS = "openrl-timeslicer", "openrl-timeslicer"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
EVENTS = kube.Resource("", "v1", "events")
REVIEWS = kube.Resource("authentication.k8s.io", "v1", "selfsubjectreviews", namespaced=False)


@dataclasses.dataclass
class Agent:
    """The agent's part of a run: its rows, and what it made, to remove after."""

    inst: Install
    other_node: str
    objects: str = ""  # manifests/timeslicer's objects, if this run applied them first

    def rows(self) -> list[Row]:
        self.objects = install_timeslicer(self.inst)
        self.inst.admin.create(NODES, {"metadata": {"name": self.other_node,
                                                    "labels": {"openrl-place/hack": "install"}}})
        return agent_rows(self.inst, next(iter(self.inst.saved_labels)), self.other_node)

    def remove(self) -> None:
        """Safe whether or not ``rows`` ran, or ran to the end."""
        self.inst.admin.delete(NODES, self.other_node)
        self.inst.admin.delete(PODS, "ts-agent", namespace=AGENT_NS)
        if self.objects:
            kubectl(self.inst, "delete", self.objects)


def kubectl(inst: Install, verb: str, docs: str) -> None:
    subprocess.run([str(ROOT / "hack" / "bin" / "kubectl"), "--kubeconfig",
                    inst.admin_kubeconfig, verb, "--wait=false", "-f", "-"],
                   input=docs, check=True, capture_output=True, text=True)


def install_timeslicer(inst: Install) -> str:
    """manifests/timeslicer's rights and policy (not its DaemonSet), applied; the objects
    to remove after, if this run made its namespace (else none: someone's install)."""
    docs = [d for d in yaml.safe_load_all(subprocess.run(
        [str(ROOT / "hack" / "bin" / "kustomize"), "build", str(ROOT / "manifests" / "timeslicer")],
        check=True, capture_output=True, text=True).stdout) if d and d["kind"] != "DaemonSet"]
    ours = inst.admin.get(NAMESPACES, AGENT_NS) is None
    kubectl(inst, "apply", yaml.safe_dump_all(docs))
    time.sleep(3)  # the policy compiles and reaches the admission plugin
    return yaml.safe_dump_all(docs) if ours else ""


def agent_token(inst: Install, bound: dict[str, Any] | None, name: str) -> Kube:
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if bound:
        spec["boundObjectRef"] = bound
    token = inst.admin.create(SERVICEACCOUNTS, {"spec": spec}, namespace=AGENT_NS, of=AGENT,
                              subresource="token")
    assert token is not None
    path = kube.token_kubeconfig(inst.admin_kubeconfig, AGENT, token["status"]["token"],
                                 inst.namespace, inst.workdir / f"{name}.kubeconfig")
    return Kube.connect(path, inst.namespace)


def agent_rows(inst: Install, node: str, other_node: str) -> list[Row]:
    """The agent's token against pods on its node and another's."""
    admin, ns = inst.admin, inst.namespace
    for pod, where in (("ts-mine", node), ("ts-theirs", other_node), ("ts-asked", node)):
        admin.create(PODS, plain_pod(pod) | {"spec": {**plain_pod(pod)["spec"], "nodeName": where}})
    admin.create(WORKERS, worker_body("ts-worker"))
    # The kubelet's token for the agent's pod: bound to a pod bound to the node.
    carrier = plain_pod("ts-agent")
    carrier["spec"] |= {"nodeName": node, "serviceAccountName": AGENT,
                        "automountServiceAccountToken": False}
    created = admin.create(PODS, carrier, namespace=AGENT_NS) or admin.get(
        PODS, "ts-agent", namespace=AGENT_NS)
    assert created is not None
    node_uid = (admin.get(NODES, node) or {})["metadata"]["uid"]
    tokens = {
        "agent": agent_token(inst, {"kind": "Pod", "apiVersion": "v1", "name": "ts-agent",
                                    "uid": created["metadata"]["uid"]}, "agent-pod"),
        "agent/node": agent_token(inst, {"kind": "Node", "apiVersion": "v1", "name": node,
                                         "uid": node_uid}, "agent-node"),
        "agent/none": agent_token(inst, None, "agent-unbound"),
    }
    api = tokens["agent"]
    turn = {"metadata": {"annotations": {"timeslice.io/turn": '{"phase":"Waiting"}'}}}
    # The scheduler's ask, as admin: only then may the agent mark the pod drained.
    admin.patch(PODS, "ts-asked", {"metadata": {"annotations": {DRAIN: "move"}}})
    drained = {"metadata": {"annotations": {DRAINED: "2026-12-05T00:00:00Z"}}}

    def whoami(who: str) -> Callable[[], Any]:
        def check() -> None:
            review = tokens[who].create(REVIEWS, {"apiVersion": "authentication.k8s.io/v1",
                                                  "kind": "SelfSubjectReview"}) or {}
            extra = review.get("status", {}).get("userInfo", {}).get("extra", {})
            if extra.get(NODE_NAME_EXTRA) != ([node] if who != "agent/none" else None):
                raise kube.KubeError(403, "Unexpected", f"extra: {extra}")
        return check

    event = {"metadata": {"generateName": "ts-"}, "reason": "TurnOverrun", "type": "Warning",
             "message": "probe", "involvedObject": {"apiVersion": API_VERSION, "kind": KIND,
                                                    "name": "ts-worker", "namespace": ns}}
    checks: list[tuple[str, str, str, Callable[[], Any]]] = [
        ("agent", f"token names node {node}", ALLOWED, whoami("agent")),
        ("agent", f"list pods on {node} (every namespace)", ALLOWED,
         lambda: api.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")),
        ("agent", "patch turn annotation, own node", ALLOWED,
         lambda: api.patch(PODS, "ts-mine", turn)),
        ("agent", "patch a label, own node", ADMISSION,
         lambda: api.patch(PODS, "ts-mine", {"metadata": {"labels": {"x": "y"}}})),
        ("agent", "patch turn annotation, other node", ADMISSION,
         lambda: api.patch(PODS, "ts-theirs", turn)),
        ("agent", "delete a pod on another node", ADMISSION,
         lambda: api.delete(PODS, "ts-theirs")),
        ("agent", "mark drained a pod asked to drain, own node", ALLOWED,
         lambda: api.patch(PODS, "ts-asked", drained)),
        ("agent", "mark drained a pod not asked to, own node", ADMISSION,
         lambda: api.patch(PODS, "ts-mine", drained)),
        ("agent", "write the drain ask, own node", ADMISSION,
         lambda: api.patch(PODS, "ts-mine", {"metadata": {"annotations": {DRAIN: "x"}}})),
        ("agent", "remove the drained mark, own node", ADMISSION,
         lambda: api.patch(PODS, "ts-asked", {"metadata": {"annotations": {DRAINED: None}}})),
        ("agent", "get openrlworkers", ALLOWED, lambda: api.get(WORKERS, "ts-worker")),
        ("agent", "create events", ALLOWED, lambda: api.create(EVENTS, event)),
        ("agent", "patch openrlworkers", RBAC,
         lambda: api.patch(WORKERS, "ts-worker", {"metadata": {"labels": {"x": "y"}}})),
        ("agent", "create pods", RBAC, lambda: api.create(PODS, plain_pod("ts-new"))),
        ("agent", "get secrets", RBAC, lambda: api.core.read_namespaced_secret("anything", ns)),
        ("agent", "list secrets", RBAC, lambda: api.core.list_secret_for_all_namespaces()),
        ("agent", "patch nodes", RBAC,
         lambda: api.patch(NODES, node, {"metadata": {"labels": {"x": "y"}}})),
        ("agent/none", "token names no node", ALLOWED, whoami("agent/none")),
        ("agent/none", "delete a pod on the node", ADMISSION,
         lambda: tokens["agent/none"].delete(PODS, "ts-mine")),
        ("agent/node", f"token names node {node}", ALLOWED, whoami("agent/node")),
        ("agent/node", "delete a pod on another node", ADMISSION,
         lambda: tokens["agent/node"].delete(PODS, "ts-theirs")),
        ("agent", "delete a pod on its own node", ALLOWED,
         lambda: api.delete(PODS, "ts-mine")),
    ]
    return [row(who, what, expected, call) for who, what, expected, call in checks]
