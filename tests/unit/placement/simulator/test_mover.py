"""The mover's records, kept cheaply, against a plain transcription that keeps them eagerly.

The mover notes only what a change can alter (``TrackedFleet``'s table) and
files the sharing workers only when they are read. The plain version below
notes every node and claim each change touches and refiles every noted
claim at once, at every settle. Both drive the same simulations; the moves,
the checks due and every record must agree.
"""

from __future__ import annotations

import dataclasses
from heapq import heappush

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement import GiB, Node, Policy, Request, Role, Strategy
from placement.fleet import Fleet
from placement.model import Node as NodeModel
from placement.rebalance import Shape
from placement.simulator import simulation as simulation_module
from placement.simulator.autoscaler import AutoscaledSimulation, NodeGroup
from placement.simulator.mover import Mover, MoveSettings
from placement.simulator.simulation import Simulation
from placement.simulator.tracked import TrackedFleet
from tests.strategies import node_lists, requests


class EagerFleet(Fleet):
    """Every node and claim a change touches, noted."""

    def __init__(self, nodes: tuple[Node, ...] = (), **_: bool) -> None:
        self.touched_nodes: set[str] = set()
        self.touched_claims: set[str] = set()
        self.gone: set[str] = set()
        super().__init__(nodes)

    def add_node(self, node: NodeModel) -> None:
        super().add_node(node)
        self.touched_nodes.add(node.name)

    def remove_node(self, name: str) -> NodeModel:
        node = super().remove_node(name)
        self.gone.add(name)
        return node

    def cut(self, name: str, node: str, devices: int, request: Request, *,
            allocated: bool = True, device_memory: int = 0) -> None:
        super().cut(name, node, devices, request, allocated=allocated,
                    device_memory=device_memory)
        self.touched_nodes.add(node)
        self.touched_claims.add(name)

    def book(self, claim: str, request: Request, *, observed: bool = False) -> None:
        super().book(claim, request, observed=observed)
        self.touched_nodes.add(self.claim_node(claim))
        self.touched_claims.add(claim)

    def unbook(self, worker: str) -> str:
        claim = super().unbook(worker)
        self.touched_nodes.add(self.claim_node(claim))
        self.touched_claims.add(claim)
        return claim

    def remove_claim(self, claim: str) -> None:
        node = self.claim_node(claim)
        super().remove_claim(claim)
        self.touched_nodes.add(node)
        self.touched_claims.add(claim)

    def allocate(self, claim: str, *, node: str | None = None) -> None:
        super().allocate(claim, node=node)
        self.touched_nodes.add(self.claim_node(claim))
        self.touched_claims.add(claim)

    def sharing(self, claim: str) -> tuple[str, ...]:
        found = self.claim(claim)
        if found is None or not found.allocated or len(found.bookings) < 2:
            return ()
        return tuple(booking.worker for booking in found.bookings)


class EagerMover(Mover):
    """Every noted node read, every noted claim refiled, at every settle."""

    def __init__(self, settings: MoveSettings, policy: Policy) -> None:
        super().__init__(settings, policy)
        self.on_claim: dict[str, tuple[str, ...]] = {}

    def settle(self, fleet: TrackedFleet, requests: dict[str, Request], now: float) -> None:
        assert isinstance(fleet, EagerFleet)
        nodes, claims, gone = fleet.touched_nodes, fleet.touched_claims, fleet.gone
        for node in gone:
            self.free.forget(node)
            self.alone.observe(node, 0, now)
        gone.clear()
        after, due = self.settings.after, self.due
        for node in nodes:
            if fleet.node(node) is None:
                continue
            if self.spread or self.settings.measure:
                rose = self.free.observe(node, fleet.free_devices(node), now)
                if rose and self.spread and after > 0:
                    heappush(due, now + after)
            lone = not self.spread and self.alone.observe(node, fleet.workers_on_node(node), now)
            if lone and after > 0:
                heappush(due, now + after)
        became = False
        if self.spread or self.settings.measure:
            # Everyone who left a noted claim first, then everyone who came: a worker
            # may go from one noted claim to another in one settle.
            now_on = {claim: fleet.sharing(claim) for claim in claims}
            for claim, workers in now_on.items():
                for worker in self.on_claim.get(claim, ()):
                    if worker not in workers:
                        self.unfile(worker)
            for claim, workers in now_on.items():
                before = self.on_claim.pop(claim, ())
                for worker in workers:
                    if worker not in before:
                        self.file(worker, requests[worker])
                if workers:
                    self.on_claim[claim] = workers
                    self._shared.add(claim)
                else:
                    self._shared.discard(claim)
                became |= bool(workers) and not before
        if became and after > 0 and self.spread:
            oldest = self.free.oldest()
            if oldest is not None and oldest <= now - after:
                heappush(due, now)
        if self._stuck and not self.spread and nodes - self._stuck:
            heappush(due, max(now, self._packed_at + after))
            self._stuck = set()
        nodes.clear()
        claims.clear()
        if self.settings.measure:
            self._measure(fleet, requests, now)

    def file(self, worker: str, request: Request) -> None:
        shape = (request.role, request.memory, request.devices)
        if self.settings.measure:  # every sharing worker counted, by shape
            self._filed[worker] = request
            self.shapes[shape] = self.shapes.get(shape, 0) + 1
        if request.movable:
            self._filed[worker] = request
            self.by_shape.setdefault(shape, {})[worker] = None

    def unfile(self, worker: str) -> None:
        request = self._filed.pop(worker, None)
        if request is None:
            return
        shape = (request.role, request.memory, request.devices)
        if self.settings.measure:
            self.shapes[shape] -= 1
            if not self.shapes[shape]:
                del self.shapes[shape]
        if request.movable:
            del self.by_shape[shape][worker]
            if not self.by_shape[shape]:
                del self.by_shape[shape]

    def _file_sharing(self, fleet: TrackedFleet, requests: dict[str, Request]) -> None:
        """Filed at every settle already."""


def sharing_from_scratch(fleet: Fleet, requests: dict[str, Request],
                         measure: bool) -> tuple[object, ...]:
    """Who shares, read off the whole fleet: the movable by shape, every shape counted
    (measured only)."""
    by_shape: dict[Shape, set[str]] = {}
    shapes: dict[Shape, int] = {}
    for claim in fleet.claims:
        if claim.allocated and len(claim.bookings) > 1:
            for booking in claim.bookings:
                request = requests[booking.worker]
                shape = (request.role, request.memory, request.devices)
                if measure:
                    shapes[shape] = shapes.get(shape, 0) + 1
                if request.movable:
                    by_shape.setdefault(shape, set()).add(booking.worker)
    return by_shape, shapes


def records(sim: Simulation, *, filed: bool = False) -> tuple[object, ...]:
    """What the mover holds; ``filed``: the sharing workers too, filed first (and checked
    against the whole fleet)."""
    mover = sim.mover
    assert mover is not None
    free = sorted((node, count, [mover.free.level(node, k) for k in range(1, count + 1)])
                  for node, count in mover.free.free_nodes())
    # The stranded device-seconds as of now: each counts up to its last measure.
    stranded = mover.stranded_seconds + mover._stranded * (sim.now - mover._stranded_at)
    held = (free, dict(mover.alone.nodes()), sorted(mover.due), mover.free.oldest(),
            stranded, dict(mover.moved))
    if not filed or not (mover.spread or mover.settings.measure):
        return held
    fleet, requests = sim.fleet, sim._requests
    assert isinstance(fleet, TrackedFleet | EagerFleet)
    mover._file_sharing(fleet, requests)  # type: ignore[arg-type]
    by_shape = {shape: set(workers) for shape, workers in mover.by_shape.items()}
    assert (by_shape, mover.shapes) == sharing_from_scratch(fleet, requests,
                                                            mover.settings.measure)
    return (*held, by_shape, dict(mover._filed), set(mover._shared))


@st.composite
def roomy_nodes(draw: st.DrawFn) -> list[Node]:
    """Nodes whose claims take two or three workers: sharing, free devices, moves."""
    count = draw(st.integers(min_value=1, max_value=4))
    return [Node(f"node-{i}", draw(st.integers(min_value=1, max_value=3)), 80 * GiB,
                 max_workers_per_claim=draw(st.integers(min_value=2, max_value=3)),
                 roles=draw(st.sampled_from([frozenset(), frozenset({Role.SAMPLER})])))
            for i in range(count)]


@st.composite
def days(draw: st.DrawFn) -> tuple[list[Node], list[tuple[float, str, object]]]:
    """A few nodes and a timed run of arrivals (names come back), departures and losses."""
    nodes = draw(st.one_of(node_lists(min_size=1, max_size=4), roomy_nodes()))
    steps: list[tuple[float, str, object]] = []
    for i in range(draw(st.integers(min_value=1, max_value=40))):
        gap = draw(st.sampled_from([0.0, 5.0, 30.0, 60.0, 130.0, 130.0, 400.0]))
        kind = draw(st.sampled_from(["arrive"] * 3 + ["leave"] * 2 + ["lose", "add"]))
        if kind == "arrive":
            name = f"w{draw(st.integers(min_value=0, max_value=9))}"
            request = draw(st.one_of(requests(name=name), st.builds(
                Request, st.just(name), st.sampled_from(list(Role)),
                st.sampled_from([10 * GiB, 20 * GiB, 40 * GiB, 70 * GiB]),
                st.sampled_from(["", "qwen", "llama"]))))
            movable = draw(st.sampled_from([False, True, True]))
            # A movable worker never names its count: a shape's pool is its first
            # worker's, and one naming a count may want another (see the report).
            request = dataclasses.replace(request, movable=movable,
                                          devices=None if movable else request.devices)
            steps.append((gap, kind, request))
        elif kind == "add":
            steps.append((gap, kind, dataclasses.replace(nodes[0], name=f"extra-{i}")))
        else:
            steps.append((gap, kind, draw(st.integers(min_value=0, max_value=100))))
    return nodes, steps


def play(sim: Simulation, steps: list[tuple[float, str, object]]) -> list[object]:
    """The run, and after each step the moves made and the mover's records."""
    seen: list[object] = []
    now = 0.0
    for gap, kind, payload in steps:
        now += gap
        sim.advance(now)
        seen.append(sim.take_moves())
        if kind == "arrive":
            assert isinstance(payload, Request)
            if payload.name in sim:
                sim.leave(payload.name)
            else:
                sim.arrive(payload)
        elif kind == "leave":
            present = list(sim.workers())
            if present:
                assert isinstance(payload, int)
                sim.leave(present[payload % len(present)])
        elif kind == "lose":
            names = sorted(node.name for node in sim.fleet.nodes)
            if len(names) > 1:
                assert isinstance(payload, int)
                sim.lose_node(names[payload % len(names)])
        else:
            assert isinstance(payload, Node)
            sim.add_node(payload)
        seen.append(records(sim))
    sim.advance(now + 1000.0)
    seen.append(sim.take_moves())
    seen.append(records(sim, filed=True))
    return seen


def both(build: object, steps: list[tuple[float, str, object]],
         monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], list[object]]:
    assert callable(build)
    fast = play(build(), steps)
    with monkeypatch.context() as patched:
        patched.setattr(simulation_module, "TrackedFleet", EagerFleet)
        patched.setattr(simulation_module, "Mover", EagerMover)
        plain = play(build(), steps)
    return fast, plain


@settings(max_examples=300, deadline=None)
@given(days(), st.sampled_from(list(Strategy)), st.booleans(),
       st.sampled_from([0.0, 120.0]))
def test_the_records_kept_cheaply_agree_with_the_plain_ones(
        day: tuple[list[Node], list[tuple[float, str, object]]], strategy: Strategy,
        measure: bool, after: float) -> None:
    if after == 0.0 and not measure:
        after = 120.0
    nodes, steps = day
    moves = MoveSettings(after, measure=measure)
    policy = Policy(strategy)
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, plain = both(lambda: Simulation(tuple(nodes), policy=policy, moves=moves),
                           steps, monkeypatch)
    assert fast == plain


@settings(max_examples=100, deadline=None)
@given(days(), st.booleans())
def test_with_a_node_group_under_binpack_too(
        day: tuple[list[Node], list[tuple[float, str, object]]], measure: bool) -> None:
    nodes, steps = day
    group = NodeGroup("g", Node("template", 2, 80 * GiB, 1024 * GiB, frozenset(), 2),
                      0, 3, 60.0, 120.0)
    policy = Policy(Strategy.BINPACK)
    moves = MoveSettings(120.0, measure=measure)
    steps = [step for step in steps if step[1] != "lose"]  # the group's nodes come and go
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, plain = both(lambda: AutoscaledSimulation(tuple(nodes[:1]), [group],
                                                        policy=policy, moves=moves),
                           steps, monkeypatch)
    assert fast == plain


@pytest.mark.parametrize("measure", [False, True])
def test_a_worker_back_under_its_old_name_is_filed_as_it_is_now(measure: bool) -> None:
    one = Node("n", 1, 80 * GiB, 1024 * GiB, frozenset(), 3)
    sim = Simulation((one,), moves=MoveSettings(120.0, measure=measure))
    sim.arrive(Request("a", Role.SAMPLER, 10 * GiB, movable=True))
    sim.arrive(Request("b", Role.SAMPLER, 10 * GiB, movable=True))
    sim.advance(1.0)
    assert records(sim, filed=True)[6] == {(Role.SAMPLER, 10 * GiB, None): {"a", "b"}}
    sim.leave("b")
    sim.advance(2.0)
    sim.arrive(Request("b", Role.SAMPLER, 20 * GiB))  # back, not movable, another size
    sim.advance(3.0)
    assert records(sim, filed=True)[6] == {(Role.SAMPLER, 10 * GiB, None): {"a"}}
    mover = sim.mover
    assert mover is not None
    assert mover.shapes == ({(Role.SAMPLER, 10 * GiB, None): 1, (Role.SAMPLER, 20 * GiB, None): 1}
                            if measure else {})
