"""The device reading's fast path against the plain one it replaced.

``fleet_rules.pool_devices`` reads what a slice's content decides once per version of
the slice (``DeviceSelector.per_slice``) and applies the claims not ours and the
counters on every read. ``plain_pool_devices`` below is the reading before that: every
device, every rule, on every read. On any pool -- devices selected or not, with or
without memory, tainted, consuming counters, held by claims not ours -- read once or
again with the verdicts kept, both give the same devices and reasons, in order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.fleet.rules import (
    LeftOut,
    _amount,
    _barring_taint,
    _consumes,
    _memory,
    device_product,
    pool_devices,
)
from controller.fleet.selectors import DeviceSelector
from controller.k8s.objects import Obj

DRIVER = "gpu.example.com"
CLASSES = [None, f"device.attributes['{DRIVER}'].type == 'gpu'",
           f"device.capacity['{DRIVER}'].memory.compareTo(quantity('20Gi')) >= 0",
           "device.attributes.exists(d, d == 'nope')"]


def plain_pool_devices(pool: str, slices: Iterable[Obj], driver: str,
                       selector: DeviceSelector | None, taken: Mapping[str, str],
                       ) -> tuple[list[tuple[str, int, str]], list[LeftOut]]:
    """The reference: each device read whole, by every rule in turn, on every read."""
    members = [(str((s.get("spec") or {}).get("nodeName") or ""), s) for s in slices]
    left = {(str(set_.get("name") or ""), str(name)): _amount(entry)
            for _, s in members for set_ in (s.get("spec") or {}).get("sharedCounters") or []
            for name, entry in (set_.get("counters") or {}).items()}
    holder_of: dict[tuple[str, str], str] = {}
    for _, s in members if taken else ():
        for device in (s.get("spec") or {}).get("devices") or []:
            claim = taken.get(str(device.get("name") or ""))
            if claim:
                for counter, amount in _consumes(device):
                    left[counter] = left.get(counter, 0) - amount
                    holder_of[counter] = f"claim {claim} ({device.get('name')})"
    counted: list[tuple[str, int, str]] = []
    out: list[LeftOut] = []
    for node, s in members:
        devices = (s.get("spec") or {}).get("devices") or []
        for device in devices:
            capacity = device.get("capacity") or (device.get("basic") or {}).get("capacity")
            entry = capacity and (capacity.get("memory") or capacity.get(f"{driver}/memory"))
            value = entry.get("value") if isinstance(entry, dict) else None
            memory = _memory(value) if isinstance(value, str) else None
            verdict = selector.verdict(driver, device) if selector is not None else ""
            reason = ("no memory capacity" if not memory else verdict or
                      _reason(device, taken, left, holder_of))
            if reason:
                out.append(LeftOut(node, str(device.get("name") or ""), reason))
            elif memory:
                counted.append((node, memory, device_product(device)))
    return counted, out


def _reason(device: Obj, taken: Mapping[str, str], left: Mapping[tuple[str, str], int],
            holder_of: Mapping[tuple[str, str], str]) -> str:
    if taint := _barring_taint(device):
        return taint
    claim = taken.get(str(device.get("name") or ""))
    if claim:
        return f"allocated to claim {claim}"
    for counter, amount in _consumes(device):
        if amount > left.get(counter, 0):
            by = holder_of.get(counter)
            return (f"counters consumed by {by}" if by else
                    f"counter {counter[0]}/{counter[1]} short ({amount} needed)")
    return ""


@st.composite
def a_device(draw: st.DrawFn, name: str) -> Obj:
    device: Obj = {"name": name, "attributes": {
        "type": {"string": draw(st.sampled_from(["gpu", "mig"]))},
        "productName": {"string": draw(st.sampled_from(["H100", "A100"]))}}}
    memory = draw(st.sampled_from([None, "10Gi", "40Gi", "80Gi", "bad"]))
    if memory is not None:
        device["capacity"] = {"memory": {"value": memory}}
    if draw(st.booleans()):
        device["taints"] = [{"key": f"{DRIVER}/xid", "value": "79",
                             "effect": draw(st.sampled_from(["None", "NoSchedule",
                                                             "NoExecute"]))}]
    if draw(st.booleans()):
        device["consumesCounters"] = [{"counterSet": draw(st.sampled_from(["gpu-0", "gpu-1"])),
                                       "counters": {"memory": {"value": draw(st.sampled_from(
                                           ["20Gi", "40Gi", "80Gi"]))}}}]
    if draw(st.booleans()):  # the older shape
        device = {"name": name, "basic": {k: v for k, v in device.items() if k != "name"}}
    return device


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[Obj], dict[str, str]]:
    slices: list[Obj] = []
    names: list[str] = []
    for index in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(["a", "b"]))
        devices = [draw(a_device(f"d{index}-{i}")) for i in range(draw(st.integers(0, 5)))]
        names += [d["name"] for d in devices]
        spec: Obj = {"driver": DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": "p", "generation": 1}}
        if draw(st.booleans()):
            spec["sharedCounters"] = [{"name": f"gpu-{i}", "counters": {"memory": {
                "value": draw(st.sampled_from(["40Gi", "80Gi"]))}}} for i in range(2)]
        metadata: Obj = {"name": f"s{index}"}
        if draw(st.booleans()):
            metadata["resourceVersion"] = "7"
        slices.append({"metadata": metadata, "spec": spec})
    held = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    return slices, {name: f"other/c-{name}" for name in held}


@settings(max_examples=300, deadline=None)
@given(pool=pools(), expression=st.sampled_from(CLASSES), reads=st.integers(1, 3))
def test_the_kept_reading_is_the_plain_reading(pool: tuple[list[Obj], dict[str, str]],
                                               expression: str | None, reads: int) -> None:
    slices, taken = pool
    selector = None if expression is None else DeviceSelector.of(
        {"metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": expression}}]}})
    for held in (taken, {}, taken)[:reads]:  # the claims change between reads; the slices not
        want = plain_pool_devices("p", slices, DRIVER, selector, held)
        assert pool_devices("p", slices, DRIVER, selector, held) == want
