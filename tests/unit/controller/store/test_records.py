"""The cache's compact records give back exactly what ``strip`` keeps, and a list page
decoded the fast way is the page read in full and stripped object by object."""

from __future__ import annotations

import json
import sys
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from controller.k8s import kube
from controller.store.records import PageDecoder, name_and_version, to_obj, to_record
from controller.store.strip import strip

Obj = dict[str, Any]
KINDS = [kube.PODS, kube.CLAIMS, kube.SLICES, kube.NODES, kube.WORKERS, kube.CONFIGMAPS,
         kube.OTHER_CLAIMS]

text = st.sampled_from(["", "a", "openrl.io/x", "gpu", "Running", "2026-01-01T00:00:00Z",
                        "memory", "gpu.example.com/memory", "PodScheduled", "80Gi"])
scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**12), text)
plain = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)), max_leaves=8)


def maybe(values: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Obj]:
    """Mappings with any of ``values``' keys (and some noise the controller never reads)."""
    return st.fixed_dictionaries({}, optional={**values, "managedFields": plain,
                                               "noise": plain})


labels = st.dictionaries(st.sampled_from(["openrl.io/managed", "openrl.io/worker", "app",
                                          "openrl.io/enabled"]), text, max_size=4)
metadata = maybe({
    "name": text, "namespace": text, "uid": text, "resourceVersion": st.sampled_from(
        ["", "1", "42", "x"]), "generation": st.integers(0, 5), "creationTimestamp": text,
    "deletionTimestamp": st.one_of(st.none(), text), "labels": labels, "annotations": labels,
    "ownerReferences": plain, "finalizers": st.lists(text, max_size=2)})
condition = maybe({"type": st.sampled_from(["PodScheduled", "Ready"]), "status": text,
                   "reason": text, "message": text})
container = maybe({"name": text, "image": text, "state": st.one_of(
    maybe({"running": plain}), st.fixed_dictionaries({"terminated": maybe(
        {"exitCode": st.integers(0, 255), "reason": text})}))})
pod = maybe({
    "metadata": metadata,
    "spec": maybe({"nodeName": text, "resourceClaims": plain, "containers": plain}),
    "status": maybe({"phase": text, "reason": text, "message": text, "podIP": text,
                     "conditions": st.lists(condition, max_size=3),
                     "containerStatuses": st.lists(container, max_size=2)})})
request = st.one_of(maybe({"name": text, "count": st.integers(0, 4)}),
                    maybe({"name": text, "exactly": maybe({"count": st.integers(0, 4),
                                                           "deviceClassName": text})}))
claim = maybe({
    "metadata": metadata,
    "spec": maybe({"devices": maybe({"requests": st.lists(request, max_size=2)})}),
    "status": maybe({"allocation": st.one_of(plain, maybe({
        "nodeSelector": plain,
        "devices": maybe({"results": st.lists(maybe({"pool": text, "device": text,
                                                     "driver": text, "request": text}),
                                              max_size=2)})})),
        "reservedFor": plain})})
device = maybe({"name": text,
                "capacity": st.dictionaries(text, plain, max_size=2),
                "attributes": st.dictionaries(st.sampled_from(["productName", "uuid"]), plain,
                                              max_size=2),
                "basic": maybe({"capacity": st.dictionaries(text, plain, max_size=2)})})
slice_ = maybe({"metadata": metadata, "spec": maybe({
    "driver": text, "nodeName": text, "pool": plain, "devices": st.lists(device, max_size=3)})})
taint = st.fixed_dictionaries({"key": st.sampled_from(
    ["node.kubernetes.io/not-ready", "karpenter.sh/disrupted", "nvidia.com/gpu"]),
    "effect": st.sampled_from(["NoSchedule", "NoExecute"])})
node = maybe({"metadata": metadata, "status": maybe({"allocatable": st.dictionaries(
    st.sampled_from(["memory", "cpu"]), text, max_size=2), "conditions": plain}),
    "spec": maybe({"unschedulable": st.booleans(), "taints": st.lists(taint, max_size=2)})})
worker = maybe({"apiVersion": text, "kind": text, "metadata": metadata, "spec": plain,
                "status": plain})
config_map = maybe({"metadata": metadata, "data": st.dictionaries(text, text, max_size=2)})
OBJECTS = {kube.PODS.key: pod, kube.CLAIMS.key: claim, kube.SLICES.key: slice_,
           kube.NODES.key: node, kube.WORKERS.key: worker,
           kube.CONFIGMAPS.key: config_map, kube.OTHER_CLAIMS.key: claim}


def plainly(res: kube.Resource, objs: list[Obj]) -> list[Obj] | None:
    """The page as the plain reading sees it; None where ``strip`` itself cannot read one
    (the fast path must then fail too, or read it the same)."""
    try:
        return [strip(res, json.loads(json.dumps(o))) for o in objs]
    except (AttributeError, TypeError, KeyError):
        return None


@pytest.mark.parametrize("res", KINDS, ids=lambda r: r.key)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_record_gives_back_what_strip_kept(res: kube.Resource, data: st.DataObject) -> None:
    obj = data.draw(OBJECTS[res.key])
    try:
        stripped = strip(res, obj)
    except (AttributeError, TypeError, KeyError):
        return
    record = to_record(res, stripped)
    assert to_obj(record) == stripped
    m = stripped.get("metadata") or {}
    version = m.get("resourceVersion")
    assert name_and_version(record) == (str(m.get("name", "")),
                                        int(version) if version and version.isdigit() else None)
    assert to_obj(record) is not to_obj(record)  # each reader gets its own


@pytest.mark.parametrize("res", KINDS, ids=lambda r: r.key)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_page_decoded_fast_is_the_page_read_plainly(res: kube.Resource,
                                                      data: st.DataObject) -> None:
    objs = data.draw(st.lists(OBJECTS[res.key], max_size=4))
    expected = plainly(res, objs)
    page = {"kind": "List", "metadata": {"resourceVersion": "7", "continue": "t"},
            "items": objs}
    decode = PageDecoder(res)
    if expected is None:
        with pytest.raises((AttributeError, TypeError, KeyError)):
            decode(json.dumps(page).encode())
        return
    listed, records = decode(json.dumps(page).encode())
    assert listed == {"resourceVersion": "7", "continue": "t"}
    assert [to_obj(r) for r in records] == expected


def test_an_empty_or_odd_page_still_reads() -> None:
    decode = PageDecoder(kube.PODS)
    assert decode(b"") == ({}, [])
    assert decode(b'{"items": null}') == ({}, [])
    listed, records = decode(b'{"metadata": {"resourceVersion": "3"}, '
                             b'"items": [{"metadata": {"name": "p", "labels": null}}]}')
    assert listed == {"resourceVersion": "3"}
    assert [to_obj(r) for r in records] == [{"metadata": {"name": "p"}, "spec": {},
                                             "status": {}}]


def test_a_record_is_smaller_than_the_object() -> None:
    obj = {"metadata": {"name": "orw-w-1", "namespace": "openrl", "uid": "u" * 36,
                        "resourceVersion": "12345", "labels": {"openrl.io/managed": "true"},
                        "ownerReferences": [{"kind": "OpenRLWorker", "name": "w-1",
                                             "uid": "u" * 36, "controller": True}]},
           "spec": {"nodeName": "gpu-node-1", "resourceClaims": [
               {"name": "gpu", "resourceClaimName": "orw-w-1-" + "u" * 36}]},
           "status": {"phase": "Running"}}
    record = to_record(kube.PODS, strip(kube.PODS, obj))
    assert record.version == 12345
    assert sys.getsizeof(record) + sys.getsizeof(record.packed) < 500
    assert to_obj(record) == strip(kube.PODS, obj)


def test_integers_past_64_bits_come_back() -> None:
    obj = {"metadata": {"name": "w"}, "spec": {"n": 10**30}, "status": {}}
    assert to_obj(to_record(kube.WORKERS, strip(kube.WORKERS, obj))) == strip(kube.WORKERS, obj)
