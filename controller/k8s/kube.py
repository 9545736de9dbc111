"""Every Kubernetes API call the controller makes, and nothing else.

Rules:

* One small surface (list, get, create, patch, replace, delete, watch) over a
  table of resources; objects go in and come out as plain JSON dicts. The
  official client does the transport (kubeconfig or in-cluster auth, TLS,
  connection pooling); we skip its model classes, which the controller would
  only turn back into dicts.
* Failures become our own error types: ``NotFound``, ``AlreadyExists``,
  ``Conflict``, ``Forbidden``, ``Gone``, ``Invalid``, else ``KubeError`` (also
  for transport errors); a kubeconfig that cannot be used is ``NoConfig``.
  Nothing above this module sees the client library's exceptions.
* Every request is counted (``calls``) and, when a hook is given, reported to
  it, so API requests per placed worker can be measured.
* Every request has a timeout: a hung connection must never hang the loop.
* Status writes are JSON merge patches on the status subresource; metadata
  writes carry the object's resourceVersion so a stale read fails with
  ``Conflict`` instead of overwriting a newer object.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import attrs
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]
# Module-level aliases: inside Kube, "list" names the method, not the builtin.
Objs = list[Obj]
Items = list[Any]
_T = TypeVar("_T")
Query = list[tuple[str, str]]
# A list page's body -> (the list's metadata, its objects in the decoder's own form).
PageDecode = Callable[[bytes], tuple[Obj, Items]]
RequestHook = Callable[[str, str, int, float], None]  # verb, resource, HTTP status (0 = no
# answer), seconds until the response headers (a watch: until it opened)

REQUEST_TIMEOUT = 30.0
WATCH_TIMEOUT = 290


@attrs.frozen
class Resource:
    group: str
    version: str
    plural: str
    namespaced: bool
    # What the cache files it under: its plural, unless one kind is read two ways
    # (the managed pods, and every namespace's for their nodes' pod slots).
    key: str = attrs.field(default=attrs.Factory(lambda self: self.plural, takes_self=True))

    def path(self, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            base += f"/namespaces/{quote(namespace or '', safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


WORKERS = Resource("openrl.io", "v1alpha1", "openrlworkers", True)
PODS = Resource("", "v1", "pods", True)
# Every namespace's pods, read only for the pod slots they take on a node (cache.py keeps
# of each no more than its node, phase and whether it is a managed worker).
NODE_PODS = Resource("", "v1", "pods", False, key="node-pods")
CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", True)
SLICES = Resource("resource.k8s.io", "v1", "resourceslices", False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", False)
# Every namespace's claims, for the devices and counters claims not ours hold.
OTHER_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", False, key="other-claims")
NODES = Resource("", "v1", "nodes", False)
CONFIGMAPS = Resource("", "v1", "configmaps", True)
EVENTS = Resource("events.k8s.io", "v1", "events", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", True)
# Kueue's, read and written only where team quotas are on (settings.kueue).
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", True)
PRIORITY_CLASSES = Resource("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", False)


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    pass


class AlreadyExists(KubeError):
    pass


class Conflict(KubeError):
    pass


class Forbidden(KubeError):
    pass


class Gone(KubeError):
    """A watch's resourceVersion is too old: list again."""


class Invalid(KubeError):
    pass


class NoConfig(KubeError):
    """No usable kubeconfig (or in-cluster account): the message names which and why."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "NoConfig", message)


def _error(status: int, body: str | bytes | None) -> KubeError:
    reason, message = "", ""
    try:
        payload = json.loads(body or b"{}")
        reason, message = str(payload.get("reason") or ""), str(payload.get("message") or "")
    except (ValueError, AttributeError):
        message = (body.decode(errors="replace") if isinstance(body, bytes) else str(body))[:500]
    kind: type[KubeError] = {404: NotFound, 403: Forbidden, 410: Gone, 422: Invalid}.get(
        status, KubeError)
    if status == 409:
        kind = AlreadyExists if reason == "AlreadyExists" else Conflict
    return kind(status, reason, message or reason)


def load_api_client(kubeconfig: str | None, context: str | None = None) -> client.ApiClient:
    """``kubeconfig`` if given, else ``$KUBECONFIG``, else in-cluster, else ``~/.kube/config``.

    ``context`` picks a kubeconfig context other than the current one (in-cluster
    has none, so naming one means a kubeconfig). ``NoConfig`` when none can be used.
    """
    try:
        return _load_api_client(kubeconfig, context)
    except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise NoConfig(str(exc)) from exc


def _load_api_client(kubeconfig: str | None, context: str | None) -> client.ApiClient:
    configuration = client.Configuration()
    # Six watches, the write pool (16 plans in flight), the loop's own deletions and the
    # leader's renewals share the pool; a full pool opens a new connection per request.
    configuration.connection_pool_maxsize = 32
    # The client's own word for a missing file is "No configuration found": say which.
    listed = [path for path in os.environ.get("KUBECONFIG", "").split(os.pathsep) if path]
    home = os.path.expanduser("~/.kube/config")
    if kubeconfig:
        if not os.path.exists(kubeconfig):
            raise NoConfig(f"kubeconfig {kubeconfig}: no such file")
        config.load_kube_config(config_file=kubeconfig, context=context,  # type: ignore[no-untyped-call]
                                client_configuration=configuration)
        return client.ApiClient(configuration)
    if not listed and not context:
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration)
            return client.ApiClient(configuration)
        except config.ConfigException:
            if not os.path.exists(home):
                raise NoConfig(
                    f"not running in a cluster, and no kubeconfig at {home} (name one with "
                    "--kubeconfig or KUBECONFIG)") from None
    if listed and not any(os.path.exists(path) for path in listed):
        raise NoConfig(f"KUBECONFIG={os.pathsep.join(listed)}: no such file")
    if not listed and not os.path.exists(home):
        raise NoConfig(f"context {context}: no kubeconfig at {home} to find it in")
    config.load_kube_config(context=context,  # type: ignore[no-untyped-call]
                            client_configuration=configuration)
    return client.ApiClient(configuration)


def context_namespace(kubeconfig: str | None, context: str | None = None) -> str | None:
    """The namespace a kubeconfig context names (kubectl's default for ``-n``), if any.

    None when there is no kubeconfig to read or the context names none; an
    unreadable kubeconfig is left for ``load_api_client`` to report.
    """
    try:
        contexts, current = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig)
    except (config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError):
        return None
    chosen = next((c for c in contexts or () if c.get("name") == context), None) \
        if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


class Kube:
    """The controller's API surface, bound to one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str,
                 hook: RequestHook | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.hook = hook
        self.calls: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ verbs

    def list(self, res: Resource, *, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> Objs:
        return self.list_with_version(res, namespace=namespace, label_selector=label_selector,
                                      field_selector=field_selector)[0]

    def list_with_version(self, res: Resource, *, namespace: str | None = None,
                          label_selector: str | None = None,
                          field_selector: str | None = None, page: int = 0,
                          keep: Callable[[Any], Any | None] | None = None,
                          decode: PageDecode | None = None) -> tuple[Items, str]:
        """Every object and the list's resourceVersion.

        With ``page``, the list comes in pages of that many objects (one request
        each) and ``keep`` reduces each object as its page arrives (None drops it),
        so a large list never sits in memory whole; an expired continuation is
        ``Gone``. With ``decode``, each page's body goes to it as it came (bytes)
        and its answer, (the list's metadata, the page's objects), is used instead
        of the parsed JSON: a decoder can build only what it keeps.
        """
        query = _selectors(label_selector, field_selector)
        path = res.path(self._ns(res, namespace))
        items: Items = []
        version, token = "", ""
        while True:
            paging = [("limit", str(page))] if page else []
            if token:
                paging.append(("continue", token))
            if decode is not None:
                metadata, objs = self._request_decoded("list", res, "GET", path,
                                                       query + paging, decode)
            else:
                result = self._request("list", res, "GET", path, query + paging)
                metadata, objs = result.get("metadata") or {}, result.get("items") or []
                del result
            version = version or str(metadata.get("resourceVersion", ""))
            for obj in objs:
                kept = keep(obj) if keep is not None else obj
                if kept is not None:
                    items.append(kept)
            del objs
            token = str(metadata.get("continue") or "")
            if not page or not token:
                return items, version

    def serves(self, res: Resource) -> bool:
        """Whether the API server serves ``res`` (its group and version list it): a custom
        resource whose definition is not installed is not served."""
        base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        try:
            listed = self._request("discover", res, "GET", base)
        except NotFound:
            return False
        return any(r.get("name") == res.plural for r in listed.get("resources") or []
                   if isinstance(r, dict))

    def get(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj:
        return self._request("get", res, "GET", res.path(self._ns(res, namespace), name))

    def create(self, res: Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        return self._request("create", res, "POST", res.path(self._ns(res, namespace)),
                             body=body)

    def patch(self, res: Resource, name: str, body: Obj, *, namespace: str | None = None,
              subresource: str | None = None) -> Obj:
        return self._request("patch", res, "PATCH",
                             res.path(self._ns(res, namespace), name, subresource),
                             body=body, content_type="application/merge-patch+json",
                             subresource=subresource)

    def replace(self, res: Resource, name: str, body: Obj, *,
                namespace: str | None = None) -> Obj:
        return self._request("update", res, "PUT", res.path(self._ns(res, namespace), name),
                             body=body)

    def delete(self, res: Resource, name: str, *, namespace: str | None = None,
               uid: str | None = None, resource_version: str | None = None) -> None:
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions",
                     "propagationPolicy": "Background"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version))
                         if v}
        if preconditions:
            body["preconditions"] = preconditions
        self._request("delete", res, "DELETE", res.path(self._ns(res, namespace), name),
                      body=body)

    def watch(self, res: Resource, resource_version: str, *, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int = WATCH_TIMEOUT) -> Iterator[tuple[str, Obj]]:
        """(type, object) events from ``resource_version`` on; ``Gone`` when it is too old."""
        query = [*_selectors(label_selector, field_selector), ("watch", "true"),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        response = self._send("watch", res, "GET", res.path(self._ns(res, namespace)), query,
                              timeout=(10.0, timeout_seconds + 30.0))
        raw = response.response
        try:
            for line in _lines(raw):
                event = json.loads(line)
                kind, obj = event.get("type", ""), event.get("object") or {}
                if kind == "ERROR":
                    raise _error(int(obj.get("code") or 0), json.dumps(obj))
                yield kind, obj
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "WatchBroken", f"watch {res.plural}: {exc}") from exc
        finally:
            raw.release_conn()

    # -------------------------------------------------------------- transport

    def _ns(self, res: Resource, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if res.namespaced else None

    def _request(self, verb: str, res: Resource, method: str, path: str,
                 query: Query | None = None, body: Obj | None = None,
                 content_type: str = "application/json", subresource: str | None = None) -> Obj:
        return self._request_decoded(verb, res, method, path, query, body=body,
                                     content_type=content_type, subresource=subresource,
                                     decode=_json_object)

    def _request_decoded(self, verb: str, res: Resource, method: str, path: str,
                         query: Query | None, decode: Callable[[bytes], _T], *,
                         body: Obj | None = None, content_type: str = "application/json",
                         subresource: str | None = None) -> _T:
        response = self._send(verb, res, method, path, query or [], body=body,
                              content_type=content_type, timeout=REQUEST_TIMEOUT, read=True,
                              subresource=subresource)
        try:
            return decode(response.data or b"")
        except ValueError as exc:
            raise KubeError(response.status, "BadResponse", f"{verb} {res.plural}: {exc}") from exc

    def _send(self, verb: str, res: Resource, method: str, path: str,
              query: Query, *, body: Obj | None = None,
              content_type: str = "application/json",
              timeout: float | tuple[float, float] = REQUEST_TIMEOUT, read: bool = False,
              subresource: str | None = None) -> Any:
        """Send one request; with ``read`` the body is read too (and timed with it)."""
        # Named as RBAC names it (``openrlworkers/status``), so a refusal can be matched.
        plural = f"{res.plural}/{subresource}" if subresource else res.plural
        with self._lock:
            self.calls[(verb, plural)] += 1
        headers = {"Accept": "application/json", "Content-Type": content_type}
        status = 0
        started = time.monotonic()
        try:
            method, url, headers, payload, _ = self.api.param_serialize(
                method=method, resource_path=path, query_params=query or None,
                header_params=headers, body=body, auth_settings=["BearerToken"])
            response = self.api.call_api(method, url, header_params=headers, body=payload,
                                         _request_timeout=timeout)
            status = response.status
            if not 200 <= status <= 299:
                raise _error(status, response.read())  # type: ignore[no-untyped-call]
            if read:
                response.read()  # type: ignore[no-untyped-call]
            return response
        except ApiException as exc:
            status = exc.status or 0
            raise _error(status, exc.body) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", f"{verb} {res.plural}: {exc}") from exc
        finally:
            if self.hook is not None:
                self.hook(verb, plural, status, time.monotonic() - started)


def _json_object(data: bytes) -> Obj:
    answer: Obj = json.loads(data) if data else {}
    return answer


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _lines(raw: Any) -> Iterator[bytes]:
    buffer = b""
    for chunk in raw.stream(amt=None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer
