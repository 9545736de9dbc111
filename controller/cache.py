"""The controller's memory of the cluster: objects from list-then-watch, and assumptions.

Rules:

* One store per watched resource, fed by its watch (events) and by re-lists
  (at start, on gaining leadership, after a 410). Only the fields the
  controller reads are kept (``strip``): a pod is not kept whole.
* An event never moves an object back to an older resourceVersion, and a
  stale event never brings back an object already seen deleted (a tombstone
  remembers the version it went at until the next re-list).
* Assume, then write: the objects a decision creates (its claim, its pod) are
  put in the store at once, before any request returns, so the next decision
  already sees the seat. The server's answer replaces an assumption
  (``confirm``); a failed write drops it (``forget``), restoring what was
  there before. While assumed, an object ignores events from before the
  assumption (at or below the newest version the store had seen).
* Every change to slices, nodes, claims, workers and pods is handed to the
  ``FleetCache``, which keeps placement's fleet current; ``view`` is what a
  reconcile reads of it (a ``fleet_rules.FleetReading``, like the plain
  reading's). ``lock`` serializes the watch threads, the write pool's answers
  and the decision; read ``view`` under it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller import kube, naming
from controller.fleet_cache import FleetCache
from controller.fleet_rules import FleetReading
from controller.objects import Obj, meta, name_of
from controller.privileges import LABEL_POD_TEMPLATE, unmarked_refusal

__all__ = ["Cache", "strip"]

KINDS = (kube.WORKERS, kube.PODS, kube.CLAIMS, kube.SLICES, kube.NODES, kube.CONFIGMAPS)


def _rv(obj: Obj | None) -> int | None:
    if obj is None:
        return None
    try:
        return int(meta(obj).get("resourceVersion") or "")
    except ValueError:
        return None


class Store:
    """Objects of one resource by name."""

    def __init__(self) -> None:
        self.objs: dict[str, Obj] = {}
        self.assumed: dict[str, tuple[Obj | None, int]] = {}  # name -> (before, floor)
        self.gone: dict[str, int] = {}  # name -> version it was deleted at
        self.newest = 0  # the newest resourceVersion seen from the server
        self.listed_at = 0  # the version of the last list

    def event(self, kind: str, obj: Obj) -> tuple[Obj | None, Obj | None] | None:
        """Apply a watch event; (old, new) if it changed anything, else None."""
        name, rv = name_of(obj), _rv(obj)
        if rv is not None:
            self.newest = max(self.newest, rv)
        if name in self.assumed:
            if rv is None or rv <= self.assumed[name][1]:
                return None  # from before the assumption
            del self.assumed[name]
        else:
            current_rv = _rv(self.objs.get(name))
            if rv is not None and current_rv is not None and (
                    rv < current_rv or (rv == current_rv and kind != "DELETED")):
                return None  # stale or duplicate
            if name not in self.objs and rv is not None and rv <= self.gone.get(
                    name, self.listed_at):
                return None  # from before a deletion we saw, or before the last list
        old = self.objs.get(name)
        if kind == "DELETED":
            if rv is not None:
                self.gone[name] = rv
            if old is None:
                return None
            del self.objs[name]
            return old, None
        self.gone.pop(name, None)
        self.objs[name] = obj
        return old, obj

    def relist(self, items: list[Obj], version: str = "",
               ) -> list[tuple[str, Obj | None, Obj | None]]:
        """Replace everything with a list's answer (at ``version``); assumptions in flight stay."""
        listed = {name_of(o): o for o in items}
        for o in items:
            rv = _rv(o)
            if rv is not None:
                self.newest = max(self.newest, rv)
        self.listed_at = _rv({"metadata": {"resourceVersion": version}}) or self.newest
        self.newest = max(self.newest, self.listed_at)
        changes: list[tuple[str, Obj | None, Obj | None]] = []
        self.gone.clear()
        for name in sorted(set(self.objs) - set(listed)):
            if name in self.assumed:
                continue
            changes.append((name, self.objs.pop(name), None))
        for name, obj in listed.items():
            if name in self.assumed:
                if (_rv(obj) or 0) <= self.assumed[name][1]:
                    continue
                del self.assumed[name]
            old = self.objs.get(name)
            if old is not None and _rv(old) is not None and _rv(old) == _rv(obj):
                continue
            self.objs[name] = obj
            changes.append((name, old, obj))
        return changes

    def assume(self, obj: Obj) -> tuple[Obj | None, Obj | None]:
        name = name_of(obj)
        old = self.objs.get(name)
        if name not in self.assumed:
            self.assumed[name] = (old, self.newest)
        self.objs[name] = obj
        return old, obj

    def confirm(self, obj: Obj) -> tuple[Obj | None, Obj | None] | None:
        """The server's answer to our write: it replaces the assumption (if still ours)."""
        self.assumed.pop(name_of(obj), None)
        return self.event("MODIFIED", obj)

    def forget(self, name: str) -> tuple[Obj | None, Obj | None] | None:
        if name not in self.assumed:
            return None
        before, _ = self.assumed.pop(name)
        old = self.objs.pop(name, None)
        if before is not None:
            self.objs[name] = before
        return old, before


class Cache:
    def __init__(self, driver: str) -> None:
        self.lock = threading.RLock()
        self.fleet = FleetCache(driver)
        self.stores = {res.plural: Store() for res in KINDS}
        self._feed: dict[str, Callable[[str, Obj | None], None]] = {
            kube.SLICES.plural: self.fleet.slice_changed,
            kube.NODES.plural: self.fleet.node_changed,
            kube.CLAIMS.plural: self.fleet.claim_changed,
            kube.WORKERS.plural: self.fleet.worker_changed,
            kube.PODS.plural: self.fleet.pod_changed,
        }

    # ---------------------------------------------------------------- reading

    @property
    def view(self) -> FleetReading:
        """The fleet as read from what the cache holds (current; read under ``lock``)."""
        return self.fleet.view

    def get(self, res: kube.Resource, name: str) -> Obj | None:
        with self.lock:
            return self.stores[res.plural].objs.get(name)

    def items(self, res: kube.Resource) -> list[Obj]:
        with self.lock:
            return list(self.stores[res.plural].objs.values())

    # ---------------------------------------------------------------- changes

    # ``stripped``: the caller has stripped the objects already (the watches do, and
    # share them with their own bookkeeping rather than keep a second copy).

    def event(self, res: kube.Resource, kind: str, obj: Obj, *, stripped: bool = False) -> bool:
        with self.lock:
            obj = obj if stripped else strip(res, obj)
            return self._apply(res, self.stores[res.plural].event(kind, obj))

    def relist(self, res: kube.Resource, items: list[Obj], version: str = "", *,
               stripped: bool = False) -> None:
        with self.lock:
            items = items if stripped else [strip(res, o) for o in items]
            changes = self.stores[res.plural].relist(items, version)
            for name, _, new in changes:
                self._notify(res, name, new)

    def assume(self, res: kube.Resource, obj: Obj) -> None:
        with self.lock:
            self._apply(res, self.stores[res.plural].assume(strip(res, obj)))

    def confirm(self, res: kube.Resource, obj: Obj) -> None:
        with self.lock:
            self._apply(res, self.stores[res.plural].confirm(strip(res, obj)))

    def forget(self, res: kube.Resource, name: str) -> None:
        with self.lock:
            change = self.stores[res.plural].forget(name)
            if change is not None:
                self._notify(res, name, change[1])

    def _apply(self, res: kube.Resource, change: tuple[Obj | None, Obj | None] | None) -> bool:
        if change is None:
            return False
        old, new = change
        self._notify(res, name_of(new if new is not None else old or {}), new)
        return True

    def _notify(self, res: kube.Resource, name: str, new: Obj | None) -> None:
        feed = self._feed.get(res.plural)
        if feed is not None:
            feed(name, new)


# ------------------------------------------------------------------ stripping

_META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
         "deletionTimestamp")


def _meta(obj: Obj, *, labels: Callable[[str], bool] | None = None,
          annotations: Callable[[str], bool] | None = None, **extra: bool) -> Obj:
    m = meta(obj)
    out: Obj = {k: m[k] for k in _META if k in m}
    if labels is not None and m.get("labels"):
        out["labels"] = {k: v for k, v in m["labels"].items() if labels(k)}
    if annotations is not None and m.get("annotations"):
        out["annotations"] = {k: v for k, v in m["annotations"].items() if annotations(k)}
    for key in extra:
        if key in m:
            out[key] = m[key]
    return out


def _pod(obj: Obj) -> Obj:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kept: Obj = {k: status[k] for k in ("phase", "reason", "message") if k in status}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    if conditions:
        kept["conditions"] = conditions
    terminated = [{"name": c.get("name"), "state": {"terminated": c["state"]["terminated"]}}
                  for c in status.get("containerStatuses") or []
                  if (c.get("state") or {}).get("terminated")]
    if terminated:
        kept["containerStatuses"] = terminated
    return {
        "metadata": _meta(obj, labels=lambda k: k.startswith("openrl.io/"),
                          annotations=lambda k: k.startswith("openrl.io/"),
                          ownerReferences=True),
        "spec": {k: spec[k] for k in ("nodeName", "resourceClaims") if k in spec},
        "status": kept,
    }


def _claim(obj: Obj) -> Obj:
    status = obj.get("status") or {}
    kept: Obj = {}
    allocation = status.get("allocation")
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        kept["allocation"] = {
            "nodeSelector": allocation.get("nodeSelector"),
            "devices": {"results": [{"pool": r.get("pool")} for r in results]},
        }
    if status.get("reservedFor"):
        kept["reservedFor"] = status["reservedFor"]
    requests = ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []
    return {
        "metadata": _meta(obj, labels=lambda _k: True, annotations=lambda _k: True),
        "spec": {"devices": {"requests": [
            {"name": r.get("name"), "exactly": {"count": (r.get("exactly") or r).get("count")}}
            for r in requests]}},
        "status": kept,
    }


def _slice(obj: Obj) -> Obj:
    spec = obj.get("spec") or {}
    devices = []
    for device in spec.get("devices") or []:
        basic = device.get("basic") or {}
        capacity = device.get("capacity") or basic.get("capacity") or {}
        attributes = device.get("attributes") or basic.get("attributes") or {}
        kept: Obj = {"name": device.get("name")}
        if capacity:
            kept["capacity"] = {k: v for k, v in capacity.items() if k.endswith("memory")}
        if attributes.get("productName"):
            kept["attributes"] = {"productName": attributes["productName"]}
        devices.append(kept)
    return {"metadata": _meta(obj),
            "spec": {"driver": spec.get("driver"), "nodeName": spec.get("nodeName"),
                     "pool": spec.get("pool"), "devices": devices}}


def _node(obj: Obj) -> Obj:
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    return {"metadata": _meta(obj, labels=lambda k: k.startswith("openrl.io/")),
            "status": {"allocatable": {"memory": allocatable["memory"]}}
            if "memory" in allocatable else {}}


def _worker(obj: Obj) -> Obj:
    return {"apiVersion": obj.get("apiVersion", f"{naming.GROUP}/v1alpha1"),
            "kind": obj.get("kind", naming.KIND),
            "metadata": _meta(obj, finalizers=True),
            "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}


def _config_map(obj: Obj) -> Obj:
    # Only a marked template's text is ever read; any other ConfigMap is kept as a name
    # (so a worker naming it is told why it is refused), never its data.
    kept = _meta(obj, labels=lambda k: k == LABEL_POD_TEMPLATE)
    marked = unmarked_refusal(obj, "") is None
    return {"metadata": kept, "data": (obj.get("data") or {}) if marked else {}}


_STRIP: dict[str, Callable[[Obj], Obj]] = {
    kube.PODS.plural: _pod, kube.CLAIMS.plural: _claim, kube.SLICES.plural: _slice,
    kube.NODES.plural: _node, kube.WORKERS.plural: _worker,
    kube.CONFIGMAPS.plural: _config_map,
}


def strip(res: kube.Resource, obj: Obj) -> Obj:
    """Only what the controller reads of ``obj`` (the shape of the API object)."""
    stripper = _STRIP.get(res.plural)
    return stripper(obj) if stripper is not None else obj
