"""Our claims giving up a device two of them were allocated (fleet_rules.device_conflict), by
the rule itself, and kept by the fleet cache as the plain reading reads it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from controller.fleet.cache import FleetCache
from controller.fleet.claims import ClaimView, read_claim
from controller.fleet.reader import FleetView
from controller.fleet.rules import device_conflict
from placement import Fleet

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
GPU0, GPU1 = "d/node-0/gpu-0", "d/node-0/gpu-1"


def view(name: str, minute: int, *held: str, deleting: bool = False) -> ClaimView:
    return ClaimView(name, "node-0", len(held), True, deleting,
                     T0 + dt.timedelta(minutes=minute), True, held=held)


def conflict(claim: ClaimView, *others: ClaimView) -> tuple[str, str] | None:
    every = (claim, *others)
    return device_conflict(claim, lambda d: [v for v in every if d in v.held])


def test_every_claim_holding_a_device_another_holds_gives_it_up() -> None:
    """None keeps it: kube-scheduler counts a device free once either lets it go."""
    a, b, c = view("a", 0, GPU0), view("b", 1, GPU0, GPU1), view("c", 2, GPU1)
    assert conflict(a, b, c) == (GPU0, "b")
    assert conflict(b, a, c) == (GPU0, "a")  # its first device, then the first holder
    assert conflict(c, a, b) == (GPU1, "b")
    being_deleted = view("old", 0, GPU0, deleting=True)
    assert conflict(view("new", 5, GPU0), being_deleted) == (GPU0, "old")
    assert conflict(being_deleted, view("new", 5, GPU0)) == (GPU0, "new")


def test_a_claim_marked_giving_a_device_up_stays_in_conflict_alone() -> None:
    """The other claim gone, kube-scheduler counts the device free: this one goes too."""
    marked = attrs.evolve(view("a", 0, GPU0), gives_up=GPU0)
    assert conflict(marked) == (GPU0, "")
    assert conflict(marked, view("b", 1, GPU0)) == (GPU0, "b")


def test_a_claim_alone_on_its_devices_is_no_conflict() -> None:
    assert conflict(view("a", 0, GPU0), view("b", 1, GPU1)) is None
    assert conflict(view("lone", 0, GPU0, deleting=True)) is None
    assert device_conflict(None, lambda _d: []) is None


def claim_obj(name: str, minute: int, devices: tuple[int, ...], deleting: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}",
                            "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z",
                            "labels": {"openrl.io/managed": "true"},
                            "annotations": {"openrl.io/sized-for-node": "node-0"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    status: dict[str, Any] = {}
    if devices:
        status["allocation"] = {
            "devices": {"results": [{"driver": "d", "pool": "node-0", "device": f"gpu-{i}"}
                                    for i in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]}}
    return {"metadata": meta, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"count": max(1, len(devices))}}]}}, "status": status}


changes = st.lists(st.tuples(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3),
    st.one_of(st.none(), st.tuples(st.lists(st.integers(0, 2), unique=True, max_size=2)
                                   .map(tuple), st.booleans()))), max_size=25)


@given(changes)
def test_the_cache_names_the_same_conflicts_as_the_plain_reading(history: list[Any]) -> None:
    """Claims allocated, re-read, deleted in any order: after each change, every claim's
    conflict and the claims sharing its devices are what the plain reading says."""
    cache = FleetCache("d", lookup=lambda _res, _name: None)
    objs: dict[str, dict[str, Any]] = {}
    for name, minute, change in history:
        if change is None:
            objs.pop(name, None)
            cache.claim_changed(name, None)
        else:
            objs[name] = claim_obj(name, minute, *change)
            cache.claim_changed(name, objs[name])
        views = [read_claim(o, {}) for o in objs.values()]
        plain = FleetView(Fleet(), {}, {v.name: v for v in views if not v.deleting},
                          {v.name: v for v in views if v.deleting}, {}, ())
        for claim in (*objs, "unknown"):
            assert cache.device_conflict(claim) == plain.device_conflict(claim), claim
            assert cache.sharing(claim) == plain.sharing(claim), claim
