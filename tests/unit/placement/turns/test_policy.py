"""Turns on a shared claim: stories of workers taking turns, then the policy's invariants."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.turns import (
    TRANSITIONS,
    Action,
    Event,
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
    for turn in range(1, 5):
        now += 120
        asked = group.tick(now)
        assert asked == [Yield(order[-1], 30, now + 30, turn)]
        order += grants(group.parked(order[-1], now + 5, turn))
        now += 5
    assert order == ["a1", "b1", "a2", "b2", "a1"]
    assert group.view("a1", now).turn == 5 and group.last_turn == 5


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
    assert crowd(group, ("new", "bob"), at=500) == [Yield("old", 30, 530, 1)]


def test_a_holder_done_with_its_turn_still_keeps_it_min_resident() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    assert group.idle("a", 3) == []
    assert group.next_deadline() == 10
    assert group.tick(10) == [Yield("a", 30, 40, 1)]
    assert grants(group.parked("a", 12)) == ["b"]


def test_a_holder_that_never_parks_is_evicted_and_blocks_the_turn_until_gone() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("stubborn", "alice"), ("patient", "bob"))
    assert group.tick(120) == [Yield("stubborn", 30, 150, 1)]
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


def test_a_dropped_connection_is_no_proof_the_device_is_free_nor_idleness() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    # The holder keeps the turn, its want and its quantum: nothing falls due early.
    assert group.disconnected("a", 50) == []
    assert group.view("a", 50).phase is TurnPhase.GRANTED and group.view("a", 50).wants
    assert group.tick(119) == []
    assert group.tick(120) == [Yield("a", 30, 150, 1)]  # asked while away: told on return
    assert group.hello("a", True, 130, turn=1) == []
    assert group.view("a", 130).deadline == 150  # the welcome carries the time left
    assert grants(group.parked("a", 131, 1)) == ["b"]


def test_a_waiting_member_whose_connection_drops_is_not_granted_until_back() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    group.disconnected("b", 1)
    assert group.view("b", 1).phase is TurnPhase.IDLE
    assert group.tick(120) == []  # nobody waits: no yield
    group.idle("a", 120)
    assert grants(group.parked("a", 121, 1)) == []
    group.hello("b", False, 122)
    assert grants(group.want("b", 122)) == ["b"]


def test_a_parked_that_crosses_its_grant_frees_nothing() -> None:
    # b waits; its grant (turn 2) is on the wire when b says parked about the last turn it
    # knew (none): the grant will be read and acted on, so b must keep the turn.
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"), ("c", "carol"))
    group.tick(120)
    assert group.parked("a", 121, 1) == [Grant("b", 2)]
    assert group.parked("b", 121.5, 0) == []  # crossed its grant: nothing moves
    assert group.holder == "b" and group.view("b", 122).phase is TurnPhase.GRANTED
    assert group.hello("b", False, 122, turn=0) == []  # a reconnect naming no turn: the same
    assert group.holder == "b"
    assert group.resident("b", 123, turn=2) == []
    group.tick(241)
    assert grants(group.parked("b", 242, 2)) == ["c"]  # its own turn named: the turn passes


def test_a_duplicate_parked_of_an_earlier_turn_frees_nothing() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"))
    group.tick(120)
    group.parked("a", 121, 1)
    group.tick(241)
    assert grants(group.parked("b", 242, 2)) == ["a"]
    assert group.parked("a", 243, 1) == []  # the old parked again: a holds turn 3
    assert group.holder == "a" and group.view("a", 243).turn == 3


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
    assert group.tick(12) == [Yield("b", 30, 42, 1)]  # b's quantum began when it reported


def test_a_member_gone_while_unreported_lets_the_others_go_on() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("a", "alice", 0)
    group.join("lost", "bob", 0)
    group.hello("a", False, 1)
    assert group.want("a", 1) == []
    assert grants(group.gone("lost", 2)) == ["a"]


def quiet_after_a_restart() -> TurnGroup:
    """Rebuilt after a restart: b reports and wants the turn, quiet says nothing."""
    group = TurnGroup(FAST, recovering=True)
    group.join("quiet", "alice", 0)
    group.join("b", "bob", 0)
    group.hello("b", False, 1)
    group.want("b", 1)
    return group


def test_a_member_silent_after_a_restart_is_evicted_a_grace_after_the_bound() -> None:
    # Without the device's word, silence ends in an eviction, never in a stall.
    group = quiet_after_a_restart()
    assert group.next_deadline() == 30
    assert group.tick(30) == [Yield("quiet", 30, 60, 0)]
    assert group.view("quiet", 30).phase is TurnPhase.SILENT and not group.recovering
    assert group.tick(59) == []
    assert group.tick(60) == [Evict("quiet", EvictReason.SILENT)]
    assert grants(group.gone("quiet", 70)) == ["b"]


def test_a_silent_member_the_device_shows_free_is_taken_as_parked() -> None:
    group = quiet_after_a_restart()
    assert group.device_free("quiet", 10) == []  # before the bound: its own word is awaited
    group.tick(30)
    assert grants(group.device_free("quiet", 31)) == ["b"]
    assert group.view("quiet", 31).phase is TurnPhase.IDLE


def test_a_silent_member_that_comes_back_resident_must_park_by_the_same_deadline() -> None:
    group = TurnGroup(FAST, recovering=True)
    for member, owner in [("quiet", "alice"), ("b", "bob"), ("c", "carol")]:
        group.join(member, owner, 0)
    group.hello("b", False, 1)
    group.want("b", 1)
    group.hello("c", True, 2, turn=8)  # c holds the turn it had
    group.want("c", 2)
    group.tick(30)
    assert group.hello("quiet", True, 40, turn=7) == []
    assert group.view("quiet", 40).phase is TurnPhase.INTRUDING
    assert group.view("quiet", 40).deadline == 60
    assert group.tick(60) == [Evict("quiet", EvictReason.TURN_OVERRUN)]
    assert group.holder == "c" and group.tick(122) == [Yield("c", 30, 152, 8)]


def test_a_pod_new_since_the_restart_is_not_waited_for() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("old", "alice", 0)
    group.join("new", "bob", 1, fresh=True)
    assert group.view("new", 1).phase is TurnPhase.IDLE
    group.hello("old", False, 2)
    assert grants(group.want("new", 3)) == ["new"]


def test_grants_are_numbered_from_where_the_caller_says() -> None:
    group = TurnGroup(FAST, first_turn=1_000)
    assert crowd(group, ("a", "alice")) == [Grant("a", 1_001)]


def test_a_second_worker_resident_without_the_turn_is_asked_to_park_first() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("a", "alice", 0)
    group.join("b", "bob", 0)
    group.join("c", "bob", 0)
    group.hello("a", True, 1, turn=3)
    assert group.hello("b", True, 2, turn=4) == [Yield("b", 30, 32, 4)]
    group.hello("c", False, 3)
    group.want("c", 3)
    assert group.view("b", 3).phase is TurnPhase.INTRUDING
    group.tick(11)
    assert group.parked("a", 12, 3) == []  # b still holds memory: nobody is granted
    assert grants(group.parked("b", 13, 4)) == ["c"]
    assert group.view("c", 13).turn == 5  # past every number reported


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


def test_a_holder_retired_finishes_its_turn_parks_and_is_never_granted_again() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"), ("c", "carol"))
    group.resident("a", 1)
    assert group.retire("a", 5) == []  # its turn goes on: no yield before its quantum
    assert group.view("a", 5).phase is P.RESIDENT and group.next_deadline() == FAST.quantum
    [asked] = group.tick(FAST.quantum)
    assert asked == Yield("a", FAST.yield_grace, FAST.quantum + FAST.yield_grace, 1)
    assert grants(group.parked("a", 121)) == ["b"]
    assert group.view("a", 121).phase is P.RETIRED
    # It still wants, and says so: it is granted nothing, and the others take turns.
    assert group.want("a", 122) == []
    out: list[Action] = []
    for _ in range(3):  # b and c take turns, each to its quantum
        now = group.next_deadline()
        assert now is not None
        [asked] = group.tick(now)
        out += group.parked(asked.member, now + 1)
    assert grants(out) == ["c", "b", "c"]
    assert group.view("a", now + 1).phase is P.RETIRED and group.view("a", now).turns == 1


def test_a_lone_holder_retiring_is_asked_to_yield_though_nobody_waits() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"))
    group.resident("a", 0)
    group.retire("a", 50)
    assert group.next_deadline() == FAST.quantum  # its turn, as though someone waited
    assert [type(a) for a in group.tick(FAST.quantum)] == [Yield]
    group.idle("a", 130)  # done with its work: it no longer wants, and parks
    group.parked("a", 131)
    assert group.view("a", 131).phase is P.RETIRED and group.holder is None
    # Done with its turn already, it is asked after min_resident.
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"))
    group.idle("a", 0)
    group.retire("a", 1)
    assert group.next_deadline() == FAST.min_resident


def test_a_member_holding_nothing_is_retired_at_once_and_leaves_the_rotation() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"), ("b", "bob"), ("c", "carol"))
    group.retire("b", 1)  # waiting: out of the line now
    group.join("d", "dave", 1)  # never connected... and never wanting: Idle
    group.retire("d", 1)
    assert group.view("b", 1).phase is group.view("d", 1).phase is P.RETIRED
    group.tick(FAST.quantum)
    assert grants(group.parked("a", 121)) == ["c"]


def test_a_retiring_holder_that_overruns_is_evicted_as_any_other() -> None:
    group = TurnGroup(FAST)
    crowd(group, ("a", "alice"))
    group.retire("a", 0)
    group.tick(FAST.quantum)
    [evict] = group.tick(FAST.quantum + FAST.yield_grace)
    assert evict == Evict("a", EvictReason.TURN_OVERRUN)
    assert group.holder == "a"  # until it is gone


def test_a_retiring_member_that_may_hold_memory_retires_when_it_says_it_holds_none() -> None:
    group = TurnGroup(FAST, recovering=True)
    group.join("a", "alice", 0)
    group.join("b", "bob", 0)
    group.retire("a", 1)
    assert group.view("a", 1).phase is P.UNREPORTED
    group.hello("a", False, 2)
    assert group.view("a", 2).phase is P.RETIRED
    # A retired member saying it holds memory must park; nobody is granted meanwhile.
    group.hello("b", False, 3)
    group.want("b", 3)
    assert group.holder == "b"
    group.idle("b", 20)
    group.parked("b", 20)
    [asked] = group.hello("a", True, 21, turn=7)
    assert isinstance(asked, Yield) and group.view("a", 21).phase is P.INTRUDING
    assert group.want("b", 22) == []
    assert grants(group.parked("a", 23, 7)) == ["b"]
    assert group.view("a", 23).phase is P.RETIRED


# -- invariants --------------------------------------------------------------------------------

MEMBERS = [f"m{i}" for i in range(5)]
OWNERS = ["alice", "bob", "carol"]
OPS = ["join", "hello", "want", "idle", "resident", "parked", "disconnected", "gone",
       "holds_device", "tick", "retire"]

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


# -- the transition table, walked row by row --------------------------------------------------

P = TurnPhase


def _recovering() -> TurnGroup:
    """m and h unreported after a restart."""
    group = TurnGroup(FAST, recovering=True)
    group.join("m", "alice", 0)
    group.join("h", "bob", 0)
    return group


def _holding(resident: bool = False) -> TurnGroup:
    group = TurnGroup(FAST)
    group.join("m", "alice", 0)
    group.want("m", 0)
    if resident:
        group.resident("m", 1, turn=1)
    return group


def _setup(phase: TurnPhase) -> tuple[TurnGroup, float]:
    """A group whose member ``m`` is in ``phase``, and the time it got there."""
    if phase is P.UNREPORTED:
        return _recovering(), 0
    if phase in (P.IDLE, P.WAITING):
        group = _recovering()  # recovering, so m is not granted at once
        group.hello("m", False, 1)
        if phase is P.WAITING:
            group.want("m", 1)
        return group, 1
    if phase in (P.GRANTED, P.RESIDENT):
        return _holding(phase is P.RESIDENT), 1
    if phase in (P.YIELDING, P.EVICTING):
        group = _holding(True)
        group.join("w", "carol", 1)
        group.want("w", 1)
        group.tick(120)
        if phase is P.EVICTING:
            group.tick(150)
        return group, 150 if phase is P.EVICTING else 120
    if phase is P.INTRUDING:
        group = TurnGroup(FAST)
        group.join("h", "bob", 0)
        group.want("h", 0)
        group.join("m", "alice", 0)
        group.hello("m", True, 1, turn=9)
        return group, 1
    if phase is P.RETIRED:
        group = _recovering()
        group.hello("m", False, 1)
        group.retire("m", 1)
        return group, 1
    assert phase is P.SILENT
    group = _recovering()
    group.hello("h", False, 1)
    group.tick(30)
    return group, 30


def _fire(group: TurnGroup, event: Event, now: float) -> None:
    view = group.view("m", now)
    if event is Event.WANT:
        group.want("m", now)
    elif event is Event.IDLE:
        group.idle("m", now)
    elif event is Event.DISCONNECT:
        group.disconnected("m", now)
    elif event is Event.GRANT:
        group.hello("h", False, now)  # the last report: the recovering group grants
    elif event in (Event.CLAIM_FREE, Event.CLAIM_TAKEN):
        others = ({group.holder} | {v.member for v in group.views(now)
                                    if v.phase in (P.INTRUDING, P.SILENT)}) - {"m", None}
        if event is Event.CLAIM_TAKEN and not others:
            group.hello("h", True, now, turn=3)  # someone else holds memory first
        group.hello("m", True, now, turn=5)
    elif event is Event.RESTORED:
        group.resident("m", now, turn=view.turn)
    elif event is Event.PARKED:
        group.idle("m", now)  # else, wanting, it would wait again at once
        group.parked("m", now, view.turn)
    elif event is Event.YIELD_DUE:
        group.join("w", "carol", now)
        group.want("w", now)
        group.tick(now + FAST.quantum)
    elif event is Event.OVERRUN:
        assert view.deadline is not None
        group.tick(view.deadline)
    elif event is Event.SEEN_HOLDING:
        group.holds_device("m", now)
    elif event is Event.DEVICE_FREE:
        group.device_free("m", now)
    elif event is Event.RETIRE:
        group.retire("m", now)
    else:
        assert event is Event.BOUND
        group.tick(now + FAST.yield_grace)


@pytest.mark.parametrize(("row", "to"), list(TRANSITIONS.items()),
                         ids=[f"{p.value}+{e.name.lower()}" for p, e in TRANSITIONS])
def test_each_row_of_the_table_moves_a_member_as_it_says(
        row: tuple[TurnPhase, Event], to: tuple[TurnPhase, str]) -> None:
    phase, event = row
    group, now = _setup(phase)
    assert group.view("m", now).phase is phase
    _fire(group, event, now + 0.5)
    assert group.view("m", now + 0.5).phase is to[0], to[1]


def test_a_parked_naming_an_earlier_turn_is_in_no_row_and_moves_no_holder() -> None:
    for phase in (P.GRANTED, P.RESIDENT, P.YIELDING, P.EVICTING):
        group, now = _setup(phase)
        turn = group.view("m", now).turn
        group.parked("m", now + 1, turn - 1)
        group.hello("m", False, now + 1, turn=turn - 1)
        assert group.view("m", now + 1).phase is phase and group.holder == "m"
    assert not [row for row in TRANSITIONS if row[1] is Event.EARLIER]


def test_every_phase_has_a_way_out() -> None:
    leaves = {phase for phase, _ in TRANSITIONS}
    assert leaves == set(TurnPhase)
