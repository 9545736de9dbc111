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
* Every change is an explicit operation, and every operation checks what it
  changes, raising ``PlacementError`` and changing nothing when it would break
  the books. Two kinds:

  - *decisions* carried out: ``cut`` (a new claim for one worker) and
    ``book`` (a join). They check what ``decide`` checks: the node accepts
    the role, the devices are free (``cut``) or the claim is allocated and
    has a seat (``book``), the worker fits the devices by itself, and the
    node can park everyone after a join.
  - *facts* recorded: ``add_node``, ``replace_node``, ``remove_node``,
    ``add_claim``, ``allocate``, ``unbook``, ``remove_claim`` and
    ``book(..., observed=True)``. A cluster can be over its limits (a node
    relabelled to fewer seats, host memory shrunk), so these check only what
    cannot be: a duplicate name, a worker booked twice, an unknown claim, a
    claim wider than its node, removing a claim that still has workers.

  Reading never changes an answer (at most it tightens a cached bound inside
  the slack index), so ``decide`` stays a pure function of the request and
  the fleet.

The indexes are the whole of the speed story. Pools are bucketed by (role
policy, device memory), then by free devices, each bucket a sorted list of
node names (so the name tie-break is its head). Allocated claims with a free
seat are bucketed by role policy, then by workers, each bucket a
``SlackIndex`` where a claim carries the largest joiner it could take: the
smaller of what its devices hold (width x device memory) and what its node
could still park. Both join checks on size are then one comparison, so a
decision visits a bucket or two per worker count whatever the fleet's size
or hardware mix, and skips the claims that cannot take the worker.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from typing import NoReturn

from placement.model import Claim, Node, PlacementError, Request, Role, per_device_share
from placement.records import ClaimRecord, Groups, NodeRecord, PoolGroup, SeatGroup
from placement.slack import Slack, SlackIndex

__all__ = ["Fleet"]


class Fleet:
    def __init__(self, nodes: Iterable[Node] = (), claims: Iterable[Claim] = ()) -> None:
        self._nodes: dict[str, NodeRecord] = {}
        self._claims: dict[str, ClaimRecord] = {}
        self._claim_of: dict[str, str] = {}
        self._claims_on: dict[str, dict[str, ClaimRecord]] = {}  # by node, sized or allocated
        self._free: dict[str, int] = {}  # free devices of each known node, as filed
        self._parked: dict[str, int] = {}
        self._pools: dict[PoolGroup, dict[int, list[str]]] = {}
        self._seats: dict[frozenset[Role], dict[int, SlackIndex]] = {}
        self._groups = Groups()
        # Counters for reasons: nodes per (group, devices); claims with a free seat per
        # group; full claims per (group, seat limit); unallocated claims per (group,
        # devices of their node).
        self._shapes: dict[tuple[PoolGroup, int], int] = {}
        self._open: dict[SeatGroup, int] = {}
        self._full: dict[tuple[SeatGroup, int], int] = {}
        self._unallocated: dict[tuple[PoolGroup, int], int] = {}
        # Groups in canonical order per role, rebuilt only when a new group appears.
        self._pool_views: dict[Role, list[tuple[PoolGroup, dict[int, list[str]]]]] = {}
        self._seat_views: dict[Role, list[dict[int, SlackIndex]]] = {}
        for node in nodes:
            self.add_node(node)
        for claim in claims:
            self.add_claim(claim)

    # ---------------------------------------------------------------- reading

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(self._nodes[name].node for name in sorted(self._nodes))

    @property
    def claims(self) -> tuple[Claim, ...]:
        return tuple(self._claims[name].snapshot() for name in sorted(self._claims))

    def node(self, name: str) -> Node | None:
        record = self._nodes.get(name)
        return record.node if record else None

    def claim(self, name: str) -> Claim | None:
        record = self._claims.get(name)
        return record.snapshot() if record else None

    def has_claim(self, name: str) -> bool:
        return name in self._claims

    def claim_of(self, worker: str) -> str | None:
        return self._claim_of.get(worker)

    def claim_node(self, claim: str) -> str:
        return self._claims[claim].node

    def claim_devices(self, claim: str) -> int:
        return self._claims[claim].devices

    def is_allocated(self, claim: str) -> bool:
        return self._claims[claim].allocated

    def workers_on(self, claim: str) -> int:
        return len(self._claims[claim].bookings)

    def largest_joiner_on(self, node: str) -> Slack | None:
        """The largest worker some claim on ``node`` could take as a joiner; None: no free seat."""
        largest: Slack | None = None
        for name, record in self._claims_on.get(node, {}).items():
            bucket = record.bucket
            if bucket is not None:
                slack = bucket.slack(name)
                if largest is None or slack > largest:
                    largest = slack
        return largest

    def free_devices(self, node: str) -> int:
        return self._free[node]

    def parked_load(self, node: str) -> int:
        return self._parked.get(node, 0)

    # Index views for the decision and its reasons. Groups come back in a
    # canonical order, never in insertion order.

    def pool_groups(self, role: Role) -> list[tuple[PoolGroup, dict[int, list[str]]]]:
        """Pool groups accepting ``role``, each with node names by free devices."""
        views = self._pool_views.get(role)
        if views is None:
            views = [(g, self._pools[g]) for g in sorted(self._pools, key=_group_key)
                     if not g.roles or role in g.roles]
            self._pool_views[role] = views
        return views

    def open_seats(self, role: Role) -> list[dict[int, SlackIndex]]:
        """Claims with a free seat on nodes accepting ``role``, by workers (no empty buckets).

        One mapping per role policy; a claim's slack is the largest joiner it takes.
        """
        views = self._seat_views.get(role)
        if views is None:
            views = [self._seats[roles] for roles in sorted(self._seats, key=_roles_key)
                     if not roles or role in roles]
            self._seat_views[role] = views
        return views

    def open_claims(self, role: Role) -> Iterator[tuple[SeatGroup, int]]:
        """(group, count) of allocated claims with a free seat, accepting role."""
        for group, count in self._open.items():
            if count and (not group.roles or role in group.roles):
                yield group, count

    def shapes(self, role: Role) -> Iterator[tuple[PoolGroup, int, int, int]]:
        """(group, devices per node, nodes, unallocated claims) of the nodes accepting role."""
        for (group, devices), count in sorted(self._shapes.items(), key=_shape_key):
            if not group.roles or role in group.roles:
                yield group, devices, count, self._unallocated.get((group, devices), 0)

    def full_claims(self, role: Role) -> Iterator[tuple[SeatGroup, int, int]]:
        """(group, seat limit, count) of allocated claims with no seat left, accepting role."""
        for (group, limit), count in self._full.items():
            if count and (not group.roles or role in group.roles):
                yield group, limit, count

    # ------------------------------------------------------------- operations

    def add_node(self, node: Node) -> None:
        """A node joins the fleet; claims already filed against its name become visible."""
        if not isinstance(node, Node):
            raise PlacementError(f"add_node takes a Node, got {node!r}")
        if node.name in self._nodes:
            raise PlacementError(f"node {node.name} already exists")
        waiting = self._claims_on.get(node.name, {})
        for name in sorted(waiting):
            self._check_width(name, node, waiting[name].devices)
        group = self._groups.pool_group(node)
        record = self._nodes[node.name] = NodeRecord(node, group)
        shape = (group, node.devices)
        self._shapes[shape] = self._shapes.get(shape, 0) + 1
        for claim in sorted(waiting):
            self._shift_parked(node.name, self._parked_share(waiting[claim]))
            self._file(waiting[claim])
        self._file_pool(record)

    def replace_node(self, node: Node) -> None:
        """A known node changed (labels, hardware, host memory); its claims stay on it."""
        old = self.remove_node(node.name)
        try:
            self.add_node(node)
        except PlacementError:
            self.add_node(old)
            raise

    def remove_node(self, name: str) -> Node:
        """Take a node out (gone, relabelled, or its hardware changed); return it.

        Its claims and their bookings stay, invisible to the decision as claims
        on an unknown node are, until a node of that name is added again.
        """
        record = self._require_node(name)
        self._unfile_pool(record)
        for claim in self._claims_on.get(name, {}).values():
            self._unfile(claim)
        shape = (record.pool_group, record.node.devices)
        self._shapes[shape] -= 1
        if not self._shapes[shape]:
            del self._shapes[shape]
        del self._nodes[name], self._free[name]
        self._parked.pop(name, None)
        return record.node

    def add_claim(self, claim: Claim) -> None:
        """Take in a claim as it is, bookings included (a fleet read from a cluster)."""
        if not isinstance(claim, Claim):
            raise PlacementError(f"add_claim takes a Claim, got {claim!r}")
        if claim.name in self._claims:
            raise PlacementError(f"claim {claim.name} already exists")
        self._check_width(claim.name, claim.node, claim.devices)
        for booking in claim.bookings:
            self._check_unbooked(booking.worker)
        record = ClaimRecord(claim.name, claim.node, claim.devices, claim.allocated)
        for booking in claim.bookings:
            record.seat(booking.worker, booking.owner, booking.parked_memory)
        self._add_record(record)

    def cut(self, name: str, node: str, devices: int, request: Request, *,
            allocated: bool = True) -> None:
        """Create claim ``name`` of ``devices`` devices on ``node`` for one worker (a ``NewClaim``).

        ``allocated=False`` leaves it sized against ``node`` and reserving its
        devices there until ``allocate`` records where DRA put it.
        """
        if name in self._claims:
            raise PlacementError(f"claim {name} already exists")
        self._check_unbooked(request.name)
        known = self._nodes.get(node)
        # One test for the common case (a decision carried out), the reasons only on refusal.
        if (known is None or type(devices) is not int or not 1 <= devices <= self._free[node]
                or request.memory > devices * known.node.device_memory
                or (known.node.roles and request.role not in known.node.roles)):
            self._refuse_cut(name, node, devices, request)
        record = ClaimRecord(name, node, devices, allocated)
        record.seat(request.name, request.owner, request.memory)
        self._add_record(record)

    def _add_record(self, record: ClaimRecord) -> None:
        for worker in record.bookings:
            self._claim_of[worker] = record.name
        self._claims[record.name] = record
        self._claims_on.setdefault(record.node, {})[record.name] = record
        node = self._nodes.get(record.node)
        if node is not None:
            self._unfile_pool(node)
            self._shift_parked(record.node, self._parked_share(record))
            self._file(record)
            self._file_pool(node)

    def book(self, claim: str, request: Request, *, observed: bool = False) -> None:
        """Seat a worker on an existing claim: a join (a ``JoinClaim``).

        ``observed=True`` records a booking that already exists (a fleet read
        from a cluster), where the join checks may no longer hold.
        """
        record = self._require_claim(claim)
        self._check_unbooked(request.name)
        if not observed:
            bucket = record.bucket  # set only for an allocated claim with a free seat
            roles = self._nodes[record.node].node.roles if bucket is not None else None
            # The claim's slack already says "fits its devices and its node can park it".
            if (bucket is None or request.memory > bucket.slack(claim)
                    or (roles and request.role not in roles)):
                self._refuse_join(record, request)
        before = self._parked_share(record)
        self._unfile(record)
        record.seat(request.name, request.owner, request.memory)
        self._claim_of[request.name] = claim
        if record.node in self._nodes:
            self._shift_parked(record.node, self._parked_share(record) - before)
        self._file(record)

    def unbook(self, worker: str) -> str:
        """Take a worker off its claim; return that claim's name. The claim stays."""
        claim = self._claim_of.get(worker)
        if claim is None:
            raise PlacementError(f"worker {worker} holds no booking")
        record = self._claims[claim]
        before = self._parked_share(record)
        self._unfile(record)
        record.unseat(worker)
        del self._claim_of[worker]
        if record.node in self._nodes:
            self._shift_parked(record.node, self._parked_share(record) - before)
        self._file(record)
        return claim

    def remove_claim(self, claim: str) -> None:
        """Delete an empty claim; its devices return to its node at once."""
        record = self._require_claim(claim)
        if record.bookings:
            raise PlacementError(
                f"claim {claim} still has workers: {', '.join(sorted(record.bookings))}")
        node = self._nodes.get(record.node)
        if node is not None:
            self._unfile_pool(node)
        self._unfile(record)
        del self._claims[claim]
        del self._claims_on[record.node][claim]
        if node is not None:
            self._file_pool(node)

    def allocate(self, claim: str, *, node: str | None = None) -> None:
        """Record DRA's allocation of a claim, on the node it was sized against by default."""
        record = self._require_claim(claim)
        if record.allocated:
            raise PlacementError(f"claim {claim} is already allocated")
        target = record.node if node is None else node
        if target not in self._nodes:
            raise PlacementError(f"claim {claim}: unknown node {target}")
        self._check_width(claim, target, record.devices)
        touched = [self._nodes[n] for n in sorted({record.node, target}) if n in self._nodes]
        for pool in touched:
            self._unfile_pool(pool)
        self._unfile(record)
        del self._claims_on[record.node][claim]
        record.node = target
        record.allocated = True
        self._claims_on.setdefault(target, {})[claim] = record
        self._shift_parked(target, self._parked_share(record))
        self._file(record)
        for pool in touched:
            self._file_pool(pool)

    # --------------------------------------------------------------- indexing

    def _require_claim(self, claim: str) -> ClaimRecord:
        record = self._claims.get(claim)
        if record is None:
            raise PlacementError(f"unknown claim {claim}")
        return record

    def _require_node(self, name: str) -> NodeRecord:
        record = self._nodes.get(name)
        if record is None:
            raise PlacementError(f"unknown node {name}")
        return record

    def _check_width(self, claim: str, node: str | Node, devices: int) -> None:
        """A claim never holds more devices than its node has (a node not known: unchecked)."""
        if isinstance(node, str):
            record = self._nodes.get(node)
            if record is None:
                return
            node = record.node
        if devices > node.devices:
            raise PlacementError(f"claim {claim} holds {devices} devices, node {node.name} has "
                                 f"{node.devices}")

    def _refuse_cut(self, name: str, node: str, devices: int, request: Request) -> NoReturn:
        """Why claim ``name`` cannot be cut for ``request``: what ``decide`` checks first."""
        hardware = self._require_node(node).node
        if type(devices) is not int or devices < 1:
            raise PlacementError(f"claim {name}: devices must be an int >= 1, got {devices!r}")
        if not hardware.accepts(request.role):
            raise PlacementError(f"node {node} does not accept {request.role} workers")
        if devices > self._free[node]:
            raise PlacementError(f"claim {name}: node {node} has {self._free[node]} free "
                                 f"device(s), not {devices}")
        raise PlacementError(f"worker {request.name} does not fit {devices} device(s) of "
                             f"node {node}")

    def _refuse_join(self, record: ClaimRecord, request: Request) -> NoReturn:
        """Why ``request`` cannot join the claim, naming the check that fails."""
        name = record.name
        if not record.allocated:
            raise PlacementError(f"claim {name} is not allocated yet: it cannot be joined")
        node = self._nodes.get(record.node)
        if node is None:
            raise PlacementError(f"claim {name}: its node {record.node} is not in the fleet")
        hardware = node.node
        if not hardware.accepts(request.role):
            raise PlacementError(f"node {hardware.name} does not accept {request.role} workers")
        if len(record.bookings) >= hardware.max_workers_per_claim:
            raise PlacementError(f"claim {name} is full at {hardware.max_workers_per_claim} "
                                 "worker(s)")
        if per_device_share(request.memory, record.devices) > hardware.device_memory:
            raise PlacementError(f"worker {request.name} does not fit claim {name}'s "
                                 f"{record.devices} device(s)")
        raise PlacementError(f"node {hardware.name} cannot park worker {request.name} "
                             f"on claim {name}: host memory")

    def _check_unbooked(self, worker: str) -> None:
        if worker in self._claim_of:
            raise PlacementError(f"worker {worker} is already on claim {self._claim_of[worker]}")

    def _join_slack(self, record: ClaimRecord) -> Slack:
        """The largest joiner the claim takes: what its devices hold, if its node can park it."""
        node = self._nodes[record.node].node
        if node.host_memory is None:
            return _largest_joiner(record, node, math.inf)
        return _largest_joiner(record, node, node.host_memory - self._parked.get(record.node, 0))

    def _parked_share(self, record: ClaimRecord) -> int:
        """What the claim adds to its node's parked load: only once allocated and shared."""
        if not record.allocated or record.node not in self._nodes:
            return 0
        return record.parked_load()

    def _shift_parked(self, node: str, delta: int) -> None:
        if not delta:
            return
        parked = self._parked[node] = self._parked.get(node, 0) + delta
        hardware = self._nodes[node].node
        if hardware.host_memory is not None:
            # Every claim filed on the node now has a different amount of room.
            room = hardware.host_memory - parked
            for name, record in self._claims_on[node].items():
                if record.bucket is not None:
                    record.bucket.update(name, _largest_joiner(record, hardware, room))

    def _file(self, record: ClaimRecord) -> None:
        node = self._nodes.get(record.node)
        if node is None:
            return
        if not record.allocated:
            shape = (node.pool_group, node.node.devices)
            self._unallocated[shape] = self._unallocated.get(shape, 0) + 1
            record.unallocated_key = shape
            return
        group = self._groups.seat_group(node, record.devices)
        workers = len(record.bookings)
        limit = node.node.max_workers_per_claim
        if workers >= limit:
            full = (group, limit)
            self._full[full] = self._full.get(full, 0) + 1
            record.full_key = full
            return
        by_workers = self._seats.get(group.roles)
        if by_workers is None:
            by_workers = self._seats[group.roles] = {}
            self._seat_views.clear()
        bucket = by_workers.get(workers)
        if bucket is None:
            bucket = by_workers[workers] = SlackIndex()
        bucket.add(record.name, self._join_slack(record))
        record.bucket = bucket
        self._open[group] = self._open.get(group, 0) + 1
        record.open_key = group

    def _unfile(self, record: ClaimRecord) -> None:
        if record.bucket is not None:
            record.bucket.remove(record.name)
            if not record.bucket:
                del self._seats[self._nodes[record.node].node.roles][len(record.bookings)]
            record.bucket = None
            assert record.open_key is not None
            self._open[record.open_key] -= 1
            record.open_key = None
        elif record.full_key is not None:
            self._full[record.full_key] -= 1
            record.full_key = None
        elif record.unallocated_key is not None:
            self._unallocated[record.unallocated_key] -= 1
            record.unallocated_key = None

    def _file_pool(self, node: NodeRecord) -> None:
        """Recompute a node's reservation from its claims and file it by free devices."""
        claims = self._claims_on.get(node.node.name, {})
        reserved = sum(record.devices for record in claims.values())
        free = self._free[node.node.name] = max(0, node.node.devices - reserved)
        by_free = self._pools.get(node.pool_group)
        if by_free is None:
            by_free = self._pools[node.pool_group] = {}
            self._pool_views.clear()
        insort(by_free.setdefault(free, []), node.node.name)

    def _unfile_pool(self, node: NodeRecord) -> None:
        name = node.node.name
        by_free = self._pools[node.pool_group]
        free = self._free[name]
        names = by_free[free]
        del names[bisect_left(names, name)]
        if not names:
            del by_free[free]


def _largest_joiner(record: ClaimRecord, node: Node, room: Slack) -> Slack:
    """The largest joiner a claim on ``node`` takes when ``room`` bytes are left to park.

    What its devices hold caps it; ``room`` is ``inf`` when host memory is unknown.
    """
    fits = record.devices * node.device_memory
    workers = len(record.bookings)
    if workers == 0:
        # The joiner would be alone and park nothing: any size fits, unless the
        # node is already over its host memory (a fleet read from a cluster can be).
        return fits if room >= 0 else -math.inf
    if workers == 1:
        # The claim turns shared: its current worker starts counting too.
        room -= record.parked_total
    return room if room < fits else fits


def _roles_key(roles: frozenset[Role]) -> tuple[str, ...]:
    return tuple(sorted(roles))


def _group_key(group: PoolGroup) -> tuple[int, tuple[str, ...]]:
    return group.device_memory, _roles_key(group.roles)


def _shape_key(item: tuple[tuple[PoolGroup, int], int]) -> tuple[int, int, tuple[str, ...]]:
    (group, devices), _ = item
    return group.device_memory, devices, _roles_key(group.roles)
