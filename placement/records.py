"""The fleet's rows and the index's groups. Internal to the package.

Rules:

* A row is the books' mutable record of one node or claim. The fields above
  the line in each row are the books; the ones below say where the index
  filed the row, so unfiling needs no recomputation. Only the index writes
  those.
* Nodes are grouped by what a decision asks of them: a new claim asks for a
  role policy and a device size (``PoolGroup``; a mixed node is in one per
  device group, with that group's devices); a join also asks for the
  claim's width (``SeatGroup``, which the reasons count by; the join itself
  reads width and device size folded into each claim's room). Two nodes in
  one group are interchangeable but for their names and their free capacity.
* A group is made once per index and shared by every node of its shape, so
  the index keys on the group object itself: equal means identical, and a
  dictionary lookup hashes nothing but an address.
* The fleet hands out only frozen snapshots (``Node``, ``Claim``) or plain
  values, never a row.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.model import Booking, Claim, Node, Role
from placement.policy import has_pod_slot
from placement.rooms import RoomIndex

# Owner -> (its workers on a claim, the roles they hold; None: not known).
Tally = dict[str, tuple[int, frozenset[str | None]]]
# One owner group's lists: rank (``owners.share_rank``) -> sorted claim names.
RankLists = dict[int, list[str]]

# A role's plain string and back (None: a role not known), for the bookings' tuples.
ROLE_NAME: dict[Role | None, str | None] = {None: None, **{role: role.value for role in Role}}
ROLE_OF: dict[str | None, Role | None] = {name: role for role, name in ROLE_NAME.items()}


@dataclass(frozen=True, slots=True, eq=False)
class PoolGroup:
    """Nodes alike in what a new claim asks of them."""

    roles: frozenset[Role]
    device_memory: int


@dataclass(frozen=True, slots=True, eq=False)
class SeatGroup:
    """Allocated claims alike in what a joiner must fit."""

    roles: frozenset[Role]
    device_memory: int
    devices: int


class NodeRow:
    """A node in the books; the index's groups for it hang below the line."""

    __slots__ = ("node", "pod_blocked", "pool_groups", "seat_groups", "seats", "shares",
                 "widest", "workers")

    def __init__(self, node: Node, workers: int = 0) -> None:
        self.node = node
        self.workers = workers  # booked on the claims allocated to it or sized against it
        self.seats = node.seats_per_claim  # read on every filing of its claims
        # It may share claims: every worker on it counts against its host memory.
        self.shares = self.seats > 1
        # No claim or new claim on it holds more (its devices at its largest size): a
        # room is never above it, so host memory left above it bounds nothing.
        self.widest = node.devices * node.groups[-1][1]
        # ---- the index's
        self.pool_groups: tuple[PoolGroup, ...] = ()  # one per device group, as node.groups
        # By width, or (width, device memory) for a mixed node's larger groups
        self.seat_groups: dict[int | tuple[int, int], SeatGroup] = {}
        self.pod_blocked = False  # filed as at its pod limit: no pool, no open seat

    @property
    def at_pod_limit(self) -> bool:
        return not has_pod_slot(self.node, self.workers)


class Groups:
    """The one group object of each shape in an index."""

    __slots__ = ("_pools", "_seats")

    def __init__(self) -> None:
        self._pools: dict[tuple[frozenset[Role], int], PoolGroup] = {}
        self._seats: dict[tuple[frozenset[Role], int, int], SeatGroup] = {}

    def pool_groups(self, node: Node) -> tuple[PoolGroup, ...]:
        """The node's pool group for each of its device groups, in ``node.groups`` order."""
        found = []
        for _devices, memory in node.groups:
            key = (node.roles, memory)
            group = self._pools.get(key)
            if group is None:
                group = self._pools[key] = PoolGroup(*key)
            found.append(group)
        return tuple(found)

    def seat_group(self, row: NodeRow, devices: int, device_memory: int) -> SeatGroup:
        """The group of a ``devices``-wide claim of ``device_memory`` devices on the row's
        node, remembered on the row too."""
        # By width alone on the node's smallest size (every claim of a plain node).
        shape: int | tuple[int, int] = (devices if device_memory == row.node.device_memory
                                        else (devices, device_memory))
        group = row.seat_groups.get(shape)
        if group is None:
            key = (row.node.roles, device_memory, devices)
            group = self._seats.get(key)
            if group is None:
                group = self._seats[key] = SeatGroup(*key)
            row.seat_groups[shape] = group
        return group


class ClaimRow:
    """A claim in the books: where it is, how wide, and who is booked on it."""

    __slots__ = ("allocated", "blocked_key", "bookings", "bucket", "device_memory", "devices",
                 "exclusive", "exclusive_key", "footprint", "full_key", "name", "node",
                 "open_key", "owner_lists", "shown", "tally", "unallocated_key")

    def __init__(self, name: str, node: str, devices: int, allocated: bool,
                 device_memory: int = 0) -> None:
        self.name = name
        self.node = node
        self.devices = devices
        self.allocated = allocated
        self.device_memory = device_memory  # its group on its node (``Claim.device_memory``)
        # worker -> (owner, parked memory, exclusive, role's name or None): a Booking is
        # made only for a snapshot, not once per seat taken. The role is kept as its plain
        # string (equal to the Role, and hashed alike): a tuple holding an enum member
        # stays tracked by the garbage collector for good, and so does the dict holding
        # it, so every collection would walk each booking.
        self.bookings: dict[str, tuple[str, int, bool, str | None]] = {}
        self.exclusive = 0  # exclusive workers booked on it: while any, no one joins it
        # The parked memory of all its workers, shared or not, kept as bookings come
        # and go: summing them on every change would cost a pass over the workers.
        self.footprint = 0
        self.shown: Claim | None = None  # the last snapshot, until the claim changes
        # ---- the index's: where the claim is filed
        self.bucket: RoomIndex | None = None  # its open-seat bucket
        # The owner lists it is filed in, as (lists, rank); None: in none (not open, or
        # no join has searched yet)
        self.owner_lists: tuple[tuple[RankLists, int], ...] | None = None
        # Its owners, filed open with two workers or more (``owners.tally``); read only
        # then (one worker: its one booking says it), so left as it was otherwise
        self.tally: Tally | None = None
        self.exclusive_key: SeatGroup | None = None  # counted as held by an exclusive worker
        self.open_key: SeatGroup | None = None  # counted as open (with a free seat)
        self.full_key: tuple[SeatGroup, int] | None = None  # counted as full
        self.blocked_key: SeatGroup | None = None  # a free seat, but its node is at its pod limit
        self.unallocated_key: tuple[PoolGroup, int] | None = None  # counted as unallocated

    def seat(self, worker: str, owner: str, parked_memory: int, exclusive: bool = False,
             role: Role | None = None) -> None:
        self.bookings[worker] = (owner, parked_memory, exclusive, ROLE_NAME[role])
        self.footprint += parked_memory
        self.exclusive += exclusive
        self.shown = None

    def unseat(self, worker: str) -> None:
        _owner, parked, exclusive, _role = self.bookings.pop(worker)
        self.footprint -= parked
        self.exclusive -= exclusive
        self.shown = None

    def place(self, node: str) -> None:
        """DRA allocated the claim on ``node``."""
        self.node = node
        self.allocated = True
        self.shown = None

    @property
    def parked_memory(self) -> int:
        """What its workers may park at once: the rule of ``Claim.parked_memory``, kept current."""
        return self.footprint if len(self.bookings) >= 2 else 0

    def snapshot(self) -> Claim:
        """The claim as a frozen value; kept until the claim changes (reads repeat a lot).

        Built as ``Claim`` and ``Booking`` would build it (bookings by worker name), less
        their checks: every value here passed them on its way into the books, and a
        report snapshots every claim (the checks were half of that).
        ``tests/unit/placement/test_properties.py`` compares it with the checked values.
        """
        shown = self.shown
        if shown is None:
            shown = self.shown = _claim(
                self.name, self.node, self.devices, self.allocated,
                tuple([_booking(worker, owner, parked, exclusive, ROLE_OF[role])
                       for worker, (owner, parked, exclusive, role)
                       in sorted(self.bookings.items())]),
                self.device_memory)
        return shown


# One setter line per field, not a loop over the slots: the loop cost more than the
# checked construction it stands in for.
_new, _set = object.__new__, object.__setattr__


def _claim(name: str, node: str, devices: int, allocated: bool,
           bookings: tuple[Booking, ...], device_memory: int) -> Claim:
    claim = _new(Claim)
    _set(claim, "name", name)
    _set(claim, "node", node)
    _set(claim, "devices", devices)
    _set(claim, "allocated", allocated)
    _set(claim, "bookings", bookings)
    _set(claim, "device_memory", device_memory)
    return claim


def _booking(worker: str, owner: str, parked_memory: int, exclusive: bool,
             role: Role | None) -> Booking:
    booking = _new(Booking)
    _set(booking, "worker", worker)
    _set(booking, "owner", owner)
    _set(booking, "parked_memory", parked_memory)
    _set(booking, "exclusive", exclusive)
    _set(booking, "role", role)
    return booking
