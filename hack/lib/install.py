"""manifests/base installed in a namespace of its own, and its identities' tokens.

For hack/privilege.py and hack/fuzz.py (and the CRD for hack/burst.py and
hack/replay.py): what they prove must hold for the shipped manifests under
the identities a real installation uses, so the admin's certificate only
sets the installation up and takes it down.

* The CRD is created, or replaced by manifests/base's. The namespaced objects of
  manifests/base (the Namespace with its Pod Security labels, the
  scheduler's ServiceAccount, Role and RoleBinding, the gateway Role, the pod
  templates) are created as they are written, only renamed into the run's
  namespace; the scheduler's ClusterRole is applied as written and bound to
  this namespace's ServiceAccount by a ClusterRoleBinding of the run's own.
  The Deployment is left out (the local cluster has no container runtime).
* The gateway is a ServiceAccount ``rl-gateway`` bound to the gateway Role
  exactly as the README shows.
* Every identity authenticates with a token from the TokenRequest API, in a
  kubeconfig of its own (the admin's only creates the installation).
* The scheduler runs as ``openrl-place controller`` in a child process with
  the scheduler's token; its log goes to the work directory.
* The fake GPU nodes are enabled for the run (labels restored afterwards).
* ``close`` takes everything down again, even after a failure, and deletes
  the token kubeconfigs (the controller's log stays).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from hack.lib import kube
from hack.lib.kube import CONFIGMAPS, CRDS, NAMESPACES, NODES, WORKERS, Kube, KubeError, Obj
from hack.lib.names import (
    FAKE_NODE_LABEL,
    GATEWAY,
    GATEWAY_ROLE,
    NODE_ENABLED,
    NODE_MAX_WORKERS,
    SCHEDULER,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "manifests" / "base"
ENABLED = {NODE_ENABLED: "true", NODE_MAX_WORKERS: "2"}
SERVICE_ACCOUNTS = kube.Resource("", "v1", "serviceaccounts")
ROLES = kube.Resource("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = kube.Resource("rbac.authorization.k8s.io", "v1", "rolebindings")
CLUSTER_ROLES = kube.Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDINGS = kube.Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                      namespaced=False)
# manifests/base's namespaced objects, created in this order (the Namespace first).
NAMESPACED = {"Namespace": NAMESPACES, "ServiceAccount": SERVICE_ACCOUNTS, "Role": ROLES,
              "RoleBinding": ROLE_BINDINGS, "ConfigMap": CONFIGMAPS}


def base_docs() -> list[dict[str, Any]]:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    docs: list[dict[str, Any]] = []
    for name in listed:
        docs.extend(d for d in yaml.safe_load_all((BASE / name).read_text()) if d)
    return docs


def ensure_crd(k: Kube, replace: bool = True) -> None:
    """The OpenRLWorker CRD of manifests/base, established; with ``replace`` brought up to
    date when it exists already (else left as it is: a chart may own it)."""
    body = yaml.safe_load((BASE / "crd.yaml").read_text())
    name = body["metadata"]["name"]
    if k.create(CRDS, body) is None and replace:
        current = k.get(CRDS, name)
        if current is not None:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if k.replace(CRDS, name, body) is None:
                raise KubeError(409, "Conflict", f"CRD {name} changed while being replaced")

    def established() -> tuple[bool, str]:
        conditions = ((k.get(CRDS, name) or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in conditions), "not established"

    if not kube.wait_for(f"the CRD {name}", 60, established, every=0.5)[0]:
        raise SystemExit(f"the CRD {name} never became established")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> tuple[float, float]:
    """A process's resident set now and at its peak (VmRSS, VmHWM), in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return round(values.get("VmRSS", 0.0), 1), round(values.get("VmHWM", 0.0), 1)


class Install:
    """One installation; ``api(account)`` is a client authenticated as that account."""

    def __init__(self, admin_kubeconfig: str, namespace: str, workdir: Path,
                 driver: str = "gpu.example.com", node_selector: str = f"{FAKE_NODE_LABEL}=true"
                 ) -> None:
        self.namespace = namespace
        self.workdir = workdir
        self.driver = driver
        self.admin_kubeconfig = admin_kubeconfig
        self.admin = Kube.connect(admin_kubeconfig, namespace)
        self.controller: subprocess.Popen[bytes] | None = None
        self.controller_url = ""
        self.binding = f"{SCHEDULER}-{namespace}"
        self.saved_labels: dict[str, dict[str, str | None]] = {}
        self.node_selector = node_selector
        self._clients: dict[str, Kube] = {}
        workdir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------ set up

    def create(self) -> None:
        admin = self.admin
        docs = base_docs()
        ensure_crd(admin)
        for kind, res in NAMESPACED.items():
            for doc in (d for d in docs if d["kind"] == kind):
                if admin.create(res, self._moved(doc)) is None:
                    raise KubeError(409, "AlreadyExists",
                                    f"{kind} {doc['metadata']['name']} in {self.namespace}")
        (cluster_role,) = (d for d in docs if d["kind"] == "ClusterRole"
                           and d["metadata"]["name"] == SCHEDULER)
        if admin.create(CLUSTER_ROLES, cluster_role) is None:
            current = admin.get(CLUSTER_ROLES, SCHEDULER) or {"metadata": {}}
            cluster_role = {**cluster_role, "metadata": {
                **cluster_role["metadata"],
                "resourceVersion": current["metadata"].get("resourceVersion")}}
            admin.replace(CLUSTER_ROLES, SCHEDULER, cluster_role)
        admin.create(CLUSTER_ROLE_BINDINGS, {
            "metadata": {"name": self.binding, "labels": {"openrl-place/hack": "install"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": SCHEDULER},
            "subjects": [{"kind": "ServiceAccount", "name": SCHEDULER,
                          "namespace": self.namespace}]})
        # The gateway, bound as the README shows (kubectl create rolebinding ... --role).
        admin.create(SERVICE_ACCOUNTS, {"metadata": {"name": GATEWAY}})
        admin.create(ROLE_BINDINGS, {
            "metadata": {"name": GATEWAY},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": GATEWAY_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": GATEWAY,
                          "namespace": self.namespace}]})
        kube.wait_for("the namespace's default ServiceAccount", 60,  # pods need it
                      lambda: (admin.get(SERVICE_ACCOUNTS, "default") is not None, "missing"),
                      every=0.5)

    def _moved(self, doc: dict[str, Any]) -> dict[str, Any]:
        doc = yaml.safe_load(yaml.safe_dump(doc))
        if doc["kind"] == "Namespace":
            doc["metadata"]["name"] = self.namespace
            doc["metadata"].setdefault("labels", {})["openrl-place/hack"] = "install"
            return doc
        doc["metadata"]["namespace"] = self.namespace
        for subject in doc.get("subjects") or []:
            subject["namespace"] = self.namespace
        return doc

    def enable_nodes(self) -> list[str]:
        names = [n["metadata"]["name"]
                 for n in self.admin.list(NODES, selector=self.node_selector)]
        for name in names:
            before = self.admin.label_node(name, dict(ENABLED))
            if before is not None:
                self.saved_labels[name] = before
        return [n for n in names if n in self.saved_labels]

    # ------------------------------------------------------------ identities

    def kubeconfig(self, account: str, hours: int = 2) -> Path:
        """A kubeconfig authenticating as ``account`` with a TokenRequest token."""
        token = self.admin.call(
            self.admin.core.create_namespaced_service_account_token, account, self.namespace,
            {"spec": {"expirationSeconds": hours * 3600}}).status.token
        return kube.token_kubeconfig(self.admin_kubeconfig, account, token, self.namespace,
                                     self.workdir / f"{account}.kubeconfig")

    def api(self, account: str) -> Kube:
        if account not in self._clients:
            self._clients[account] = Kube.connect(self.kubeconfig(account), self.namespace)
        return self._clients[account]

    # ------------------------------------------------------------ the scheduler

    def start_controller(self, *extra: str, env: dict[str, str] | None = None) -> None:
        port = free_port()
        self.controller_url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "controller", "--namespace", self.namespace,
                   "--no-leader-elect", "--http-address", f"127.0.0.1:{port}",
                   "--device-class", self.driver, "--retry-interval", "3s",
                   "--reclaim-interval", "2s", "--reclaim-grace", "10s",
                   "--kubeconfig", str(self.kubeconfig(SCHEDULER)),
                   "--log-format", "text", "--log-level", "warning", *extra]
        log = (self.workdir / "controller.log").open("ab")
        self.controller = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise RuntimeError(f"the controller exited ({self.controller.returncode}); "
                                   f"see {self.workdir / 'controller.log'}")
            try:
                with urllib.request.urlopen(f"{self.controller_url}/readyz", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the controller never became ready")

    def controller_rss(self) -> tuple[float, float]:
        assert self.controller is not None
        return rss_mb(self.controller.pid)

    def stop_controller(self) -> None:
        if self.controller is None:
            return
        self.controller.terminate()
        try:
            self.controller.wait(20)
        except subprocess.TimeoutExpired:
            self.controller.kill()
            self.controller.wait(10)
        self.controller = None

    # ------------------------------------------------------------ tear down

    def workers(self) -> list[Obj]:
        return self.admin.list(WORKERS)

    def close(self) -> None:
        try:
            for item in self.workers():
                if not item["metadata"].get("deletionTimestamp"):
                    self.admin.delete(WORKERS, item["metadata"]["name"])
            deadline = time.monotonic() + 90
            while self.controller is not None and self.workers() and \
                    time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            self.stop_controller()
            self._force_clean()
            for written in self.workdir.glob("*.kubeconfig"):
                written.unlink()  # tokens good for hours: never left lying about

    def _force_clean(self) -> None:
        admin = self.admin
        for item in self.workers():  # never wedge the namespace on a finalizer
            admin.patch(WORKERS, item["metadata"]["name"], {"metadata": {"finalizers": None}})
        for claim in admin.list(kube.CLAIMS):  # the devices back now, not when the namespace goes
            admin.delete(kube.CLAIMS, claim["metadata"]["name"])
        admin.delete(NAMESPACES, self.namespace)
        admin.delete(CLUSTER_ROLE_BINDINGS, self.binding)
        for name, labels in self.saved_labels.items():
            admin.label_node(name, labels)
