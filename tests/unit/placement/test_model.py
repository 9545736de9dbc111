from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from placement import Booking, Claim, GiB, Node, PlacementError, Request, Role
from placement.model import devices_for, devices_needed, per_device_share


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
        ({"device_memory": 0}, "device_memory must be > 0"),
        ({"max_workers_per_claim": 0}, "max_workers_per_claim must be >= 1"),
        ({"host_memory": -1}, "host_memory must be >= 0"),
        ({"pods": -1}, "pods must be >= 0"),
        ({"pods": 1.5}, "pods must be a whole number \\(an int\\), got 1.5"),
        ({"devices": 1.5}, "devices must be a whole number \\(an int\\), got 1.5 \\(a float\\)"),
        ({"devices": "2"}, "devices must be a whole number \\(an int\\), got '2' \\(a str\\)"),
        ({"devices": True}, "devices must be a whole number \\(an int\\), got True \\(a bool\\)"),
        ({"device_memory": math.inf}, "device_memory must be a whole number of bytes"),
        ({"device_memory": "80Gi"}, "parse quantities such as"),
        ({"host_memory": math.nan}, "host_memory must be a whole number of bytes"),
        ({"max_workers_per_claim": 2.0}, "max_workers_per_claim must be a whole number"),
        ({"roles": "trainer"}, "roles must be a set of roles"),
        ({"roles": {"critic"}}, "must be one of trainer, sampler, got 'critic'"),
        ({"product": None}, "product must be a string"),
        ({"name": 7}, "node name must be a string, got 7 \\(an int\\)"),
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
    with pytest.raises(PlacementError, match="worker w: role must be one of trainer, sampler"):
        Request("w", "critic", GiB)  # type: ignore[arg-type]
    assert Request("w", "sampler", GiB).role is Role.SAMPLER  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        (math.inf, "memory must be a whole number of bytes \\(an int\\), got inf \\(a float\\)"),
        (math.nan, "got nan \\(a float\\)"),
        (10.0 * GiB, "a whole number of bytes"),
        (True, "got True \\(a bool\\)"),
        ("10Gi", "parse quantities such as"),
        (-1, "memory must be > 0"),
    ],
)
def test_a_request_refuses_a_size_that_is_not_bytes(memory: object, message: str) -> None:
    with pytest.raises(PlacementError, match=message) as raised:
        Request("w", Role.TRAINER, memory)  # type: ignore[arg-type]
    assert str(raised.value).startswith("worker w: memory must be")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Request("", Role.TRAINER, GiB), "worker name must not be empty"),
        (lambda: Request("w", Role.TRAINER, GiB, owner=3), "worker w: owner must be a string"),
        (lambda: Booking("w", "o", -1), "booking of w: parked_memory must be >= 0"),
        (lambda: Booking("w", "o", 1.5), "parked_memory must be a whole number of bytes"),
        (lambda: Claim("c", "n", 0), "claim c: devices must be >= 1"),
        (lambda: Claim("c", "n", 2.0), "claim c: devices must be a whole number"),
        (lambda: Claim("c", "", 1), "claim c: node name must not be empty"),
        (lambda: Claim("c", "n", 1, allocated=1), "allocated must be True or False"),
        (lambda: Claim("c", "n", 1, bookings=("w",)), "bookings must be Booking values"),
        (lambda: Claim("c", "n", 1, bookings=(Booking("w", "o", 1), Booking("w", "p", 2))),
         "worker w booked twice"),
    ],
)
def test_every_value_is_checked_where_it_enters(build: Callable[[], object], message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        build()


def test_a_claims_allocated_flag_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        Claim("c", "n", 1, False)  # type: ignore[misc]


def test_a_lone_worker_parks_nothing_and_a_shared_claim_parks_everyone() -> None:
    lone = Claim("c", "n", 1, bookings=(Booking("a", "a", 60 * GiB),))
    assert lone.parked_memory == 0
    shared = Claim("c", "n", 1, bookings=(Booking("b", "b", 20 * GiB), Booking("a", "a", 60 * GiB)))
    assert shared.parked_memory == 80 * GiB
    assert shared.workers == ("a", "b")  # canonical order, whatever was given


def test_a_claim_seats_its_setting_within_the_256_consumers_dra_lists() -> None:
    assert Node("n", 1, GiB, max_workers_per_claim=16).seats_per_claim == 16
    assert Node("n", 1, GiB, max_workers_per_claim=256).seats_per_claim == 256
    assert Node("n", 1, GiB, max_workers_per_claim=1000).seats_per_claim == 256


def test_a_mixed_node_reads_as_groups_smallest_first_and_one_size_as_a_plain_node() -> None:
    node = Node.grouped("m", [(4, 80 * GiB), (4, 48 * GiB)])
    assert (node.devices, node.device_memory) == (8, 48 * GiB)
    assert node.groups == ((4, 48 * GiB), (4, 80 * GiB))
    assert node.group_memory(80 * GiB) == 80 * GiB
    assert node.group_memory(0) == node.group_memory(24 * GiB) == 48 * GiB  # the smallest
    assert node.group_floor(80 * GiB) == 48 * GiB + 1
    assert node.group_floor(48 * GiB) == 0
    assert Node.grouped("p", [(2, 24 * GiB), (1, 24 * GiB)]) == Node("p", 3, 24 * GiB)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Node.grouped("m", []), "node m: device_groups must be a non-empty list"),
    (lambda: Node.grouped("m", [(0, GiB), (1, 2 * GiB)]),
     "node m: a device group's devices must be >= 1, got 0"),
    (lambda: Node.grouped("m", [(1, "80Gi")]),
     "node m: a device group's device_memory must be a whole number of bytes"),
    (lambda: Node("m", 3, GiB, device_groups=((1, GiB), (1, 2 * GiB))),
     "node m: device_groups hold 2 devices of at least 1073741824 bytes, but "
     "devices/device_memory say 3 of 1073741824"),
    (lambda: Claim("c", "m", 1, device_memory=-1), "claim c: device_memory must be >= 0"),
])
def test_malformed_device_groups_are_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        build()


@pytest.mark.parametrize(("memory", "device_memory", "exact", "expected"), [
    (100 * GiB, 80 * GiB, None, 2),  # as its memory needs
    (100 * GiB, 80 * GiB, 4, 4),  # 25Gi each fits 80Gi
    (100 * GiB, 80 * GiB, 1, None),  # 100Gi on one 80Gi device: no count of them will do
    (100 * GiB + 1, 25 * GiB, 4, None),  # the share rounds up past the devices' size
])
def test_devices_for_a_worker_naming_its_count(memory: int, device_memory: int,
                                               exact: int | None, expected: int | None) -> None:
    assert devices_for(memory, device_memory, exact) == expected


@pytest.mark.parametrize(("devices", "message"), [
    (0, "worker w: devices must be >= 1, got 0"),
    (-2, "worker w: devices must be >= 1, got -2"),
    (2.0, "worker w: devices must be a whole number (an int), got 2.0 (a float)"),
    (True, "worker w: devices must be a whole number (an int), got True (a bool)"),
    ("4", "worker w: devices must be a whole number (an int), got '4' (a str)"),
])
def test_a_request_refuses_a_device_count_that_is_not_a_whole_number_from_one(
        devices: object, message: str) -> None:
    with pytest.raises(PlacementError) as raised:
        Request("w", Role.TRAINER, GiB, devices=devices)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_a_worker_naming_its_device_count_joins_no_claim() -> None:
    assert Request("w", Role.TRAINER, GiB).joins
    assert not Request("w", Role.TRAINER, GiB, devices=2).joins
    assert not Request("w", Role.TRAINER, GiB, exclusive=True).joins
