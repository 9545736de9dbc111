"""The fleet: nodes, claims and bookings, indexed so a decision never scans it whole.

Rules of the books:

* Free devices of a node = its devices minus the devices of every claim
  allocated to it *or sized against it*: an unallocated claim reserves the
  pool it was priced for until DRA allocates it somewhere.
* Parked load of a node = the parked footprints of every worker on a shared
  claim (two or more workers) allocated to it. A lone worker parks nothing.
* A worker holds at most one booking; a claim name is unique.
* Claims on a node the fleet does not know (yet) are kept but invisible to
  the decision until that node is added.
* Every change is an explicit operation (``add_node``, ``add_claim``,
  ``book``, ``release``, ``drop_claim``, ``allocate``). Reading never
  mutates, so ``decide`` stays a pure function of the request and the fleet.

The indexes are the whole of the speed story: pools are bucketed by
(role policy, device memory) and then by free devices; allocated claims by
(role policy, device memory, claim width, seat limit) and then by bookings.
Hardware comes in few shapes, so a decision visits a handful of buckets
whatever the fleet's size. Each bucket is a sorted list of names, so the
name tie-break is the list's head.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from placement.model import Booking, Claim, Node, PlacementError, Request, Role

__all__ = ["Fleet", "PoolGroup", "SeatGroup"]


@dataclass(frozen=True, slots=True)
class PoolGroup:
    """Nodes alike in what the decision asks of a free pool."""

    roles: frozenset[Role]
    device_memory: int


@dataclass(frozen=True, slots=True)
class SeatGroup:
    """Allocated claims alike in what the decision asks of a seat."""

    roles: frozenset[Role]
    device_memory: int
    devices: int
    max_workers: int


class _ClaimRecord:
    __slots__ = ("allocated", "bookings", "devices", "name", "node")

    def __init__(self, name: str, node: str, devices: int, allocated: bool) -> None:
        self.name = name
        self.node = node
        self.devices = devices
        self.allocated = allocated
        self.bookings: dict[str, Booking] = {}

    def parked_load(self) -> int:
        if len(self.bookings) < 2:
            return 0
        return sum(b.parked_memory for b in self.bookings.values())

    def snapshot(self) -> Claim:
        return Claim(
            name=self.name,
            node=self.node,
            devices=self.devices,
            allocated=self.allocated,
            bookings=tuple(self.bookings.values()),
        )


def _remove_sorted(names: list[str], name: str) -> None:
    index = bisect_left(names, name)
    if index == len(names) or names[index] != name:
        raise AssertionError(f"index lost {name!r}")  # pragma: no cover - an internal bug
    del names[index]


class Fleet:
    def __init__(self, nodes: Iterable[Node] = (), claims: Iterable[Claim] = ()) -> None:
        self._nodes: dict[str, Node] = {}
        self._claims: dict[str, _ClaimRecord] = {}
        self._claim_of: dict[str, str] = {}
        self._claims_on: dict[str, set[str]] = {}
        self._reserved: dict[str, int] = {}
        self._parked: dict[str, int] = {}
        self._pools: dict[PoolGroup, dict[int, list[str]]] = {}
        self._seats: dict[SeatGroup, dict[int, list[str]]] = {}
        # node count and unallocated-claim count per (pool group, device count): for reasons.
        self._shapes: dict[tuple[PoolGroup, int], int] = {}
        self._unallocated: dict[tuple[PoolGroup, int], int] = {}
        # Groups in canonical order per role, rebuilt only when a new group appears.
        self._pool_views: dict[Role, list[tuple[PoolGroup, dict[int, list[str]]]]] = {}
        self._seat_views: dict[Role, list[tuple[SeatGroup, dict[int, list[str]]]]] = {}
        for node in nodes:
            self.add_node(node)
        for claim in claims:
            self.add_claim(claim)

    # ---------------------------------------------------------------- reading

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(self._nodes[name] for name in sorted(self._nodes))

    @property
    def claims(self) -> tuple[Claim, ...]:
        return tuple(self._claims[name].snapshot() for name in sorted(self._claims))

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def claim(self, name: str) -> Claim | None:
        record = self._claims.get(name)
        return record.snapshot() if record else None

    def has_claim(self, name: str) -> bool:
        return name in self._claims

    def claim_of(self, worker: str) -> str | None:
        return self._claim_of.get(worker)

    def claim_node(self, claim: str) -> str:
        return self._claims[claim].node

    def workers_on(self, claim: str) -> int:
        return len(self._claims[claim].bookings)

    def free_devices(self, node: str) -> int:
        return max(0, self._nodes[node].devices - self._reserved.get(node, 0))

    def parked_load(self, node: str) -> int:
        return self._parked.get(node, 0)

    def worker_count(self) -> int:
        return len(self._claim_of)

    # Index views for the decision. Groups come back in a canonical order so
    # that iteration order never depends on insertion order.

    def pool_groups(self, role: Role) -> list[tuple[PoolGroup, dict[int, list[str]]]]:
        views = self._pool_views.get(role)
        if views is None:
            views = [(g, self._pools[g]) for g in sorted(self._pools, key=_pool_group_key)
                     if not g.roles or role in g.roles]
            self._pool_views[role] = views
        return views

    def seat_groups(self, role: Role) -> list[tuple[SeatGroup, dict[int, list[str]]]]:
        views = self._seat_views.get(role)
        if views is None:
            views = [(g, self._seats[g]) for g in sorted(self._seats, key=_seat_group_key)
                     if not g.roles or role in g.roles]
            self._seat_views[role] = views
        return views

    def shapes(self, role: Role) -> Iterator[tuple[PoolGroup, int, int, int]]:
        """(group, devices per node, node count, unallocated claims) for nodes accepting role."""
        for (group, devices), count in sorted(self._shapes.items(), key=_shape_key):
            if not group.roles or role in group.roles:
                yield group, devices, count, self._unallocated.get((group, devices), 0)

    def join_fits_host(self, claim: str, joiner_memory: int) -> bool:
        """Whether the claim's node can park everyone once the joiner is on it."""
        record = self._claims[claim]
        host = self._nodes[record.node].host_memory
        if host is None:
            return True
        return self._parked_after_join(record, joiner_memory) <= host

    def _parked_after_join(self, record: _ClaimRecord, joiner_memory: int) -> int:
        load = self._parked.get(record.node, 0)
        if not record.bookings:
            return load  # the joiner will be alone: resident, parks nothing
        if len(record.bookings) == 1:
            # The claim turns shared: its current worker starts counting too.
            (only,) = record.bookings.values()
            load += only.parked_memory
        return load + joiner_memory

    # ------------------------------------------------------------- operations

    def add_node(self, node: Node) -> None:
        if node.name in self._nodes:
            raise PlacementError(f"node {node.name} already exists")
        self._nodes[node.name] = node
        shape = (_pool_group(node), node.devices)
        self._shapes[shape] = self._shapes.get(shape, 0) + 1
        for claim in sorted(self._claims_on.get(node.name, ())):
            self._index_claim(self._claims[claim])
        self._index_pool(node)

    def add_claim(self, claim: Claim) -> None:
        if claim.name in self._claims:
            raise PlacementError(f"claim {claim.name} already exists")
        for booking in claim.bookings:
            self._check_unbooked(booking.worker)
        record = _ClaimRecord(claim.name, claim.node, claim.devices, claim.allocated)
        for booking in claim.bookings:
            record.bookings[booking.worker] = booking
            self._claim_of[booking.worker] = claim.name
        node = self._nodes.get(claim.node)
        self._claims[claim.name] = record
        self._claims_on.setdefault(claim.node, set()).add(claim.name)
        if node is not None:
            self._unindex_pool(node)
            self._index_claim(record)
            self._index_pool(node)

    def book(self, claim: str, request: Request) -> None:
        """Seat a worker on an existing claim (a join)."""
        record = self._require_claim(claim)
        self._check_unbooked(request.name)
        self._unindex_claim(record)
        record.bookings[request.name] = Booking(request.name, request.owner, request.memory)
        self._claim_of[request.name] = claim
        self._index_claim(record)

    def release(self, worker: str) -> str:
        """Take a worker off its claim; return that claim's name. The claim stays."""
        claim = self._claim_of.get(worker)
        if claim is None:
            raise PlacementError(f"worker {worker} holds no booking")
        record = self._claims[claim]
        self._unindex_claim(record)
        del record.bookings[worker]
        del self._claim_of[worker]
        self._index_claim(record)
        return claim

    def drop_claim(self, claim: str) -> None:
        """Delete an empty claim; its devices return to its node at once."""
        record = self._require_claim(claim)
        if record.bookings:
            raise PlacementError(
                f"claim {claim} still has workers: {', '.join(sorted(record.bookings))}"
            )
        node = self._nodes.get(record.node)
        if node is not None:
            self._unindex_pool(node)
            self._unindex_claim(record)
        del self._claims[claim]
        self._claims_on[record.node].discard(claim)
        if node is not None:
            self._index_pool(node)

    def allocate(self, claim: str, node: str | None = None) -> None:
        """Record DRA's allocation of a claim, on the node it was sized against by default."""
        record = self._require_claim(claim)
        if record.allocated:
            raise PlacementError(f"claim {claim} is already allocated")
        target = record.node if node is None else node
        if target not in self._nodes:
            raise PlacementError(f"claim {claim}: unknown node {target}")
        touched = [self._nodes[n] for n in sorted({record.node, target}) if n in self._nodes]
        for pool in touched:
            self._unindex_pool(pool)
        self._unindex_claim(record)
        self._claims_on[record.node].discard(claim)
        record.node = target
        record.allocated = True
        self._claims_on.setdefault(target, set()).add(claim)
        self._index_claim(record)
        for pool in touched:
            self._index_pool(pool)

    # --------------------------------------------------------------- indexing

    def _require_claim(self, claim: str) -> _ClaimRecord:
        record = self._claims.get(claim)
        if record is None:
            raise PlacementError(f"unknown claim {claim}")
        return record

    def _check_unbooked(self, worker: str) -> None:
        if worker in self._claim_of:
            raise PlacementError(f"worker {worker} is already on claim {self._claim_of[worker]}")

    def _index_pool(self, node: Node) -> None:
        """Recompute a node's reservation from its claims and file it by free devices."""
        reserved = 0
        for name in self._claims_on.get(node.name, ()):
            reserved += self._claims[name].devices
        self._reserved[node.name] = reserved
        free = max(0, node.devices - reserved)
        group = _pool_group(node)
        if group not in self._pools:
            self._pools[group] = {}
            self._pool_views.clear()
        insort(self._pools[group].setdefault(free, []), node.name)

    def _unindex_pool(self, node: Node) -> None:
        free = max(0, node.devices - self._reserved.get(node.name, 0))
        _remove_sorted(self._pools[_pool_group(node)][free], node.name)

    def _index_claim(self, record: _ClaimRecord) -> None:
        node = self._nodes.get(record.node)
        if node is None:
            return
        if record.allocated:
            self._parked[node.name] = self._parked.get(node.name, 0) + record.parked_load()
            group = _seat_group(node, record.devices)
            if group not in self._seats:
                self._seats[group] = {}
                self._seat_views.clear()
            insort(self._seats[group].setdefault(len(record.bookings), []), record.name)
        else:
            shape = (_pool_group(node), node.devices)
            self._unallocated[shape] = self._unallocated.get(shape, 0) + 1

    def _unindex_claim(self, record: _ClaimRecord) -> None:
        node = self._nodes.get(record.node)
        if node is None:
            return
        if record.allocated:
            self._parked[node.name] -= record.parked_load()
            group = _seat_group(node, record.devices)
            _remove_sorted(self._seats[group][len(record.bookings)], record.name)
        else:
            self._unallocated[(_pool_group(node), node.devices)] -= 1


def _pool_group(node: Node) -> PoolGroup:
    return PoolGroup(node.roles, node.device_memory)


def _seat_group(node: Node, devices: int) -> SeatGroup:
    return SeatGroup(node.roles, node.device_memory, devices, node.max_workers_per_claim)


def _roles_key(roles: frozenset[Role]) -> tuple[str, ...]:
    return tuple(sorted(roles))


def _pool_group_key(group: PoolGroup) -> tuple[int, tuple[str, ...]]:
    return group.device_memory, _roles_key(group.roles)


def _seat_group_key(group: SeatGroup) -> tuple[int, int, int, tuple[str, ...]]:
    return group.device_memory, group.devices, group.max_workers, _roles_key(group.roles)


def _shape_key(item: tuple[tuple[PoolGroup, int], int]) -> tuple[int, int, tuple[str, ...]]:
    (group, devices), _ = item
    return group.device_memory, devices, _roles_key(group.roles)
