"""What an expression reads of a device, from its parse: the names it spells, or unknown."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.fleet.cel_reads import Reads, reads_of

NV = "device.attributes['gpu.nvidia.com']"
MEM = "device.capacity['gpu.nvidia.com'].memory"


@pytest.mark.parametrize(("expression", "attributes", "capacity"), [
    (f"{MEM}.compareTo(quantity('60Gi')) >= 0", (), ("memory",)),
    (f"{NV}.driverVersion.isGreaterThan(semver('575.0.0'))", ("driverVersion",), ()),
    (f"{NV}.productName.startsWith('NVIDIA') && device.driver == 'gpu.nvidia.com'",
     ("productName",), ()),
    (f"{NV}['type'] == 'gpu' || has(device.capacity.example.slices)", ("type",), ("slices",)),
    ("device.attributes[device.driver].index in [0, 1] ? true : false", ("index",), ()),
    (f"!({NV}.ready) && -1 < 2 // a comment", ("ready",), ()),
    (f"{NV}.zone + '||' == \"?\" && {NV}[r'a\\b'] == {{'k': [1, 2.5e3, 0x1u,]}}",
     ("zone", "a\\b"), ()),
    (f"{NV}.uuid.matches('^GPU-') == '''x'''", ("uuid",), ()),
    # the index of a read value may read the device too
    (f"{NV}.a[device.capacity['x'].b]", ("a",), ("b",)),
])
def test_the_names_spelled_are_the_names_read(expression: str, attributes: tuple[str, ...],
                                              capacity: tuple[str, ...]) -> None:
    assert reads_of(expression) == Reads(frozenset(attributes), frozenset(capacity))


@pytest.mark.parametrize("expression", [
    f"{NV}.exists(k, k == 'type')",  # a macro over a domain's names
    "[1, 2].all(device, device > 0)",  # a macro that shadows device
    "cel.bind(x, 1, x == 1)",
    f"size({NV}) > 1",  # a domain read whole
    f"'type' in {NV}",
    f"{NV}.size() == 0",
    "device",
    "device.name == 'gpu-0'",  # a field this table does not know
    f"{NV}[device.driver] == 1",  # a name computed when evaluated
    f"{NV}['a\\u0041']",  # an escape this parser does not decode
    f"{NV}[?'type']",  # optional selection
    "google.protobuf.Int64Value{value: 1} == 1",  # a message literal
    f"{NV}.type ==",  # not an expression at all
    "(" * 400 + f"{NV}.type" + ")" * 400,  # deeper than the parser recurses
])
def test_anything_else_is_unknown(expression: str) -> None:
    assert reads_of(expression) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("device.atribuscpy[]()'\"!?:,{}<=&|+-0 d")),
               max_size=60))
def test_any_text_gets_an_answer_never_an_exception(text: str) -> None:
    assert reads_of(text) is None or isinstance(reads_of(text), Reads)
