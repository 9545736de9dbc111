from __future__ import annotations

import pytest

from placement import (
    Booking,
    Claim,
    GiB,
    Node,
    PlacementError,
    Request,
    Role,
    devices_needed,
    per_device_share,
)


@pytest.mark.parametrize(
    ("memory", "device_memory", "expected"),
    [
        (1, 80 * GiB, 1),  # never zero devices
        (80 * GiB, 80 * GiB, 1),  # exactly full
        (80 * GiB + 1, 80 * GiB, 2),  # one byte over takes a second device
        (60 * GiB, 24 * GiB, 3),
        (48 * GiB, 24 * GiB, 2),
    ],
)
def test_devices_needed(memory: int, device_memory: int, expected: int) -> None:
    assert devices_needed(memory, device_memory) == expected


def test_per_device_share_rounds_up_so_no_byte_is_lost() -> None:
    assert per_device_share(120 * GiB, 2) == 60 * GiB
    assert per_device_share(10, 3) == 4
    assert per_device_share(1, 8) == 1


def test_a_node_naming_no_roles_accepts_both() -> None:
    node = Node("n", 1, 80 * GiB)
    assert node.accepts(Role.TRAINER) and node.accepts(Role.SAMPLER)
    trainers = Node("t", 1, 80 * GiB, roles=frozenset({Role.TRAINER}))
    assert trainers.accepts(Role.TRAINER) and not trainers.accepts(Role.SAMPLER)


def test_roles_given_as_strings_compare_equal_to_enums() -> None:
    assert Node("n", 1, GiB, roles=frozenset({"trainer"})) == Node(  # type: ignore[arg-type]
        "n", 1, GiB, roles=frozenset({Role.TRAINER}))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"devices": 0}, "devices must be >= 1"),
        ({"device_memory": 0}, "device memory must be > 0"),
        ({"max_workers_per_claim": 0}, "max workers per claim must be >= 1"),
        ({"host_memory": -1}, "host memory must not be negative"),
        ({"name": ""}, "node name must not be empty"),
    ],
)
def test_malformed_nodes_are_refused(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"name": "n", "devices": 1, "device_memory": GiB, **kwargs}
    with pytest.raises(PlacementError, match=message):
        Node(**args)  # type: ignore[arg-type]


def test_a_worker_naming_no_owner_owns_itself() -> None:
    assert Request("w", Role.SAMPLER, GiB).owner == "w"
    assert Request("w", Role.SAMPLER, GiB, "qwen").owner == "qwen"


def test_requests_need_positive_memory_and_a_known_role() -> None:
    with pytest.raises(PlacementError, match="memory must be > 0"):
        Request("w", Role.TRAINER, 0)
    with pytest.raises(ValueError, match="'critic' is not a valid Role"):
        Request("w", "critic", GiB)  # type: ignore[arg-type]


def test_a_lone_worker_parks_nothing_and_a_shared_claim_parks_everyone() -> None:
    lone = Claim("c", "n", 1, bookings=(Booking("a", "a", 60 * GiB),))
    assert lone.parked_load() == 0
    shared = Claim("c", "n", 1, bookings=(Booking("b", "b", 20 * GiB), Booking("a", "a", 60 * GiB)))
    assert shared.parked_load() == 80 * GiB
    assert shared.workers == ("a", "b")  # canonical order, whatever was given
