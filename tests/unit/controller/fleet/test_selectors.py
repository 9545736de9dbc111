"""A DeviceClass's selectors on a node's devices: each device gets its own verdict, though
the verdicts are kept per device shape."""

from __future__ import annotations

from typing import Any

from controller.fleet.selectors import DeviceSelector

DRIVER = "gpu.nvidia.com"


def selector(*expressions: str) -> DeviceSelector:
    return DeviceSelector.of({"metadata": {"name": "c"}, "spec": {"selectors": [
        {"cel": {"expression": e}} for e in expressions]}})


def gpu(name: str, memory: str, **attributes: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"uuid": {"string": f"GPU-{name}"}, **attributes},
            "capacity": {"memory": {"value": memory}}}


def test_a_method_on_a_capacity_keys_the_verdict_by_that_capacity() -> None:
    """An H100 then an L40S on one node: the class asks for 60Gi and more."""
    big = selector("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0")
    assert big.verdict(DRIVER, gpu("gpu-0", "81559Mi")) == ""
    assert big.verdict(DRIVER, gpu("gpu-1", "46068Mi")) == "not selected by class c"
    assert big.verdict(DRIVER, gpu("gpu-2", "81559Mi")) == ""


def test_methods_on_versions_and_strings_key_by_the_attribute_they_are_called_on() -> None:
    new = selector("device.attributes['gpu.nvidia.com'].driverVersion"
                   ".isGreaterThan(semver('575.0.0'))",
                   "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')")
    h100 = {"productName": {"string": "NVIDIA H100 80GB HBM3"}}
    assert new.verdict(DRIVER, gpu("a", "80Gi", driverVersion={"version": "580.65.6"},
                                   **h100)) == ""
    assert new.verdict(DRIVER, gpu("b", "80Gi", driverVersion={"version": "550.127.8"},
                                   **h100)) == "not selected by class c"
    assert new.verdict(DRIVER, gpu("c", "80Gi", driverVersion={"version": "580.65.6"},
                                   productName={"string": "NVIDIA L40S"})) == (
        "not selected by class c")


def test_whether_a_domain_exists_is_kept_apart_from_its_names() -> None:
    """A name missing from a domain the device has answers has() false; a domain the
    device lacks fails the selector."""
    unzoned = selector("!has(device.attributes['example.com'].zone)")
    other = gpu("a", "80Gi", **{"example.com/rack": {"string": "r1"}})
    assert unzoned.verdict(DRIVER, other) == ""
    assert unzoned.verdict(DRIVER, gpu("b", "80Gi")).startswith(
        "not selected by class c (selector 0 failed: no such key")


def test_the_later_of_two_spellings_of_one_name_is_the_one_read() -> None:
    big = selector("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('60Gi'))")
    first = {"name": "a", "capacity": {"memory": {"value": "80Gi"},
                                       "gpu.nvidia.com/memory": {"value": "40Gi"}}}
    second = {"name": "b", "capacity": {"gpu.nvidia.com/memory": {"value": "40Gi"},
                                        "memory": {"value": "80Gi"}}}
    assert big.verdict(DRIVER, first) == "not selected by class c"
    assert big.verdict(DRIVER, second) == ""


def test_what_the_expressions_read_is_all_a_verdict_is_kept_by() -> None:
    typed = selector("device.attributes['gpu.nvidia.com'].type == 'gpu'")
    for i in range(5):  # uuids differ; no class reads them
        typed.verdict(DRIVER, gpu(f"gpu-{i}", "80Gi", type={"string": "gpu"}))
    assert len(typed._memo) == 1
    macro = selector("device.attributes['gpu.nvidia.com'].exists(k, k == 'type')")
    for i in range(3):  # a macro may read any name: the whole device is the key
        assert macro.verdict(DRIVER, gpu(f"gpu-{i}", "80Gi", type={"string": "gpu"})) == ""
    assert macro.reads is None and len(macro._memo) == 3
