"""The simulation's moves: ``placement.rebalance``'s rule played on the scenario's clock.

What this keeps, and when it acts:

    record              kept from                         read by
    ------------------  --------------------------------  -------------------------------
    free since          every node whose free devices     spread: a newcomer's devices
    (``FreeSince``)     may have changed (noted by the    free long enough
                        fleet, ``tracked.py``), settled
                        at the time of the change
    alone since         every node whose workers may      binpack: a node held by one
    (``AloneSince``)    have changed, the same            worker long enough
    sharing, by shape   every claim noted (two workers    spread's candidates (the
                        or more, before or after a        movable ones), and the
                        change) and every worker gone     stranded devices measured
                        from a claim: its workers while
                        it has two or more, allocated --
                        filed when read, not per change
    moves per worker    each move made                    the move limit

The sharing workers are filed only when read (``_file_sharing``: spread's
rule reads them once free devices are old enough, the measure at every
change), so a claim shared and left between two reads costs nothing; a
claim that *becomes* shared is still seen at the change, when devices are
old enough for it to make a check due.

A check is due when a record says a move may have become possible: a level
of free devices (or a node alone) turning ``after`` seconds old, at once
when a claim becomes shared while devices have been free that long, and
(binpack) after a change on another node while a lone node that was due
found no seat elsewhere -- at most once per ``after``. A due
check asks the rule for one move at a time until it gives none; the
simulation carries each out (``Simulation._carry_out``) and its changes are
settled before the next question.

*Stranded* devices, measured when asked (``measure``): at each moment, the
free devices on nodes where a worker that shares a claim could cut a claim
of its own as a newcomer, never more than the workers sharing beyond one per
claim (each would take at least one device). Their integral over the run is
the stranded device-seconds ``compare`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from heapq import heappop, heappush

from placement.model import Node, Request, devices_for
from placement.policy import Policy, Strategy
from placement.rebalance import (
    AloneSince,
    FreeSince,
    Move,
    MoveLimit,
    Shape,
    pack_move,
    shape_of,
    spread_move,
)
from placement.simulator.tracked import TrackedFleet

__all__ = ["MOVE_LIMIT", "MoveSettings", "Mover"]

MOVE_LIMIT = MoveLimit()  # the controller's defaults: 3 moves in 30 minutes


@dataclass(frozen=True, slots=True)
class MoveSettings:
    """``after``: seconds devices stay free (or a node alone) before a move; 0: off."""

    after: float
    limit: MoveLimit = MOVE_LIMIT
    measure: bool = False  # integrate the stranded devices over the run


class Mover:
    """The records and the due checks of one simulation's moves (the module's rules)."""

    def __init__(self, settings: MoveSettings, policy: Policy) -> None:
        self.settings = settings
        self.spread = policy.strategy is Strategy.SPREAD
        self.free = FreeSince()
        self.alone = AloneSince()
        # The sharing workers, filed when read (``_file_sharing``), as of the claims noted:
        self.by_shape: dict[Shape, dict[str, None]] = {}  # movable sharing workers
        self.shapes: dict[Shape, int] = {}  # measured: every sharing worker's shape, how many
        # sharing worker (measured: every one; else the movable) -> the request it was filed as
        self._filed: dict[str, Request] = {}
        self._shared: set[str] = set()  # the shared claims
        self._unfiled: dict[str, bool] = {}  # claims noted since, in the order first noted
        self.moved: dict[str, list[float]] = {}  # worker -> when it moved
        self.due: list[float] = []  # when checks are due, a heap (the clock reads it)
        self._stuck: set[str] = set()  # binpack: lone nodes due that found no seat elsewhere
        self._packed_at = float("-inf")  # binpack: the last check
        self.stranded_seconds = 0.0  # device-seconds, when measured
        self._stranded = 0  # devices stranded since ``_stranded_at``
        self._stranded_at = 0.0

    # ---------------------------------------------------------------- records

    def settle(self, fleet: TrackedFleet, requests: dict[str, Request], now: float) -> None:
        """Take in what changed on the fleet since the last call, as of ``now``."""
        nodes, claims, gone = fleet.touched_nodes, fleet.touched_claims, fleet.gone
        if gone:
            for node in gone:
                self.free.forget(node)
                self.alone.observe(node, 0, now)
            gone.clear()
        elif not nodes and not claims:
            return
        after = self.settings.after
        if not self.spread:
            self._settle_binpack(fleet, nodes, now)
        elif nodes:
            # Spread reads the free devices: a level that rose is due ``after`` later. (Read
            # here, not in a method of its own: nearly every event changes one node.)
            observe, free_now = self.free.observe, fleet.free_now
            for node in nodes:
                free = free_now(node)  # -1: changed, then removed (taken with ``gone``)
                if free >= 0 and observe(node, free, now) and after > 0:
                    heappush(self.due, now + after)
            nodes.clear()
        if claims:  # noted only where read: spread, the measure (binpack reads no sharing)
            if self.spread and after > 0:
                # A claim that became shared beside devices free ``after`` seconds: a
                # check at once. The free devices first: they are rarely that old.
                oldest = self.free.oldest()
                if (oldest is not None and oldest <= now - after
                        and self._became_shared(fleet, claims)):
                    heappush(self.due, now)
            self._unfiled.update(claims)
            claims.clear()
        if self.settings.measure:
            self._measure(fleet, requests, now)

    def _settle_binpack(self, fleet: TrackedFleet, nodes: set[str], now: float) -> None:
        """Binpack: each noted node's workers (and its free devices, when measured); a node
        just left alone is due ``after`` later."""
        after = self.settings.after
        free = self.free if self.settings.measure else None
        alone = self.alone
        for node in nodes:
            if fleet.node(node) is None:  # changed, then removed: taken with ``gone``
                continue
            if free is not None:
                free.observe(node, fleet.free_devices(node), now)
            if alone.observe(node, fleet.workers_on_node(node), now) and after > 0:
                heappush(self.due, now + after)
        if self._stuck and nodes - self._stuck:
            # A lone worker found no seat elsewhere when it was due: a change on another
            # node may have made one. Looked at again, at most once per ``after``.
            heappush(self.due, max(now, self._packed_at + after))
            self._stuck = set()
        nodes.clear()

    @staticmethod
    def _became_shared(fleet: TrackedFleet, claims: dict[str, bool]) -> bool:
        """Whether a noted claim is shared now and was not when last taken."""
        shared = fleet.shared
        return any(not was and shared(claim) for claim, was in claims.items())

    def _file_sharing(self, fleet: TrackedFleet, requests: dict[str, Request]) -> None:
        """File the workers of the claims noted since the last call as sharing or not.

        Called only when a record of sharing is read (a due check past its free
        devices, the measure): a claim that shared and stopped between two reads
        costs nothing. Everyone who left a claim, or is on one no longer shared, is
        taken out first, then everyone on a shared claim not filed is filed: a
        worker may have moved from one claim noted to another, or left and come
        back as another request. Unmeasured, only the movable are filed: nothing
        else reads the rest.
        """
        unfiled, left = self._unfiled, fleet.left
        if not unfiled and not left:
            return
        filed, shared, unfile = self._filed, self._shared, self._unfile
        for worker in left:
            if worker in filed:
                unfile(worker)
        left.clear()
        is_shared, workers_of = fleet.shared, fleet.workers_of
        now: list[str] = []
        for claim in unfiled:
            if is_shared(claim):
                now.append(claim)
            elif claim in shared:
                shared.discard(claim)
                for worker in workers_of(claim):
                    if worker in filed:
                        unfile(worker)
        unfiled.clear()
        counted = self.shapes if self.settings.measure else None
        by_shape = self.by_shape
        for claim in now:  # the filing inlined: thousands of workers between two reads
            shared.add(claim)
            for worker in workers_of(claim):
                if worker in filed:
                    continue
                request = requests[worker]
                if counted is None and not request.movable:
                    continue
                filed[worker] = request
                shape = shape_of(request)
                if counted is not None:
                    counted[shape] = counted.get(shape, 0) + 1
                if request.movable:
                    bucket = by_shape.get(shape)
                    if bucket is None:
                        bucket = by_shape[shape] = {}
                    bucket[worker] = None

    def _unfile(self, worker: str) -> None:
        request = self._filed.pop(worker)
        shape = shape_of(request)
        if self.settings.measure:
            shapes = self.shapes
            shapes[shape] -= 1
            if not shapes[shape]:
                del shapes[shape]
        if request.movable:
            bucket = self.by_shape[shape]
            del bucket[worker]
            if not bucket:
                del self.by_shape[shape]

    def forget(self, worker: str) -> None:
        """The worker left: its moves no longer count."""
        self.moved.pop(worker, None)

    # ---------------------------------------------------------------- checks

    def next_due(self) -> float | None:
        return self.due[0] if self.due else None

    def pop_due(self, now: float) -> None:
        """Drop every check due at or before ``now`` (the caller is making them)."""
        due = self.due
        while due and due[0] <= now:
            heappop(due)

    def next_move(self, fleet: TrackedFleet, requests: dict[str, Request], policy: Policy,
                  now: float, age: dict[str, int],
                  removable: Callable[[str], bool]) -> Move | None:
        """The rule's next move now; schedules the next check when it gives none."""
        settings = self.settings
        limit, moved = settings.limit, self.moved

        def may_move(worker: str) -> bool:
            times = moved.get(worker)
            return times is None or limit.allows(times, now)

        if policy.strategy is Strategy.SPREAD:
            found = spread_move(fleet, _Sharers(self, fleet, requests), requests,
                                self.free, now=now,
                                after=settings.after, may_move=may_move, age=age.__getitem__)
        else:
            self._packed_at = now
            found = pack_move(fleet, self.alone, requests, policy, now=now,
                              after=settings.after, removable=removable, may_move=may_move)
            if not isinstance(found, Move):
                self._stuck = {node for node, since in self.alone.nodes()
                               if since <= now - settings.after and removable(node)}
        if isinstance(found, Move):
            moved.setdefault(found.worker, []).append(now)
            return found
        if found is not None and found > now:
            heappush(self.due, found)
        return None

    # ------------------------------------------------------------- stranded

    def _measure(self, fleet: TrackedFleet, requests: dict[str, Request], now: float) -> None:
        self._file_sharing(fleet, requests)
        self.stranded_seconds += self._stranded * (now - self._stranded_at)
        self._stranded_at = now
        extra = len(self._filed) - len(self._shared)  # beyond one per shared claim
        if not extra:
            self._stranded = 0
            return
        shapes = list(self.shapes)
        usable = 0
        for node_name, free in self.free.free_nodes():
            node = fleet.node(node_name)
            if node is None:
                continue
            if any(_fits_new(node, free, role, memory, devices)
                   for role, memory, devices in shapes):
                usable += free
        self._stranded = min(usable, extra)

    def close(self, now: float) -> None:
        """The run ended at ``now``: the stranded devices counted up to it."""
        if self.settings.measure:
            self.stranded_seconds += self._stranded * (now - self._stranded_at)
            self._stranded_at = now


class _Sharers(Mapping[Shape, dict[str, None]]):
    """The mover's movable sharing workers by shape, filed when first read."""

    __slots__ = ("_fleet", "_mover", "_requests")

    def __init__(self, mover: Mover, fleet: TrackedFleet, requests: dict[str, Request]) -> None:
        self._mover, self._fleet, self._requests = mover, fleet, requests

    def _current(self) -> dict[Shape, dict[str, None]]:
        self._mover._file_sharing(self._fleet, self._requests)
        return self._mover.by_shape

    def __getitem__(self, shape: Shape) -> dict[str, None]:
        return self._current()[shape]

    def __iter__(self) -> Iterator[Shape]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def values(self) -> ValuesView[dict[str, None]]:
        return self._current().values()


def _fits_new(node: Node, free: int, role: object, memory: int, devices: int | None) -> bool:
    if node.roles and role not in node.roles:
        return False
    groups = node.device_groups or ((node.devices, node.device_memory),)
    for _, device_memory in groups:
        needed = devices_for(memory, device_memory, devices)
        if needed is not None and needed <= free:
            return True
    return False
