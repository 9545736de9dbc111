"""The index is derived from the books alone: after any run of operations it equals a rebuild.

A state machine drives a fleet through every operation the books offer --
decisions carried out (``cut``, ``book``) and facts recorded (nodes added,
replaced and removed, claims allocated, bookings observed and dropped, empty
claims removed) -- and after each step compares the fleet's index with the
index of a fleet built afresh from the same nodes and claims. Decisions are
made with owner affinity on or off, so the owner lists are filed, at the first
search with it on, over claims that were never filed by owner, and kept from
then on.
"""

from __future__ import annotations

import contextlib
import math

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from placement import (
    Booking,
    Claim,
    Fleet,
    GiB,
    JoinClaim,
    NewClaim,
    Node,
    PlacementError,
    Policy,
    Request,
    Role,
)
from placement.decide import find_seat
from placement.policy import pairs, turn_round
from tests.strategies import nodes, requests

NODE_NAMES = [f"node-{c}" for c in "abcd"]


class Books(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fleet = Fleet()
        self.count = 0

    def _worker(self) -> str:
        self.count += 1
        return f"w{self.count}"

    def _workers(self) -> list[str]:
        return sorted(w for claim in self.fleet.claims for w in claim.workers)

    @rule(data=st.data(), name=st.sampled_from(NODE_NAMES))
    def add_or_replace_node(self, data: st.DataObject, name: str) -> None:
        node = data.draw(nodes(name=name))
        with contextlib.suppress(PlacementError):  # narrower than a claim on it: refused
            if self.fleet.node(name) is None:
                self.fleet.add_node(node)
            else:
                self.fleet.replace_node(node)

    @rule(name=st.sampled_from(NODE_NAMES))
    def remove_node(self, name: str) -> None:
        if self.fleet.node(name) is not None:
            self.fleet.remove_node(name)

    @rule(data=st.data(), deferred=st.booleans(), affinity=st.booleans())
    def arrive(self, data: st.DataObject, deferred: bool, affinity: bool) -> None:
        request: Request = data.draw(requests(name=self._worker()))
        seat = find_seat(request, self.fleet, Policy(owner_affinity=affinity))
        if isinstance(seat, NewClaim):
            self.fleet.cut(f"claim-{request.name}", seat.node, seat.devices, request,
                           allocated=not deferred)
        elif isinstance(seat, JoinClaim):
            self.fleet.book(seat.claim, request)

    @rule(data=st.data(), index=st.integers(min_value=0, max_value=100))
    def observe_booking(self, data: st.DataObject, index: int) -> None:
        # A cluster may show a booking decide would not make: the books record it.
        claims = self.fleet.claims
        if claims:
            claim = claims[index % len(claims)]
            self.fleet.book(claim.name, data.draw(requests(name=self._worker())), observed=True)

    @rule(index=st.integers(min_value=0, max_value=100))
    def leave(self, index: int) -> None:
        workers = self._workers()
        if workers:
            claim = self.fleet.unbook(workers[index % len(workers)])
            if self.fleet.workers_on(claim) == 0:
                self.fleet.remove_claim(claim)

    @rule(index=st.integers(min_value=0, max_value=100), elsewhere=st.sampled_from(NODE_NAMES))
    def allocate(self, index: int, elsewhere: str) -> None:
        waiting = [c for c in self.fleet.claims if not c.allocated]
        if waiting:
            claim = waiting[index % len(waiting)]
            target = claim.node if self.fleet.node(claim.node) else elsewhere
            with contextlib.suppress(PlacementError):  # onto an unknown node: refused
                self.fleet.allocate(claim.name, node=target)

    @invariant()
    def index_equals_a_rebuild(self) -> None:
        rebuilt = Fleet(self.fleet.nodes, self.fleet.claims)
        described = self.fleet.index.describe()
        assert described["bounds_hold"] and described["ranked"]
        assert described == rebuilt.index.describe()
        twin = self.fleet.copy()
        assert twin.index.describe() == described
        assert (twin.nodes, twin.claims) == (self.fleet.nodes, self.fleet.claims)
        for claim in self.fleet.claims:  # the four reads at once, as each gives it
            fleet, name = self.fleet, claim.name
            assert fleet.claim_figures(name) == (fleet.claim_node(name), fleet.claim_devices(
                name), fleet.workers_on(name), fleet.is_allocated(name))
        for node in self.fleet.nodes:
            assert self.fleet.free_devices(node.name) == rebuilt.free_devices(node.name)
            assert self.fleet.parked_load(node.name) == rebuilt.parked_load(node.name)


    @invariant()
    def owner_searches_read_plainly(self) -> None:
        # Owner affinity's search and the general one, against the books read plainly:
        # on a rebuild, and on the fleet itself once a search has filed its lists.
        rebuilt = Fleet(self.fleet.nodes, self.fleet.claims)
        fleets = [rebuilt, *([self.fleet] if self.fleet.index.owners_filed else [])]
        rooms = {name: room for by_key in rebuilt.index.describe()["seats"].values()
                 for entries in by_key.values() for name, room in entries}
        memories = sorted({1, *(int(room) for room in rooms.values()
                                if 0 < room < math.inf)})[:4]
        for owner in sorted({b.owner for c in self.fleet.claims for b in c.bookings}):
            for role in Role:
                for memory in memories:
                    want = _plain_first_pairing(self.fleet, rooms, owner, role, memory)
                    for fleet in fleets:
                        assert fleet.index.first_pairing(owner, role, memory) == want
                        found = fleet.index.first_of_owner(owner, role, memory, pairing=True)
                        assert (found[1] if found is not None else None) == want


def _plain_first_pairing(fleet: Fleet, rooms: dict[str, float], owner: str, role: Role,
                         memory: int) -> str | None:
    """The open claim of ``owner``'s that pairs with a joiner of ``role`` and takes
    ``memory``, ranked by turn round, workers, then name: read from the books claim by
    claim (the index's rooms only say which claims are open and what they take)."""
    ranked = []
    for claim in fleet.claims:
        node = fleet.node(claim.node)
        if rooms.get(claim.name, -math.inf) < memory or node is None or (
                node.roles and role not in node.roles):
            continue
        held = [booking.role for booking in claim.bookings if booking.owner == owner]
        if pairs(role, held):
            owners = len({booking.owner for booking in claim.bookings})
            ranked.append((turn_round(owners, len(held)), len(claim.bookings), claim.name))
    return min(ranked)[2] if ranked else None


Books.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_the_index_is_derived_from_the_books = Books.TestCase


def test_owner_lists_are_filed_only_once_a_search_reads_them() -> None:
    # Two claims of one trainer each, of owner "o": a sampler of "o" pairs with both.
    node = Node("n", 2, 80 * GiB, 1000 * GiB, max_workers_per_claim=2)  # no device free
    fleet = Fleet([node], [Claim(f"c{i}", "n", 1, bookings=(
        Booking(f"t{i}", "o", 10 * GiB, role=Role.TRAINER),)) for i in (1, 2)])
    first = fleet.index.describe()
    sampler = Request("s", Role.SAMPLER, 10 * GiB, owner="o")
    off = find_seat(sampler, fleet, Policy(owner_affinity=False))
    # Claims of one worker leave any joiner a half of the turns: the open seats' buckets
    # rank them alike for everyone, so no owner's list was read.
    assert not fleet.index.owners_filed
    assert isinstance(off, JoinClaim)
    assert find_seat(Request("s2", Role.SAMPLER, 10 * GiB, owner="o"), fleet) == off
    assert fleet.index.owners_filed  # owner affinity read them: filed
    assert fleet.index.describe() == first  # as they would have been filed
