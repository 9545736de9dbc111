"""The testbed's one Kubernetes client: every hack script reaches the API server through it.

Rules:

* A kubeconfig (the admin's, or a ServiceAccount's token kubeconfig written by
  ``token_kubeconfig``) is loaded into an ApiClient of its own; the
  process-wide default configuration is never touched, so several identities
  can live in one process.
* The common verbs (``list``, ``get``, ``create``, ``patch``, ``delete``) take
  a ``Resource`` from the table below and move plain JSON dicts, field names
  as the API spells them. Where a script wants the official client's typed
  APIs (a watch, a TokenRequest, a probe of one exact RBAC verb), ``core``,
  ``custom`` and the rest are right there, and ``call`` runs one of them.
* Outcomes a script expects are return values: ``get`` gives None for an
  object that is not there, ``create`` gives None when it already exists,
  ``patch`` None when the object is gone or a precondition failed,
  ``delete`` False when there was nothing to delete. Any other refusal or
  transport failure is a ``KubeError`` naming the request; nothing above
  this module catches ``ApiException``.
* Every request has a timeout and every wait (``wait_for``) a bound.
* This module does not import the product's ``controller.k8s.kube``: the checkers
  read the cluster through it, and a fault in the code they check must not
  be able to hide from them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

__all__ = [
    "CLAIMS", "CONFIGMAPS", "CRDS", "DEVICECLASSES", "LEASES", "NAMESPACES", "NODES", "PODS",
    "SLICES", "WORKERS", "Kube", "KubeError", "Obj", "Resource", "api_client", "refusal",
    "token_kubeconfig", "wait_for",
]

Obj = dict[str, Any]
Query = list[tuple[str, str]]  # module-level: inside Kube, "list" is a method
REQUEST_TIMEOUT = 30.0


class KubeError(Exception):
    """A request the API server refused (``status``: its HTTP status) or never answered (0)."""

    def __init__(self, status: int, reason: str, message: str, what: str = "") -> None:
        prefix = f"{what}: " if what else ""
        super().__init__(f"{prefix}{status} {reason}: {message}" if status
                         else f"{prefix}{message}")
        self.status = status
        self.reason = reason
        self.message = message

    @staticmethod
    def answer(status: int, reason: str, body: Any, what: str = "") -> KubeError:
        """From a refusal's status and body (a Status object, usually)."""
        message = ""
        try:
            payload = json.loads(body or b"{}")
            reason = str(payload.get("reason") or reason)
            message = str(payload.get("message") or "")
        except (TypeError, ValueError, AttributeError):
            message = (body.decode(errors="replace") if isinstance(body, bytes)
                       else str(body or ""))[:500]
        return KubeError(status, reason, message or reason, what)

    @staticmethod
    def of(exc: Exception, what: str = "") -> KubeError:
        if isinstance(exc, ApiException):
            return KubeError.answer(int(exc.status or 0), str(exc.reason or ""), exc.body, what)
        return KubeError(0, "Unreachable", str(exc), what)


@dataclasses.dataclass(frozen=True)
class Resource:
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.plural} are namespaced: name a namespace")
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        return f"{base}/{subresource}" if subresource else base


PODS = Resource("", "v1", "pods")
CONFIGMAPS = Resource("", "v1", "configmaps")
NODES = Resource("", "v1", "nodes", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings")
WORKERS = Resource("openrl.io", "v1alpha1", "openrlworkers")
CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims")
SLICES = Resource("resource.k8s.io", "v1", "resourceslices", namespaced=False)
DEVICECLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", namespaced=False)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)


def api_client(kubeconfig: str | Path | None = None, pool: int = 32) -> client.ApiClient:
    """An ApiClient for ``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = pool  # watches and worker threads share it
    path = str(kubeconfig) if kubeconfig else None
    try:
        config.load_kube_config(config_file=path,  # type: ignore[no-untyped-call]
                                client_configuration=configuration)
    except (config.ConfigException, OSError, TypeError, yaml.YAMLError) as e:
        where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeError(0, "BadKubeconfig", f"cannot load kubeconfig {where}: {e}") from e
    return client.ApiClient(configuration)


class Kube:
    """One identity's connection; ``namespace`` is the default for namespaced resources."""

    def __init__(self, api: client.ApiClient, namespace: str = "",
                 timeout: float = REQUEST_TIMEOUT) -> None:
        self.api = api
        self.namespace = namespace
        self.timeout = timeout
        self.requests = 0  # every request sent through this object

    @classmethod
    def connect(cls, kubeconfig: str | Path | None = None, namespace: str = "") -> Kube:
        return cls(api_client(kubeconfig), namespace)

    # The official client's typed APIs, for what the verbs below do not cover.
    @cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @cached_property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @cached_property
    def extensions(self) -> client.ApiextensionsV1Api:
        return client.ApiextensionsV1Api(self.api)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One typed-API call, its failure as a ``KubeError``."""
        self.requests += 1
        kwargs.setdefault("_request_timeout", self.timeout)
        try:
            return fn(*args, **kwargs)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeError.of(e, getattr(fn, "__name__", "request")) from e

    def raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """One typed-API call, its answer as the API's own JSON rather than models."""
        data = json.loads(self.call(fn, *args, _preload_content=False, **kwargs).data)
        if not isinstance(data, dict):
            raise KubeError(0, "BadResponse", f"not a JSON object: {str(data)[:200]}")
        return data

    def watch(self, fn: Callable[..., Any], *args: Any, **kwargs: Any
              ) -> Iterator[tuple[str, Obj]]:
        """A typed list call's watch as (event type, object as JSON).

        Ends when the server closes it; a failure is a ``KubeError`` (410: the
        resourceVersion is too old, list again).
        """
        self.requests += 1
        kwargs.setdefault("_request_timeout", self.timeout + kwargs.get("timeout_seconds", 0))
        try:
            for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                    fn, *args, **kwargs):
                yield str(event["type"]), self.to_json(event["object"])
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeError.of(e, f"watch {getattr(fn, '__name__', '')}") from e

    def version(self) -> str:
        return str(self.call(client.VersionApi(self.api).get_code).git_version)

    def to_json(self, model: Any) -> Any:
        """A typed model (a watch event's object, say) as the API's JSON."""
        return self.api.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]

    # ------------------------------------------------------------------ verbs

    def list(self, res: Resource, *, namespace: str | None = None,
             selector: str | None = None, fields: str | None = None) -> list[Obj]:
        query = [(k, v) for k, v in (("labelSelector", selector), ("fieldSelector", fields)) if v]
        items = self._send("GET", res.path(self._ns(res, namespace)), query=query)["items"]
        return list(items or [])

    def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj | None:
        try:
            return self._send("GET", res.path(self._ns(res, namespace), name))
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def create(self, res: Resource, body: Obj, *, namespace: str | None = None,
               of: str | None = None, subresource: str | None = None,
               dry_run: bool = False) -> Obj | None:
        """The created object; None if one of that name already exists. With ``of`` and
        ``subresource``: a request posted to that object's subresource (a token). With
        ``dry_run`` the server runs every check, admission included, and stores nothing."""
        try:
            return self._send("POST", res.path(self._ns(res, namespace), of, subresource),
                              body=body, query=[("dryRun", "All")] if dry_run else None)
        except KubeError as e:
            if e.status == 409:
                return None
            raise

    def patch(self, res: Resource, name: str, body: Obj, *, namespace: str | None = None,
              subresource: str | None = None) -> Obj | None:
        """A JSON merge patch (None removes a key); None if the object is gone or changed."""
        try:
            return self._send("PATCH", res.path(self._ns(res, namespace), name, subresource),
                              body=body, content_type="application/merge-patch+json")
        except KubeError as e:
            if e.status in (404, 409):
                return None
            raise

    def replace(self, res: Resource, name: str, body: Obj, *,
                namespace: str | None = None) -> Obj | None:
        """A full update; None if the object is gone or its resourceVersion is stale."""
        try:
            return self._send("PUT", res.path(self._ns(res, namespace), name), body=body)
        except KubeError as e:
            if e.status in (404, 409):
                return None
            raise

    def delete(self, res: Resource, name: str, *, namespace: str | None = None,
               grace: int | None = None, uid: str | None = None) -> bool:
        """Whether a deletion started; False if nothing was there (or not that ``uid``)."""
        options: Obj = {}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            self._send("DELETE", res.path(self._ns(res, namespace), name), body=options or None)
        except KubeError as e:
            if e.status in (404, 409):
                return False
            raise
        return True

    def label_node(self, name: str, labels: dict[str, str | None]) -> dict[str, str | None] | None:
        """Set (None: remove) these labels; their values before, or None if no such node."""
        node = self.get(NODES, name)
        if node is None:
            return None
        current = node["metadata"].get("labels") or {}
        if self.patch(NODES, name, {"metadata": {"labels": labels}}) is None:
            return None
        return {k: current.get(k) for k in labels}

    # ------------------------------------------------------------------ transport

    def _ns(self, res: Resource, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if res.namespaced else None

    def _send(self, method: str, path: str, *, query: Query | None = None,
              body: Obj | None = None, content_type: str = "application/json") -> Obj:
        self.requests += 1
        what = f"{method} {path}"
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            method, url, headers, payload, _ = self.api.param_serialize(
                method=method, resource_path=path, query_params=query or None,
                header_params=headers, body=body, auth_settings=["BearerToken"])
            response = self.api.call_api(method, url, header_params=headers, body=payload,
                                         _request_timeout=self.timeout)
            data = response.read()  # type: ignore[no-untyped-call]
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            raise KubeError.of(e, what) from e
        if not 200 <= response.status <= 299:
            raise KubeError.answer(response.status, str(response.reason or ""), data, what)
        decoded = json.loads(data or b"{}")
        return decoded if isinstance(decoded, dict) else {}


def refusal(probe: Callable[[], Any]) -> KubeError | None:
    """What the API server said no with to ``probe`` (a typed-API call), or None if it
    agreed: for the checks whose point is the answer itself."""
    try:
        probe()
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
        return KubeError.of(e)
    except KubeError as e:
        return e
    return None


def wait_for(what: str, timeout: float, poll: Callable[[], tuple[bool, str]],
             every: float = 1.0, report_every: float = 10.0) -> tuple[bool, float, str]:
    """Poll until done or ``timeout`` seconds; progress printed now and then (on stderr:
    a command's stdout may be its JSON).

    (done, seconds taken, the last detail ``poll`` gave).
    """
    t0 = time.monotonic()
    last_report = t0
    while True:
        done, detail = poll()
        now = time.monotonic()
        if done:
            return True, now - t0, detail
        if now - t0 > timeout:
            print(f"  timed out after {timeout:g}s waiting for {what}: {detail}", flush=True,
                  file=sys.stderr)
            return False, now - t0, detail
        if now - last_report >= report_every:
            print(f"  ... {now - t0:4.0f}s waiting for {what}: {detail}", flush=True,
                  file=sys.stderr)
            last_report = now
        time.sleep(every)


def token_kubeconfig(admin_kubeconfig: str | Path, account: str, token: str, namespace: str,
                     path: Path) -> Path:
    """A kubeconfig at ``path`` for ``account`` by its token, on the admin's cluster.

    The cluster's CA is inlined, so the file stands alone; it is written 0600
    (a token is a credential).
    """
    raw = yaml.safe_load(Path(admin_kubeconfig).read_text())
    contexts = {c["name"]: c["context"] for c in raw.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in raw.get("clusters") or []}
    current = contexts.get(raw.get("current-context"), {})
    cluster = dict(clusters.get(current.get("cluster"), raw["clusters"][0]["cluster"]))
    if "certificate-authority" in cluster:
        ca_path = Path(cluster.pop("certificate-authority"))
        if not ca_path.is_absolute():
            ca_path = Path(admin_kubeconfig).parent / ca_path
        cluster["certificate-authority-data"] = base64.b64encode(ca_path.read_bytes()).decode()
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {
            "cluster": "cluster", "user": account, "namespace": namespace}}],
        "current-context": account}))
    return path
