"""What the agent keeps so a message never walks a whole group or every group: the members a
call can move (held against every member's phase) and the earliest deadline (held against the
minimum over every group)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.turns import Grant, TurnGroup, TurnSettings, Yield
from tests.unit.placement.turns.test_policy_plain import call, ops, policies
from timeslicer.agent.core import touched
from timeslicer.agent.deadlines import Deadlines


@settings(max_examples=300, deadline=None)
@given(policies, st.booleans(), st.booleans(), ops)
def test_a_call_moves_no_phase_but_its_members_and_those_its_actions_name(
        policy: TurnSettings, recovering: bool, polite: bool,
        steps: list[tuple[str, str, str, bool, float]]) -> None:
    group = TurnGroup(policy, recovering=recovering)
    now = 0.0
    for op, member, owner, flag, dt in steps:
        now += dt
        before = {v.member: v.phase for v in group.views(now)}
        caller = group.holder if op == "pass" else None if op == "tick" else member
        actions = call(group, op, member, owner, flag, now, polite) or []
        moved = {v.member for v in group.views(now) if before.get(v.member) is not v.phase}
        assert moved <= set(touched(caller, actions)), (op, member, actions)


def test_a_call_about_a_member_names_it_first_and_each_member_once() -> None:
    assert touched("a", [Yield("b", 1.0, 2.0), Grant("a"), Grant("b")]) == ["a", "b"]
    assert touched(None, []) == []


moves = st.lists(st.tuples(st.sampled_from("abcdefgh"),
                           st.none() | st.integers(0, 50).map(float),
                           st.integers(0, 60).map(float)), max_size=300)


@settings(max_examples=300, deadline=None)
@given(moves)
def test_the_earliest_deadline_is_the_minimum_over_every_group(
        steps: list[tuple[str, float | None, float]]) -> None:
    kept, plain = Deadlines(), dict[str, float]()
    for group, when, now in steps:
        kept.set(group, when)
        if when is None:
            plain.pop(group, None)
        else:
            plain[group] = when
        assert kept.earliest() == min(plain.values(), default=None)
        if now < 40:  # time passes only now and then, so deadlines pile up between
            continue
        due = kept.due(now)
        assert sorted(due) == sorted(g for g, at in plain.items() if at <= now)
        for g in due:
            del plain[g]
        assert len(kept) == len(plain)
