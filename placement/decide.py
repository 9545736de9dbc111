"""The decision: where one worker goes, or why it waits.

The policy is stated once, as data and small functions, in
``placement.policy``: the spread ranking, the join checks and the join
ranking. This module carries it out quickly, with the fleet's index
(``placement.index``) serving exactly what the policy names;
``tests/reference.py`` transcribes the same rules plainly and is the judge.

The two steps, in the order the policy's strategy gives (``steps_for``:
spread cuts first and shares only under contention, binpack joins first; an
exclusive worker only ever cuts):

1. New claim: a node that accepts the worker's role, has the devices it
   needs free and a pod slot free gets a new claim -- on a node that may
   share claims, only while its host memory can still park the newcomer:
   there every worker counts, a lone one too (``policy.py``). A node that
   never shares is not checked for host memory. Candidates are a node's device
   groups (one on most nodes; one per size on a mixed node, whose claim takes
   all its devices from one group) and rank by ``SPREAD_RANKING``, whose
   first keys pick the tightest group that holds the worker by itself: a
   60Gi worker on a node of 80Gi and 48Gi devices gets one 80Gi device, a
   20Gi worker a 48Gi one, and the 80Gi ones stay for the big.
2. Join: the worker may join a claim when every one of ``JOIN_CHECKS``
   holds. Candidates rank by ``JOIN_RANKING`` (with owner affinity on, claims
   holding the joiner's owner in the other role only first).
3. Otherwise wait, with a reason that tells "never" (``NoCapacity``) from
   "not yet" (``WaitingForCapacity``) and names what blocks the worker: a
   node at its pod limit is named with its limit, one with the devices free
   but too little host memory to park it is named with what it can still
   park, and when every node the worker fits takes no worker pod at all (a
   limit of 0) that is "never".

A worker that names its device count (``Request.devices``: N) needs exactly
N devices of one group, each holding ``ceil(memory / N)`` (``devices_for``),
and never joins (``policy.py``): 100Gi with ``devices: 4`` on a node of 8 x
80Gi gets a claim of 4 devices, floor 25Gi each, where its memory alone
would take 2. When no node has N devices that size it waits "never".

A new claim's shape: width = devices needed in the chosen group (N when named); per-device
floor = the worker's per-device share, raised on a mixed node above its
smaller groups' size; ceiling = the group's device memory (the size it was
priced against), so DRA can hand out neither a bigger device nor one of
another group.

``decide`` is a pure function of the request, the fleet and the policy: the
request's name never influences it (its owner only ranks joins, with owner
affinity on), and ties are broken by names, never by the order in which
anything was added. ``seat_text`` says in a few words why a seat was chosen
(``seat_why``: those words alone, for a caller that words the seat itself).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement.model import Node, Request, devices_for, per_device_share
from placement.owners import NO_RANK, WORKER_BITS, share_rank
from placement.policy import (
    DEFAULT_POLICY,
    Policy,
    Step,
    Strategy,
    pairs,
    spread_rank,
    steps_for,
)
from placement.quantity import format_gib
from placement.records import PoolGroup
from placement.rooms import OwnedRooms, Room, RoomIndex

if TYPE_CHECKING:  # the decision only reads a fleet
    from placement.fleet import Fleet
    from placement.index import Index

# best_pool, best_claim and offer_of are the package's own (the simulation's fast path).
__all__ = [
    "Decision",
    "JoinClaim",
    "NewClaim",
    "Reason",
    "Wait",
    "WaitKind",
    "decide",
    "explain",
    "find_seat",
    "seat_text",
    "seat_why",
]


@dataclass(frozen=True, slots=True)
class NewClaim:
    """Cut a claim of ``devices`` devices on ``node``, bounded to [floor, ceiling] per device."""

    node: str
    devices: int
    memory_floor: int
    memory_ceiling: int


@dataclass(frozen=True, slots=True)
class JoinClaim:
    """Take a seat on an allocated claim; ``memory_per_device`` is the joiner's share."""

    claim: str
    node: str
    devices: int
    memory_per_device: int


class WaitKind(enum.StrEnum):
    NO_CAPACITY = "NoCapacity"
    WAITING_FOR_CAPACITY = "WaitingForCapacity"


@dataclass(frozen=True, slots=True)
class Reason:
    kind: WaitKind
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"

    @property
    def never(self) -> bool:
        """True when no accepting hardware could ever hold the worker."""
        return self.kind is WaitKind.NO_CAPACITY


@dataclass(frozen=True, slots=True)
class Wait:
    reason: Reason


Decision = NewClaim | JoinClaim | Wait


def decide(request: Request, fleet: Fleet, policy: Policy = DEFAULT_POLICY) -> Decision:
    seat = find_seat(request, fleet, policy)
    return seat if seat is not None else Wait(explain(request, fleet))


def find_seat(request: Request, fleet: Fleet,
              policy: Policy = DEFAULT_POLICY) -> NewClaim | JoinClaim | None:
    """``decide`` without the reason: for callers that only act on a seat."""
    for step in steps_for(policy, request):
        if step is Step.NEW_CLAIM:
            pool = best_pool(request, fleet)
            if pool is not None:
                node, devices, device_memory = pool
                floor = per_device_share(request.memory, devices)
                hardware = fleet.node(node)
                if hardware is not None and hardware.device_groups:
                    floor = max(floor, hardware.group_floor(device_memory))
                return NewClaim(node, devices, floor, device_memory)
        else:
            claim = best_claim(request, fleet, policy.owner_affinity)
            if claim is not None:
                devices = fleet.claim_devices(claim)
                return JoinClaim(claim, fleet.claim_node(claim), devices,
                                 per_device_share(request.memory, devices))
    return None


def seat_text(request: Request, fleet: Fleet, seat: NewClaim | JoinClaim,
              policy: Policy = DEFAULT_POLICY) -> str:
    """Why ``find_seat`` chose ``seat``, in a few words, after what it is
    (``joins claim-x: same owner, other role``)."""
    what = f"new claim on {seat.node}" if isinstance(seat, NewClaim) else f"joins {seat.claim}"
    return f"{what}: {seat_why(request, fleet, seat, policy)}"


def seat_why(request: Request, fleet: Fleet, seat: NewClaim | JoinClaim,
             policy: Policy = DEFAULT_POLICY) -> str:
    """Why ``find_seat`` chose ``seat``, the few words alone (``same owner, other role``)."""
    if isinstance(seat, NewClaim):
        if request.exclusive:
            return "a claim of its own (exclusive)"
        if policy.strategy is Strategy.BINPACK:
            return "no claim can seat it (binpack)"
        return "free devices (spread)"
    claim = fleet.claim(seat.claim)
    mine = [booking.role for booking in claim.bookings if booking.owner == request.owner
            ] if policy.owner_affinity and claim is not None else []
    if pairs(request.role, mine):
        # A worker whose role its reader could not tell (None) is only known as same owner.
        return ("same owner, other role" if any(role is not None for role in mine)
                else "same owner")
    if policy.strategy is Strategy.BINPACK:
        return "binpack joins before cutting"
    return "no free devices (contention)"


def best_pool(request: Request, fleet: Fleet) -> tuple[str, int, int] | None:
    """The new-claim step: (node, devices, device memory) of the best free pool, if any.

    ``find_seat`` wraps this in a ``NewClaim``; the simulation, which decides
    tens of thousands of times, reads the plain answer. A node is a candidate
    only where its new-claim room (host memory, on a node that may share)
    holds the worker: within a group the tightest bucket with such a node
    ranks best, its first such name first.
    """
    best: tuple[int, int, int, str] | None = None
    memory, exact = request.memory, request.devices
    for group, by_free in fleet.index.pool_groups(request.role):
        if exact is None:  # devices_needed inlined (two groups a decision): memory >= 1
            needed = -(-memory // group.device_memory)
        elif per_device_share(memory, exact) <= group.device_memory:
            needed = exact
        else:  # its share of each of N devices outgrows this group's
            continue
        tightest = -1
        for free in by_free:  # a handful of keys: a node's devices, plus one
            if free >= needed and (tightest < 0 or free < tightest):
                tightest = free
        if tightest < 0:
            continue
        bucket = by_free[tightest]
        head = bucket.heads[0]  # mostly its first name has room: no search
        name = head if bucket.rooms[head] >= memory else bucket.first(memory)
        if name is None:  # host memory short there: the next tightest with room
            tightest, name = _roomy_pool(by_free, needed, memory)
            if name is None:
                continue
        candidate = spread_rank(needed, group.device_memory, tightest - needed, name)
        if best is None or candidate < best:
            best = candidate
    if best is None:
        return None
    needed, device_memory, _, node = best
    return node, needed, device_memory


def _roomy_pool(by_free: dict[int, RoomIndex], needed: int,
                memory: int) -> tuple[int, str | None]:
    """The fewest free devices (at least ``needed``) some node of a pool group has with a
    new-claim room for ``memory``, and the first such node; (-1, None): none."""
    for free in sorted(by_free):
        if free >= needed:
            name = by_free[free].first(memory)
            if name is not None:
                return free, name
    return -1, None


def best_claim(request: Request, fleet: Fleet, owner_affinity: bool = True) -> str | None:
    """The join step: the claim to join, if any.

    The index holds only allocated claims with a free seat on a node with a
    pod slot free and no exclusive worker on them, by role policy (the
    second, third, fourth, sixth and seventh of ``JOIN_CHECKS``), each with
    its room (``join_room``: the fifth and eighth), so the check left is one
    comparison inside a bucket; the first (an exclusive joiner) is checked
    here. With owner affinity the claims of the joiner's owner that pair with
    it are searched first, in the same order.
    """
    if request.exclusive:
        return None
    index = fleet.index
    if owner_affinity:
        found = index.first_pairing(request.owner, request.role, request.memory)
        if found is not None:
            return found
    return _first_open(index, request, owner_affinity)


def _first_open(index: Index, request: Request, owner_affinity: bool) -> str | None:
    # JOIN_RANKING after owner affinity: the joiner's share of turns, then fewest workers
    # (one rank, ``share_rank``), then the smallest claim name. The claims its owner is
    # not on rank by the open seats' buckets, whose key is their rank less one turn; each
    # role policy's buckets come ascending: its first fit is its best, and a key ranking
    # past the best found so far is not read. A bucket of two workers or more may hold
    # claims its owner is on: they rank lower, so the bucket leaves them out here
    # (``OwnedRooms``) and that owner's lists rank them after, only where they beat the
    # best found (a claim of one worker ranks alike for anyone: the buckets rank it).
    # With owner affinity on, the claims that pair with it were searched already: none
    # took it.
    owner, memory = request.owner, request.memory
    best_rank, best = NO_RANK, ""
    room = False  # some open claim it may join takes it, its owner's or not
    for by_key in index.open_seats(request.role):
        for key, bucket in by_key.items():
            rank = key + _ONE_MORE_OWNER
            if rank > best_rank:
                break
            if not bucket.rooms:  # emptied, kept
                continue
            name = bucket.first(memory)
            if name is None:
                continue
            room = True
            if key & _WORKERS > 1 and index.holds(name, owner):
                assert isinstance(bucket, OwnedRooms)  # the buckets of two workers or more
                name = bucket.first_without(memory, owner)
            if name is not None:
                if rank < best_rank or name < best:
                    best_rank, best = rank, name
                break
    if not room:  # nothing takes it: its owner's lists would only walk claims without room
        return None
    if best_rank < _LEAST_MINE:  # no claim of two workers or more of its owner ranks so well
        return best
    mine = index.first_of_owner(owner, request.role, memory,
                                pairing=False if owner_affinity else None, alone=False,
                                to_beat=(best_rank, best))
    return mine[1] if mine is not None else best or None


_ONE_MORE_OWNER = share_rank(1, 0, 0) - share_rank(0, 0, 0)  # a joiner's owner, new there
_WORKERS = (1 << WORKER_BITS) - 1
_LEAST_MINE = share_rank(1, 2, 2)  # the best rank of a claim of two workers, one its owner's


def offer_of(fleet: Fleet, node: Node) -> tuple[Room, Room]:
    """The largest worker one of the fleet's nodes could seat right now, by spreading or by
    joining, as (capacity, alone).

    A worker of ``memory`` bytes can spread onto ``free`` devices of ``d``
    bytes exactly when ``memory <= free * d``, and join a k-device claim with
    ``host_left`` to park exactly when ``memory <= join_room(...)``. On a node
    that may share claims a new claim also needs ``memory <= host_left``
    (``policy.new_claim_room``), so the spreading part is the smaller of the
    two. So what a node can seat is one threshold: every worker of an
    accepted role up to ``capacity`` bytes, and none above. An exclusive
    worker only spreads, so its threshold is ``alone``, the spreading part of
    it. A worker naming N devices only spreads too, and ``alone`` bounds it
    from above (its ``memory <= N * d <= free * d``); the exact test is
    ``best_pool``'s. A plain pair, not a value object: the simulation asks on
    every retry.
    """
    node_name = node.name
    if node.pods is not None and not fleet.has_pod_slot(node_name):  # None: unchecked
        return _NO_OFFER
    # A new claim takes one group's devices: the largest it can cut is one group's worth.
    alone: Room = (max(free * memory for free, (_count, memory)
                       in zip(fleet.free_by_group(node_name), node.device_groups, strict=True))
                   if node.device_groups else fleet.free_devices(node_name) * node.device_memory)
    if node.host_memory is not None and node.max_workers_per_claim > 1:
        # ``policy.new_claim_room`` inlined: the simulation asks on every retry.
        host_left = node.host_memory - fleet.parked_load(node_name)
        if host_left < alone:
            alone = host_left
    room = fleet.largest_room_on(node_name)
    return (room if room is not None and room > alone else alone), alone


_NO_OFFER: tuple[Room, Room] = (-math.inf, -math.inf)  # no pod slot: nothing fits


def explain(request: Request, fleet: Fleet) -> Reason:
    """Why ``request`` cannot be placed right now (meaningful when ``decide`` says wait)."""
    role = request.role
    memory = request.memory
    exact = request.devices
    shapes = list(fleet.index.shapes(role))
    if not shapes:
        return Reason(WaitKind.NO_CAPACITY, f"no enabled node accepts {role} workers")

    fitting = [
        (group, devices, unallocated)
        for group, devices, _nodes, unallocated in shapes
        if _fits(memory, group.device_memory, exact, devices)
    ]
    if not fitting:
        largest_group, largest_devices = max(
            ((group, devices) for group, devices, _n, _u in shapes),
            key=lambda shape: (shape[0].device_memory * shape[1], shape[0].device_memory),
        )
        needs = (f"needs {format_gib(memory)} of accelerator memory on one node"
                 if exact is None else
                 f"devices: {exact}: no {role} node has {exact} devices of at least "
                 f"{format_gib(per_device_share(memory, exact))} ({format_gib(memory)} "
                 f"over {exact})")
        return Reason(
            WaitKind.NO_CAPACITY,
            f"{needs}; the largest {role} pool offers {largest_devices} x "
            f"{format_gib(largest_group.device_memory)}",
        )

    pod_full = [
        (names, podless) for group, devices, names, podless in fleet.index.pod_full(role)
        if _fits(memory, group.device_memory, exact, devices)
    ]
    at_limit = sum(len(names) for names, _ in pod_full)
    nodes_fitting = sum(nodes for group, devices, nodes, _u in shapes
                        if _fits(memory, group.device_memory, exact, devices))
    blockers = []
    host_short = _host_short(fleet, request)
    if pod_full:
        first = min(names[0] for names, _ in pod_full)
        known = fleet.node(first)
        pods = known.pods if known is not None else None
        # A mixed node is filed under each of its device groups: named once.
        named = len({name for names, _ in pod_full for name in names})
        if sum(podless for _, podless in pod_full) == nodes_fitting:
            return Reason(WaitKind.NO_CAPACITY,
                          f"no {role} node it fits runs worker pods: "
                          f"{_pod_limit(first, pods, named)}")
        blockers.append(_pod_limit(first, pods, named))
    if host_short:
        blockers.append(_host_short_text(fleet, request, host_short))
    if at_limit + len(host_short) < nodes_fitting:
        blockers.append(_free_devices_blocker(memory, exact, fitting,
                                              other=bool(pod_full or host_short)))
    if request.exclusive or exact is not None:
        # It joins no claim, so what blocks the others' joins is not its business.
        why = ("exclusive: it shares no claim" if request.exclusive
               else f"devices: {exact}: it joins no claim")
        return Reason(WaitKind.WAITING_FOR_CAPACITY,
                      "; ".join([f"{why} and waits for devices of its own", *blockers]))
    full_at = sorted({
        limit for group, limit, _count in fleet.index.full_claims(role)
        if per_device_share(memory, group.devices) <= group.device_memory
    })
    if full_at:
        limits = "/".join(str(n) for n in full_at)
        blockers.append(f"claims it fits are full at {limits} worker{_s(full_at[-1])}")
    # decide found no seat, so every open seat it fits is blocked by host memory.
    host_blocked = sum(
        count for group, count in fleet.index.open_claims(role)
        if per_device_share(memory, group.devices) <= group.device_memory
    )
    if host_blocked:
        blockers.append(
            f"host memory: parking it on {host_blocked} claim{_s(host_blocked)} with a free seat "
            "would exceed the node's host memory"
        )
    held = sum(
        count for group, count in fleet.index.exclusive_claims(role)
        if per_device_share(memory, group.devices) <= group.device_memory
    )
    if held:
        blockers.append(f"{held} claim{_s(held)} it fits {'hold' if held > 1 else 'holds'} "
                        "an exclusive worker")
    unallocated = sum(count for _group, _devices, count in fitting)
    if unallocated:
        blockers.append(f"{unallocated} claim{_s(unallocated)} not yet allocated")
    if not full_at and not host_blocked and not unallocated and not pod_full and not held:
        blockers.append("no allocated claim it fits")
    return Reason(WaitKind.WAITING_FOR_CAPACITY, "; ".join(blockers))


def _host_short(fleet: Fleet, request: Request) -> list[str]:
    """The nodes with the devices a new claim of ``request`` needs free (once per device
    group that has them) where it found no seat: their host memory cannot park it (they
    may share claims, and every worker there counts). Sorted by name."""
    memory, exact = request.memory, request.devices
    short: list[str] = []
    for group, by_free in fleet.index.pool_groups(request.role):
        needed = devices_for(memory, group.device_memory, exact)
        if needed is not None:
            for free, bucket in by_free.items():
                if free >= needed:
                    short.extend(bucket)
    return sorted(short)


def _host_short_text(fleet: Fleet, request: Request, short: list[str]) -> str:
    first = short[0]
    node = fleet.node(first)
    assert node is not None and node.host_memory is not None
    left = max(0, node.host_memory - fleet.parked_load(first))
    others = len(set(short)) - 1
    text = (f"host memory: {first} has the devices free but can park {format_gib(left)} "
            f"more of its {format_gib(node.host_memory)}, not {format_gib(request.memory)} "
            "(a node that may share claims counts every worker on it)")
    if others:
        text += f", and {others} other node{_s(others)} likewise"
    return text


def _pod_limit(first: str, pods: int | None, at_limit: int) -> str:
    text = f"{first} is at its pod limit ({pods} pod{_s(pods or 0)})"
    others = at_limit - 1
    if others:
        text += f", and {others} other node{_s(others)} it fits at theirs"
    return text


def _fits(memory: int, device_memory: int, exact: int | None, devices: int) -> bool:
    """A group of ``devices`` devices of ``device_memory`` could hold the worker, all free
    (``devices_for`` inlined: every wait's reason asks it of each shape)."""
    if exact is None:
        return -(-memory // device_memory) <= devices  # at least 1, and devices >= 1
    return exact <= devices and -(-memory // exact) <= device_memory


def _free_devices_blocker(memory: int, exact: int | None,
                          fitting: list[tuple[PoolGroup, int, int]], *,
                          other: bool = False) -> str:
    # Name the narrowest pool it would take: that is what a departure must free.
    needed, device_memory = min(
        (devices_for(memory, group.device_memory, exact) or 0, group.device_memory)
        for group, _devices, _unallocated in fitting
    )
    return (
        f"no {'other ' if other else ''}node has {needed} free device{_s(needed)} of "
        f"{format_gib(device_memory)} for {format_gib(memory)}"
    )


def _s(count: int) -> str:
    return "" if count == 1 else "s"
