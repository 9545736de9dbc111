"""What the cache keeps of each object: the fields read, as compact records.

Rules:

* ``strip`` says what is kept: only the fields the controller reads, in the
  API object's own shape (a pod is not kept whole). It is the definition;
  everything else here must agree with it.
* The cache holds a stripped object as a record (``to_record``): its name,
  its resourceVersion and the stripped object packed into one bytes object
  (MessagePack, deflated against a preset dictionary of the field names and
  our own label keys, so a small record does not spell them out again).
  ``to_obj`` gives the stripped object back, equal to what ``strip``
  returned: readers never see a record.
* A list page is decoded straight into records (``PageDecoder``): the
  decoder knows the fields ``strip`` reads and skips the rest of each object
  (managed fields, container specs, images) without building it, then strips
  what it kept. A page it cannot read so (a field of an unexpected type) is
  read in full and stripped as a watch event is: never refused for speed's sake.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from controller import kube, naming
from controller.nodes import kept_taint
from controller.objects import Obj, meta
from controller.privileges import LABEL_POD_TEMPLATE, unmarked_refusal

__all__ = ["PageDecoder", "Record", "strip", "to_obj", "to_record"]

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
            "devices": {"results": [{"pool": r.get("pool")} for r in results]},
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
    # Its health and whether it is closing (controller.nodes): the Ready condition without
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
    # Only what a pod slot needs. Named namespace/name: pods of every namespace share a store.
    m = meta(obj)
    kept: Obj = {"name": f"{m.get('namespace', '')}/{m.get('name', '')}"}
    if "resourceVersion" in m:
        kept["resourceVersion"] = m["resourceVersion"]
    if (m.get("labels") or {}).get(naming.LABEL_MANAGED) == "true":
        kept["labels"] = {naming.LABEL_MANAGED: "true"}
    out: Obj = {"metadata": kept}
    node = (obj.get("spec") or {}).get("nodeName")
    if node:
        out["spec"] = {"nodeName": node}
    phase = (obj.get("status") or {}).get("phase")
    if phase:
        out["status"] = {"phase": phase}
    return out


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
    kube.PODS.key: _pod, kube.CLAIMS.key: _claim, kube.SLICES.key: _slice,
    kube.NODES.key: _node, kube.WORKERS.key: _worker,
    kube.CONFIGMAPS.key: _config_map, kube.NODE_PODS.key: _node_pod,
    kube.OTHER_CLAIMS.key: _foreign_claim,
}


def strip(res: kube.Resource, obj: Obj) -> Obj:
    """Only what the controller reads of ``obj`` (the shape of the API object)."""
    stripper = _STRIP.get(res.key)
    return stripper(obj) if stripper is not None else obj


# ------------------------------------------------------------------- records
#
# A record is (name, resourceVersion as a number or None, the stripped object packed
# as MessagePack and deflated): one small struct and one bytes object, where the stripped
# object as Python mappings would be a dozen of each and a string object per value.
# Deflating alone (zlib's fastest level) takes a stripped pod from about 670 bytes to
# 380: a single record is too short to repeat its own field names. Deflating against a
# preset dictionary (``_VOCABULARY``: the shapes ``strip`` keeps, their field names, our
# label and annotation keys; no values of any fleet) lets every record refer to those
# instead, and a stripped pod takes under 200 bytes. Unpacking is two passes in C, a few
# microseconds.


class Record(Struct, frozen=True, gc=False):
    # Not tracked by the cyclic collector (it holds a str, an int and bytes: no cycle can
    # go through it), so a collection never walks the cache's records; 40 bytes where a
    # named tuple takes 64.
    name: str
    version: int | None  # resourceVersion, where it is a number (the store compares them)
    packed: bytes


_pack = msgspec.msgpack.Encoder().encode
_unpack = msgspec.msgpack.Decoder().decode


def _vocabulary() -> bytes:
    """The preset dictionary: each kept shape packed with empty values (names, not data)."""
    meta_ = {k: "" for k in _META} | {"generation": 1}
    condition = {"lastTransitionTime": "", "message": "", "reason": "", "status": "True",
                 "type": ""}
    owner = {"apiVersion": naming.API_VERSION, "blockOwnerDeletion": True, "controller": True,
             "kind": naming.KIND, "name": "", "uid": ""}
    shapes: list[Obj] = [
        {"metadata": {"labels": {naming.LABEL_MANAGED: "true"}, "name": "",
                      "resourceVersion": ""},
         "spec": {"nodeName": ""}, "status": {"phase": "Running"}},
        {"metadata": {**meta_, "labels": {naming.LABEL_DEVICES: "", naming.LABEL_MANAGED: "true",
                                          naming.LABEL_MEMORY_CEILING: "",
                                          naming.LABEL_MEMORY_FLOOR: "",
                                          naming.LABEL_SIZED_FOR: ""},
                      "annotations": {naming.ANNOTATION_SIZED_FOR: "",
                                      naming.ANNOTATION_WORKER: "",
                                      naming.ANNOTATION_BOOKED: ""}},
         "spec": {"devices": {"requests": [{"exactly": {"count": 1},
                                            "name": naming.CLAIM_REQUEST}]}},
         "status": {"allocation": {"devices": {"results": [{"pool": ""}]}, "nodeSelector": {
             "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                     "values": [""]}]}]}},
             "reservedFor": [{"name": "", "resource": "pods", "uid": ""}]}},
        {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
         "metadata": {**meta_, "finalizers": [naming.FINALIZER]},
         "spec": {"memory": "", "modelId": "", "ownerId": "", "role": ""},
         "status": {"claimName": "", "conditions": [condition], "deviceCount": 1,
                    "hostMemoryWhenParked": "", "memoryPerDevice": "", "nodeName": "",
                    "observedGeneration": 1, "phase": "Running", "podName": ""}},
        {"metadata": {**meta_, "annotations": {naming.ANNOTATION_MEMORY: "",
                                               naming.ANNOTATION_OWNER: "",
                                               naming.ANNOTATION_WORKER: ""},
                      "labels": {naming.LABEL_CLAIM: "", naming.LABEL_MANAGED: "true",
                                 naming.LABEL_ROLE: "", naming.LABEL_WORKER: ""},
                      "ownerReferences": [owner]},
         "spec": {"nodeName": "", "resourceClaims": [{"name": naming.CLAIM_REQUEST,
                                                      "resourceClaimName": ""}]},
         "status": {"conditions": [condition | {"type": "PodScheduled"}],
                    "phase": "Running"}},
    ]
    return b"".join(_pack(shape) for shape in shapes)


_VOCABULARY = _vocabulary()


# Raw deflate (no header, no checksum: ten bytes a record need not carry; the record
# never leaves the process) with a 4 KiB window, which holds the dictionary and any
# stripped object. Setting a dictionary makes deflate hash all of it: done once, in
# ``_PRIMED``, whose state each record's compressor copies (half the time of priming each).
_WBITS = -12
_PRIMED = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 5, zdict=_VOCABULARY)
# No raw deflate stream starts with this byte (block type 3 is reserved): a record that
# starts with it is JSON instead.
_JSON = b"\xff"


def _deflate(data: bytes) -> bytes:
    squeezer = _PRIMED.copy()
    return squeezer.compress(data) + squeezer.flush()


def _inflate(data: bytes) -> bytes:
    return zlib.decompressobj(_WBITS, zdict=_VOCABULARY).decompress(data)


def to_record(res: kube.Resource, stripped: Obj) -> Record:
    """The compact form of a stripped object (``strip``'s answer)."""
    m = meta(stripped)
    version = m.get("resourceVersion")
    try:
        number: int | None = int(version or "")
    except (TypeError, ValueError):
        number = None
    try:
        packed = _deflate(_pack(stripped))
    except OverflowError:  # an integer past 64 bits: JSON holds any
        packed = _JSON + msgspec.json.encode(stripped)
    return Record(sys.intern(str(m.get("name", ""))), number, packed)


def to_obj(record: Record) -> Obj:
    """The stripped object a record holds (a new mapping each time: the caller's own)."""
    packed = record.packed
    out: Obj = (msgspec.json.decode(packed[1:]) if packed[:1] == _JSON
                else _unpack(_inflate(packed)))
    return out


def name_and_version(record: Record) -> tuple[str, int | None]:
    """(name, resourceVersion where it is a number, else None) of a record."""
    return record.name, record.version


# -------------------------------------------------------- decoding list pages
#
# The raw objects as far as ``strip`` reads them; a field typed Any is read whole
# (where ``strip`` tests a mapping for being empty, it must see all of it).

class RawMeta(Struct, omit_defaults=True):
    name: Any = UNSET
    namespace: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET


class RawPodSpec(Struct, omit_defaults=True):
    nodeName: Any = UNSET
    resourceClaims: Any = UNSET


class RawContainer(Struct, omit_defaults=True):
    name: Any = UNSET
    state: Any = UNSET


class RawPodStatus(Struct, omit_defaults=True):
    phase: Any = UNSET
    reason: Any = UNSET
    message: Any = UNSET
    conditions: Any = UNSET
    containerStatuses: list[RawContainer] | UnsetType | None = UNSET


class RawPod(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    spec: RawPodSpec | UnsetType | None = UNSET
    status: RawPodStatus | UnsetType | None = UNSET


class RawRequest(Struct, omit_defaults=True):
    name: Any = UNSET
    count: Any = UNSET
    exactly: Any = UNSET


class RawClaimDevices(Struct, omit_defaults=True):
    requests: list[RawRequest] | UnsetType | None = UNSET


class RawClaimSpec(Struct, omit_defaults=True):
    devices: RawClaimDevices | UnsetType | None = UNSET


class RawClaimStatus(Struct, omit_defaults=True):
    allocation: Any = UNSET
    reservedFor: Any = UNSET


class RawClaim(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    spec: RawClaimSpec | UnsetType | None = UNSET
    status: RawClaimStatus | UnsetType | None = UNSET


class RawDevice(Struct, omit_defaults=True):
    name: Any = UNSET
    basic: Any = UNSET
    capacity: Any = UNSET
    attributes: Any = UNSET
    taints: Any = UNSET
    consumesCounters: Any = UNSET
    allowMultipleAllocations: Any = UNSET


class RawSliceSpec(Struct, omit_defaults=True):
    driver: Any = UNSET
    nodeName: Any = UNSET
    pool: Any = UNSET
    devices: list[RawDevice] | UnsetType | None = UNSET
    sharedCounters: Any = UNSET


class RawSlice(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    spec: RawSliceSpec | UnsetType | None = UNSET


class RawNodeStatus(Struct, omit_defaults=True):
    allocatable: Any = UNSET
    conditions: Any = UNSET


class RawNodeSpec(Struct, omit_defaults=True):
    taints: Any = UNSET
    unschedulable: Any = UNSET


class RawNode(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    spec: RawNodeSpec | UnsetType | None = UNSET
    status: RawNodeStatus | UnsetType | None = UNSET


class RawWorker(Struct, omit_defaults=True):
    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: RawMeta | UnsetType | None = UNSET
    spec: Any = UNSET
    status: Any = UNSET


class RawConfigMap(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    data: Any = UNSET


_RAWS: dict[str, type[Struct]] = {
    kube.PODS.key: RawPod, kube.CLAIMS.key: RawClaim, kube.SLICES.key: RawSlice,
    kube.NODES.key: RawNode, kube.WORKERS.key: RawWorker,
    kube.CONFIGMAPS.key: RawConfigMap, kube.NODE_PODS.key: RawPod,
    kube.OTHER_CLAIMS.key: RawClaim,
}


class ListMeta(Struct, omit_defaults=True):
    resourceVersion: Any = UNSET
    # "continue" is a keyword: renamed
    next: Any = msgspec.field(default=UNSET, name="continue")


class PageDecoder:
    """A list page's bytes -> (its metadata, its objects as records), for one resource."""

    def __init__(self, res: kube.Resource) -> None:
        self.res = res
        raw = _RAWS.get(res.key)
        self._decoder = None if raw is None else msgspec.json.Decoder(_page_type(raw))

    def __call__(self, data: bytes) -> tuple[Obj, list[Record]]:
        if self._decoder is not None and data:
            try:
                page: Any = self._decoder.decode(data)
            except msgspec.DecodeError:
                pass  # an unexpected shape somewhere: read it all, as events are read
                # (and text that is no JSON fails there, as a ValueError)
            else:
                listed = {} if page.metadata in (None, UNSET) else msgspec.to_builtins(
                    page.metadata)
                return listed, [self.record(msgspec.to_builtins(o))
                                for o in page.items or ()]
        payload = json.loads(data) if data else {}
        return (payload.get("metadata") or {},
                [self.record(o) for o in payload.get("items") or ()])

    def record(self, obj: Obj) -> Record:
        return to_record(self.res, strip(self.res, obj))


def _page_type(raw: type[Struct]) -> type[Struct]:
    return msgspec.defstruct(
        f"{raw.__name__}Page",
        [("metadata", ListMeta | None | UnsetType, UNSET),
         ("items", list[raw] | None | UnsetType, UNSET)],  # type: ignore[valid-type]
        omit_defaults=True)
