"""The fleet the simulation plays when moves are on: it notes, per change, what the
mover's records (``mover.py``) may have to take in.

A record read from the books changes only with what it reads, so a change notes
only what it can change (``Mover.settle`` reads the books as they are then, so
a note too many costs a look, never a record):

    change         node noted                        claim noted
    -------------  --------------------------------  --------------------------------
    add_node       yes (its free devices, workers)   --
    remove_node    in ``gone``                       --
    cut            yes (free devices fell)           no: one worker shares nothing
    remove_claim   yes (free devices rose)           no: empty, its last sharer's
                                                     unbook noted it
    allocate       yes                               with two workers or more
    book           ``workers`` only (binpack's       with two workers or more after
                   lone nodes; free devices stay)
    unbook         ``workers`` only                  with one worker or more left
                                                     (two or more before)

A claim's sharing (its workers while it is allocated with two or more) changes
only through a change that leaves it, or finds it, with two workers or more,
and each such change is noted.
"""

from __future__ import annotations

from collections.abc import Collection

from placement.fleet import Fleet
from placement.model import Node, Request

__all__ = ["TrackedFleet"]


class TrackedFleet(Fleet):
    """A ``Fleet`` that notes, per change, what the mover's records may have to take
    in (the module's table)."""

    __slots__ = ("gone", "left", "sharers", "touched_claims", "touched_nodes", "workers")

    def __init__(self, nodes: tuple[Node, ...] = (), *, workers: bool = True,
                 sharers: bool = True) -> None:
        self.touched_nodes: set[str] = set()
        # claim -> whether it was shared when the changes were last taken (before the
        # first change noted since), in the order first noted
        self.touched_claims: dict[str, bool] = {}
        self.gone: set[str] = set()  # nodes removed since the changes were last taken
        self.left: set[str] = set()  # workers unbooked since the mover last filed sharing
        self.workers = workers  # note the node of a join or a departure (binpack's records)
        self.sharers = sharers  # note claims and departures (who shares: spread, the measure)
        super().__init__(nodes)

    # Fleet's own methods called by name: a super() per call costs an object in 3.11.

    def add_node(self, node: Node) -> None:
        Fleet.add_node(self, node)
        self.touched_nodes.add(node.name)

    def remove_node(self, name: str) -> Node:
        node = Fleet.remove_node(self, name)
        self.gone.add(name)
        return node

    def cut(self, name: str, node: str, devices: int, request: Request, *,
            allocated: bool = True, device_memory: int = 0) -> None:
        Fleet.cut(self, name, node, devices, request, allocated=allocated,
                  device_memory=device_memory)
        self.touched_nodes.add(node)

    def book(self, claim: str, request: Request, *, observed: bool = False) -> None:
        Fleet.book(self, claim, request, observed=observed)
        row = self._claims[claim]
        workers = len(row.bookings)
        if workers > 1 and self.sharers and claim not in self.touched_claims:
            self.touched_claims[claim] = workers > 2 and row.allocated  # shared before it
        if self.workers:
            self.touched_nodes.add(row.node)

    def unbook(self, worker: str) -> str:
        claim = Fleet.unbook(self, worker)
        row = self._claims[claim]  # unbooking leaves the claim
        if self.sharers:
            self.left.add(worker)
            if row.bookings and claim not in self.touched_claims:
                self.touched_claims[claim] = row.allocated  # two or more before: shared
        if self.workers:
            self.touched_nodes.add(row.node)
        return claim

    def remove_claim(self, claim: str) -> None:
        row = self._claims.get(claim)  # None: refused below, by name
        Fleet.remove_claim(self, claim)
        assert row is not None
        self.touched_nodes.add(row.node)

    def allocate(self, claim: str, *, node: str | None = None) -> None:
        Fleet.allocate(self, claim, node=node)
        row = self._claims[claim]
        self.touched_nodes.add(row.node)
        if len(row.bookings) > 1 and self.sharers and claim not in self.touched_claims:
            self.touched_claims[claim] = False  # not allocated before it: not shared

    def free_now(self, node: str) -> int:
        """The node's free devices (``free_devices``); -1 for a node not known."""
        free = self._free.get(node)
        if free is None:
            return -1
        return free[0] if len(free) == 1 else sum(free)

    def shared(self, claim: str) -> bool:
        """Whether the claim is allocated and holds two workers or more."""
        row = self._claims.get(claim)
        return row is not None and row.allocated and len(row.bookings) > 1

    def workers_of(self, claim: str) -> Collection[str]:
        """The workers booked on the claim (none for a claim gone); read, never changed."""
        row = self._claims.get(claim)
        return () if row is None else row.bookings  # its keys: no view made per call
