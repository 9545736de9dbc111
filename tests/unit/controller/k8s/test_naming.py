import re

import pytest

from controller.k8s import naming

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


def test_claim_name_is_the_incarnation_s_own() -> None:
    assert naming.claim_name("lora-1", "1234-abcd") == "orw-lora-1-1234-abcd"
    assert naming.claim_name("lora-1", "1") != naming.claim_name("lora-1", "2")


def test_a_long_worker_name_is_cut_and_the_uid_kept_whole() -> None:
    uid = "0f8e6a2c-1d7b-4c7e-9a44-3d2f5b6c7d8e"
    name = naming.claim_name("w" * 300, uid)
    assert len(name) <= naming.OBJECT_NAME_MAX and name.endswith("-" + uid)


def test_claims_sort_as_the_simulator_s_so_ties_break_alike() -> None:
    # The decision joins the claim with the fewest workers, then the first by
    # name; on the cluster and in simulate that must be the same claim.
    workers = ["w1", "w10", "w2", "lora-1", "lora-10", "a", "b", "trainer-9", "trainer-10"]
    uids = {w: f"{i:08x}-ffff" for i, w in enumerate(reversed(workers))}
    cluster = sorted(workers, key=lambda w: naming.claim_name(w, uids[w]))
    simulated = sorted(workers, key=lambda w: f"claim-{w}")
    assert cluster == simulated


def test_owner_reference_is_a_blocking_controller_reference() -> None:
    ref = naming.owner_reference({"metadata": {"name": "w", "uid": "u1"}})
    assert ref == {"apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker", "name": "w",
                   "uid": "u1", "controller": True, "blockOwnerDeletion": True}
