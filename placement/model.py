"""Plain data the placement decision reads, and the arithmetic over it.

Rules stated once, so the rest of the package can lean on them:

* Every memory figure is an ``int`` of bytes. Quantities such as ``"10Gi"`` are
  parsed at the edges (CLI, controller; with ``placement.quantity``), never here.
* A node is a *pool*: ``devices`` accelerators of at least ``device_memory``
  bytes each, plus ``host_memory`` bytes of allocatable RAM (``None`` =
  unknown, never checked).
* A node whose devices differ in memory is *mixed*: its ``device_groups``
  list (devices, device memory) per size, smallest first; ``devices`` is
  their total and ``device_memory`` the smallest size. A node without them is
  one group (``groups`` reads both alike). A claim's devices all come from
  one group of its node, named by the claim's ``device_memory`` (0, or a
  size the node lacks: its smallest group), so a new claim's memory bounds
  (``group_floor`` up to the group's size) let DRA pick only that group's
  devices.
* A node that names no roles accepts both roles.
* ``max_workers_per_claim`` defaults to 1: sharing a claim is opt-in per node.
  A claim seats at most ``seats_per_claim`` = min(max_workers_per_claim,
  ``MAX_CLAIM_CONSUMERS``): DRA records at most 256 consumers of one claim,
  so a higher setting promises seats that could never be taken.
* A node runs at most ``pods`` workers (``None`` = unknown, never checked):
  its pod slots left for workers, i.e. its allocatable pods less the pods
  bound to it that are not workers and have not finished. Every worker
  booked on a claim allocated to the node, or sized against it, takes one:
  a new claim's first worker as much as a joiner.
* One node per worker. Devices needed on a node =
  ``max(1, ceil(memory / device_memory))``; capacity split across nodes places
  nothing.
* A worker that names ``devices`` (a tensor-parallel server) needs exactly
  that many, whatever its memory: ``devices_for`` gives N on devices that
  hold its per-device share ``ceil(memory / N)``, and None on smaller ones
  (no count of them will do). It never joins a claim (``policy.py``).
* V1 residency: exactly one worker of a claim is resident in accelerator
  memory at a time, so estimates on a claim are never summed. A worker fits a
  k-device claim when its per-device share ``ceil(memory / k)`` fits one
  device.
* A suspended worker parks its whole accelerator state in host RAM, so its
  parked footprint is its ``memory``. A worker alone on its claim is always
  resident and parks nothing; on a shared claim every worker may be parked at
  once (a handoff suspends the outgoing worker before restoring the next).
* A worker that names no owner is an owner of one: itself.
* An *exclusive* worker runs alone: it never joins a claim, and no one joins
  a claim it is booked on (the decision's rules are in ``policy.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import KW_ONLY, dataclass, field

__all__ = [
    "MAX_CLAIM_CONSUMERS",
    "Booking",
    "Claim",
    "DeviceGroup",
    "Node",
    "PlacementError",
    "Request",
    "Role",
    "devices_for",
    "devices_needed",
    "per_device_share",
]

# A ResourceClaim lists at most this many consumers (its ``status.reservedFor``).
MAX_CLAIM_CONSUMERS = 256


class PlacementError(ValueError):
    """Input the decision cannot be asked about (a malformed node, request or fleet change)."""


class Role(enum.StrEnum):
    TRAINER = "trainer"
    SAMPLER = "sampler"


def devices_needed(memory: int, device_memory: int) -> int:
    """Devices a worker of ``memory`` bytes needs when each holds ``device_memory``."""
    needed = -(-memory // device_memory)
    return needed if needed > 1 else 1


def devices_for(memory: int, device_memory: int, exact: int | None) -> int | None:
    """Devices a worker of ``memory`` bytes takes on devices of ``device_memory``: its
    ``exact`` count when it names one and its share of each fits (None when it does not),
    else ``devices_needed``."""
    if exact is None:
        needed = -(-memory // device_memory)
        return needed if needed > 1 else 1
    return exact if -(-memory // exact) <= device_memory else None


def per_device_share(memory: int, devices: int) -> int:
    """Bytes of each device a worker uses when spread over a ``devices``-wide claim."""
    return -(-memory // devices)  # rounded up


DeviceGroup = tuple[int, int]  # (devices, bytes of memory each) of one size on a node


@dataclass(frozen=True, slots=True)
class Node:
    """A pool: ``devices`` accelerators of ``device_memory`` bytes each, on one host.

    A mixed node also lists its ``device_groups``; ``Node.grouped`` builds one
    from the groups alone.
    """

    name: str
    devices: int
    device_memory: int
    host_memory: int | None = None
    roles: frozenset[Role] = frozenset()
    max_workers_per_claim: int = 1
    product: str = ""
    pods: int | None = None  # pod slots for workers; None: unchecked
    # (devices, device memory) per size, smallest first; () on a node of one size.
    device_groups: tuple[DeviceGroup, ...] = ()

    @classmethod
    def grouped(cls, name: str, groups: Collection[DeviceGroup], **kwargs: object) -> Node:
        """A node of these (devices, device memory) groups: totals and smallest derived."""
        where = f"node {name}"
        checked = _device_groups(where, groups)
        return cls(name, sum(n for n, _ in checked), min(m for _, m in checked),
                   device_groups=checked, **kwargs)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        _check_name("node", self.name)
        where = f"node {self.name}"
        _check_whole(where, "devices", self.devices, 1)
        _check_whole(where, "device_memory", self.device_memory, 1, bytes_=True)
        if self.host_memory is not None:
            _check_whole(where, "host_memory", self.host_memory, 0, bytes_=True)
        _check_whole(where, "max_workers_per_claim", self.max_workers_per_claim, 1)
        if self.pods is not None:
            _check_whole(where, "pods", self.pods, 0)
        if type(self.product) is not str:
            raise PlacementError(f"{where}: product must be a string, got {_show(self.product)}")
        # Normalise so that equal policies compare (and index) equal.
        object.__setattr__(self, "roles", _roles(where, self.roles))
        if self.device_groups:
            groups = _device_groups(where, self.device_groups)
            if (sum(n for n, _ in groups), groups[0][1]) != (self.devices, self.device_memory):
                raise PlacementError(
                    f"{where}: device_groups hold {sum(n for n, _ in groups)} devices of at "
                    f"least {groups[0][1]} bytes, but devices/device_memory say "
                    f"{self.devices} of {self.device_memory}")
            # One size is a plain node: the same value either way.
            object.__setattr__(self, "device_groups", groups if len(groups) > 1 else ())

    @property
    def groups(self) -> tuple[DeviceGroup, ...]:
        """(devices, device memory) of each size on the node, smallest first."""
        return self.device_groups or ((self.devices, self.device_memory),)

    def group_index(self, device_memory: int) -> int:
        """The group a claim of ``device_memory`` takes its devices from (0: the smallest)."""
        for index, (_devices, memory) in enumerate(self.device_groups):
            if memory == device_memory:
                return index
        return 0

    def group_memory(self, device_memory: int) -> int:
        """The device size of the group a claim of ``device_memory`` draws on."""
        if not self.device_groups:
            return self.device_memory
        return self.device_groups[self.group_index(device_memory)][1]

    def group_floor(self, device_memory: int) -> int:
        """The least device memory only the group of ``device_memory`` holds on this node:
        one byte above the next smaller group's (0 on a node of one size)."""
        index = self.group_index(device_memory) if self.device_groups else 0
        return self.device_groups[index - 1][1] + 1 if index else 0

    def accepts(self, role: Role) -> bool:
        return not self.roles or role in self.roles

    @property
    def seats_per_claim(self) -> int:
        """Workers one claim on this node seats: its setting, within DRA's consumer limit."""
        seats = self.max_workers_per_claim
        return seats if seats < MAX_CLAIM_CONSUMERS else MAX_CLAIM_CONSUMERS


@dataclass(frozen=True, slots=True)
class Request:
    """One worker asking for a seat: its identity, role and estimated accelerator memory."""

    name: str
    role: Role
    memory: int
    owner: str = ""
    exclusive: bool = False  # runs alone: joins no claim, and no one joins its claim
    # Exactly this many devices of one node, each holding memory / devices; None: as
    # many as its memory needs. A worker naming it joins no claim.
    devices: int | None = None
    # It may be stopped and started again elsewhere (``placement.moves`` moves only these).
    movable: bool = False

    def __post_init__(self) -> None:
        # Inline tests first: a simulation builds one request per arrival.
        if type(self.name) is not str or not self.name:
            _check_name("worker", self.name)
        if type(self.memory) is not int or self.memory <= 0:
            _check_whole(f"worker {self.name}", "memory", self.memory, 1, bytes_=True)
        if type(self.role) is not Role:  # an Enum call costs more than the rest of a request
            object.__setattr__(self, "role", _role(f"worker {self.name}", "role", self.role))
        if not self.owner:
            object.__setattr__(self, "owner", self.name)
        elif type(self.owner) is not str:
            raise PlacementError(f"worker {self.name}: owner must be a string, "
                                 f"got {_show(self.owner)}")
        if type(self.exclusive) is not bool:
            raise PlacementError(f"worker {self.name}: exclusive must be True or False, "
                                 f"got {_show(self.exclusive)}")
        if self.devices is not None and (type(self.devices) is not int or self.devices < 1):
            _check_whole(f"worker {self.name}", "devices", self.devices, 1)
        if self.movable is not False and self.movable is not True:
            raise PlacementError(f"worker {self.name}: movable must be True or False, "
                                 f"got {_show(self.movable)}")

    @property
    def joins(self) -> bool:
        """Whether it may join a claim: neither exclusive nor asking an exact device count."""
        return not self.exclusive and self.devices is None


@dataclass(frozen=True, slots=True)
class Booking:
    """A worker's seat on a claim, with what it parks in host RAM when suspended."""

    worker: str
    owner: str
    parked_memory: int
    exclusive: bool = False  # the worker runs alone: no one joins this claim
    # Its role; None: not known (a reader that cannot tell), taken as either role.
    role: Role | None = None

    def __post_init__(self) -> None:
        # One test for the common case: every snapshot of a claim builds its bookings.
        if (type(self.worker) is not str or not self.worker or type(self.owner) is not str
                or type(self.parked_memory) is not int or self.parked_memory < 0
                or type(self.exclusive) is not bool):
            self._refuse()
        if self.role is not None and type(self.role) is not Role:
            object.__setattr__(self, "role", _role(f"booking of {self.worker}", "role",
                                                   self.role))

    def _refuse(self) -> None:
        _check_name("booked worker", self.worker)
        where = f"booking of {self.worker}"
        if type(self.owner) is not str:
            raise PlacementError(f"{where}: owner must be a string, got {_show(self.owner)}")
        _check_whole(where, "parked_memory", self.parked_memory, 0, bytes_=True)
        raise PlacementError(f"{where}: exclusive must be True or False, "
                             f"got {_show(self.exclusive)}")


@dataclass(frozen=True, slots=True)
class Claim:
    """A bundle of ``devices`` accelerators and the workers taking turns on it.

    ``node`` is where the claim is allocated, or, while ``allocated`` is false,
    the node it was sized against (whose devices it reserves meanwhile).
    """

    name: str
    node: str
    devices: int
    _: KW_ONLY
    allocated: bool = True
    bookings: tuple[Booking, ...] = field(default=())
    # The device size of the node's group its devices come from; 0: the node's smallest.
    device_memory: int = 0

    def __post_init__(self) -> None:
        name, node, devices = self.name, self.node, self.devices
        # One test for the common case: the fleet builds a snapshot per claim it hands out.
        if (type(name) is not str or not name or type(node) is not str or not node
                or type(devices) is not int or devices < 1 or type(self.allocated) is not bool
                or type(self.device_memory) is not int or self.device_memory < 0):
            self._refuse()
        bookings = self.bookings
        if type(bookings) is not tuple:
            bookings = tuple(bookings)
        if bookings:
            for booking in bookings:
                if type(booking) is not Booking:
                    raise PlacementError(f"claim {name}: bookings must be Booking values, "
                                         f"got {_show(booking)}")
            workers = [b.worker for b in bookings]
            if len(set(workers)) != len(workers):
                twice = sorted({w for w in workers if workers.count(w) > 1})
                raise PlacementError(f"claim {name}: worker {', '.join(twice)} booked twice")
            if len(bookings) > 1:
                # A set in meaning; one canonical order for determinism.
                bookings = tuple(sorted(bookings, key=_booking_key))
        object.__setattr__(self, "bookings", bookings)

    def _refuse(self) -> None:
        _check_name("claim", self.name)
        where = f"claim {self.name}"
        _check_name(f"{where}: node", self.node)
        _check_whole(where, "devices", self.devices, 1)
        _check_whole(where, "device_memory", self.device_memory, 0, bytes_=True)
        raise PlacementError(f"{where}: allocated must be True or False, "
                             f"got {_show(self.allocated)}")

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(b.worker for b in self.bookings)

    @property
    def exclusive(self) -> bool:
        """Whether an exclusive worker is booked on it: then no one joins it."""
        return any(booking.exclusive for booking in self.bookings)

    @property
    def parked_memory(self) -> int:
        """Host RAM its workers may park at once: all of theirs once shared, none while alone."""
        if len(self.bookings) < 2:
            return 0
        return sum(booking.parked_memory for booking in self.bookings)


# Construction checks: every value a caller hands the library is checked for
# its type as well as its range, so a float device count, an infinite size or
# a role spelled wrong is refused where it enters, naming the field and why.

_ROLES = {role.value: role for role in Role}


def _show(value: object) -> str:
    kind = type(value).__name__
    return f"{value!r} ({'an' if kind[0] in 'aeiou' else 'a'} {kind})"


def _check_name(what: str, value: object) -> None:
    if type(value) is not str or not value:
        if type(value) is str:
            raise PlacementError(f"{what} name must not be empty")
        raise PlacementError(f"{what} name must be a string, got {_show(value)}")


def _check_whole(where: str, field_name: str, value: object, minimum: int, *,
                 bytes_: bool = False) -> None:
    if type(value) is not int:
        unit = "a whole number of bytes" if bytes_ else "a whole number"
        hint = (" (parse quantities such as \"10Gi\" with placement.quantity.parse_quantity)"
                if bytes_ and isinstance(value, str) else "")
        raise PlacementError(f"{where}: {field_name} must be {unit} (an int), "
                             f"got {_show(value)}{hint}")
    if value < minimum:
        bound = "> 0" if minimum == 1 and bytes_ else f">= {minimum}"
        raise PlacementError(f"{where}: {field_name} must be {bound}, got {value}")


def _role(where: str, field_name: str, value: object) -> Role:
    role = _ROLES.get(value) if isinstance(value, str) else None
    if role is None:
        raise PlacementError(f"{where}: {field_name} must be one of "
                             f"{', '.join(_ROLES)}, got {_show(value)}")
    return role


def _roles(where: str, value: object) -> frozenset[Role]:
    if isinstance(value, str) or not isinstance(value, Collection):
        raise PlacementError(f"{where}: roles must be a set of roles, got {_show(value)}")
    return frozenset(_role(where, "each of roles", role) for role in value)


def _device_groups(where: str, value: object) -> tuple[DeviceGroup, ...]:
    """Groups checked, equal sizes merged, smallest first."""
    if isinstance(value, str) or not isinstance(value, Collection) or not value:
        raise PlacementError(f"{where}: device_groups must be a non-empty list of "
                             f"(devices, device memory) pairs, got {_show(value)}")
    merged: dict[int, int] = {}
    for group in value:
        if not isinstance(group, tuple) or len(group) != 2:
            raise PlacementError(f"{where}: each of device_groups must be a "
                                 f"(devices, device memory) pair, got {_show(group)}")
        devices, memory = group
        _check_whole(where, "a device group's devices", devices, 1)
        _check_whole(where, "a device group's device_memory", memory, 1, bytes_=True)
        merged[memory] = merged.get(memory, 0) + devices
    return tuple((devices, memory) for memory, devices in sorted(merged.items()))


def _booking_key(booking: Booking) -> str:
    return booking.worker
