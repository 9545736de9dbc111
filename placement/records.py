"""The records behind the fleet's indexes: groups of alike nodes and claims, and mutable rows.

Rules:

* Nodes are grouped by what a decision asks of them: a new claim asks for a
  role policy and a device size (``PoolGroup``); a join also asks for the
  claim's width (``SeatGroup``, which the reasons count by; the join itself
  reads width and device size folded into each claim's slack). Two nodes in
  one group are interchangeable but for their names and their free capacity.
* A group is made once per fleet and shared by every node of its shape, so
  the indexes key on the group object itself: equal means identical, and a
  dictionary lookup hashes nothing but an address.
* Rows are private and mutable; the fleet hands out only frozen snapshots
  (``Claim``) or plain values.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.model import Booking, Claim, Node, Role
from placement.slack import SlackIndex


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


class NodeRecord:
    """A node as the fleet files it: its hardware, its pool group, its seat groups by width."""

    __slots__ = ("node", "pool_group", "seat_groups")

    def __init__(self, node: Node, pool_group: PoolGroup) -> None:
        self.node = node
        self.pool_group = pool_group
        self.seat_groups: dict[int, SeatGroup] = {}  # by claim width, filled by Groups


class Groups:
    """The one group object of each shape in a fleet."""

    __slots__ = ("_pools", "_seats")

    def __init__(self) -> None:
        self._pools: dict[tuple[frozenset[Role], int], PoolGroup] = {}
        self._seats: dict[tuple[frozenset[Role], int, int], SeatGroup] = {}

    def pool_group(self, node: Node) -> PoolGroup:
        key = (node.roles, node.device_memory)
        group = self._pools.get(key)
        if group is None:
            group = self._pools[key] = PoolGroup(*key)
        return group

    def seat_group(self, node: NodeRecord, devices: int) -> SeatGroup:
        """The group of a ``devices``-wide claim on ``node``, remembered on the node too."""
        group = node.seat_groups.get(devices)
        if group is None:
            key = (node.node.roles, node.node.device_memory, devices)
            group = self._seats.get(key)
            if group is None:
                group = self._seats[key] = SeatGroup(*key)
            node.seat_groups[devices] = group
        return group


class ClaimRecord:
    __slots__ = ("allocated", "bookings", "bucket", "devices", "full_key", "name", "node",
                 "open_key", "parked_total", "unallocated_key")

    def __init__(self, name: str, node: str, devices: int, allocated: bool) -> None:
        self.name = name
        self.node = node
        self.devices = devices
        self.allocated = allocated
        # worker -> (owner, parked memory): a Booking is made only for a snapshot,
        # not once per seat taken.
        self.bookings: dict[str, tuple[str, int]] = {}
        # Kept as bookings come and go: summing them on every change would cost
        # a pass over the claim's workers each time its node's room is asked.
        self.parked_total = 0
        # Where the claim is filed, so unfiling needs no recomputation.
        self.bucket: SlackIndex | None = None  # its open-seat bucket
        self.open_key: SeatGroup | None = None  # counted as open (with a free seat)
        self.full_key: tuple[SeatGroup, int] | None = None  # counted as full
        self.unallocated_key: tuple[PoolGroup, int] | None = None  # counted as unallocated

    def seat(self, worker: str, owner: str, parked_memory: int) -> None:
        self.bookings[worker] = (owner, parked_memory)
        self.parked_total += parked_memory

    def unseat(self, worker: str) -> None:
        self.parked_total -= self.bookings.pop(worker)[1]

    def parked_load(self) -> int:
        """What its workers may park at once: the rule of ``model.parked_load``, kept current."""
        return self.parked_total if len(self.bookings) >= 2 else 0

    def snapshot(self) -> Claim:
        return Claim(self.name, self.node, self.devices, allocated=self.allocated,
                     bookings=tuple(Booking(worker, owner, parked)
                                    for worker, (owner, parked) in self.bookings.items()))
