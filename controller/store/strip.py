"""What the controller reads of each object: ``strip``, the definition of what is kept.

Rules:

* ``strip`` says what is kept: only the fields the controller reads, in the
  API object's own shape (a pod is not kept whole). It is the definition;
  everything else must agree with it: the cache's records hold what it
  returns, and the page decoder reads only what it reads (``records``).
* Each resource has its own stripper; a resource with none is kept whole.
"""

from __future__ import annotations

from collections.abc import Callable

from controller.fleet.health import kept_taint
from controller.k8s import kube, naming
from controller.k8s.objects import Obj, meta
from controller.reconcile.privileges import LABEL_POD_TEMPLATE, unmarked_refusal

__all__ = ["META", "strip"]

# The metadata fields kept of every object (the records' preset dictionary spells them too).
META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
        "deletionTimestamp")


def _meta(obj: Obj, *, labels: Callable[[str], bool] | None = None,
          annotations: Callable[[str], bool] | None = None, **extra: bool) -> Obj:
    m = meta(obj)
    out: Obj = {k: m[k] for k in META if k in m}
    if labels is not None and m.get("labels"):
        out["labels"] = {k: v for k, v in m["labels"].items() if labels(k)}
    if annotations is not None and m.get("annotations"):
        out["annotations"] = {k: v for k, v in m["annotations"].items() if annotations(k)}
    for key in extra:
        if key in m:
            out[key] = m[key]
    return out


def _ours(key: str) -> bool:
    return key.startswith("openrl.io/")


def _any(_key: str) -> bool:
    return True


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
        "metadata": _meta(obj, labels=_ours, annotations=_ours, ownerReferences=True),
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
            # Which devices, not only how many: two of our claims given one device
            # is a conflict the controller ends (fleet_rules.device_conflict).
            "devices": {"results": [{k: r[k] for k in ("driver", "pool", "device") if k in r}
                                    for r in results]},
        }
    if status.get("reservedFor"):
        kept["reservedFor"] = status["reservedFor"]
    requests = ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []
    return {
        "metadata": _meta(obj, labels=_any, annotations=_any),
        "spec": {"devices": {"requests": [
            {"name": r.get("name"), "exactly": {"count": (r.get("exactly") or r).get("count")}}
            for r in requests]}},
        "status": kept,
    }


def _foreign_claim(obj: Obj) -> Obj:
    # A claim not ours, of any namespace: only the devices its allocation holds (their
    # counters are the slices' to say). Named namespace/name: claims of every namespace
    # share a store; its namespace and managed mark are kept for the watch's filter.
    m = meta(obj)
    name, namespace = str(m.get("name", "")), m.get("namespace", "")
    kept: Obj = {"name": name if "/" in name else f"{namespace}/{name}"}
    for key in ("namespace", "uid", "resourceVersion"):
        if key in m:
            kept[key] = m[key]
    if (m.get("labels") or {}).get(naming.LABEL_MANAGED) == "true":
        kept["labels"] = {naming.LABEL_MANAGED: "true"}
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = [{k: r[k] for k in ("driver", "pool", "device") if k in r}
               for r in (allocation.get("devices") or {}).get("results") or []]
    out: Obj = {"metadata": kept}
    if results:
        out["status"] = {"allocation": {"devices": {"results": results}}}
    return out


# What a device's reading needs: its capacity and attributes whole (the class's
# selectors may read any of them), its taints, the counters it consumes.
_DEVICE_FIELDS = ("taints", "consumesCounters", "allowMultipleAllocations")


def _slice(obj: Obj) -> Obj:
    spec = obj.get("spec") or {}
    devices = []
    for device in spec.get("devices") or []:
        basic = device.get("basic") or {}
        capacity = device.get("capacity") or basic.get("capacity") or {}
        attributes = device.get("attributes") or basic.get("attributes") or {}
        kept: Obj = {"name": device.get("name")}
        if capacity:
            kept["capacity"] = capacity
        if attributes:
            kept["attributes"] = attributes
        for key in _DEVICE_FIELDS:
            value = device.get(key) if key in device else basic.get(key)
            if value:
                kept[key] = value
        devices.append(kept)
    out: Obj = {"metadata": _meta(obj),
                "spec": {"driver": spec.get("driver"), "nodeName": spec.get("nodeName"),
                         "pool": spec.get("pool"), "devices": devices}}
    if spec.get("sharedCounters"):
        out["spec"]["sharedCounters"] = spec["sharedCounters"]
    return out


def _node(obj: Obj) -> Obj:
    status = obj.get("status") or {}
    allocatable = status.get("allocatable") or {}
    kept = {k: allocatable[k] for k in ("memory", "pods") if k in allocatable}
    out: Obj = {"metadata": _meta(obj, labels=_ours),
                "status": {"allocatable": kept} if kept else {}}
    # Its health and whether it is closing (controller.fleet.health): the Ready condition without
    # its heartbeat, a cordon, the node controller's and the operator's
    # node.kubernetes.io/ taints and a node autoscaler's removal taints.
    ready = [{k: c[k] for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
             for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready:
        out["status"]["conditions"] = ready
    spec = obj.get("spec") or {}
    taints = [{k: t[k] for k in ("key", "effect") if k in t}
              for t in spec.get("taints") or [] if kept_taint(t.get("key", ""))]
    kept_spec: Obj = {"taints": taints} if taints else {}
    if spec.get("unschedulable"):
        kept_spec["unschedulable"] = True
    if kept_spec:
        out["spec"] = kept_spec
    return out


def _node_pod(obj: Obj) -> Obj:
    # Only what a pod slot and its memory request need. Named namespace/name: pods of
    # every namespace share a store.
    m = meta(obj)
    kept: Obj = {"name": f"{m.get('namespace', '')}/{m.get('name', '')}"}
    if "resourceVersion" in m:
        kept["resourceVersion"] = m["resourceVersion"]
    if (m.get("labels") or {}).get(naming.LABEL_MANAGED) == "true":
        kept["labels"] = {naming.LABEL_MANAGED: "true"}
    out: Obj = {"metadata": kept}
    spec = obj.get("spec") or {}
    node = spec.get("nodeName")
    kept_spec: Obj = {"nodeName": node} if node else {}
    # What its memory request needs (controller.fleet.requests): each container's
    # requested memory, each init container's too with its restartPolicy (a sidecar's
    # counts apart), in order, and the pod's overhead. Nothing of one that asks none.
    containers = [_asks(c) for c in _listed(spec.get("containers")) if _memory_of(c)]
    inits = [_asks(c) for c in _listed(spec.get("initContainers")) if _memory_of(c)]
    overhead = _field(spec.get("overhead"), "memory")
    if containers:
        kept_spec["containers"] = containers
    if inits:
        kept_spec["initContainers"] = inits
    if overhead is not None:
        kept_spec["overhead"] = {"memory": overhead}
    if kept_spec:
        out["spec"] = kept_spec
    phase = (obj.get("status") or {}).get("phase")
    if phase:
        out["status"] = {"phase": phase}
    return out


def _listed(value: object) -> list[Obj]:
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _field(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, dict) else None


def _memory_of(container: Obj) -> object:
    return _field(_field(container.get("resources"), "requests"), "memory")


def _asks(container: Obj) -> Obj:
    kept: Obj = {}
    memory = _memory_of(container)
    if memory is not None:
        kept["resources"] = {"requests": {"memory": memory}}
    if container.get("restartPolicy"):
        kept["restartPolicy"] = container["restartPolicy"]
    return kept


def _kueue(key: str) -> bool:
    return key.startswith("kueue.x-k8s.io/")


def _worker(obj: Obj) -> Obj:
    # Of its labels, only Kueue's (its queue, its priority class: admission.py).
    return {"apiVersion": obj.get("apiVersion", f"{naming.GROUP}/v1alpha1"),
            "kind": obj.get("kind", naming.KIND),
            "metadata": _meta(obj, labels=_kueue, finalizers=True),
            "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}


def _config_map(obj: Obj) -> Obj:
    # Only a marked template's text is ever read; any other ConfigMap is kept as a name
    # (so a worker naming it is told why it is refused), never its data.
    kept = _meta(obj, labels=lambda k: k == LABEL_POD_TEMPLATE)
    marked = unmarked_refusal(obj, "") is None
    return {"metadata": kept, "data": (obj.get("data") or {}) if marked else {}}


def _workload(obj: Obj) -> Obj:
    # Its conditions whole: handing its quota back writes the list again (a merge patch
    # replaces a list), and must not lose what Kueue put in them.
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kept: Obj = {"metadata": _meta(obj, ownerReferences=True),
                 "spec": {k: spec[k] for k in ("queueName",) if k in spec}}
    cluster_queue = (status.get("admission") or {}).get("clusterQueue")
    kept["status"] = {
        **({"conditions": status["conditions"]} if status.get("conditions") else {}),
        **({"admission": {"clusterQueue": cluster_queue}} if cluster_queue else {})}
    return kept


def _priority_class(obj: Obj) -> Obj:
    return {"metadata": _meta(obj), "value": obj.get("value")}


_STRIP: dict[str, Callable[[Obj], Obj]] = {
    kube.PODS.key: _pod, kube.CLAIMS.key: _claim, kube.SLICES.key: _slice,
    kube.NODES.key: _node, kube.WORKERS.key: _worker,
    kube.CONFIGMAPS.key: _config_map, kube.NODE_PODS.key: _node_pod,
    kube.OTHER_CLAIMS.key: _foreign_claim, kube.WORKLOADS.key: _workload,
    kube.PRIORITY_CLASSES.key: _priority_class,
}


def strip(res: kube.Resource, obj: Obj) -> Obj:
    """Only what the controller reads of ``obj`` (the shape of the API object)."""
    stripper = _STRIP.get(res.key)
    return stripper(obj) if stripper is not None else obj
