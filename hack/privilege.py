#!/usr/bin/env python3
"""Least privilege, proven on a real API server with ServiceAccount tokens.

Installs manifests/base in a fresh namespace (hack/lib/install.py), then acts
as each identity with a token from the TokenRequest API -- never with the
admin's certificate -- and prints one row per attempt: who, what, what was
expected, what the API server answered.

* gateway (bound to the openrl-place-gateway Role as docs/deploying.md shows): may
  create, get, list, watch and delete OpenRLWorkers and read their status; is
  refused pods, claims, ConfigMaps, Secrets, status writes, other namespaces.
* scheduler (open-rl-scheduler, as the controller runs): reads no Secrets,
  writes nothing outside its namespace or in cluster scope (it lists and
  watches every namespace's pods and claims, and may do no more with them
  there), and even it cannot create a privileged pod in its namespace (Pod
  Security admission).
* admin: a privileged pod created directly in the openrl namespace (labelled
  from manifests/base/namespace.yaml) is refused by admission.
* time-slicer agent (manifests/timeslicer's RBAC and admission policy, with
  node-bound tokens): its own node's pods only, the rules and rows in
  hack/privilege_agent.py, run between the admin's row and the escalation.
* The escalation tried by hand: a ConfigMap holding a pod template with the
  scheduler's ServiceAccount, host namespaces, a privileged container and a
  hostPath of /, named by a worker the gateway creates, with the controller
  running as the scheduler. Refused with a clear reason and no pod: unmarked;
  marked; marked without the ServiceAccount; and allowed by the operator's
  --template-allow (then Pod Security admission refuses the pod itself).

Ends with ``privilege: PASS`` or ``privilege: FAIL`` (exit 0 or 1). Usage:

  KUBECONFIG=.cluster/admin.kubeconfig .venv/bin/python -m hack.privilege [--json]

(from the repository root, as ``make privilege`` runs it)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from hack.lib.attempts import ADMISSION, ALLOWED, RBAC, Row, plain_pod, row, worker_body
from hack.lib.install import ROOT, Install
from hack.lib.kube import (
    CLAIMS,
    CONFIGMAPS,
    LEASES,
    NAMESPACES,
    PODS,
    ROLEBINDINGS,
    SERVICEACCOUNTS,
    WORKERS,
    KubeError,
)
from hack.lib.names import (
    GATEWAY,
    GROUP,
    LABEL_POD_TEMPLATE,
    PLURAL,
    SCHEDULER,
    VERSION,
    pod_name,
    template_name,
)
from hack.privilege_agent import Agent

CLAIMS_API = ("resource.k8s.io", "v1", "resourceclaims")  # group, version, plural
EVIL_SPEC: dict[str, Any] = {
    "serviceAccountName": SCHEDULER, "hostNetwork": True, "hostPID": True,
    "containers": [{"name": "worker", "image": "registry.example/evil:1",
                    "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
    "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
}


def claim_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com"}}]}}}


def gateway_rows(inst: Install, other: str) -> list[Row]:
    ns = inst.namespace
    api = inst.api(GATEWAY)
    custom, core = api.custom, api.core
    w = "gateway-probe"

    def watch_once() -> None:
        for _ in api.watch(custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                           timeout_seconds=1):
            break

    checks: list[tuple[str, str, Callable[[], Any]]] = [
        ("create openrlworkers", ALLOWED, lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, worker_body(w))),
        ("get openrlworkers", ALLOWED, lambda: custom.get_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, w)),
        ("list openrlworkers", ALLOWED, lambda: custom.list_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL)),
        ("watch openrlworkers", ALLOWED, watch_once),
        ("get openrlworkers/status", ALLOWED,
         lambda: custom.get_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, w)),
        ("patch openrlworkers", RBAC, lambda: custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, w, {"metadata": {"labels": {"x": "y"}}})),
        ("patch openrlworkers/status", RBAC,
         lambda: custom.patch_namespaced_custom_object_status(
             GROUP, VERSION, ns, PLURAL, w, {"status": {"phase": "Running"}})),
        ("delete openrlworkers", ALLOWED, lambda: custom.delete_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, w)),
        ("create openrlworkers in another namespace", RBAC,
         lambda: custom.create_namespaced_custom_object(
             GROUP, VERSION, other, PLURAL, worker_body(w))),
        ("list pods", RBAC, lambda: core.list_namespaced_pod(ns)),
        ("create pods", RBAC, lambda: api.create(PODS, plain_pod("gw-pod"))),
        ("list resourceclaims", RBAC, lambda: api.list(CLAIMS)),
        ("create resourceclaims", RBAC, lambda: api.create(CLAIMS, claim_body("gw-claim"))),
        ("get configmaps (a template)", RBAC,
         lambda: api.get(CONFIGMAPS, template_name("trainer"))),
        ("create configmaps", RBAC, lambda: api.create(
            CONFIGMAPS, {"metadata": {"name": "evil"}, "data": {"pod.yaml": "{}"}})),
        ("list secrets", RBAC, lambda: core.list_namespaced_secret(ns)),
        ("get secrets", RBAC, lambda: core.read_namespaced_secret("anything", ns)),
        ("create rolebindings", RBAC, lambda: api.create(ROLEBINDINGS, {
            "metadata": {"name": "gw-escalate"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": SCHEDULER},
            "subjects": [{"kind": "ServiceAccount", "name": GATEWAY, "namespace": ns}]})),
    ]
    return [row("gateway", what, expected, call) for what, expected, call in checks]


def scheduler_rows(inst: Install, other: str) -> list[Row]:
    ns = inst.namespace
    api = inst.api(SCHEDULER)
    custom, core = api.custom, api.core
    checks: list[tuple[str, str, Callable[[], Any]]] = [
        ("list pods", ALLOWED, lambda: core.list_namespaced_pod(ns)),
        ("list nodes", ALLOWED, lambda: core.list_node()),
        ("create a baseline pod", ALLOWED,
         lambda: api.create(PODS, plain_pod("sched-probe"))),
        ("delete that pod", ALLOWED, lambda: core.delete_namespaced_pod("sched-probe", ns)),
        ("create a privileged pod", ADMISSION,
         lambda: api.create(PODS, plain_pod("sched-priv", privileged=True))),
        ("list secrets", RBAC, lambda: core.list_namespaced_secret(ns)),
        ("get secrets", RBAC, lambda: core.read_namespaced_secret("anything", ns)),
        ("watch secrets", RBAC, lambda: core.list_namespaced_secret(
            ns, watch=True, timeout_seconds=1, _preload_content=False)),
        ("list secrets in every namespace", RBAC, lambda: core.list_secret_for_all_namespaces()),
        ("create configmaps", RBAC, lambda: api.create(
            CONFIGMAPS, {"metadata": {"name": "sched-cm"}, "data": {}})),
        ("create serviceaccounts/token", RBAC,
         lambda: api.create(SERVICEACCOUNTS, {"spec": {"expirationSeconds": 600}},
                            of=SCHEDULER, subresource="token")),
        ("create rolebindings", RBAC, lambda: api.create(ROLEBINDINGS, {
            "metadata": {"name": "sched-escalate"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": ns}]})),
        ("create pods in another namespace", RBAC,
         lambda: api.create(PODS, plain_pod("sched-out"), namespace=other)),
        # Pods of every namespace are listed and watched for the pod slots
        # they take on a node; that read is the whole of it.
        ("list pods in every namespace", ALLOWED,
         lambda: core.list_pod_for_all_namespaces(limit=1)),
        ("get a pod in another namespace", RBAC,
         lambda: core.read_namespaced_pod("anything", other)),
        ("delete pods in another namespace", RBAC,
         lambda: core.delete_collection_namespaced_pod(other)),
        ("read pods/log in another namespace", RBAC,
         lambda: core.read_namespaced_pod_log("anything", other)),
        # Claims of every namespace are listed and watched for the devices they
        # hold; outside its namespace it may read no more and write none.
        ("list resourceclaims in every namespace", ALLOWED,
         lambda: custom.list_cluster_custom_object(*CLAIMS_API, limit=1)),
        ("watch resourceclaims in every namespace", ALLOWED,
         lambda: _released(custom.list_cluster_custom_object(
             *CLAIMS_API, watch=True, timeout_seconds=1, _preload_content=False))),
        ("get a resourceclaim in another namespace", RBAC,
         lambda: api.get(CLAIMS, "anything", namespace=other)),
        ("create resourceclaims in another namespace", RBAC,
         lambda: api.create(CLAIMS, claim_body("sched-out"), namespace=other)),
        ("patch resourceclaims in another namespace", RBAC,
         lambda: api.patch(CLAIMS, "anything", {"metadata": {"labels": {"x": "y"}}},
                           namespace=other)),
        ("delete resourceclaims in another namespace", RBAC,
         lambda: api.delete(CLAIMS, "anything", namespace=other)),
        ("create configmaps in another namespace", RBAC,
         lambda: api.create(CONFIGMAPS, {"metadata": {"name": "sched-out"}, "data": {}},
                            namespace=other)),
        ("create leases in another namespace", RBAC, lambda: api.create(
            LEASES, {"metadata": {"name": "sched-out"}, "spec": {}}, namespace=other)),
        ("delete openrlworkers in another namespace", RBAC,
         lambda: custom.delete_collection_namespaced_custom_object(
             GROUP, VERSION, other, PLURAL)),
        ("patch nodes", RBAC, lambda: core.patch_node(next(iter(inst.saved_labels), "none"),
                                                      {"metadata": {"labels": {"x": "y"}}})),
        ("create namespaces", RBAC, lambda: api.create(
            NAMESPACES, {"metadata": {"name": f"sched-{uuid.uuid4().hex[:6]}"}})),
    ]
    return [row("scheduler", what, expected, call) for what, expected, call in checks]


def admin_rows(inst: Install) -> list[Row]:
    """The openrl namespace as manifests/base labels it refuses a privileged pod, from anyone."""
    admin = inst.admin
    (namespace,) = (d for d in yaml.safe_load_all((ROOT / "manifests" / "base" /
                                                   "namespace.yaml").read_text()) if d)
    name = namespace["metadata"]["name"]
    if admin.create(NAMESPACES, namespace) is None:
        admin.patch(NAMESPACES, name, {"metadata": {"labels": namespace["metadata"]["labels"]}})
    pod = plain_pod("admin-privileged", privileged=True)
    pod["spec"]["hostNetwork"] = True
    # Pod Security admission reads namespace labels from its own cache: a label just
    # patched (an earlier run's node overlay labels the namespace privileged) may not
    # be in it yet. Probe with dry runs until it is refused, then ask for real.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            admin.create(PODS, pod, namespace=name, dry_run=True)
        except KubeError:
            break
        time.sleep(0.5)
    return [row("admin", f"create a privileged pod in {name}", ADMISSION,
                lambda: admin.create(PODS, pod, namespace=name))]


def _released(response: Any) -> None:
    """A watch that opened: its connection back to the pool, the stream unread."""
    response.release_conn()


# ------------------------------------------------------------------ escalation


@dataclasses.dataclass
class Step:
    what: str
    template: str
    expect: str  # a fragment the worker's reason must hold
    phase: str = ""
    reason: str = ""
    pods: int = -1

    @property
    def ok(self) -> bool:
        return self.phase == "Failed" and self.expect in self.reason and self.pods == 0


def escalation(inst: Install) -> list[Step]:
    """The hand-made escalation, step by step, through the gateway and the controller."""
    ns = inst.namespace
    gateway = inst.api(GATEWAY)
    reader = inst.api(SCHEDULER)  # what exists, as the scheduler sees it
    without_account = {k: v for k, v in EVIL_SPEC.items() if k != "serviceAccountName"}
    templates = {
        # Someone with ConfigMap rights (not the gateway: refused above) plants a template.
        "evil": ({}, EVIL_SPEC),
        "evil-marked": ({LABEL_POD_TEMPLATE: "true"}, EVIL_SPEC),
        "evil-no-account": ({LABEL_POD_TEMPLATE: "true"}, without_account),
        "evil-allowed": ({LABEL_POD_TEMPLATE: "true"}, without_account),
    }
    for name, (labels, spec) in templates.items():
        inst.admin.create(CONFIGMAPS, {
            "metadata": {"name": name, "labels": labels},
            "data": {"pod.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                                 "spec": spec})}})
    steps = [
        Step("an unmarked ConfigMap", "evil", "is not a pod template"),
        Step("marked, the scheduler's ServiceAccount", "evil-marked",
             "spec.serviceAccountName: is the scheduler's own ServiceAccount"),
        Step("marked, no ServiceAccount", "evil-no-account", "spec.hostNetwork"),
        Step("marked and allowed by --template-allow", "evil-allowed", "PodSecurity"),
    ]
    for i, step in enumerate(steps):
        gateway.create(WORKERS, worker_body(f"escalate-{i}", podTemplate={
            "name": step.template}))
    deadline = time.monotonic() + 120
    for i, step in enumerate(steps):
        while time.monotonic() < deadline:
            status = gateway.raw(gateway.custom.get_namespaced_custom_object_status,
                                 GROUP, VERSION, ns, PLURAL, f"escalate-{i}").get("status") or {}
            step.phase, step.reason = status.get("phase", ""), status.get("reason", "")
            if step.phase == "Failed":
                break
            time.sleep(0.5)
    pods = reader.list(PODS)
    for i, step in enumerate(steps):
        step.pods = sum(1 for p in pods if p["metadata"]["name"] == pod_name(f"escalate-{i}"))
    return steps


# ------------------------------------------------------------------ output


def table(rows: list[Row]) -> str:
    width = max(len(r.what) for r in rows)
    lines = [f"{'who':<10} {'attempt':<{width}}  {'expected':<20} {'got':<20} ok"]
    for r in rows:
        lines.append(f"{r.who:<10} {r.what:<{width}}  {r.expected:<20} {r.got:<20} "
                     f"{'yes' if r.ok else 'NO: ' + r.detail[:160]}")
    return "\n".join(lines)


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # a TERM cleans up as an interrupt does


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--driver", default=os.environ.get("FAKE_GPU_DRIVER", "gpu.example.com"))
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    parser.add_argument("--workdir", type=Path, help="where tokens and logs go [a temp dir]")
    args = parser.parse_args()
    kubeconfig = os.environ.get("KUBECONFIG") or str(ROOT / ".cluster" / "admin.kubeconfig")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="openrl-privilege-"))
    suffix = uuid.uuid4().hex[:6]
    inst = Install(kubeconfig, f"privilege-{suffix}", workdir, driver=args.driver)
    other = f"privilege-other-{suffix}"
    agent = Agent(inst, f"privilege-node-{suffix}")
    try:
        inst.create()
        inst.admin.create(NAMESPACES, {"metadata": {"name": other,
                                                    "labels": {"openrl-place/hack": "install"}}})
        inst.enable_nodes()
        rows = gateway_rows(inst, other) + scheduler_rows(inst, other) + admin_rows(inst)
        rows += agent.rows()
        inst.start_controller(
            env={"OPEN_RL_TEMPLATE_ALLOW": "evil-allowed=hostNetwork,hostPID,privileged,hostPath"})
        steps = escalation(inst)
    finally:
        inst.close()
        inst.admin.delete(NAMESPACES, other)
        agent.remove()
    print(table(rows))
    print()
    print("escalation (a worker the gateway creates naming a planted template):")
    for step in steps:
        print(f"  {step.what:<40} {step.phase or '(no status)':<8} pods={step.pods}  "
              f"{step.reason[:300]}")
    ok = all(r.ok for r in rows) and all(s.ok for s in steps)
    if args.json:
        print(json.dumps({"rows": [dataclasses.asdict(r) | {"ok": r.ok} for r in rows],
                          "escalation": [dataclasses.asdict(s) | {"ok": s.ok} for s in steps]},
                         indent=1))
    print(f"privilege: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
