"""Plain data the placement decision reads, and the arithmetic over it.

Rules stated once, so the rest of the package can lean on them:

* Every memory figure is an ``int`` of bytes. Quantities such as ``"10Gi"`` are
  parsed at the edges (CLI, controller; with ``placement.quantity``), never here.
* A node is a *pool*: ``devices`` accelerators of at least ``device_memory``
  bytes each (the smallest device on the node, because DRA may pick any of
  them), plus ``host_memory`` bytes of allocatable RAM (``None`` = unknown,
  never checked).
* A node that names no roles accepts both roles.
* ``max_workers_per_claim`` defaults to 1: sharing a claim is opt-in per node.
* One node per worker. Devices needed on a node =
  ``max(1, ceil(memory / device_memory))``; capacity split across nodes places
  nothing.
* V1 residency: exactly one worker of a claim is resident in accelerator
  memory at a time, so estimates on a claim are never summed. A worker fits a
  k-device claim when its per-device share ``ceil(memory / k)`` fits one
  device.
* A suspended worker parks its whole accelerator state in host RAM, so its
  parked footprint is its ``memory``. A worker alone on its claim is always
  resident and parks nothing; on a shared claim every worker may be parked at
  once (a handoff suspends the outgoing worker before restoring the next).
* A worker that names no owner is an owner of one: itself.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass, field

__all__ = [
    "Booking",
    "Claim",
    "Node",
    "PlacementError",
    "Request",
    "Role",
    "devices_needed",
    "parked_load",
    "per_device_share",
]

class PlacementError(ValueError):
    """Input the decision cannot be asked about (a malformed node, request or fleet change)."""


class Role(enum.StrEnum):
    TRAINER = "trainer"
    SAMPLER = "sampler"


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def devices_needed(memory: int, device_memory: int) -> int:
    """Devices a worker of ``memory`` bytes needs when each holds ``device_memory``."""
    needed = -(-memory // device_memory)
    return needed if needed > 1 else 1


def per_device_share(memory: int, devices: int) -> int:
    """Bytes of each device a worker uses when spread over a ``devices``-wide claim."""
    return _ceil_div(memory, devices)


def parked_load(bookings: Collection[Booking]) -> int:
    """Host RAM a claim's workers may park at once: nothing while one worker is alone."""
    return sum(b.parked_memory for b in bookings) if len(bookings) >= 2 else 0


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    devices: int
    device_memory: int
    host_memory: int | None = None
    roles: frozenset[Role] = frozenset()
    max_workers_per_claim: int = 1
    product: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise PlacementError("node name must not be empty")
        if self.devices < 1:
            raise PlacementError(f"node {self.name}: devices must be >= 1, got {self.devices}")
        if self.device_memory < 1:
            raise PlacementError(f"node {self.name}: device memory must be > 0")
        if self.host_memory is not None and self.host_memory < 0:
            raise PlacementError(f"node {self.name}: host memory must not be negative")
        if self.max_workers_per_claim < 1:
            raise PlacementError(
                f"node {self.name}: max workers per claim must be >= 1, "
                f"got {self.max_workers_per_claim}"
            )
        # Normalise so that equal policies compare (and index) equal.
        object.__setattr__(self, "roles", frozenset(Role(r) for r in self.roles))

    def accepts(self, role: Role) -> bool:
        return not self.roles or role in self.roles


@dataclass(frozen=True, slots=True)
class Request:
    """One worker asking for a seat: its identity, role and estimated accelerator memory."""

    name: str
    role: Role
    memory: int
    owner: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise PlacementError("worker name must not be empty")
        if self.memory <= 0:
            raise PlacementError(f"worker {self.name}: memory must be > 0, got {self.memory}")
        if type(self.role) is not Role:  # an Enum call costs more than the rest of a request
            object.__setattr__(self, "role", Role(self.role))
        if not self.owner:
            object.__setattr__(self, "owner", self.name)


@dataclass(frozen=True, slots=True)
class Booking:
    """A worker's seat on a claim, with what it parks in host RAM when suspended."""

    worker: str
    owner: str
    parked_memory: int


@dataclass(frozen=True, slots=True)
class Claim:
    """A bundle of ``devices`` accelerators and the workers taking turns on it.

    ``node`` is where the claim is allocated, or, while ``allocated`` is false,
    the node it was sized against (whose devices it reserves meanwhile).
    """

    name: str
    node: str
    devices: int
    allocated: bool = True
    bookings: tuple[Booking, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name:
            raise PlacementError("claim name must not be empty")
        if self.devices < 1:
            raise PlacementError(f"claim {self.name}: devices must be >= 1, got {self.devices}")
        # Bookings are a set in meaning; keep one canonical order for determinism.
        object.__setattr__(self, "bookings", tuple(sorted(self.bookings, key=_booking_key)))

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(b.worker for b in self.bookings)

    def parked_load(self) -> int:
        return parked_load(self.bookings)


def _booking_key(booking: Booking) -> str:
    return booking.worker
