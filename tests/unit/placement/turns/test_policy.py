"""Turns on a shared claim: stories of workers taking turns, then the policy's invariants."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.turns import (
    Action,
    Evict,
    EvictReason,
    Grant,
    TurnGroup,
    TurnPhase,
    TurnSettings,
    Yield,
)

FAST = TurnSettings(quantum=120, min_resident=10, yield_grace=30)


def grants(actions: list[Action]) -> list[str]:
    return [a.member for a in actions if isinstance(a, Grant)]


def crowd(group: TurnGroup, *members: tuple[str, str], at: float = 0) -> list[Action]:
    """Members join and want a turn at once, in order; the actions that made."""
    out: list[Action] = []
    for member, owner in members:
        out += group.join(member, owner, at)
        out += group.want(member, at)
    return out


# -- stories ---------------------------------------------------------------------------------


def test_four_samplers_of_two_owners_take_turns_owner_by_owner() -> None:
    group = TurnGroup(FAST)
    first = crowd(group, ("a1", "alice"), ("a2", "alice"), ("b1", "bob"), ("b2", "bob"))
    assert grants(first) == ["a1"]
    order = ["a1"]
    now = 0.0
    for _ in range(4):
        now += 120
        asked = group.tick(now)
        assert asked == [Yield(order[-1], 30, now + 30)]
        order += grants(group.parked(order[-1], now + 5))
        now += 5
    assert order == ["a1", "b1", "a2", "b2", "a1"]


def test_a_lone_worker_keeps_its_turn_past_the_quantum() -> None:
    group = TurnGroup(FAST)
    assert grants(crowd(group, ("solo", "alice"))) == ["solo"]
    assert group.tick(10_000) == []
    assert group.next_deadline() is None
    assert group.view("solo", 10_000).phase is TurnPhase.GRANTED


def test_a_newcomer_after_a_long_quiet_turn_is_served_at_once() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("old", "alice"))
    group.resident("old", 20)
    assert group.view("old", 20).phase is TurnPhase.RESIDENT
    assert crowd(group, ("new", "bob"), at=500) == [Yield("old", 30, 530)]


def test_a_holder_done_with_its_turn_still_keeps_it_min_resident() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    assert group.idle("a", 3) == []
    assert group.next_deadline() == 10
    assert group.tick(10) == [Yield("a", 30, 40)]
    assert grants(group.parked("a", 12)) == ["b"]


def test_a_holder_that_never_parks_is_evicted_and_blocks_the_turn_until_gone() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("stubborn", "alice"), ("patient", "bob"))
    assert group.tick(120) == [Yield("stubborn", 30, 150)]
    assert group.tick(149) == []
    assert group.tick(150) == [Evict("stubborn", EvictReason.TURN_OVERRUN)]
    assert group.tick(400) == []  # its pod is being deleted; the process may still hold memory
    assert group.view("stubborn", 400).phase is TurnPhase.EVICTING
    assert grants(group.gone("stubborn", 401)) == ["patient"]


def test_an_evicted_worker_comes_back_at_the_back_of_its_owners_line() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a1", "alice"), ("a2", "alice"), ("b1", "bob"))
    group.tick(120)
    group.tick(150)
    assert grants(group.gone("a1", 151)) == ["b1"]
    crowd(group, ("a1-again", "alice"), at=152)
    group.tick(271)
    assert grants(group.parked("b1", 272)) == ["a2"]
    group.tick(392)
    assert grants(group.parked("a2", 393)) == ["b1"]
    group.tick(513)
    assert grants(group.parked("b1", 514)) == ["a1-again"]


def test_a_dropped_connection_is_no_proof_the_device_is_free() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    # It no longer wants the turn (it cannot be reached) and is asked to yield, unheard.
    assert group.disconnected("a", 50) == [Yield("a", 30, 80)]
    assert group.tick(79) == []
    assert group.tick(80) == [Evict("a", EvictReason.TURN_OVERRUN)]
    assert grants(group.gone("a", 95)) == ["b"]


def test_after_a_restart_nothing_is_granted_until_every_member_has_reported() -> None:
    group = TurnGroup(FAST, recovering=True)
    for member, owner in [("a", "alice"), ("b", "bob"), ("c", "carol")]:
        group.join(member, owner, 0)
    assert group.view("a", 0).phase is TurnPhase.UNREPORTED
    assert group.hello("a", False, 1) == []
    assert group.want("a", 1) == []
    assert group.hello("b", True, 2) == []  # it was resident before the restart: it keeps it
    assert group.holder == "b"
    assert group.hello("c", False, 3) == []
    assert not group.recovering
    assert group.view("a", 3).phase is TurnPhase.WAITING
    assert group.tick(12) == [Yield("b", 30, 42)]  # b's quantum began when it reported


def test_a_member_gone_while_unreported_lets_the_others_go_on() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("a", "alice", 0)
    group.join("lost", "bob", 0)
    group.hello("a", False, 1)
    assert group.want("a", 1) == []
    assert grants(group.gone("lost", 2)) == ["a"]


def test_a_second_worker_resident_without_the_turn_is_asked_to_park_first() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("a", "alice", 0)
    group.join("b", "bob", 0)
    group.join("c", "bob", 0)
    group.hello("a", True, 1)
    assert group.hello("b", True, 2) == [Yield("b", 30, 32)]
    group.hello("c", False, 3)
    group.want("c", 3)
    assert group.view("b", 3).phase is TurnPhase.INTRUDING
    group.tick(11)
    assert group.parked("a", 12) == []  # b still holds memory: nobody is granted
    assert grants(group.parked("b", 13)) == ["c"]


def test_a_parked_worker_seen_holding_device_memory_is_evicted() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    assert group.holds_device("a", 5) == []  # the holder may
    assert group.holds_device("b", 6) == [Evict("b", EvictReason.RESIDENT_WITHOUT_TURN)]
    group.tick(120)
    assert group.parked("a", 121) == []  # b's memory is still there
    assert grants(group.gone("b", 122)) == ["a"]


def test_turn_settings_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="quantum must be more than 0"):
        TurnSettings(quantum=0)
    with pytest.raises(ValueError, match="yield_grace must be a number"):
        TurnSettings(yield_grace=-1)
    with pytest.raises(ValueError, match=r"min_resident \(300s\) must not exceed quantum"):
        TurnSettings(quantum=120, min_resident=300)


def test_membership_mistakes_name_the_member() -> None:
    group = TurnGroup(FAST)
    group.join("a", "alice", 0)
    with pytest.raises(ValueError, match="'a' has already joined"):
        group.join("a", "alice", 1)
    with pytest.raises(KeyError, match="'ghost' is not in this group"):
        group.want("ghost", 1)


def test_held_time_and_turns_are_counted() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    group.tick(120)
    group.parked("a", 125)
    assert group.view("a", 200).held == 125
    assert group.view("b", 200).held == 75
    assert group.view("b", 200).turns == 1
    assert group.view("a", 200).waiting_since == 125


# -- invariants --------------------------------------------------------------------------------

MEMBERS = [f"m{i}" for i in range(5)]
OWNERS = ["alice", "bob", "carol"]
OPS = ["join", "hello", "want", "idle", "resident", "parked", "disconnected", "gone",
       "holds_device", "tick"]

ops = st.lists(
    st.tuples(st.sampled_from(OPS), st.sampled_from(MEMBERS), st.sampled_from(OWNERS),
              st.booleans(), st.floats(min_value=0, max_value=200, allow_nan=False)),
    max_size=80,
)
turn_settings = st.builds(
    TurnSettings,
    quantum=st.sampled_from([1.0, 30.0, 120.0]),
    min_resident=st.sampled_from([0.0, 1.0]),
    yield_grace=st.sampled_from([0.0, 5.0, 30.0]),
)


def play(policy: TurnSettings, recovering: bool,
         steps: list[tuple[str, str, str, bool, float]]) -> list[tuple[float, Action]]:
    """Any calls in any order, as a misbehaving node might make them; checks exclusion as it goes.

    A member *occupies* the device from a grant or its own claim to hold memory
    until it parks or is gone; a grant to anyone while another occupies it breaks
    the one rule.
    """
    group = TurnGroup(policy, recovering=recovering)
    occupying: set[str] = set()
    log: list[tuple[float, Action]] = []
    now = 0.0
    for op, member, owner, flag, dt in steps:
        now += dt
        if op == "join":
            if member in group:
                continue
            actions = group.join(member, owner, now)
        elif op == "tick":
            actions = group.tick(now)
        elif member not in group:
            continue
        elif op == "hello":
            (occupying.add if flag else occupying.discard)(member)
            actions = group.hello(member, flag, now)
        elif op in ("resident", "holds_device"):
            occupying.add(member)
            actions = getattr(group, op)(member, now)
        elif op in ("parked", "gone"):
            occupying.discard(member)
            actions = getattr(group, op)(member, now)
        else:
            actions = getattr(group, op)(member, now)
        for action in actions:
            if isinstance(action, Grant):
                assert not occupying - {action.member}, (
                    f"granted {action.member} while {sorted(occupying)} occupy the device")
                occupying.add(action.member)
            log.append((now, action))
        assert sum(v.phase in {TurnPhase.GRANTED, TurnPhase.RESIDENT, TurnPhase.YIELDING}
                   for v in group.views(now)) <= 1
    return log


@settings(max_examples=300, deadline=None)
@given(turn_settings, st.booleans(), ops)
def test_never_two_members_on_the_device(policy: TurnSettings, recovering: bool,
                                         steps: list[tuple[str, str, str, bool, float]]) -> None:
    play(policy, recovering, steps)


@settings(max_examples=100, deadline=None)
@given(turn_settings, st.booleans(), ops)
def test_the_same_calls_at_the_same_times_give_the_same_turns(
        policy: TurnSettings, recovering: bool,
        steps: list[tuple[str, str, str, bool, float]]) -> None:
    assert play(policy, recovering, steps) == play(policy, recovering, steps)


@dataclass
class Run:
    """Well-behaved workers that always want a turn and park some delay after being asked."""

    group: TurnGroup
    park_delay: float
    now: float = 0.0
    parks: dict[str, float] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    started: dict[str, float] = field(default_factory=dict)

    def act(self, actions: list[Action]) -> None:
        for action in actions:
            assert not isinstance(action, Evict), f"a well-behaved worker was evicted: {action}"
            if isinstance(action, Yield):
                self.parks[action.member] = self.now + self.park_delay
            elif isinstance(action, Grant):
                self.waits.append(self.now - self.started.pop(action.member))
                self.act(self.group.resident(action.member, self.now))

    def until(self, end: float) -> None:
        while True:
            times = [*self.parks.values()]
            deadline = self.group.next_deadline()
            if deadline is not None:
                times.append(deadline)
            if not times or min(times) > end:
                return
            self.now = max(self.now, min(times))
            for member, at in sorted(self.parks.items()):
                if at <= self.now:
                    del self.parks[member]
                    self.started[member] = self.now
                    self.act(self.group.parked(member, self.now))
            self.act(self.group.tick(self.now))


def constant_demand(policy: TurnSettings, per_owner: list[int], park_delay: float) -> Run:
    run = Run(TurnGroup(policy), park_delay)
    for o, count in enumerate(per_owner):
        for i in range(count):
            member = f"{o}-{i}"
            run.started[member] = 0.0
            run.act(run.group.join(member, f"owner{o}", 0.0))
            run.act(run.group.want(member, 0.0))
    return run


demand = st.tuples(
    st.builds(TurnSettings, quantum=st.sampled_from([10.0, 60.0, 120.0]),
              min_resident=st.sampled_from([0.0, 5.0]),
              yield_grace=st.sampled_from([5.0, 30.0])),
    st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4),
    st.floats(min_value=0, max_value=1),
)


@settings(max_examples=60, deadline=None)
@given(demand)
def test_every_waiting_member_is_granted_within_the_bound(
        case: tuple[TurnSettings, list[int], float]) -> None:
    policy, per_owner, fraction = case
    run = constant_demand(policy, per_owner, fraction * policy.yield_grace)
    run.until(50 * policy.quantum)
    members, owners = sum(per_owner), len(per_owner)
    bound = (members * owners + 1) * (policy.quantum + policy.yield_grace)
    assert max(run.waits) <= bound


@settings(max_examples=60, deadline=None)
@given(demand)
def test_each_owner_holds_within_one_quantum_of_an_equal_share(
        case: tuple[TurnSettings, list[int], float]) -> None:
    policy, per_owner, fraction = case
    run = constant_demand(policy, per_owner, fraction * policy.yield_grace)
    end = 100 * policy.quantum
    run.until(end)
    held: dict[str, float] = {}
    for view in run.group.views(run.now):
        held[view.owner] = held.get(view.owner, 0.0) + view.held
    equal = sum(held.values()) / len(per_owner)
    turn = policy.quantum + fraction * policy.yield_grace
    assert all(abs(h - equal) <= turn for h in held.values()), held


def test_one_worker_of_alice_against_three_of_bob_get_half_each() -> None:
    run = constant_demand(FAST, [1, 3], park_delay=2.0)
    run.until(100 * FAST.quantum)
    shares = {v.member: v.held for v in run.group.views(run.now)}
    alice = shares["0-0"] / sum(shares.values())
    assert 0.45 <= alice <= 0.55
