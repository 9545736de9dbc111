"""The fleet's index: what makes a decision cheap, derived from the books alone.

Internal to the package. The books (``placement.fleet``) own the state and
call in here on every change; nothing here is a fact of its own, so an index
rebuilt from the books' nodes and claims files everything the same way
(``describe`` gives both as plain data to compare).

What is filed, and for which part of the policy in ``policy.py``:

* Pools, for spreading: node names bucketed by pool group (role policy and
  device size), then by free devices, each bucket a ``RoomIndex`` holding
  every node with its *new-claim room*: the largest newcomer its host memory
  lets a new claim take (``policy.new_claim_room``: what it can still park
  where it may share claims, unbounded elsewhere), capped at the largest
  claim its free devices make now (no newcomer it could take is larger, so
  a roomy host's room does not move as workers come and go). The name
  tie-break is the first name with room. A mixed node is filed once per
  device group, by that group's free devices: a new claim's devices all
  come from one group. An emptied bucket goes (a fleet near full would
  otherwise keep a key for every count of free devices, and each search
  reads them all).
* Open seats, for joining: allocated claims on known nodes with fewer workers
  than their node's limit, bucketed by role policy, then by (distinct owners,
  workers) as one number (``owners.share_rank`` of a joiner whose owner is
  not on them, less one turn: the join ranking's keys after owner affinity),
  each bucket a ``RoomIndex`` holding every claim with its room
  (``join_room``: the fit and host-memory checks as one number). A decision
  visits a bucket or two per key whatever the fleet's size or hardware mix,
  and skips the claims that cannot take the worker.
* The same open seats again by each owner on them, ranked as that owner's
  joiners rank them (``placement.owners``, the index's base: its rules
  there), filed only once a search first reads them; until then filing a claim
  costs one test for them. An open claim of two workers or more keeps its
  owners (``ClaimRow.tally``): its bucket's key counts them, and its bucket
  (an ``OwnedRooms``) reads them to leave the joiner's owner's claims out.
* A claim an exclusive worker is on takes no joiner, so it is filed apart:
  counted per seat group for the reasons, never among the open seats.
* A node at its pod limit takes no worker at all, so it is filed apart: its
  name by (pool group, devices), not among the pools, and its claims with a
  free seat counted as blocked, not among the open seats. The books refile
  a node (``refile_node``) whenever its workers cross the limit.
* Counters for the reasons (a mixed node counted once per device group, by
  that group's devices): nodes per (pool group, devices), and of those
  the ones that take no worker pod at all (a pod limit of 0); open claims per
  seat group; blocked claims per seat group; claims held by an exclusive
  worker per seat group; full claims per (seat group,
  seat limit); unallocated claims per (pool group, devices of the node they
  are sized against).

Views come back in a canonical order (by group, never by insertion), so a
decision never depends on the order in which the fleet was built.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from placement.model import Role
from placement.owners import WORKER_BITS, OwnerLists, tally
from placement.policy import join_room
from placement.records import ClaimRow, Groups, NodeRow, PoolGroup, SeatGroup
from placement.rooms import OwnedRooms, Room, RoomIndex


class Index(OwnerLists):
    """The index; see the module's rules. The owner lists are its base's (``OwnerLists``)."""

    __slots__ = ("_blocked", "_exclusive", "_full", "_groups", "_open", "_pod_full",
                 "_podless", "_pool_views", "_pools", "_seat_views", "_seats", "_shapes",
                 "_spare", "_unallocated")

    def __init__(self, rows: Mapping[str, ClaimRow]) -> None:
        """``rows``: the books' claims, read when owner affinity first searches."""
        super().__init__(rows)
        self._groups = Groups()
        self._pools: dict[PoolGroup, dict[int, RoomIndex]] = {}
        # Pool buckets gone (each still holding the one name it had), for new ones.
        self._spare: list[RoomIndex] = []
        self._seats: dict[frozenset[Role], dict[int, RoomIndex]] = {}
        self._exclusive: dict[SeatGroup, int] = {}
        self._shapes: dict[tuple[PoolGroup, int], int] = {}
        self._open: dict[SeatGroup, int] = {}
        self._full: dict[tuple[SeatGroup, int], int] = {}
        self._unallocated: dict[tuple[PoolGroup, int], int] = {}
        self._pod_full: dict[tuple[PoolGroup, int], list[str]] = {}  # sorted names
        self._podless: dict[tuple[PoolGroup, int], int] = {}
        self._blocked: dict[SeatGroup, int] = {}
        # Groups in canonical order per role, rebuilt only when a new group appears.
        self._pool_views: dict[Role, list[tuple[PoolGroup, dict[int, RoomIndex]]]] = {}
        self._seat_views: dict[Role, list[dict[int, RoomIndex]]] = {}

    # ------------------------------------------------------------ the books call

    def add_node(self, row: NodeRow) -> None:
        """A node joins (before its pool and claims are filed)."""
        groups = row.pool_groups = self._groups.pool_groups(row.node)
        for group, (devices, _memory) in zip(groups, row.node.groups, strict=True):
            shape = (group, devices)
            self._shapes[shape] = self._shapes.get(shape, 0) + 1
            if row.node.pods == 0:
                self._podless[shape] = self._podless.get(shape, 0) + 1
        row.pod_blocked = row.at_pod_limit

    def remove_node(self, row: NodeRow) -> None:
        for group, (devices, _memory) in zip(row.pool_groups, row.node.groups, strict=True):
            shape = (group, devices)
            self._shapes[shape] -= 1
            if not self._shapes[shape]:
                del self._shapes[shape]
            if row.node.pods == 0:
                self._podless[shape] -= 1

    def refile_node(self, row: NodeRow, free: tuple[int, ...], claims: Iterable[ClaimRow],
                    host_left: Room) -> None:
        """The node's workers crossed its pod limit: file it and its claims the other way."""
        claims = list(claims)
        self.unfile_pool(row, free)
        for claim in claims:
            self.unfile_claim(claim)
        row.pod_blocked = not row.pod_blocked
        self.file_pool(row, free, host_left)
        for claim in claims:
            self.file_claim(claim, row, host_left)

    def file_pool(self, row: NodeRow, free: tuple[int, ...], host_left: Room) -> None:
        """File the node by the free devices of each of its device groups, with its
        new-claim room; ``host_left`` is what the node can still park."""
        name = row.node.name
        if not row.pod_blocked and len(free) == 1:  # one group (most nodes): no loop
            group = row.pool_groups[0]
            by_free = self._pools.get(group)
            if by_free is None:
                by_free = self._pools[group] = {}
                self._pool_views.clear()
            # _pool_room inlined: every new claim and every claim gone refiles its node.
            cap = free[0] * row.node.device_memory
            room = host_left if row.shares and host_left < cap else cap
            bucket = by_free.get(free[0])
            if bucket is not None:
                bucket.add(name, room)
            else:
                self._new_pool(by_free, free[0], name, room)
            return
        room = _pool_room(row, host_left, free)
        for group, (devices, _memory), left in zip(row.pool_groups, row.node.groups, free,
                                                    strict=True):
            if row.pod_blocked:
                insort(self._pod_full.setdefault((group, devices), []), name)
                continue
            by_free = self._pools.get(group)
            if by_free is None:
                by_free = self._pools[group] = {}
                self._pool_views.clear()
            bucket = by_free.get(left)
            if bucket is not None:
                bucket.add(name, room)
            else:
                self._new_pool(by_free, left, name, room)

    def unfile_pool(self, row: NodeRow, free: tuple[int, ...]) -> None:
        name = row.node.name
        if not row.pod_blocked and len(free) == 1:  # one group (most nodes): no loop
            by_free = self._pools[row.pool_groups[0]]
            bucket = by_free[free[0]]
            if len(bucket.rooms) == 1:  # gone: the new-claim search reads every key it finds
                del by_free[free[0]]
                self._spare.append(bucket)
            else:
                bucket.remove(name)
            return
        for group, (devices, _memory), left in zip(row.pool_groups, row.node.groups, free,
                                                    strict=True):
            if row.pod_blocked:
                shape = (group, devices)
                names = self._pod_full[shape]
                del names[bisect_left(names, name)]
                if not names:
                    del self._pod_full[shape]
                continue
            by_free = self._pools[group]
            bucket = by_free[left]
            if len(bucket.rooms) == 1:
                del by_free[left]
                self._spare.append(bucket)
            else:
                bucket.remove(name)

    def _new_pool(self, by_free: dict[int, RoomIndex], free: int, name: str,
                  room: Room) -> None:
        """A pool bucket for a new count of free devices, holding the node: a bucket gone
        taken again where there is one (nodes cross counts all the time)."""
        if self._spare:
            bucket = by_free[free] = self._spare.pop()
            bucket.hold_only(name, room)
        else:
            by_free[free] = RoomIndex()
            by_free[free].add(name, room)

    def file_claim(self, claim: ClaimRow, row: NodeRow, host_left: Room) -> None:
        """File a claim on a known node; ``host_left`` is what the node can still park."""
        node = row.node
        if not claim.allocated:
            # Counted under the device group it reserves, by that group's devices.
            at = node.group_index(claim.device_memory) if node.device_groups else 0
            shape = (row.pool_groups[at], node.groups[at][0])
            self._unallocated[shape] = self._unallocated.get(shape, 0) + 1
            claim.unallocated_key = shape
            return
        devices = claim.devices
        if node.device_groups:
            device_memory = node.group_memory(claim.device_memory)
            group = self._groups.seat_group(row, devices, device_memory)
        else:  # a plain node (most): its seat groups are remembered by width alone
            device_memory = node.device_memory
            group = row.seat_groups.get(devices)  # type: ignore[assignment]
            if group is None:
                group = self._groups.seat_group(row, devices, device_memory)
        if claim.exclusive:
            self._exclusive[group] = self._exclusive.get(group, 0) + 1
            claim.exclusive_key = group
            return
        bookings = claim.bookings
        workers = len(bookings)
        limit = row.seats
        if workers >= limit:
            full = (group, limit)
            self._full[full] = self._full.get(full, 0) + 1
            claim.full_key = full
            return
        if row.pod_blocked:
            self._blocked[group] = self._blocked.get(group, 0) + 1
            claim.blocked_key = group
            return
        by_key = self._seats.get(group.roles)
        if by_key is None:
            by_key = self._seats[group.roles] = {}
            self._seat_views.clear()
        if workers > 1:
            owners = claim.tally = tally(bookings)
            key = len(owners) << WORKER_BITS | workers
        else:  # one owner with one worker, or none
            key = workers << WORKER_BITS | workers
        bucket = by_key.get(key)
        if bucket is None:
            bucket = _new_bucket(by_key, key, self._owners_on)
        room: Room = devices * device_memory  # join_room inlined: every claim filed
        if row.shares:
            if host_left < room:
                room = host_left
        elif host_left < 0:
            room = -math.inf
        bucket.add(claim.name, room)
        claim.bucket = bucket
        self._open[group] = self._open.get(group, 0) + 1
        claim.open_key = group
        if self._owners is not None and workers:
            self._file_owners(claim, group.roles, workers)

    def unfile_claim(self, claim: ClaimRow) -> None:
        bucket = claim.bucket
        if bucket is not None:
            bucket.remove(claim.name)  # left in place when emptied: that count comes back
            group = claim.open_key
            assert group is not None
            claim.bucket = None
            self._open[group] -= 1
            claim.open_key = None
            lists = claim.owner_lists
            if lists is not None:
                for by_rank, rank in lists:  # an emptied list stays: that rank comes back
                    names = by_rank[rank]
                    del names[bisect_left(names, claim.name)]
                claim.owner_lists = None
        elif claim.exclusive_key is not None:
            self._exclusive[claim.exclusive_key] -= 1
            claim.exclusive_key = None
        elif claim.full_key is not None:
            self._full[claim.full_key] -= 1
            claim.full_key = None
        elif claim.blocked_key is not None:
            self._blocked[claim.blocked_key] -= 1
            claim.blocked_key = None
        elif claim.unallocated_key is not None:
            self._unallocated[claim.unallocated_key] -= 1
            claim.unallocated_key = None

    def host_left_changed(self, claims: Iterable[ClaimRow], row: NodeRow,
                          free: tuple[int, ...] | None, host_left: Room) -> None:
        """A node's parked load moved: every open claim on it has a new room, and on a node
        that may share claims its pools too (``free``: the free devices it is filed by;
        None: its pools are being refiled)."""
        node, sharing = row.node, row.shares
        if sharing and free is not None and not row.pod_blocked:
            name = node.name
            if len(free) == 1:  # one group (most nodes): _pool_room inlined
                cap = free[0] * node.device_memory
                pool = self._pools[row.pool_groups[0]][free[0]]
                room = host_left if host_left < cap else cap
                if pool.rooms[name] != room:  # most are capped by the free devices: same
                    pool.update(name, room)
            else:
                room = _pool_room(row, host_left, free)
                for group, left in zip(row.pool_groups, free, strict=True):
                    pool = self._pools[group][left]
                    if pool.rooms[name] != room:
                        pool.update(name, room)
        if node.device_groups:
            for claim in claims:
                bucket = claim.bucket
                if bucket is not None:
                    bucket.update(claim.name, join_room(
                        claim.devices, node.group_memory(claim.device_memory), host_left,
                        sharing))
            return
        device_memory = node.device_memory  # a plain node: one size for every claim
        for claim in claims:
            bucket = claim.bucket
            if bucket is not None:
                # join_room inlined (a node's every claim, on every shift of its load).
                room = claim.devices * device_memory
                if sharing:
                    if host_left < room:
                        room = host_left
                elif host_left < 0:
                    room = -math.inf
                if bucket.rooms[claim.name] != room:  # most rooms are their devices': same
                    bucket.update(claim.name, room)

    # -------------------------------------------------------- the decision reads

    def pool_groups(self, role: Role) -> list[tuple[PoolGroup, dict[int, RoomIndex]]]:
        """Pool groups accepting ``role``, each with its nodes (and their new-claim rooms) by
        free devices."""
        views = self._pool_views.get(role)
        if views is None:
            views = [(g, self._pools[g]) for g in sorted(self._pools, key=_group_key)
                     if not g.roles or role in g.roles]
            self._pool_views[role] = views
        return views

    def open_seats(self, role: Role) -> list[dict[int, RoomIndex]]:
        """Claims with a free seat on nodes accepting ``role``, by (owners, workers).

        One mapping per role policy, its keys ``owners << WORKER_BITS | workers`` in
        ascending order (the join ranking's, for a joiner whose owner is on none of
        them); a bucket once emptied stays, empty (in the simulation a claim's last
        worker leaving empties the bucket of none every time).
        """
        views = self._seat_views.get(role)
        if views is None:
            views = [self._seats[roles] for roles in sorted(self._seats, key=_roles_key)
                     if not roles or role in roles]
            self._seat_views[role] = views
        return views

    def _owners_on(self, claim: str) -> Collection[str]:
        """The owners of an open claim of two workers or more."""
        owners = self._rows[claim].tally
        assert owners is not None
        return owners

    def holds(self, claim: str, owner: str) -> bool:
        """Whether an open claim of two workers or more has one of ``owner``'s."""
        owners = self._rows[claim].tally
        return owners is not None and owner in owners

    @staticmethod
    def largest_room(claims: Iterable[ClaimRow]) -> Room | None:
        """The largest room among these claims; None: none has a free seat."""
        largest: Room | None = None
        for claim in claims:
            bucket = claim.bucket
            if bucket is not None:
                room = bucket.rooms[claim.name]
                if largest is None or room > largest:
                    largest = room
        return largest

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

    def pod_full(self, role: Role) -> Iterator[tuple[PoolGroup, int, list[str], int]]:
        """(group, devices per node, names, of those with no pod slot at all) of the nodes
        accepting role that are at their pod limit."""
        for (group, devices), names in sorted(self._pod_full.items(), key=_shape_key):
            if not group.roles or role in group.roles:
                yield group, devices, names, self._podless.get((group, devices), 0)

    def exclusive_claims(self, role: Role) -> Iterator[tuple[SeatGroup, int]]:
        """(group, count) of allocated claims an exclusive worker is on, accepting role."""
        for group, count in self._exclusive.items():
            if count and (not group.roles or role in group.roles):
                yield group, count

    def full_claims(self, role: Role) -> Iterator[tuple[SeatGroup, int, int]]:
        """(group, seat limit, count) of allocated claims with no seat left, accepting role."""
        for (group, limit), count in self._full.items():
            if count and (not group.roles or role in group.roles):
                yield group, limit, count

    # ------------------------------------------------------------------ checking

    def describe(self) -> dict[str, Any]:
        """Everything filed, as plain comparable data (groups by their shape, no zeros).

        Two indexes describe alike exactly when a decision and its reason read
        the same from both. A room index's block bounds are left out: they are
        upper bounds by design; ``RoomIndex.bounds_hold`` checks them.
        """
        def shape(group: PoolGroup | SeatGroup) -> tuple[object, ...]:
            return (_roles_key(group.roles), *[getattr(group, f) for f in group.__slots__
                                               if f != "roles"])

        return {
            "pools": {shape(g): {free: tuple((name, bucket.room(name)) for name in bucket)
                                 for free, bucket in by_free.items()}
                      for g, by_free in self._pools.items() if any(by_free.values())},
            "seats": {_roles_key(roles): {divmod(key, 1 << WORKER_BITS):
                                          tuple((name, bucket.room(name)) for name in bucket)
                                          for key, bucket in by_key.items() if bucket}
                      for roles, by_key in self._seats.items() if any(by_key.values())},
            # Keys in the order the searches walk them: ascending.
            "ranked": (all(list(by_key) == sorted(by_key) for by_key in self._seats.values())
                       and self._ranks_ascending()),
            "owners": self._describe_owners(),
            "exclusive": {shape(g): n for g, n in self._exclusive.items() if n},
            "shapes": {(shape(g), devices): n for (g, devices), n in self._shapes.items() if n},
            "open": {shape(g): n for g, n in self._open.items() if n},
            "full": {(shape(g), limit): n for (g, limit), n in self._full.items() if n},
            "unallocated": {(shape(g), devices): n
                            for (g, devices), n in self._unallocated.items() if n},
            "pod_full": {(shape(g), devices): tuple(names)
                         for (g, devices), names in self._pod_full.items() if names},
            "podless": {(shape(g), devices): n for (g, devices), n in self._podless.items() if n},
            "blocked": {shape(g): n for g, n in self._blocked.items() if n},
            "bounds_hold": all(bucket.bounds_hold() for by_key in (*self._seats.values(),
                                                                  *self._pools.values())
                               for bucket in by_key.values()),
        }


def _pool_room(row: NodeRow, host_left: Room, free: tuple[int, ...]) -> Room:
    """A node's new-claim room: ``policy.new_claim_room`` read from what the node can still
    park (``inf`` when its host memory is unknown), capped at the largest new claim it
    could cut now (its free devices' memory in one group: no newcomer it takes is larger,
    so a host roomier than that moves no room)."""
    node = row.node
    cap = (free[0] * node.device_memory if len(free) == 1
           else max(count * size for count, (_devices, size) in zip(free, node.groups,
                                                                    strict=True)))
    return host_left if row.shares and host_left < cap else cap


def _new_bucket(by_key: dict[int, RoomIndex], key: int,
                owners_on: Callable[[str], Collection[str]]) -> RoomIndex:
    """A role policy's bucket for a new (owners, workers) key, its keys kept ascending: an
    ``OwnedRooms`` for claims of two workers or more (a search leaves out the joiner's
    own owner's there; claims of one worker rank alike for anyone)."""
    bucket = by_key[key] = (OwnedRooms(owners_on) if key & ((1 << WORKER_BITS) - 1) > 1
                            else RoomIndex())
    if len(by_key) > 1 and max(by_key) != key:  # rare: re-rank in place
        ranked = sorted(by_key.items())
        by_key.clear()
        by_key.update(ranked)
    return bucket


def _roles_key(roles: frozenset[Role]) -> tuple[str, ...]:
    return tuple(sorted(roles))


def _group_key(group: PoolGroup) -> tuple[int, tuple[str, ...]]:
    return group.device_memory, _roles_key(group.roles)


def _shape_key(item: tuple[tuple[PoolGroup, int], object]) -> tuple[int, int, tuple[str, ...]]:
    (group, devices), _ = item
    return group.device_memory, devices, _roles_key(group.roles)
