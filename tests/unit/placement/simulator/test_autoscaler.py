"""The autoscaler over node groups, as stories on a clock, and its invariants under churn."""

from __future__ import annotations

import dataclasses

from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement import GiB, Node, Policy, Request, Role, Strategy
from placement.simulator.autoscaler import (
    AutoscaledSimulation,
    NodeAsked,
    NodeDown,
    NodeGroup,
    NodeUp,
)
from placement.simulator.simulation import Moved, Placement

BOX = Node("template", 4, 80 * GiB, 1024 * GiB, frozenset(), 4)
SOLO = Node("template", 4, 80 * GiB, 1024 * GiB)  # no sharing: a full node seats no one else


def group(min_: int = 0, max_: int = 3, boot: float = 300, idle: float = 600,
          name: str = "h100", template: Node = BOX) -> NodeGroup:
    return NodeGroup(name, template, min_, max_, boot, idle)


def t(name: str, gib: int = 10) -> Request:
    return Request(name, Role.TRAINER, gib * GiB)


def nodes(sim: AutoscaledSimulation) -> list[str]:
    return sorted(node.name for node in sim.fleet.nodes)


def test_a_group_starts_with_its_min_nodes_up() -> None:
    sim = AutoscaledSimulation((), [group(min_=2)])
    assert nodes(sim) == ["h100-1", "h100-2"]
    assert sim.group_of("h100-1") == "h100"


def test_a_waiting_worker_asks_for_a_node_which_seats_it_after_its_boot_time() -> None:
    sim = AutoscaledSimulation((), [group(boot=300)])
    sim.advance(60)
    assert sim.arrive(t("w")) == []
    (asked,) = sim.take_changes()
    assert asked == NodeAsked(60, "h100", "h100-1", "w", 360)
    assert sim.coming_for("w") is not None
    sim.advance(359)
    assert sim.take_changes() == [] and nodes(sim) == []
    sim.advance(360)
    (up,) = sim.take_changes()
    assert isinstance(up, NodeUp) and up.at == 360 and up.node.name == "h100-1"
    assert [seat.worker for seat in up.placed] == ["w"]
    assert sim.state("w").node == "h100-1"


def test_workers_a_coming_node_will_seat_ask_for_no_other() -> None:
    sim = AutoscaledSimulation((), [group()], policy=Policy(Strategy.BINPACK))
    for name in "abcdefgh":  # on h100-1's plan: a cuts a claim, b-d join it, e cuts ...
        sim.arrive(t(name))
    asked = [c for c in sim.take_changes() if isinstance(c, NodeAsked)]
    assert [c.node for c in asked] == ["h100-1"]


def test_under_spread_a_worker_that_could_only_share_waits_for_a_node_instead() -> None:
    # A pool that can grow has no contention: spread shares no claim while a group fits.
    sim = AutoscaledSimulation((), [group(min_=1)])
    for name in "abcd":  # h100-1's four devices, a claim each
        sim.arrive(t(name))
    assert sim.arrive(t("e")) == []  # it could join a's claim, but waits for h100-2
    assert str(sim.state("e").reason) == (
        "WaitingForCapacity: no free devices for it, and under spread it joins no claim (it "
        "could join claim-a) while a node group can add a node for it; node h100-2 of group "
        "h100 is on its way")
    assert [c.node for c in sim.take_changes()] == ["h100-2"]
    sim.advance(300)
    assert sim.state("e").node == "h100-2" and sim.state("e").claim == "claim-e"
    # Workers no group could seat still share under contention.
    fixed = Node("fixed", 1, 400 * GiB, max_workers_per_claim=2)
    sim = AutoscaledSimulation((fixed,), [group()])
    sim.arrive(t("x", 350))  # more than a template's four 80Gi devices
    assert [seat.claim for seat in sim.arrive(t("y", 350))] == ["claim-x"]


def test_a_worker_the_coming_node_cannot_also_take_asks_for_a_second() -> None:
    sim = AutoscaledSimulation((), [group(template=SOLO)])
    sim.arrive(t("wide", 300))  # four devices: the whole node
    sim.arrive(t("other", 200))  # three devices: not on h100-1 beside the wide one
    assert [c.node for c in sim.take_changes()] == ["h100-1", "h100-2"]


def test_asks_stop_at_max_and_the_worker_waits() -> None:
    sim = AutoscaledSimulation((), [group(template=SOLO, max_=1)])
    sim.arrive(t("a", 300))
    sim.arrive(t("b", 300))
    assert [c.node for c in sim.take_changes()] == ["h100-1"]
    sim.advance(300)
    sim.take_changes()
    assert sim.state("b").node is None and sim.coming_for("b") is None


def test_a_worker_no_template_fits_asks_for_nothing() -> None:
    sim = AutoscaledSimulation((), [group()])
    sim.arrive(t("huge", 700))  # more than four 80Gi devices
    assert sim.take_changes() == []


def test_a_node_idle_for_its_idle_time_goes_but_never_below_min() -> None:
    sim = AutoscaledSimulation((), [group(template=SOLO, min_=1, boot=0, idle=600)])
    sim.arrive(t("a", 300))  # fills h100-1
    sim.arrive(t("b", 300))  # asks h100-2, up at once
    sim.advance(0)
    sim.take_changes()
    sim.advance(100)
    sim.leave("b")  # h100-2 idle from 100
    sim.leave("a")  # h100-1 idle from 100 too
    sim.advance(699)
    assert sim.take_changes() == []
    sim.advance(700)
    changes = sim.take_changes()
    assert [(type(c), c.node.name) for c in changes if isinstance(c, NodeDown)] == [
        (NodeDown, "h100-2")]  # the first to go idle goes; the other is the floor
    assert nodes(sim) == ["h100-1"]
    sim.advance(10_000)
    assert nodes(sim) == ["h100-1"]


def test_an_idle_node_kept_at_the_floor_goes_once_another_of_its_group_is_up() -> None:
    fixed = Node("fixed", 4, 80 * GiB)
    sim = AutoscaledSimulation((fixed,), [group(template=SOLO, min_=1, boot=300, idle=60)])
    sim.arrive(t("holder", 300))  # fills fixed
    sim.arrive(t("w1", 300))  # fills h100-1
    sim.arrive(t("w2", 300))  # asks h100-2, up at 300
    sim.advance(10)
    sim.leave("holder")  # w2 takes fixed: h100-2 comes for no one
    sim.advance(20)
    sim.leave("w1")  # h100-1 idle from 20, due at 80 -- but it is the group's only node up
    sim.advance(299)
    assert nodes(sim) == ["fixed", "h100-1"]
    sim.advance(300)  # h100-2 is up: h100-1, idle long since, goes now
    assert nodes(sim) == ["fixed", "h100-2"]
    sim.advance(10_000)  # and h100-2 is the floor
    assert nodes(sim) == ["fixed", "h100-2"]


def test_a_claim_stops_the_idle_clock() -> None:
    sim = AutoscaledSimulation((), [group(min_=0, boot=0, idle=600)])
    sim.arrive(t("a"))
    sim.advance(0)
    sim.take_changes()
    sim.advance(100)
    sim.leave("a")  # idle from 100: would go at 700
    sim.advance(500)
    sim.arrive(t("b"))  # seated there at 500: stays
    sim.advance(1000)
    assert nodes(sim) == ["h100-1"]
    sim.leave("b")
    sim.advance(1600)
    assert nodes(sim) == []


def test_the_oldest_waiting_worker_gets_the_node_the_younger_asks_again() -> None:
    # b asked for h100-1; before it comes, the older a (which a fixed node was
    # coming to free) is still waiting and takes it: b is counted again.
    fixed = Node("fixed", 4, 80 * GiB, 1024 * GiB)
    sim = AutoscaledSimulation((fixed,), [group(template=SOLO, boot=300, max_=2)])
    sim.arrive(t("holder", 300))  # fixed is full
    sim.arrive(t("a", 300))  # asks h100-1
    sim.arrive(t("b", 300))  # asks h100-2
    assert [c.node for c in sim.take_changes()] == ["h100-1", "h100-2"]
    sim.advance(300)
    assert sim.state("a").node == "h100-1" and sim.state("b").node == "h100-2"


def test_a_counted_worker_that_leaves_frees_its_place_on_the_plan() -> None:
    sim = AutoscaledSimulation((), [group(template=SOLO, boot=300)])
    sim.arrive(t("a", 300))
    sim.leave("a")
    sim.arrive(t("b", 300))  # h100-1 is coming and now has room for b
    assert [c.node for c in sim.take_changes()] == ["h100-1"]
    assert sim.coming_for("b") is not None


def test_a_lost_nodes_workers_that_wait_ask_for_a_node_in_its_place() -> None:
    sim = AutoscaledSimulation((), [group(template=SOLO, min_=1, max_=2, boot=60)])
    sim.arrive(t("a", 300))
    sim.advance(10)
    (moved,) = sim.lose_node("h100-1")
    assert moved.placed is None and nodes(sim) == []
    assert [(c.node, c.worker) for c in sim.take_changes()] == [("h100-2", "a")]
    sim.advance(70)
    assert sim.state("a").node == "h100-2"


def test_binpack_keeps_devices_free_for_a_wide_worker_where_spread_asks_a_node() -> None:
    asked = {}
    for strategy in Strategy:
        sim = AutoscaledSimulation((), [group(min_=1)], policy=Policy(strategy))
        for index in range(5):
            sim.arrive(Request(f"s{index}", Role.SAMPLER, 10 * GiB))
        sim.arrive(t("wide", 140))
        asked[strategy] = [c.node for c in sim.take_changes()]
    assert asked == {Strategy.SPREAD: ["h100-2"], Strategy.BINPACK: []}


# ------------------------------------------------------------------- invariants

actions = st.lists(st.tuples(st.integers(0, 400), st.sampled_from(["arrive", "leave"]),
                             st.sampled_from([10, 60, 140, 300, 700])), max_size=40)


@settings(max_examples=100, deadline=None)
@given(actions, st.integers(0, 2), st.integers(1, 3), st.sampled_from(list(Strategy)))
# A node kept at the floor that held a claim and went idle again since: its idle clock
# started again, so a node of its group coming up later does not end it early.
@example([(0, "arrive", 10), (300, "arrive", 10), (0, "arrive", 300), (0, "leave", 10),
          (0, "leave", 10), (0, "leave", 10), (120, "arrive", 10)], 1, 1, Strategy.SPREAD)
def test_under_churn_groups_stay_in_bounds_and_no_fitting_worker_is_forgotten(
        script: list[tuple[int, str, int]], min_: int, extra: int, strategy: Strategy) -> None:
    small = Node("template", 2, 80 * GiB, 256 * GiB, frozenset(), 2)
    groups = [group(min_=min_, max_=min_ + extra, boot=120, idle=300),
              group(name="small", template=small, max_=2, boot=60, idle=60)]
    sim = AutoscaledSimulation((Node("fixed", 1, 80 * GiB),), groups, policy=Policy(strategy))
    now, serial, present = 0.0, 0, []
    empty_since: dict[str, float] = {}  # group nodes holding no claim, since when

    def empty(node: str) -> bool:
        return node not in {c.node for c in sim.fleet.claims}

    for node in sim.started:
        empty_since[node.name] = 0.0
    for gap, action, gib in script:
        now += gap
        sim.advance(now)
        for change in sim.take_changes():
            if isinstance(change, NodeUp) and empty(change.node.name):
                empty_since[change.node.name] = change.at
            if isinstance(change, NodeDown):  # only an empty node goes, idle long enough
                assert empty(change.node.name)
                assert change.at >= empty_since.pop(change.node.name) + sim.groups[
                    [g.name for g in sim.groups].index(change.group)].idle
        # A node empty for its idle time is gone, unless its group has only its min up.
        for g in sim.groups:
            up = [n.name for n in sim.fleet.nodes if sim.group_of(n.name) == g.name]
            idle = [n for n in up if n in empty_since and empty_since[n] + g.idle <= now]
            assert not idle or len(up) <= g.min
        if action == "leave" and present:
            sim.leave(present.pop(gap % len(present)))
        else:
            serial += 1
            present.append(f"w{serial}")
            sim.arrive(t(f"w{serial}", gib))
        for change in sim.take_changes():
            assert not isinstance(change, NodeDown)  # nothing goes but on the clock
        for node in sim.fleet.nodes:
            if sim.group_of(node.name) is None:
                continue
            if not empty(node.name):
                empty_since.pop(node.name, None)
            else:
                empty_since.setdefault(node.name, now)
        for index, g in enumerate(sim.groups):
            up = [n for n in sim.fleet.nodes if sim.group_of(n.name) == g.name]
            assert g.min <= len(up) <= g.max
            assert sim._states[index].up + sim._states[index].coming <= g.max
        for worker in present:
            if sim.fleet.claim_of(worker) is not None:
                continue
            request = sim._requests[worker]
            fits = [i for i, state in enumerate(sim._states) if sim._template_fits(state, request)]
            # A waiting worker some group could seat is counted on a node coming, or
            # every such group is full.
            assert (not fits or sim.coming_for(worker) is not None
                    or all(sim._states[i].full for i in fits))


# ------------------------------------------------- a removal meeting a blocked queue


class Plain(AutoscaledSimulation):
    """The removal's reconsideration as first written: every blocked worker, oldest first."""

    def _reconsider_blocked(self) -> None:
        self._consider(list(self._blocked.workers))


class Counting(AutoscaledSimulation):
    """Which waiting workers were considered for a node, in order."""

    considered: list[str]

    def _consider_one(self, worker: str, request: Request) -> None:
        self.considered.append(worker)
        super()._consider_one(worker, request)


TRAINERS = dataclasses.replace(SOLO, roles=frozenset({Role.TRAINER}))
SAMPLERS = dataclasses.replace(SOLO, roles=frozenset({Role.SAMPLER}))


def test_a_removal_considers_one_blocked_worker_of_each_shape() -> None:
    sim = Counting((), [group(name="trainers", template=TRAINERS, max_=1, boot=0),
                        group(name="samplers", template=SAMPLERS, boot=0, idle=10)])
    sim.considered = []
    sim.arrive(t("holder", 300))  # trainers-1, all four devices
    for index in range(100):
        sim.arrive(t(f"b{index}", 300))  # blocked: trainers is at its max
        sim.arrive(t(f"c{index}", 200))
    sim.arrive(Request("s", Role.SAMPLER, 10 * GiB))  # samplers-1
    sim.advance(0)
    sim.leave("s")  # samplers-1 goes at 10
    sim.considered = []
    sim.advance(10)
    assert [type(c) for c in sim.take_changes()] == [NodeAsked, NodeAsked, NodeUp, NodeUp,
                                                     NodeDown]
    # The plain loop considers all 200; each shape's oldest stays blocked, so the rest would.
    assert sim.considered == ["b0", "c0"]
    assert len(sim._blocked.workers) == 200


def test_a_blocked_worker_a_coming_plan_has_room_for_again_is_counted_at_a_removal() -> None:
    # a leaves trainers-1's plan, which then has room for b (two devices) but not for the
    # older big (four); nothing considers them until a node goes, here one of the other
    # group, which neither can use: big stays blocked, and b, younger, is counted.
    for kind in (AutoscaledSimulation, Plain):
        sim = kind((), [group(name="trainers", template=TRAINERS, max_=1, boot=1000),
                        group(name="samplers", template=SAMPLERS, boot=10, idle=10)])
        sim.arrive(Request("s", Role.SAMPLER, 300 * GiB))  # samplers-1, up at 10
        sim.arrive(t("a", 140))  # trainers-1, up at 1000: two devices of its plan
        sim.arrive(t("x", 140))  # the other two
        sim.arrive(t("big", 300))  # blocked: trainers is at its max
        sim.arrive(t("b", 140))
        sim.leave("a")
        assert sim.coming_for("b") is None
        sim.advance(15)
        sim.leave("s")  # samplers-1 idle from 15: it goes at 25
        sim.advance(30)
        assert sim.coming_for("big") is None
        coming = sim.coming_for("b")
        assert coming is not None and coming.node == "trainers-1"


lockstep = st.lists(st.tuples(st.integers(0, 30),
                              st.sampled_from(["trainer", "trainer", "sampler", "sampler",
                                               "trainer leaves", "sampler leaves", "lose"]),
                              st.sampled_from([10, 60, 140, 300]),
                              st.sampled_from(["o1", "o2", ""]),  # "": the worker's own name
                              st.booleans(),
                              # Now and then an exact device count; 3: more than any node has.
                              st.sampled_from([None, None, None, 1, 2, 3])),
                    min_size=30, max_size=80)


@settings(max_examples=100, deadline=None)
@given(lockstep, st.sampled_from(list(Strategy)), st.booleans(), st.booleans())
def test_the_blocked_are_considered_again_as_the_plain_loop_does(
        script: list[tuple[int, str, int, str, bool, int | None]], strategy: Strategy,
        affinity: bool,
        third: bool) -> None:
    # Trainers wait for one slow node while samplers' nodes come and go: removals meet
    # a blocked queue, at times with room freed on the trainers' plan meanwhile.
    both = Node("template", 2, 80 * GiB, 512 * GiB, frozenset(), 2)
    groups = [group(name="trainers", template=dataclasses.replace(both, roles=frozenset(
                  {Role.TRAINER})), max_=1, boot=300, idle=30),
              group(name="samplers", template=dataclasses.replace(both, roles=frozenset(
                  {Role.SAMPLER})), max_=3, boot=5, idle=5)]
    if third:
        groups.append(group(name="both", template=both, max_=1, boot=50, idle=40))
    sims = [kind((Node("fixed", 1, 80 * GiB),), groups, policy=Policy(strategy, affinity))
            for kind in (AutoscaledSimulation, Plain)]
    fast, plain = sims
    now, serial = 0, 0
    present: dict[Role, list[str]] = {Role.TRAINER: [], Role.SAMPLER: []}
    for gap, action, gib, owner, exclusive, devices in script:
        now += gap
        for sim in sims:
            sim.advance(now)
        assert fast.take_changes() == plain.take_changes()
        role = Role.SAMPLER if action.startswith("sampler") else Role.TRAINER
        lost = [node.name for node in fast.fleet.nodes if fast.group_of(node.name)]
        outcome: list[list[Placement]] | list[list[Moved]]
        if action.endswith("leaves") and present[role]:
            worker = present[role].pop(gap % len(present[role]))
            outcome = [sim.leave(worker) for sim in sims]
        elif action == "lose" and lost:
            outcome = [sim.lose_node(lost[gap % len(lost)]) for sim in sims]
        else:
            serial += 1
            present[role].append(f"w{serial}")
            request = Request(f"w{serial}", role, gib * GiB, owner, exclusive, devices)
            outcome = [sim.arrive(request) for sim in sims]
        assert outcome[0] == outcome[1]
        assert fast.take_changes() == plain.take_changes()
        for worker in present[Role.TRAINER] + present[Role.SAMPLER]:
            assert fast.state(worker) == plain.state(worker)
            assert fast.coming_for(worker) == plain.coming_for(worker)
        assert fast._blocked.workers.keys() == plain._blocked.workers.keys()
        # Each shape's queue: its blocked, oldest first.
        queued = [entry for queue in fast._blocked.queues.values() for entry in queue]
        assert sorted(worker for _, worker in queued) == sorted(fast._blocked.workers)
        assert all(queue and queue == sorted(queue) for queue in fast._blocked.queues.values())


def test_a_worker_naming_its_devices_asks_only_a_group_with_that_many() -> None:
    narrow = group(name="narrow", template=Node("template", 2, 80 * GiB, 1024 * GiB))
    sim = AutoscaledSimulation((), [narrow, group(name="wide")])
    # 100Gi fits 2 x 80Gi by memory, but it names 4 devices: only the wide group will do.
    assert sim.arrive(Request("tp", Role.TRAINER, 100 * GiB, devices=4)) == []
    (asked,) = sim.take_changes()
    assert isinstance(asked, NodeAsked) and asked.group == "wide"
    sim.arrive(Request("plain", Role.TRAINER, 100 * GiB))
    (asked,) = sim.take_changes()
    assert isinstance(asked, NodeAsked) and asked.group == "narrow"
