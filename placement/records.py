"""The records behind the fleet's indexes: groups of alike nodes and claims, and mutable rows.

Rules:

* Nodes are grouped by what a decision asks of them: a new claim asks for a
  role policy and a device size (``PoolGroup``); a join also asks for the
  claim's width (``SeatGroup``). Two nodes in one group are interchangeable
  but for their names and their free capacity.
* Rows are private and mutable; the fleet hands out only frozen snapshots
  (``Claim``) or plain values.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.model import Booking, Claim, Node, Role, parked_load
from placement.slack import SlackIndex

__all__ = ["ClaimRecord", "NodeRecord", "PoolGroup", "SeatGroup"]


@dataclass(frozen=True, slots=True)
class PoolGroup:
    """Nodes alike in what a new claim asks of them."""

    roles: frozenset[Role]
    device_memory: int


@dataclass(frozen=True, slots=True)
class SeatGroup:
    """Allocated claims alike in what a joiner must fit."""

    roles: frozenset[Role]
    device_memory: int
    devices: int


class NodeRecord:
    __slots__ = ("node", "pool_group", "seat_groups")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.pool_group = PoolGroup(node.roles, node.device_memory)
        self.seat_groups: dict[int, SeatGroup] = {}  # by claim width

    def seat_group(self, devices: int) -> SeatGroup:
        group = self.seat_groups.get(devices)
        if group is None:
            group = self.seat_groups[devices] = SeatGroup(
                self.node.roles, self.node.device_memory, devices)
        return group


class ClaimRecord:
    __slots__ = ("allocated", "bookings", "bucket", "devices", "full_key", "name", "node",
                 "unallocated_key")

    def __init__(self, name: str, node: str, devices: int, allocated: bool) -> None:
        self.name = name
        self.node = node
        self.devices = devices
        self.allocated = allocated
        self.bookings: dict[str, Booking] = {}
        # Where the claim is filed, so unfiling needs no recomputation.
        self.bucket: SlackIndex | None = None  # its open-seat bucket
        self.full_key: tuple[SeatGroup, int] | None = None  # counted as full
        self.unallocated_key: tuple[PoolGroup, int] | None = None  # counted as unallocated

    def parked_load(self) -> int:
        return parked_load(self.bookings.values())

    def snapshot(self) -> Claim:
        return Claim(self.name, self.node, self.devices, self.allocated,
                     tuple(self.bookings.values()))
