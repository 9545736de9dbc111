"""manifests/base installed in a namespace of its own, and its identities' tokens.

For hack/privilege.py and hack/fuzz.py: what they prove must hold for the
shipped manifests under the identities a real installation uses, so the
admin's certificate only sets the installation up and takes it down.

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

import base64
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "manifests" / "base"
SCHEDULER = "open-rl-scheduler"
GATEWAY = "rl-gateway"
GATEWAY_ROLE = "openrl-place-gateway"
GROUP, VERSION, PLURAL = "openrl.io", "v1alpha1", "openrlworkers"
NAMESPACED = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap")
ENABLED = {"openrl.io/enabled": "true", "openrl.io/max-workers-per-claim": "2"}


def base_docs() -> list[dict[str, Any]]:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    docs: list[dict[str, Any]] = []
    for name in listed:
        docs.extend(d for d in yaml.safe_load_all((BASE / name).read_text()) if d)
    return docs


def ensure_crd(api: client.ApiClient) -> None:
    """The OpenRLWorker CRD of manifests/base, created or brought up to date, established."""
    body = yaml.safe_load((BASE / "crd.yaml").read_text())
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        current = ext.read_custom_resource_definition(body["metadata"]["name"])
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        ext.replace_custom_resource_definition(body["metadata"]["name"], body)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True"
               for c in (crd.status.conditions or [])):
            return
        time.sleep(0.5)
    raise SystemExit("the OpenRLWorker CRD never became established")


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
    """One installation; ``api(account)`` is an ApiClient authenticated as that account."""

    def __init__(self, admin_kubeconfig: str, namespace: str, workdir: Path,
                 driver: str = "gpu.example.com", node_selector: str = "fake-gpu-node=true"
                 ) -> None:
        self.namespace = namespace
        self.workdir = workdir
        self.driver = driver
        self.admin_kubeconfig = admin_kubeconfig
        self.admin = config.new_client_from_config(config_file=admin_kubeconfig)
        self.controller: subprocess.Popen[bytes] | None = None
        self.controller_url = ""
        self.binding = f"{SCHEDULER}-{namespace}"
        self.saved_labels: dict[str, dict[str, str | None]] = {}
        self.node_selector = node_selector
        self._clients: dict[str, client.ApiClient] = {}
        workdir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------ set up

    def create(self) -> None:
        core, rbac = client.CoreV1Api(self.admin), client.RbacAuthorizationV1Api(self.admin)
        docs = base_docs()
        ensure_crd(self.admin)
        for kind in NAMESPACED:
            for doc in (d for d in docs if d["kind"] == kind):
                self._create(core, rbac, self._moved(doc))
        (cluster_role,) = (d for d in docs if d["kind"] == "ClusterRole"
                           and d["metadata"]["name"] == SCHEDULER)
        try:
            rbac.create_cluster_role(cluster_role)
        except client.ApiException as e:
            if e.status != 409:
                raise
            rbac.replace_cluster_role(SCHEDULER, cluster_role)
        rbac.create_cluster_role_binding({
            "metadata": {"name": self.binding, "labels": {"openrl-place/hack": "install"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": SCHEDULER},
            "subjects": [{"kind": "ServiceAccount", "name": SCHEDULER,
                          "namespace": self.namespace}]})
        # The gateway, bound as the README shows (kubectl create rolebinding ... --role).
        core.create_namespaced_service_account(self.namespace, {"metadata": {"name": GATEWAY}})
        rbac.create_namespaced_role_binding(self.namespace, {
            "metadata": {"name": GATEWAY},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": GATEWAY_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": GATEWAY,
                          "namespace": self.namespace}]})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # pods need the default account to exist
            try:
                core.read_namespaced_service_account("default", self.namespace)
                break
            except client.ApiException:
                time.sleep(0.5)

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

    def _create(self, core: client.CoreV1Api, rbac: client.RbacAuthorizationV1Api,
                doc: dict[str, Any]) -> None:
        kind, ns = doc["kind"], self.namespace
        if kind == "Namespace":
            core.create_namespace(doc)
        elif kind == "ServiceAccount":
            core.create_namespaced_service_account(ns, doc)
        elif kind == "ConfigMap":
            core.create_namespaced_config_map(ns, doc)
        elif kind == "Role":
            rbac.create_namespaced_role(ns, doc)
        elif kind == "RoleBinding":
            rbac.create_namespaced_role_binding(ns, doc)

    def enable_nodes(self) -> list[str]:
        core = client.CoreV1Api(self.admin)
        names = [n.metadata.name for n in
                 core.list_node(label_selector=self.node_selector).items]
        for name in names:
            labels = core.read_node(name).metadata.labels or {}
            self.saved_labels[name] = {k: labels.get(k) for k in ENABLED}
            core.patch_node(name, {"metadata": {"labels": ENABLED}})
        return names

    # ------------------------------------------------------------ identities

    def kubeconfig(self, account: str, hours: int = 2) -> Path:
        """A kubeconfig authenticating as ``account`` with a TokenRequest token."""
        token = client.CoreV1Api(self.admin).create_namespaced_service_account_token(
            account, self.namespace,
            {"spec": {"expirationSeconds": hours * 3600}}).status.token
        raw = yaml.safe_load(Path(self.admin_kubeconfig).read_text())
        contexts = {c["name"]: c["context"] for c in raw.get("contexts") or []}
        current = contexts.get(raw.get("current-context"), {})
        clusters = {c["name"]: c["cluster"] for c in raw["clusters"]}
        cluster = dict(clusters.get(current.get("cluster"), raw["clusters"][0]["cluster"]))
        if "certificate-authority" in cluster:
            ca_path = Path(cluster.pop("certificate-authority"))
            if not ca_path.is_absolute():
                ca_path = Path(self.admin_kubeconfig).parent / ca_path
            cluster["certificate-authority-data"] = base64.b64encode(
                ca_path.read_bytes()).decode()
        path = self.workdir / f"{account}.kubeconfig"
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": cluster}],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": account, "context": {
                "cluster": "cluster", "user": account, "namespace": self.namespace}}],
            "current-context": account}))
        return path

    def api(self, account: str) -> client.ApiClient:
        if account not in self._clients:
            configuration = client.Configuration()
            configuration.connection_pool_maxsize = 32
            config.load_kube_config(config_file=str(self.kubeconfig(account)),
                                    client_configuration=configuration)
            self._clients[account] = client.ApiClient(configuration)
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

    def workers(self) -> list[dict[str, Any]]:
        custom = client.CustomObjectsApi(self.admin)
        items: list[dict[str, Any]] = custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL)["items"]
        return items

    def close(self) -> None:
        custom = client.CustomObjectsApi(self.admin)
        try:
            for item in self.workers():
                if not item["metadata"].get("deletionTimestamp"):
                    _ignore_missing(custom.delete_namespaced_custom_object,
                                    GROUP, VERSION, self.namespace, PLURAL,
                                    item["metadata"]["name"])
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
        custom = client.CustomObjectsApi(self.admin)
        core, rbac = client.CoreV1Api(self.admin), client.RbacAuthorizationV1Api(self.admin)
        try:
            for item in self.workers():  # never wedge the namespace on a finalizer
                _ignore_missing(custom.patch_namespaced_custom_object, GROUP, VERSION,
                                self.namespace, PLURAL, item["metadata"]["name"],
                                {"metadata": {"finalizers": None}})
            claims = custom.list_namespaced_custom_object(
                "resource.k8s.io", "v1", self.namespace, "resourceclaims")["items"]
            for claim in claims:  # give the devices back now, not when the namespace goes
                _ignore_missing(custom.delete_namespaced_custom_object, "resource.k8s.io",
                                "v1", self.namespace, "resourceclaims",
                                claim["metadata"]["name"])
        except client.ApiException as e:
            if e.status != 404:
                raise
        _ignore_missing(core.delete_namespace, self.namespace)
        _ignore_missing(rbac.delete_cluster_role_binding, self.binding)
        for name, labels in self.saved_labels.items():
            _ignore_missing(core.patch_node, name, {"metadata": {"labels": labels}})


def _ignore_missing(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except client.ApiException as e:
        if e.status != 404:
            raise
