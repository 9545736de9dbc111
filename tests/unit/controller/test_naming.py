import re

import pytest

from controller import naming

LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(("text", "expected"), [
    ("lora-1", "lora-1"),
    ("Qwen/Qwen3-8B", "qwen-qwen3-8b"),
    ("team.alpha_run", "team-alpha-run"),
    ("--edge--", "edge"),
])
def test_label_value_sanitizes(text: str, expected: str) -> None:
    assert naming.label_value(text) == expected


def test_label_value_cut_keeps_a_hash_of_the_whole() -> None:
    a = naming.label_value("x" * 80 + "a")
    b = naming.label_value("x" * 80 + "b")
    assert len(a) <= 63 and len(b) <= 63
    assert LABEL.match(a) and LABEL.match(b)
    assert a != b
    assert a.endswith(naming.short_hash("x" * 80 + "a"))


def test_label_value_of_nothing_usable_is_a_hash() -> None:
    value = naming.label_value("___")
    assert LABEL.match(value) and value == naming.short_hash("___")


def test_pod_name_is_worker_name_or_cut_with_hash() -> None:
    assert naming.pod_name("lora-1") == "orw-lora-1"
    long = "w" * 260
    name = naming.pod_name(long)
    assert len(name) <= 253
    assert name.endswith(naming.short_hash("orw-" + long))
    assert naming.pod_name(long[:-1] + "z") != name


def test_claim_name_derives_from_uid_not_name() -> None:
    assert naming.claim_name("1234-abcd") == "orw-1234-abcd"


def test_owner_reference_is_a_blocking_controller_reference() -> None:
    ref = naming.owner_reference({"metadata": {"name": "w", "uid": "u1"}})
    assert ref == {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker", "name": "w",
                   "uid": "u1", "controller": True, "blockOwnerDeletion": True}
