"""An in-memory stand-in for controller.k8s.kube.Kube: same verbs, same errors.

It keeps what the reconcile relies on: uids, resourceVersions and their
preconditions, finalizers holding a deletion, the status subresource, merge
patches, label selectors. A pod on a node is held by deletion until
``finish_pod`` (a kubelet's job); one never scheduled goes at once.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import uuid
from collections import Counter
from typing import Any

from controller.k8s import kube
from controller.k8s.objects import format_time

Obj = dict[str, Any]


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        if "!=" in term:  # absent, or another value
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
            continue
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class FakeKube:
    def __init__(self, namespace: str = "openrl",
                 now: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) -> None:
        self.namespace = namespace
        self.now = now
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.calls: Counter[tuple[str, str]] = Counter()
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        # The next call of (verb, plural) raises this: an API error, or any other failure.
        self.fail_next: dict[tuple[str, str], Exception] = {}

    # ----------------------------------------------------------- test helpers

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)

    def clock(self) -> dt.datetime:
        return self.now

    def key(self, res: kube.Resource, name: str, namespace: str | None = None) -> tuple:
        return (res.plural, (namespace or self.namespace) if res.namespaced else "", name)

    def put(self, res: kube.Resource, obj: Obj, namespace: str | None = None) -> Obj:
        """Store an object as the API server would have created it (no call counted)."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            meta.setdefault("namespace", namespace or self.namespace)
        meta.setdefault("uid", str(uuid.UUID(int=next(self._uid))))
        meta.setdefault("creationTimestamp", format_time(self.now))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[self.key(res, meta["name"], meta.get("namespace"))] = obj
        return copy.deepcopy(obj)

    def obj(self, res: kube.Resource, name: str) -> Obj | None:
        found = self.objects.get(self.key(res, name))
        return copy.deepcopy(found) if found else None

    def all(self, res: kube.Resource) -> list[Obj]:
        """Every stored object of a kind, in the order they were stored."""
        return [copy.deepcopy(o) for (plural, _, _), o in self.objects.items()
                if plural == res.plural]

    def edit(self, res: kube.Resource, name: str, patch: Obj) -> Obj:
        """Change an object behind the controller's back (a kubelet, DRA, a user)."""
        key = self.key(res, name)
        self.objects[key] = merge_patch(self.objects[key], patch)
        self.objects[key]["metadata"]["resourceVersion"] = str(next(self._rv))
        self._maybe_remove(key)
        return copy.deepcopy(self.objects.get(key))

    def allocate(self, claim: str, node: str) -> None:
        """DRA allocates the claim ``free_devices`` of the node."""
        count = self.objects[self.key(kube.CLAIMS, claim)]["spec"]["devices"]["requests"][0][
            "exactly"]["count"]
        self.edit(kube.CLAIMS, claim, {"status": {"allocation": {
            "devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": node,
                 "device": device} for device in self.free_devices(node, count)]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }}})

    def free_devices(self, node: str, count: int) -> list[str]:
        """The node's lowest-numbered devices no claim's allocation holds, as DRA picks."""
        taken = {r.get("device") for c in self.all(kube.CLAIMS)
                 for r in (((c.get("status") or {}).get("allocation") or {}).get("devices")
                           or {}).get("results") or [] if r.get("pool") == node}
        free = (f"gpu-{i}" for i in itertools.count() if f"gpu-{i}" not in taken)
        return list(itertools.islice(free, count))

    def run_pod(self, name: str, node: str, phase: str = "Running") -> None:
        self.edit(kube.PODS, name, {"spec": {"nodeName": node}, "status": {"phase": phase}})

    def finish_pod(self, name: str) -> None:
        """The kubelet confirms a deleting pod's containers are gone."""
        self.objects.pop(self.key(kube.PODS, name), None)

    # ------------------------------------------------------------------ verbs

    def _count(self, verb: str, res: kube.Resource) -> None:
        self.calls[(verb, res.plural)] += 1
        error = self.fail_next.pop((verb, res.plural), None)
        if error is not None:
            raise error

    def list(self, res: kube.Resource, *, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        return self.list_with_version(res, namespace=namespace, label_selector=label_selector)[0]

    def list_with_version(self, res: kube.Resource, *, namespace: str | None = None,
                          label_selector: str | None = None,
                          field_selector: str | None = None, page: int = 0,
                          keep: Any = None, decode: Any = None) -> tuple[list[Any], str]:
        self._count("list", res)
        ns = (namespace or self.namespace) if res.namespaced else ""
        items: list[Any] = [copy.deepcopy(o) for (plural, n, _), o in sorted(self.objects.items())
                            if plural == res.plural and n == ns
                            and _matches(o["metadata"].get("labels") or {}, label_selector)]
        version = str(next(self._rv))
        if decode is not None:  # as the server sends it: one page of JSON
            _, items = decode(json.dumps({"metadata": {"resourceVersion": version},
                                          "items": items}).encode())
        if keep is not None:
            items = [k for k in map(keep, items) if k is not None]
        return items, version

    def get(self, res: kube.Resource, name: str, *, namespace: str | None = None) -> Obj:
        self._count("get", res)
        found = self.objects.get(self.key(res, name, namespace))
        if found is None:
            raise kube.NotFound(404, "NotFound", f"{res.plural} {name} not found")
        return copy.deepcopy(found)

    def create(self, res: kube.Resource, body: Obj, *, namespace: str | None = None) -> Obj:
        self._count("create", res)
        stated = body["metadata"].get("namespace")
        if res.namespaced and stated and stated != (namespace or self.namespace):
            # As the server does: the object's namespace must be the request's.
            raise kube.KubeError(400, "BadRequest", "the namespace of the provided object "
                                 "does not match the namespace sent on the request")
        if self.key(res, body["metadata"]["name"], namespace) in self.objects:
            raise kube.AlreadyExists(409, "AlreadyExists", f"{body['metadata']['name']} exists")
        body = copy.deepcopy(body)
        for field in ("uid", "resourceVersion", "creationTimestamp"):
            body["metadata"].pop(field, None)
        return self.put(res, body, namespace)

    def patch(self, res: kube.Resource, name: str, body: Obj, *, namespace: str | None = None,
              subresource: str | None = None) -> Obj:
        self._count("patch", res)
        key = self.key(res, name, namespace)
        current = self.objects.get(key)
        if current is None:
            raise kube.NotFound(404, "NotFound", f"{name} not found")
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected and expected != current["metadata"]["resourceVersion"]:
            raise kube.Conflict(409, "Conflict", "the object has been modified")
        if subresource == "status":
            body = {"status": body.get("status")}
        else:
            body = {k: v for k, v in body.items() if k != "status"}
            body["metadata"] = {k: v for k, v in (body.get("metadata") or {}).items()
                                if k != "resourceVersion"}
        updated = merge_patch(current, body)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = updated
        self._maybe_remove(key)
        return copy.deepcopy(updated)

    def replace(self, res: kube.Resource, name: str, body: Obj, *,
                namespace: str | None = None) -> Obj:
        self._count("update", res)
        key = self.key(res, name, namespace)
        current = self.objects.get(key)
        if current is None:
            raise kube.NotFound(404, "NotFound", f"{name} not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise kube.Conflict(409, "Conflict", "the object has been modified")
        updated = copy.deepcopy(body)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = updated
        return copy.deepcopy(updated)

    def delete(self, res: kube.Resource, name: str, *, namespace: str | None = None,
               uid: str | None = None, resource_version: str | None = None) -> None:
        self._count("delete", res)
        key = self.key(res, name, namespace)
        current = self.objects.get(key)
        if current is None:
            raise kube.NotFound(404, "NotFound", f"{name} not found")
        meta = current["metadata"]
        if (uid and uid != meta["uid"]) or (resource_version
                                            and resource_version != meta["resourceVersion"]):
            raise kube.Conflict(409, "Conflict", "precondition failed")
        on_node = res is kube.PODS and (current.get("spec") or {}).get("nodeName")
        if meta.get("finalizers") or on_node:
            meta.setdefault("deletionTimestamp", format_time(self.now))
            meta["resourceVersion"] = str(next(self._rv))
        else:
            del self.objects[key]

    def _maybe_remove(self, key: tuple) -> None:
        meta = self.objects[key]["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and key[0] != "pods":
            del self.objects[key]

    def watch(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - unit tests poll
        raise NotImplementedError
