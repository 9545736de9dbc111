"""What the cache keeps of each object: what ``strip`` kept, as compact records.

Rules:

* What is kept is ``strip``'s to say (``controller.store.strip``); everything here
  agrees with it.
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
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from controller.k8s import kube, naming
from controller.k8s.objects import Obj, meta
from controller.store.strip import META, strip

__all__ = ["PageDecoder", "Record", "name_and_version", "to_obj", "to_record"]

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
    meta_ = {k: "" for k in META} | {"generation": 1}
    condition = {"lastTransitionTime": "", "message": "", "reason": "", "status": "True",
                 "type": ""}
    owner = {"apiVersion": naming.API_VERSION, "blockOwnerDeletion": True, "controller": True,
             "kind": naming.KIND, "name": "", "uid": ""}
    shapes: list[Obj] = [
        {"metadata": {"labels": {naming.LABEL_MANAGED: "true"}, "name": "",
                      "resourceVersion": ""},
         "spec": {"nodeName": "", "containers": [{"resources": {"requests": {"memory": ""}}}],
                  "initContainers": [{"resources": {"requests": {"memory": ""}},
                                      "restartPolicy": "Always"}],
                  "overhead": {"memory": ""}},
         "status": {"phase": "Running"}},
        {"metadata": {**meta_, "labels": {naming.LABEL_DEVICES: "", naming.LABEL_MANAGED: "true",
                                          naming.LABEL_MEMORY_CEILING: "",
                                          naming.LABEL_MEMORY_FLOOR: "",
                                          naming.LABEL_SIZED_FOR: ""},
                      "annotations": {naming.ANNOTATION_SIZED_FOR: "",
                                      naming.ANNOTATION_WORKER: "",
                                      naming.ANNOTATION_BOOKED: ""}},
         "spec": {"devices": {"requests": [{"exactly": {"count": 1},
                                            "name": naming.CLAIM_REQUEST}]}},
         "status": {"allocation": {"devices": {"results": [
             {"device": "", "driver": "", "pool": ""}]}, "nodeSelector": {
             "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                     "values": [""]}]}]}},
             "reservedFor": [{"name": "", "resource": "pods", "uid": ""}]}},
        {"apiVersion": naming.API_VERSION, "kind": naming.KIND,
         "metadata": {**meta_, "finalizers": [naming.FINALIZER]},
         "spec": {"exclusive": False, "memory": "", "modelId": "", "movable": False,
                  "ownerId": "", "role": ""},
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


class RawAsks(Struct, omit_defaults=True):
    # A container as a memory request reads it (its image, command, env are skipped)
    resources: Any = UNSET
    restartPolicy: Any = UNSET


class RawNodePodSpec(Struct, omit_defaults=True):
    nodeName: Any = UNSET
    containers: list[RawAsks] | UnsetType | None = UNSET
    initContainers: list[RawAsks] | UnsetType | None = UNSET
    overhead: Any = UNSET


class RawNodePod(Struct, omit_defaults=True):
    metadata: RawMeta | UnsetType | None = UNSET
    spec: RawNodePodSpec | UnsetType | None = UNSET
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
    kube.CONFIGMAPS.key: RawConfigMap, kube.NODE_PODS.key: RawNodePod,
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
