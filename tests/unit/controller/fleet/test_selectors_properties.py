"""The selectors' memos answer what a fresh evaluation answers, whatever the devices and
the expressions.

Generated devices carry attributes of every kind (int, bool, string, version) and
capacities (quantities, some unreadable), named with and without a domain, often
the same name in two spellings; generated DeviceClasses have one to three selectors
from a grammar of member and index access, string, quantity and version methods,
``has()``, the macros, maps read whole, and the operators between them. The
reference is a freshly compiled selector per device (its memo empty: it evaluates).

``SELECTOR_CASES`` scales the examples (1 by default, well under a minute); run
with ``-s`` to see the count of devices compared:

    SELECTOR_CASES=4 .venv/bin/pytest -q -s tests/unit/controller/test_selectors_properties.py
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.fleet.rules import pool_devices
from controller.fleet.selectors import DeviceSelector

SCALE = float(os.environ.get("SELECTOR_CASES", "1"))
DRIVERS = ("gpu.nvidia.com", "gpu.nvidia.com", "example.com")
NAMES = ("memory", "type", "productName", "driverVersion", "index", "ready", "uuid")
DOMAINS = ("", "gpu.nvidia.com/", "example.com/", "other.org/")
STRINGS = ("gpu", "mig", "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "")
VERSIONS = ("550.127.8", "575.0.0", "580.65.6", "575.0.0-rc.1", "v1")
QUANTITIES = ("10Gi", "40Gi", "46068Mi", "60Gi", "81559Mi", "0", "80G", "1.5", "lots")

values = st.one_of(
    st.sampled_from((0, 1, 2, 575)).map(lambda v: {"int": v}),
    st.booleans().map(lambda v: {"bool": v}),
    st.sampled_from(STRINGS).map(lambda v: {"string": v}),
    st.sampled_from(VERSIONS).map(lambda v: {"version": v}))
QUANTITY = st.sampled_from(QUANTITIES).map(lambda v: {"value": v})
entry_names = st.builds(str.__add__, st.sampled_from(DOMAINS), st.sampled_from(NAMES[:-1]))


@st.composite
def devices(draw: Any, name: str) -> dict[str, Any]:
    # Most start from a GPU's usual entries, so that more selectors answer
    attributes: dict[str, Any] = {}
    capacity: dict[str, Any] = {}
    if draw(st.integers(0, 2)):
        attributes = {"type": {"string": draw(st.sampled_from(("gpu", "mig")))},
                      "productName": {"string": draw(st.sampled_from(STRINGS[2:4]))},
                      "driverVersion": {"version": draw(st.sampled_from(VERSIONS[:3]))},
                      "index": {"int": draw(st.sampled_from((0, 1)))}}
        capacity = {"memory": {"value": draw(st.sampled_from(QUANTITIES[:5]))}}
    attributes.update(draw(st.dictionaries(entry_names, values, max_size=4)))
    attributes["uuid"] = {"string": f"GPU-{name}"}  # every device its own, rarely read
    capacity.update(draw(st.dictionaries(entry_names, QUANTITY, max_size=2)))
    if draw(st.integers(0, 5)) == 0:  # the older layout
        return {"name": name, "basic": {"attributes": attributes, "capacity": capacity}}
    return {"name": name, "attributes": attributes, "capacity": capacity}


@st.composite
def fleet(draw: Any, size: int) -> list[dict[str, Any]]:
    """Devices made from one to three drawn ones, each a copy of one (its own name and
    uuid) with, most often, one entry changed, added or taken away: devices that differ
    by one value are where a memo keyed by too little gives a wrong verdict."""
    templates = draw(st.lists(devices("t"), min_size=1, max_size=3))
    out = []
    for i in range(draw(st.integers(1, size))):
        device = copy.deepcopy(draw(st.sampled_from(templates)))
        device["name"] = f"gpu-{i}"
        entries = device.get("basic", device)
        entries["attributes"]["uuid"] = {"string": f"GPU-{i}"}
        kind = draw(st.sampled_from(("attributes", "capacity")))
        table = entries.setdefault(kind, {})
        value = values if kind == "attributes" else QUANTITY
        change = draw(st.integers(0, 3))
        if change == 1 and table:
            table[draw(st.sampled_from(sorted(table)))] = draw(value)
        elif change == 2:
            table[draw(entry_names)] = draw(value)
        elif change == 3 and table:
            del table[draw(st.sampled_from(sorted(table)))]
        out.append(device)
    return out


DOMAIN = st.sampled_from(("'gpu.nvidia.com'", "device.driver", "'gpu.nvidia.com'",
                          "'gpu.nvidia.com'", '"example.com"', "'other.org'"))
NAME = st.sampled_from(NAMES)


def field(kind: str, *likely: str) -> st.SearchStrategy[str]:
    """``device.<kind>[domain].name`` or ``...['name']``; mostly a name ``likely`` of the
    type the operation wants, so that more selectors answer."""
    names = st.sampled_from((*likely * (3 if len(likely) > 1 else 6), *NAMES))
    return st.builds(lambda d, n, index: f"device.{kind}[{d}]" + (f"['{n}']" if index
                                                                  else f".{n}"),
                     DOMAIN, names, st.booleans())


def on(template: str, *parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(template.format, *parts)


STR = field("attributes", "type", "productName")
INT, BOOL = field("attributes", "index"), field("attributes", "ready")
VERSION, CAP = field("attributes", "driverVersion"), field("capacity", "memory")
ATOMS = st.one_of(
    # strings
    on("{}.startsWith('NV')", STR), on("{}.endsWith('B3')", STR),
    on("{}.contains('H1')", STR), on("{}.matches('^[a-z]+$')", STR),
    on("size({}) > 3", STR), on("{} == 'gpu'", STR), on("{} in ['gpu', 'mig']", STR),
    # ints and bools
    on("{} == 1", INT), on("{} > 0", INT), on("{}", BOOL), on("{} == true", BOOL),
    # quantities
    on("{}.compareTo(quantity('60Gi')) >= 0", CAP), on("{}.isGreaterThan(quantity('40Gi'))", CAP),
    on("{}.isLessThan(quantity('50Gi'))", CAP), on("{}.asInteger() > 1000000", CAP),
    on("{}.compareTo({}) == 0", CAP, CAP),
    # versions
    on("{}.compareTo(semver('575.0.0')) < 0", VERSION),
    on("{}.isGreaterThan(semver('550.0.0'))", VERSION), on("{}.major() >= 560", VERSION),
    # presence
    on("has(device.attributes[{}].{})", DOMAIN, NAME),
    on("!has(device.capacity[{}].{})", DOMAIN, NAME),
    # the driver
    st.just("device.driver == 'gpu.nvidia.com'"), st.just("device.driver.endsWith('.com')"),
    # macros and maps read whole
    on("device.attributes[{}].exists(k, k == '{}')", DOMAIN, NAME),
    on("device.capacity[{}].all(k, k != '{}')", DOMAIN, NAME),
    on("device.attributes[{}].exists_one(k, k.startsWith('p'))", DOMAIN),
    on("size(device.attributes[{}].filter(k, k != '{}')) > 1", DOMAIN, NAME),
    on("size(device.capacity[{}].map(k, k)) == 1", DOMAIN),
    on("'{}' in device.attributes[{}]", NAME, DOMAIN),
    on("size(device.capacity[{}]) == 1", DOMAIN))
EXPRESSIONS = st.recursive(ATOMS, lambda inner: st.one_of(
    on("({} && {})", inner, inner), on("({} || {})", inner, inner), on("!({})", inner),
    on("({} ? {} : {})", inner, inner, inner)), max_leaves=4)


def device_class(expressions: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "c"},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def test_the_kept_verdict_is_a_fresh_evaluations_on_every_device_in_any_order() -> None:
    tally: Counter[str] = Counter()

    @settings(max_examples=int(700 * SCALE), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(EXPRESSIONS, min_size=1, max_size=3), st.sampled_from(DRIVERS),
           fleet(10), st.randoms(use_true_random=False))
    def check(expressions: list[str], driver: str, fleet_: list[dict[str, Any]],
              rng: Any) -> None:
        kept = DeviceSelector.of(device_class(expressions))
        # Each device twice, in two orders: the second pass reads only the memo.
        order = [*fleet_, *fleet_]
        rng.shuffle(order)
        seen: set[str] = set()
        for device in order:
            fresh = DeviceSelector.of(device_class(expressions)).verdict(driver, device)
            known = len(kept._memo)
            assert kept.verdict(driver, device) == fresh, (expressions, device)
            tally["cases"] += 1
            tally["selected"] += not fresh
            # a device not seen before answered from the memo: another one's verdict
            tally["shared"] += len(kept._memo) == known and device["name"] not in seen
            seen.add(device["name"])

    check()
    print(f"\nselector memo: {tally['cases']} devices compared with a fresh evaluation "
          f"({tally['selected']} selected, {tally['shared']} given another device's kept "
          "verdict), "
          "0 differences")


def slice_of(node: str, name: str, version: int, devices_: list[dict[str, Any]],
             driver: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": str(version)},
            "spec": {"driver": driver, "nodeName": node, "devices": devices_,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 2}}}


@st.composite
def republished(draw: Any) -> list[list[dict[str, Any]]]:
    """A pool of two slices read several times; between reads, a slice may be
    republished (new content, a new resourceVersion) and the list may come in another
    order. Device names are unique in the pool; a few consume one counter set."""
    driver = draw(st.sampled_from(DRIVERS))
    version, reads = 1, []
    current: dict[str, dict[str, Any]] = {}
    for step in range(draw(st.integers(1, 4))):
        for part in ("a", "b"):
            if part in current and draw(st.booleans()):
                continue
            found = draw(fleet(5))
            for device in found:
                device["name"] = f"{part}{step}-{device['name']}"
                if draw(st.integers(0, 3)) == 0:
                    device["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {
                        "memory": {"value": draw(st.sampled_from(("40Gi", "80Gi")))}}}]
            version += 1
            current[part] = slice_of("n", f"n-{part}", version, found, driver)
        reads.append(draw(st.permutations(list(current.values()))))
    return reads


class Fresh:
    """The reference reading: no slice kept, every device evaluated by a fresh selector."""

    def __init__(self, expressions: list[str]) -> None:
        self.device_class = device_class(expressions)

    def per_slice(self, driver: str, item: dict[str, Any], read: Any) -> Any:
        return read()

    def slice_verdicts(self, driver: str, item: dict[str, Any]) -> list[str]:
        return [DeviceSelector.of(self.device_class).verdict(driver, d)
                for d in item["spec"]["devices"]]


def test_the_kept_slice_reading_is_a_fresh_reading_at_every_version() -> None:
    tally: Counter[str] = Counter()

    @settings(max_examples=int(250 * SCALE), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(EXPRESSIONS, min_size=1, max_size=2), republished(), st.data())
    def check(expressions: list[str], reads: list[list[dict[str, Any]]], data: Any) -> None:
        kept = DeviceSelector.of(device_class(expressions))
        fresh: Any = Fresh(expressions)
        for slices in reads:
            driver = slices[0]["spec"]["driver"]
            names = [d["name"] for s in slices for d in s["spec"]["devices"]]
            taken = data.draw(st.dictionaries(st.sampled_from(names), st.just("team/other"),
                                              max_size=2) if names else st.just({}))
            tally["reads"] += 1
            tally["devices"] += len(names)
            assert (pool_devices("n", slices, driver, kept, taken)
                    == pool_devices("n", slices, driver, fresh, taken)), expressions

    check()
    print(f"\nslice memo: {tally['reads']} pool reads of {tally['devices']} devices compared "
          "with a fresh reading, 0 differences")
