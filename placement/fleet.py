"""The fleet: the books a decision reads -- nodes, claims, bookings -- and the operations on them.

Rules of the books:

* A node's *free devices* = its devices minus the devices of every claim
  allocated to it *or sized against it*: an unallocated claim reserves the
  pool it was priced for until DRA allocates it somewhere. (Never below 0: a
  cluster can be over-committed.) On a mixed node they are counted per
  device group: a claim takes its devices from its own group
  (``Claim.device_memory``), and a new claim is cut from one group: the one
  named, else the smallest device size that holds the worker on that many
  free devices (the tightest fit, what ``decide`` chose).
* A node's *parked load*: on a node that may share claims (its
  ``max_workers_per_claim`` above 1), the memory of every worker booked on a
  claim allocated to it or sized against it, a lone one too -- it may be
  joined at any moment, and its pod asks that memory of the node from the
  start. On a node that never shares, the parked memory of its allocated
  claims, and a claim parks all its workers' memory once shared (two or more
  workers: the cluster shared it), nothing while one worker is alone.
* A node's *workers* = the workers booked on every claim allocated to it or
  sized against it: each runs a pod there, so with its ``pods`` set the node
  takes no further worker (no new claim, no join) once its workers reach it.
* A worker holds at most one booking; a claim name is unique; a claim never
  holds more devices than its node has.
* Claims on a node the fleet does not know (yet, or any more) are kept, with
  their bookings, but are invisible to the decision until that node is added.

Every change is an explicit operation, and every operation checks what it
changes, raising ``PlacementError`` and changing nothing when it would break
the books. Two kinds:

* *Decisions* carried out: ``cut`` (a new claim for one worker) and ``book``
  (a join). They check what ``decide`` checks (``policy.JOIN_CHECKS`` for a
  join): the node accepts the role and has a pod slot free, the devices are
  free (``cut``) or the claim is allocated and has a seat (``book``), neither
  the joiner nor a worker on the claim is exclusive (``book``), the
  worker fits the devices by itself, and the node can park everyone after a
  join, or after a new claim on a node that may share.
* *Facts* recorded, as a cluster reports them: ``add_node``,
  ``replace_node``, ``remove_node``, ``add_claim``, ``allocate``, ``unbook``,
  ``remove_claim`` and ``book(..., observed=True)``. A cluster can be over its
  limits (a node relabelled to fewer seats, host memory shrunk, more pods
  than its limit), so these
  check only what cannot be: a duplicate name, a worker booked twice, an
  unknown name, a claim wider than its node, removing a claim that still has
  workers.

The books themselves, their reads and the reasons an operation gives for a
refusal are ``placement.ledger`` (``Ledger``, this class's base: the rules of
reading and refusing there); this module holds every change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from placement.ledger import Ledger
from placement.model import Claim, Node, PlacementError, Request
from placement.records import ClaimRow, NodeRow

__all__ = ["Fleet"]


class Fleet(Ledger):
    """Nodes, claims and bookings; see the module's rules. Build it, change it, ``decide``."""

    __slots__ = ()

    def __init__(self, nodes: Iterable[Node] = (), claims: Iterable[Claim] = ()) -> None:
        super().__init__()
        for node in nodes:
            self.add_node(node)
        for claim in claims:
            self.add_claim(claim)

    # ------------------------------------------------------------- operations

    def copy(self) -> Fleet:
        """An independent fleet with the same books, for trials that change it.

        Cheaper than ``Fleet(fleet.nodes, fleet.claims)``: the rows are cloned
        as they are (already checked) and the index is built from them at once.
        """
        twin = Fleet()
        twin._nodes = {name: NodeRow(row.node, row.workers) for name, row in self._nodes.items()}
        for name, row in self._claims.items():
            clone = twin._claims[name] = ClaimRow(name, row.node, row.devices, row.allocated,
                                                  row.device_memory)
            clone.bookings = dict(row.bookings)
            clone.footprint = row.footprint
            clone.exclusive = row.exclusive
            clone.shown = row.shown
            twin._claims_on.setdefault(row.node, {})[name] = clone
        twin._claim_of = dict(self._claim_of)
        twin._parked = dict(self._parked)
        twin._free = dict(self._free)
        twin._build_index()
        return twin

    def _build_index(self) -> None:
        """File every node and claim of the books into the (empty) index."""
        index = self.index
        for name in sorted(self._nodes):
            row = self._nodes[name]
            index.add_node(row)
            host_left = self._host_left(row)
            index.file_pool(row, self._free[name], host_left)
            for claim in self._claims_on.get(name, {}).values():
                index.file_claim(claim, row, host_left)

    def add_node(self, node: Node) -> None:
        """A node joins the fleet; claims already filed against its name become visible."""
        if not isinstance(node, Node):
            raise PlacementError(f"add_node takes a Node, got {node!r}")
        if node.name in self._nodes:
            raise PlacementError(f"node {node.name} already exists")
        waiting = self._claims_on.get(node.name, {})
        for name in sorted(waiting):
            self._check_width(name, node, waiting[name].devices)
        row = self._nodes[node.name] = NodeRow(
            node, sum(len(claim.bookings) for claim in waiting.values()))
        self.index.add_node(row)
        for name in sorted(waiting):
            claim = waiting[name]
            self._shift_parked(node.name, self._parked_share(claim), pooled=False)
            self.index.file_claim(claim, row, self._host_left(row))
        self._file_pool(row)

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
        row = self._require_node(name)
        self.index.unfile_pool(row, self._free[name])
        for claim in self._claims_on.get(name, {}).values():
            self.index.unfile_claim(claim)
        self.index.remove_node(row)
        del self._nodes[name], self._free[name]
        self._parked.pop(name, None)
        return row.node

    def add_claim(self, claim: Claim) -> None:
        """Take in a claim as it is, bookings included (a fleet read from a cluster)."""
        if not isinstance(claim, Claim):
            raise PlacementError(f"add_claim takes a Claim, got {claim!r}")
        if claim.name in self._claims:
            raise PlacementError(f"claim {claim.name} already exists")
        self._check_width(claim.name, claim.node, claim.devices)
        for booking in claim.bookings:
            self._check_unbooked(booking.worker)
        row = ClaimRow(claim.name, claim.node, claim.devices, claim.allocated,
                       claim.device_memory)
        for booking in claim.bookings:
            row.seat(booking.worker, booking.owner, booking.parked_memory, booking.exclusive,
                     booking.role)
        row.shown = claim  # the row reads back as exactly this value
        self._add_row(row)

    def cut(self, name: str, node: str, devices: int, request: Request, *,
            allocated: bool = True, device_memory: int = 0) -> None:
        """Create claim ``name`` of ``devices`` devices on ``node`` for one worker (a ``NewClaim``).

        ``allocated=False`` leaves it sized against ``node`` and reserving its
        devices there until ``allocate`` records where DRA put it. On a mixed
        node ``device_memory`` names the device group (0: the tightest fit).
        """
        if name in self._claims:
            raise PlacementError(f"claim {name} already exists")
        if request.name in self._claim_of:
            self._check_unbooked(request.name)
        known = self._nodes.get(node)
        at, size, group_memory = 0, 0, 0  # group_memory: the claim's, on a mixed node
        if known is not None:
            hardware = known.node
            size = hardware.device_memory
            if hardware.device_groups and type(devices) is int:
                at = self._cut_group(hardware, devices, request.memory, device_memory)
                size = group_memory = hardware.device_groups[at][1]
        # One test for the common case (a decision carried out), the reasons only on refusal.
        if (known is None or at < 0 or type(devices) is not int
                or not 1 <= devices <= self._free[node][at]
                or request.memory > devices * size
                or (hardware.roles and request.role not in hardware.roles)
                or (hardware.pods is not None and known.at_pod_limit)
                or (known.shares and hardware.host_memory is not None
                    and request.memory > hardware.host_memory - self._parked.get(node, 0))):
            self._refuse_cut(name, node, devices, request, at)
        row = ClaimRow(name, node, devices, allocated, group_memory)
        row.seat(request.name, request.owner, request.memory, request.exclusive, request.role)
        self._add_row(row)

    def book(self, claim: str, request: Request, *, observed: bool = False) -> None:
        """Seat a worker on an existing claim: a join (a ``JoinClaim``).

        ``observed=True`` records a booking that already exists (a fleet read
        from a cluster), where the join checks may no longer hold.
        """
        row = self._claims.get(claim)  # _require_claim inlined: every join
        if row is None:
            row = self._require_claim(claim)
        if request.name in self._claim_of:
            self._check_unbooked(request.name)
        node = self._nodes.get(row.node)
        if not observed:
            bucket = row.bucket  # set only for an allocated claim with a free seat
            roles = node.node.roles if node is not None else None
            # The claim's room already says "fits its devices and its node can park it";
            # a claim an exclusive worker is on has no bucket.
            if (bucket is None or request.memory > bucket.rooms[claim]
                    or (roles and request.role not in roles) or request.exclusive):
                self._refuse_join(row, request)
        # Its share of the node's parked load (``_parked_share``), before and after: on a
        # node that may share, the joiner's memory; elsewhere a shared claim's footprint.
        counted = node is not None and not node.shares and row.allocated
        before = row.parked_memory if counted else 0
        self.index.unfile_claim(row)
        row.seat(request.name, request.owner, request.memory, request.exclusive, request.role)
        self._claim_of[request.name] = claim
        if node is not None:
            node.workers += 1
            shift = (request.memory if node.shares
                     else row.parked_memory - before if counted else 0)
            if shift:
                self._shift_parked(row.node, shift)
            host = node.node.host_memory  # _host_left inlined: every join
            self.index.file_claim(row, node, math.inf if host is None
                                  else host - self._parked.get(row.node, 0))
            if node.node.pods is not None:  # else never at its limit
                self._check_pods(node)

    def unbook(self, worker: str) -> str:
        """Take a worker off its claim; return that claim's name. The claim stays."""
        claim = self._claim_of.get(worker)
        if claim is None:
            raise PlacementError(f"worker {worker} holds no booking")
        row = self._claims[claim]
        node = self._nodes.get(row.node)
        # Its share of the node's parked load (``_parked_share``), before and after: on a
        # node that may share, the leaver's memory; elsewhere a shared claim's footprint.
        counted = node is not None and not node.shares and row.allocated
        before = row.parked_memory if counted else row.bookings[worker][1]
        self.index.unfile_claim(row)
        row.unseat(worker)
        del self._claim_of[worker]
        if node is not None:
            node.workers -= 1
            shift = (-before if node.shares
                     else row.parked_memory - before if counted else 0)
            if shift:
                self._shift_parked(row.node, shift)
            host = node.node.host_memory  # _host_left inlined: every leaver
            self.index.file_claim(row, node, math.inf if host is None
                                  else host - self._parked.get(row.node, 0))
            if node.node.pods is not None:  # else never at its limit
                self._check_pods(node)
        return claim

    def remove_claim(self, claim: str) -> None:
        """Delete an empty claim; its devices return to its node at once."""
        row = self._require_claim(claim)
        if row.bookings:
            raise PlacementError(
                f"claim {claim} still has workers: {', '.join(sorted(row.bookings))}")
        node = self._nodes.get(row.node)
        if node is not None:
            self.index.unfile_pool(node, self._free[row.node])
        self.index.unfile_claim(row)
        del self._claims[claim]
        del self._claims_on[row.node][claim]
        if node is not None:
            self._file_pool(node)

    def allocate(self, claim: str, *, node: str | None = None) -> None:
        """Record DRA's allocation of a claim, on the node it was sized against by default."""
        row = self._require_claim(claim)
        if row.allocated:
            raise PlacementError(f"claim {claim} is already allocated")
        target = row.node if node is None else node
        if target not in self._nodes:
            raise PlacementError(f"claim {claim}: unknown node {target}")
        self._check_width(claim, target, row.devices)
        touched = [self._nodes[n] for n in sorted({row.node, target}) if n in self._nodes]
        for pool in touched:
            self.index.unfile_pool(pool, self._free[pool.node.name])
        self.index.unfile_claim(row)
        sized, before = row.node, self._parked_share(row)  # its share where it was sized
        del self._claims_on[sized][claim]
        if sized in self._nodes:
            self._nodes[sized].workers -= len(row.bookings)
        row.place(target)
        self._claims_on.setdefault(target, {})[claim] = row
        self._nodes[target].workers += len(row.bookings)
        # Its share of the parked load (``_parked_share``) leaves the node it was sized
        # against and arrives on the target's.
        if sized == target:
            self._shift_parked(target, self._parked_share(row) - before, pooled=False)
        else:
            if sized in self._nodes:
                self._shift_parked(sized, -before, pooled=False)
            self._shift_parked(target, self._parked_share(row), pooled=False)
        self.index.file_claim(row, self._nodes[target], self._host_left(self._nodes[target]))
        for pool in touched:
            self._file_pool(pool)
            self._check_pods(pool)

    # ----------------------------------------------------------- keeping books

    def _add_row(self, row: ClaimRow) -> None:
        for worker in row.bookings:
            self._claim_of[worker] = row.name
        self._claims[row.name] = row
        self._claims_on.setdefault(row.node, {})[row.name] = row
        node = self._nodes.get(row.node)
        if node is not None:
            self.index.unfile_pool(node, self._free[row.node])
            node.workers += len(row.bookings)
            # Its share of the parked load (``_parked_share``, inlined: every new claim).
            self._shift_parked(row.node, row.footprint if node.shares
                               else row.parked_memory if row.allocated else 0, pooled=False)
            host = node.node.host_memory  # _host_left inlined: every new claim
            self.index.file_claim(row, node, math.inf if host is None
                                  else host - self._parked.get(row.node, 0))
            self._file_pool(node)
            if node.node.pods is not None:  # else never at its limit
                self._check_pods(node)

    def _shift_parked(self, node: str, delta: int, *, pooled: bool = True) -> None:
        """The node's parked load moves by ``delta``; ``pooled``: its pools are filed (else
        they are being refiled, with the new load)."""
        if not delta:
            return
        parked = self._parked[node] = self._parked.get(node, 0) + delta
        row = self._nodes[node]
        host = row.node.host_memory
        if host is not None:
            left = host - parked
            # No room is above the node's widest: host left above it before and after
            # changes none (most shifts on a roomy host).
            if left < row.widest or left + delta < row.widest:
                self.index.host_left_changed(self._claims_on[node].values(), row,
                                              self._free[node] if pooled else None, left)

    def _check_pods(self, row: NodeRow) -> None:
        """After the node's workers changed: refile it if they crossed its pod limit."""
        if row.pod_blocked != row.at_pod_limit:
            self.index.refile_node(row, self._free[row.node.name],
                                   self._claims_on.get(row.node.name, {}).values(),
                                   self._host_left(row))

    def _file_pool(self, row: NodeRow) -> None:
        """Recompute a node's free devices from its claims and file it by them."""
        node = row.node
        claims = self._claims_on.get(node.name, {}).values()
        if not node.device_groups:
            reserved = 0
            for claim in claims:  # a few claims: a loop, no generator
                reserved += claim.devices
            free: tuple[int, ...] = (max(0, node.devices - reserved),)
        else:
            held = [0] * len(node.device_groups)
            for claim in claims:
                held[node.group_index(claim.device_memory)] += claim.devices
            free = tuple(max(0, count - taken)
                         for (count, _memory), taken in zip(node.device_groups, held, strict=True))
        self._free[node.name] = free
        host = node.host_memory  # _host_left inlined: every new claim refiles its node
        self.index.file_pool(row, free, math.inf if host is None
                             else host - self._parked.get(node.name, 0))
