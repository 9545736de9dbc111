"""The turn policy's bookkeeping (who waits, in what order; who has reported; which owners
remain) against plain walks over every member: the same calls give the same turns."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.turns import Action, TurnGroup, TurnPhase, TurnSettings
from placement.turns.policy import Member
from placement.turns.rotation import Rotation

T = TypeVar("T")


class PlainTurnGroup(TurnGroup):
    """The policy as first written: every question answered by walking the members, and the
    member each owner last had served kept by the owner's name."""

    def __init__(self, settings: TurnSettings, *, recovering: bool = False) -> None:
        super().__init__(settings, recovering=recovering)
        self._served: dict[str, int] = {}

    def _take(self, m: Member, now: float) -> None:
        super()._take(m, now)
        self._served[m.owner] = m.seq

    def gone(self, member: str, now: float) -> list[Action]:
        owner = self._members[member].owner if member in self._members else None
        actions = super().gone(member, now)
        if owner is not None and owner not in self._owners:
            self._served.pop(owner, None)
        return actions

    def _anyone_waiting(self) -> bool:
        return any(m.phase is TurnPhase.WAITING for m in self._members.values())

    def _all_reported(self) -> bool:
        return all(m.phase is not TurnPhase.UNREPORTED for m in self._members.values())

    def _owner_has_members(self, owner: str) -> bool:
        return any(m.owner == owner for m in self._members.values())

    def _next(self) -> Member | None:
        waiting: dict[str, list[Member]] = {}
        for m in self._members.values():
            if m.phase is TurnPhase.WAITING:
                waiting.setdefault(m.owner, []).append(m)
        if not waiting:
            return None
        owner = after(self._last_owner, {self._owners[o]: o for o in waiting})
        last = self._served.get(owner, -1)
        return after(last, {m.seq: m for m in waiting[owner]})


def after(last: int, by_place: dict[int, T]) -> T:
    later = [place for place in by_place if place > last]
    return by_place[min(later) if later else min(by_place)]


MEMBERS = [f"m{i}" for i in range(6)]
OWNERS = ["alice", "bob", "carol"]
OPS = ["hello", "hello", "want", "want", "want", "idle", "resident", "parked", "pass", "pass",
       "pass", "disconnected", "gone", "holds_device", "device_free", "stale", "tick", "tick",
       "retire"]
ops = st.lists(
    st.tuples(st.sampled_from(OPS), st.sampled_from(MEMBERS), st.sampled_from(OWNERS),
              st.booleans(), st.sampled_from([0.0, 0.5, 1.0, 4.0, 20.0, 60.0, 150.0])),
    min_size=20, max_size=200,
)
policies = st.builds(TurnSettings, quantum=st.sampled_from([1.0, 30.0, 120.0]),
                     min_resident=st.sampled_from([0.0, 1.0]),
                     yield_grace=st.sampled_from([0.0, 5.0, 30.0]))


def call(group: TurnGroup, op: str, member: str, owner: str, flag: bool, now: float,
         polite: bool = False) -> list[Action] | None:
    """One step; a member not in the group joins instead, so every step does something.
    ``pass`` is the holder parking, ``stale`` a parked naming no turn it was given. Polite
    members claim device memory only while they hold the turn."""
    if polite and op in ("resident", "holds_device", "hello") and member != group.holder:
        op, flag = ("hello", False) if op == "hello" else ("want", flag)
    if op == "pass" and group.holder is not None:
        return group.parked(group.holder, now)
    if op in ("tick", "pass"):
        return group.tick(now)
    if member not in group:
        return group.join(member, owner, now)
    if op == "hello":
        return group.hello(member, flag, now)
    if op == "stale":
        return group.parked(member, now, turn=0)
    actions: list[Action] = getattr(group, op)(member, now)
    return actions


@settings(max_examples=400, deadline=None)
@given(policies, st.booleans(), st.booleans(), ops)
def test_the_kept_books_answer_as_walking_every_member_does(
        policy: TurnSettings, recovering: bool, polite: bool,
        steps: list[tuple[str, str, str, bool, float]]) -> None:
    fast, plain = TurnGroup(policy, recovering=recovering), PlainTurnGroup(policy,
                                                                        recovering=recovering)
    now = 0.0
    for op, member, owner, flag, dt in steps:
        now += dt
        assert call(fast, op, member, owner, flag, now, polite) == call(
            plain, op, member, owner, flag, now, polite), (op, member)
        assert fast.views(now) == plain.views(now)
        assert (fast.holder, fast.recovering, fast.next_deadline()) == (
            plain.holder, plain.recovering, plain.next_deadline())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.integers(0, 30),
                          st.integers(-1, 31), st.integers(-1, 6)), max_size=120))
def test_the_rotation_picks_as_a_walk_over_the_waiting_does(
        steps: list[tuple[bool, int, int, int, int]]) -> None:
    rotation: Rotation[int] = Rotation()
    waiting: dict[int, int] = {}  # entry place -> owner place
    for add, owner, place, last_entry, last_owner in steps:
        if add and place not in waiting:
            rotation.add(owner, place, place)
            waiting[place] = owner
        elif not add and waiting.get(place) is not None:
            rotation.remove(waiting.pop(place), place)
        assert len(rotation) == len(waiting)
        if not waiting:
            assert rotation.next_owner(last_owner) is None
            continue
        nxt = after(last_owner, {o: o for o in waiting.values()})
        assert rotation.next_owner(last_owner) == nxt
        mine = {p: p for p, o in waiting.items() if o == nxt}
        assert rotation.next_entry(nxt, last_entry) == after(last_entry, mine)
