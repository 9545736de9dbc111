"""The placement rules transcribed as plainly as possible, to check the fast ones against.

Nothing here is indexed or clever: every question is answered by looking at
every node and every claim. If this file and ``placement`` disagree, read
this file first: it is meant to be obviously right.

A mixed node (devices of several sizes) is a list of device groups: every
claim takes its devices from one group, named by its ``device_memory`` (0 or
a size the node lacks: the smallest group), and free devices are counted per
group.

A worker naming ``devices`` (N) takes exactly N devices of one group whose
devices each hold ``ceil(memory / N)``, and never joins a claim.

Host memory: on a node that may share claims (``max_workers_per_claim`` above
1) every worker on a claim allocated to it or sized against it counts, alone
or not, and a new claim or a join must leave the node able to park the
newcomer too. On a node that never shares only its allocated claims with two
workers or more count, and nothing checks a new claim there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from placement import JoinClaim, NewClaim, Node, Policy, Request, Role, Strategy

SPREAD = Policy()  # spread, owner affinity on: the default


@dataclass
class RefClaim:
    name: str
    node: str
    devices: int
    allocated: bool
    workers: dict[str, int] = field(default_factory=dict)  # worker -> memory
    owners: dict[str, str] = field(default_factory=dict)  # worker -> owner
    exclusive: set[str] = field(default_factory=set)  # workers that run alone
    device_memory: int = 0  # the size of its node's group it takes devices from; 0: smallest
    roles: dict[str, Role | None] = field(default_factory=dict)  # worker -> role (None: unknown)


def needed(memory: int, device_memory: int) -> int:
    return max(1, math.ceil(memory / device_memory))


def accepts(node: Node, role: str) -> bool:
    return not node.roles or role in node.roles


def group_size(node: Node, claim: RefClaim) -> int:
    """The device size of the group the claim takes its devices from."""
    sizes = [memory for _count, memory in node.groups]
    return claim.device_memory if claim.device_memory in sizes else sizes[0]


def free_in_group(node: Node, size: int, claims: list[RefClaim]) -> int:
    count = next(count for count, memory in node.groups if memory == size)
    return count - sum(c.devices for c in claims
                       if c.node == node.name and group_size(node, c) == size)


def free_devices(node: Node, claims: list[RefClaim]) -> int:
    return node.devices - sum(c.devices for c in claims if c.node == node.name)


def workers_on(node: Node, claims: list[RefClaim]) -> int:
    return sum(len(c.workers) for c in claims if c.node == node.name)


def pod_slot_free(node: Node, claims: list[RefClaim]) -> bool:
    """Every worker on a claim on the node runs a pod there; ``pods`` bounds them."""
    return node.pods is None or workers_on(node, claims) < node.pods


def seats_per_claim(node: Node) -> int:
    """DRA lists at most 256 consumers of a claim, whatever the node's setting."""
    return min(node.max_workers_per_claim, 256)


def shares(node: Node) -> bool:
    return node.max_workers_per_claim > 1


def parked_load(node: Node, claims: list[RefClaim]) -> int:
    return sum(
        sum(c.workers.values())
        for c in claims
        if c.node == node.name and (shares(node) or (c.allocated and len(c.workers) >= 2))
    )


def can_park_newcomer(node: Node, claims: list[RefClaim], memory: int) -> bool:
    """A new claim's worker on ``node``: checked only where it may share claims."""
    return (node.host_memory is None or not shares(node)
            or parked_load(node, claims) + memory <= node.host_memory)


def reference_decide(
    request: Request, nodes: list[Node], claims: list[RefClaim], policy: Policy = SPREAD
) -> NewClaim | JoinClaim | None:
    """Binpack tries a join first, spread a new claim first; an exclusive worker never joins,
    nor one naming its device count."""
    new = reference_new_claim(request, nodes, claims)
    alone = request.exclusive or request.devices is not None
    join = None if alone else reference_join(request, nodes, claims, policy)
    if policy.strategy == Strategy.BINPACK:
        return join or new
    return new or join


def reference_new_claim(request: Request, nodes: list[Node],
                        claims: list[RefClaim]) -> NewClaim | None:
    pools = []
    for node in nodes:
        if not accepts(node, request.role) or not pod_slot_free(node, claims):
            continue
        if not can_park_newcomer(node, claims, request.memory):
            continue
        for _count, size in node.groups:  # each device group is a pool of its own
            n = needed(request.memory, size) if request.devices is None else request.devices
            if math.ceil(request.memory / n) > size:  # its share outgrows these devices
                continue
            free = max(0, free_in_group(node, size, claims))
            if free >= n:
                pools.append(((n, size, free - n, node.name), node, n, size))
    if pools:
        _, node, n, size = min(pools, key=lambda p: p[0])
        # The floor keeps DRA off the node's smaller groups.
        smaller = [memory for _count, memory in node.groups if memory < size]
        floor = max([math.ceil(request.memory / n), *[m + 1 for m in smaller]])
        return NewClaim(node.name, n, floor, size)
    return None


def reference_join(request: Request, nodes: list[Node], claims: list[RefClaim],
                   policy: Policy) -> JoinClaim | None:
    by_name = {node.name: node for node in nodes}
    seats = []
    for claim in claims:
        node = by_name.get(claim.node)
        if node is None or not claim.allocated or not accepts(node, request.role):
            continue
        if claim.exclusive:
            continue
        if math.ceil(request.memory / claim.devices) > group_size(node, claim):
            continue
        if len(claim.workers) >= seats_per_claim(node) or not pod_slot_free(node, claims):
            continue
        if node.host_memory is not None:
            after = dict(claim.workers, **{request.name: request.memory})
            others = parked_load(node, [c for c in claims if c is not claim])
            # Where it may share, every worker counts, the joiner too, alone or not.
            mine = sum(after.values()) if shares(node) or len(after) >= 2 else 0
            if others + mine > node.host_memory:
                continue
        # Affinity: workers of the joiner's owner, none in its role (unknown: the other).
        mine = [claim.roles.get(worker) for worker, owner in claim.owners.items()
                if owner == request.owner]
        paired = policy.owner_affinity and bool(mine) and request.role not in mine
        # The joiner's share of the claim's turns once it joins: turns go round the
        # owners, then round one owner's workers.
        owners = set(claim.owners.values()) | {request.owner}
        share = Fraction(1, len(owners)) / (len(mine) + 1)
        seats.append(((not paired, -share, len(claim.workers), claim.name), claim, node))
    if seats:
        _, claim, node = min(seats, key=lambda s: s[0])
        return JoinClaim(claim.name, node.name, claim.devices,
                         math.ceil(request.memory / claim.devices))
    return None


class ReferenceSimulation:
    """The simulator's rules with a plain pending list, retried by full scans."""

    def __init__(self, nodes: list[Node], deferred: bool = False,
                 policy: Policy = SPREAD) -> None:
        self.nodes = list(nodes)
        self.deferred = deferred
        self.policy = policy
        self.claims: list[RefClaim] = []
        self.requests: dict[str, Request] = {}
        self.pending: list[str] = []  # oldest first

    def claim_of(self, worker: str) -> RefClaim | None:
        return next((c for c in self.claims if worker in c.workers), None)

    def _place(self, request: Request) -> bool:
        decision = reference_decide(request, self.nodes, self.claims, self.policy)
        if decision is None:
            return False
        if isinstance(decision, NewClaim):
            base = f"claim-{request.name}"
            name, k = base, 1
            while any(c.name == name for c in self.claims):
                k += 1
                name = f"{base}-{k}"
            node = next(n for n in self.nodes if n.name == decision.node)
            self.claims.append(RefClaim(name, decision.node, decision.devices,
                                        not self.deferred, {request.name: request.memory},
                                        {request.name: request.owner},
                                        {request.name} if request.exclusive else set(),
                                        decision.memory_ceiling if node.device_groups else 0,
                                        {request.name: request.role}))
        else:
            claim = next(c for c in self.claims if c.name == decision.claim)
            claim.workers[request.name] = request.memory
            claim.owners[request.name] = request.owner
            claim.roles[request.name] = request.role
        return True

    def _retry(self) -> None:
        progress = True
        while progress:
            progress = False
            for worker in list(self.pending):
                if self._place(self.requests[worker]):
                    self.pending.remove(worker)
                    progress = True
                    break

    def arrive(self, request: Request) -> None:
        self.requests[request.name] = request
        if self._place(request):
            self._retry()
        else:
            self.pending.append(request.name)

    def leave(self, worker: str) -> None:
        del self.requests[worker]
        if worker in self.pending:
            self.pending.remove(worker)
            return
        claim = self.claim_of(worker)
        assert claim is not None
        del claim.workers[worker]
        del claim.owners[worker]
        del claim.roles[worker]
        claim.exclusive.discard(worker)
        if not claim.workers:
            self.claims.remove(claim)
        self._retry()

    def allocate(self, worker: str) -> None:
        claim = self.claim_of(worker)
        assert claim is not None and not claim.allocated
        claim.allocated = True
        self._retry()

    def add_node(self, node: Node) -> None:
        self.nodes.append(node)
        self._retry()

    def books(self) -> dict[str, tuple[str, str, int, bool, int] | None]:
        """worker -> (claim, node, devices, allocated, device memory), or None while pending."""
        out: dict[str, tuple[str, str, int, bool, int] | None] = {}
        for worker in self.requests:
            claim = self.claim_of(worker)
            out[worker] = None if claim is None else (
                claim.name, claim.node, claim.devices, claim.allocated, claim.device_memory)
        return out
