"""The fleet's books as they are read: the state, every read, and the checks an operation makes.

Internal to the package: the base of ``placement.fleet.Fleet``, which holds
every operation that changes the books (and keeps the rules stated there);
nothing here changes them. Rules of reading:

* Reading never changes an answer, so ``decide`` stays a pure function of the
  request and the fleet. The reads hand out frozen values (``Node``,
  ``Claim``) and numbers, never a row.
* A name the books do not hold is refused with ``PlacementError`` naming it
  (``unknown node N``, ``unknown claim C``), never answered with a default;
  a node's parked load is 0 while nothing on it parks.
* Claims on a node the fleet does not know are read back (``claims``,
  ``claim``, ``claim_node``) but count on no node until it is added.
* The index (``placement.index``) is derived from these books alone and
  follows every change; ``decide`` reads it through ``index``, never sets it.

Rules of refusing, for the operations (each raises before changing anything):

* A refusal names the first check that fails, in the order ``decide`` makes
  them: for a new claim its width, the device group, the node's roles, its
  pod limit, its free devices, the worker's fit, then (on a node that may
  share) its host memory; for a join the first of
  ``policy.JOIN_CHECKS`` that fails over the claim as a ``JoinCandidate``.
* The operations test the common case in one expression and ask here for the
  reason only on refusal; the index and the join checks disagreeing (a join
  refused with every check holding) is a bug, raised as ``AssertionError``.
"""

from __future__ import annotations

import math
from typing import Final, NoReturn

from placement.index import Index
from placement.model import Claim, Node, PlacementError, Request
from placement.policy import JOIN_CHECKS, JoinCandidate
from placement.records import ClaimRow, NodeRow
from placement.rooms import Room

__all__ = ["Ledger"]


class Ledger:
    """The books and their reads; see the module's rules. Changed only by ``Fleet``."""

    __slots__ = ("_claim_of", "_claims", "_claims_on", "_free", "_nodes", "_parked", "index")

    def __init__(self) -> None:
        self._nodes: dict[str, NodeRow] = {}
        self._claims: dict[str, ClaimRow] = {}
        self._claim_of: dict[str, str] = {}  # worker -> its claim
        self._claims_on: dict[str, dict[str, ClaimRow]] = {}  # by node, sized or allocated
        self._free: dict[str, tuple[int, ...]] = {}  # free devices per device group, by node
        self._parked: dict[str, int] = {}  # parked load of each known node (absent: 0)
        # The decision's index over these books (internal to the package; read, never set).
        self.index: Final[Index] = Index(self._claims)

    # ---------------------------------------------------------------- reading

    @property
    def nodes(self) -> tuple[Node, ...]:
        """Every known node, by name."""
        return tuple(self._nodes[name].node for name in sorted(self._nodes))

    @property
    def claims(self) -> tuple[Claim, ...]:
        """Every claim (those on unknown nodes too), by name, as frozen snapshots."""
        return tuple(self._claims[name].snapshot() for name in sorted(self._claims))

    def node(self, name: str) -> Node | None:
        row = self._nodes.get(name)
        return row.node if row else None

    def claim(self, name: str) -> Claim | None:
        row = self._claims.get(name)
        return row.snapshot() if row else None

    def has_claim(self, name: str) -> bool:
        return name in self._claims

    def claim_of(self, worker: str) -> str | None:
        """The claim ``worker`` is booked on, if any."""
        return self._claim_of.get(worker)

    # One figure of a claim, without building its snapshot (the simulation asks often).

    def claim_node(self, claim: str) -> str:
        """Where the claim is allocated, or the node it is sized against."""
        try:
            return self._claims[claim].node
        except KeyError:
            raise _unknown_claim(claim) from None

    def claim_devices(self, claim: str) -> int:
        try:
            return self._claims[claim].devices
        except KeyError:
            raise _unknown_claim(claim) from None

    def is_allocated(self, claim: str) -> bool:
        try:
            return self._claims[claim].allocated
        except KeyError:
            raise _unknown_claim(claim) from None

    def workers_on(self, claim: str) -> int:
        try:
            return len(self._claims[claim].bookings)
        except KeyError:
            raise _unknown_claim(claim) from None

    def claim_figures(self, claim: str) -> tuple[str, int, int, bool]:
        """(node, devices, workers, allocated) of the claim, as the four reads above give
        them, in one: the simulation reads them on every join and every worker's state."""
        try:
            row = self._claims[claim]
        except KeyError:
            raise _unknown_claim(claim) from None
        return row.node, row.devices, len(row.bookings), row.allocated

    def free_devices(self, node: str) -> int:
        """The node's devices that no claim holds or reserves."""
        try:
            free = self._free[node]
        except KeyError:
            raise PlacementError(f"unknown node {node}") from None
        return free[0] if len(free) == 1 else sum(free)

    def free_by_group(self, node: str) -> tuple[int, ...]:
        """The node's free devices per device group, in ``Node.groups`` order."""
        try:
            return self._free[node]
        except KeyError:
            raise PlacementError(f"unknown node {node}") from None

    def workers_on_node(self, node: str) -> int:
        """Workers booked on the node's claims: the pod slots they take there."""
        return self._require_node(node).workers

    def has_pod_slot(self, node: str) -> bool:
        """Whether the node can run one more worker's pod (always, when its pods are unchecked)."""
        return not self._require_node(node).at_pod_limit

    def parked_load(self, node: str) -> int:
        """Host memory the node's workers may park at once: every worker booked on it where
        it may share claims, else the workers of its allocated shared claims."""
        if node not in self._nodes:
            raise PlacementError(f"unknown node {node}")
        return self._parked.get(node, 0)

    def largest_room_on(self, node: str) -> Room | None:
        """The largest worker some claim on ``node`` could take as a joiner; None: no free seat."""
        return self.index.largest_room(self._claims_on.get(node, {}).values())

    # ------------------------------------------------ read by the operations

    def _parked_share(self, row: ClaimRow) -> int:
        """What the claim adds to its node's parked load. On a node that may share claims
        (``policy.shares``), all its workers' memory, allocated or sized against the node
        alike (each runs a pod there, asking that much); on one that never shares, its
        workers' once it is allocated and shared (the cluster shared it); on a node not
        known, nothing."""
        node = self._nodes.get(row.node)
        if node is None:
            return 0
        if node.shares:
            return row.footprint
        return row.parked_memory if row.allocated else 0

    def _host_left(self, row: NodeRow) -> Room:
        """Host memory the node can still park; unbounded when its host memory is unknown."""
        host = row.node.host_memory
        return math.inf if host is None else host - self._parked.get(row.node.name, 0)

    def _cut_group(self, node: Node, devices: int, memory: int, device_memory: int) -> int:
        """The device group a new claim on a mixed node draws on: the one of
        ``device_memory``, else the smallest size holding ``memory`` on ``devices``
        free devices; -1: the node has no group of that size."""
        if device_memory:
            for at, (_count, size) in enumerate(node.groups):
                if size == device_memory:
                    return at
            return -1
        free = self._free[node.name]
        for at, (_count, size) in enumerate(node.groups):
            if free[at] >= devices and memory <= devices * size:
                return at
        return 0

    # ---------------------------------------------------------------- checking

    def _require_claim(self, claim: str) -> ClaimRow:
        row = self._claims.get(claim)
        if row is None:
            raise _unknown_claim(claim)
        return row

    def _require_node(self, name: str) -> NodeRow:
        row = self._nodes.get(name)
        if row is None:
            raise PlacementError(f"unknown node {name}")
        return row

    def _check_unbooked(self, worker: str) -> None:
        if worker in self._claim_of:
            raise PlacementError(f"worker {worker} is already on claim {self._claim_of[worker]}")

    def _check_width(self, claim: str, node: str | Node, devices: int) -> None:
        """A claim never holds more devices than its node has (a node not known: unchecked)."""
        if isinstance(node, str):
            row = self._nodes.get(node)
            if row is None:
                return
            node = row.node
        if devices > node.devices:
            raise PlacementError(f"claim {claim} holds {devices} devices, node {node.name} has "
                                 f"{node.devices}")

    def _refuse_cut(self, name: str, node: str, devices: int, request: Request,
                    at: int = 0) -> NoReturn:
        """Why claim ``name`` cannot be cut for ``request``: what ``decide`` checks first."""
        hardware = self._require_node(node).node
        if type(devices) is not int or devices < 1:
            raise PlacementError(f"claim {name}: devices must be an int >= 1, got {devices!r}")
        if at < 0:
            raise PlacementError(f"claim {name}: node {node} has no device group of that "
                                 "device memory")
        if not hardware.accepts(request.role):
            raise PlacementError(f"node {node} does not accept {request.role} workers")
        if self._nodes[node].at_pod_limit:
            raise PlacementError(f"claim {name}: node {node} is at its pod limit "
                                 f"({hardware.pods} pods)")
        free = self._free[node][at]
        of = f" of {hardware.groups[at][1]} bytes" if hardware.device_groups else ""
        if devices > free:
            raise PlacementError(f"claim {name}: node {node} has {free} free "
                                 f"device(s){of}, not {devices}")
        if request.memory > devices * hardware.groups[at][1]:
            raise PlacementError(f"worker {request.name} does not fit {devices} device(s){of} "
                                 f"of node {node}")
        raise PlacementError(f"claim {name}: node {node} may share claims and can park "
                             f"{self._host_left(self._nodes[node])} more bytes of host memory, "
                             f"not worker {request.name}'s {request.memory}")

    def _refuse_join(self, row: ClaimRow, request: Request) -> NoReturn:
        """Why ``request`` cannot join the claim: the first of the join checks that fails."""
        node = self._nodes.get(row.node)
        candidate = JoinCandidate(
            allocated=row.allocated, exclusive=row.exclusive > 0,
            node=node.node if node else None, devices=row.devices,
            device_memory=node.node.group_memory(row.device_memory) if node else 0,
            workers=len(row.bookings), footprint=row.footprint,
            node_parked=self._parked.get(row.node, 0), node_workers=node.workers if node else 0)
        for check, holds in JOIN_CHECKS:
            if not holds(candidate, request):
                raise PlacementError(f"worker {request.name} cannot join claim {row.name}: "
                                     f"{check} does not hold")
        raise AssertionError(f"claim {row.name}: the index and the join checks disagree")


def _unknown_claim(claim: str) -> PlacementError:
    return PlacementError(f"unknown claim {claim}")
