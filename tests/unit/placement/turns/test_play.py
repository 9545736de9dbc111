"""The turns player: well-behaved workers on shared claims, driven over a clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placement.turns.play
from placement.turns import Action, TurnGroup, TurnSettings
from placement.turns.play import TurnPlay

GB = 10**9
POLICY = TurnSettings(quantum=60, min_resident=5, yield_grace=30)


def test_a_claim_with_one_worker_never_gets_a_group() -> None:
    play = TurnPlay(POLICY)
    play.join("c", "n", 10 * GB, "solo", "o", 10 * GB, None, 0)
    play.leave("c", "solo", 100)
    play.end(200)
    assert play.claims == {} and play.members == []


def test_the_first_worker_is_played_from_its_start_when_a_second_joins() -> None:
    play = TurnPlay(POLICY)
    play.join("c", "n", 10 * GB, "first", "a", 10 * GB, None, 0)
    play.join("c", "n", 10 * GB, "second", "b", 10 * GB, None, 1000)
    play.end(1000)
    first = next(m for m in play.members if m.worker == "first")
    # Resident since its restore (one second) until the second joined: it kept the turn.
    assert first.joined == 0 and math.isclose(first.resident, 999)
    assert play.claims["c"].first == 0


def test_a_switch_costs_the_outgoing_park_and_the_incoming_restore() -> None:
    play = TurnPlay(POLICY)
    play.join("c", "n", 10 * GB, "a", "a", 20 * GB, None, 0)
    play.join("c", "n", 10 * GB, "b", "b", 10 * GB, None, 0)
    play.end(70)
    claim = play.claims["c"]
    # a restores (2s), is asked to yield at 60s and parks (2s); b then restores (1s).
    assert claim.switches == 1
    assert math.isclose(claim.switching, 2 + 2 + 1)
    b = next(m for m in play.members if m.worker == "b")
    assert b.waits == {62: 1}


def test_a_worker_whose_park_outlasts_the_grace_is_evicted_and_rejoins() -> None:
    play = TurnPlay(TurnSettings(quantum=60, min_resident=5, yield_grace=1))
    play.join("c", "n", 1 * GB, "big", "a", 10 * GB, None, 0)
    play.join("c", "n", 1 * GB, "small", "b", 1 * GB, None, 0)
    play.end(200)
    big = next(m for m in play.members if m.worker == "big")
    assert big.evictions >= 1 and big.joined == 0
    assert [m.worker for m in play.members].count("big") == 1


def test_demand_windows_say_when_a_worker_wants_a_turn() -> None:
    play = TurnPlay(POLICY, keep=frozenset({"c"}))
    play.join("c", "n", 100 * GB, "busy", "a", 1 * GB, None, 0)
    play.join("c", "n", 100 * GB, "late", "b", 1 * GB, ((600.0, math.inf),), 0)
    play.end(1200)
    late = next(m for m in play.members if m.worker == "late")
    busy = next(m for m in play.members if m.worker == "busy")
    assert late.waits and min(late.waits) <= POLICY.quantum + 1
    assert busy.resident > 850  # alone for ten minutes, then half of the next ten
    intervals = play.claims["c"].intervals
    assert intervals is not None and {who for _, _, who in intervals} == {"busy", "late", ""}


# -- repeats counted, not played: the same figures as playing every switch ---------------

Event = tuple[float, str, str, str, int, tuple[tuple[float, float], ...] | None]


def play_all(events: list[Event], settings: TurnSettings, end: float, *, compress: bool,
             keep: frozenset[str] = frozenset({"c0", "c1"})) -> TurnPlay:
    play = TurnPlay(settings, keep=keep, compress=compress)
    for at, what, claim, worker, memory, demand in events:
        if what == "join":
            # Powers of two: every time is exact, so both plays must agree to the bit.
            play.join(claim, "n", 2**30, worker, f"o{memory % 3}", memory, demand, at)
        else:
            play.leave(claim, worker, at)
    play.end(end)
    return play


def figures(play: TurnPlay) -> tuple[object, ...]:
    members = sorted((m.worker, m.owner, m.claim, m.joined, m.left, m.resident, m.turns,
                      m.evictions, sorted(m.waits.items())) for m in play.members)
    claims = sorted((c.claim, c.first, c.last, c.switches, c.switching,
                     None if c.intervals is None else list(c.intervals))
                    for c in play.claims.values())
    return members, claims


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Event], TurnSettings, float]:
    quantum = draw(st.integers(1, 300))
    settings = TurnSettings(quantum=quantum, min_resident=draw(st.integers(0, quantum)),
                            yield_grace=draw(st.sampled_from([0, 1, 2, 30])))
    events: list[Event] = []
    seated: dict[str, str] = {}
    now = 0.0
    for index in range(draw(st.integers(1, 12))):
        now += draw(st.integers(0, 20_000))
        if seated and draw(st.booleans()):
            worker = draw(st.sampled_from(sorted(seated)))
            events.append((now, "leave", seated.pop(worker), worker, 0, None))
            continue
        worker = f"w{index}"
        claim = draw(st.sampled_from(["c0", "c1", "c2"]))
        memory = 2 ** draw(st.integers(26, 34))  # 1/16s to 16s over the link
        demand = draw(st.none() | st.lists(st.integers(0, 40_000), max_size=4, unique=True)
                      .map(lambda edges: _windows(sorted(edges))))
        seated[worker] = claim
        events.append((now, "join", claim, worker, memory, demand))
    return events, settings, now + draw(st.integers(0, 50_000))


def _windows(edges: list[int]) -> tuple[tuple[float, float], ...]:
    pairs = [(float(a), float(b)) for a, b in zip(edges[::2], edges[1::2], strict=False)]
    if len(edges) % 2:
        pairs.append((float(edges[-1]), math.inf))
    return tuple(pairs)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_counting_repeats_gives_the_figures_of_playing_every_switch(
        scenario: tuple[list[Event], TurnSettings, float]) -> None:
    events, policy, end = scenario
    assert figures(play_all(events, policy, end, compress=True)) == \
        figures(play_all(events, policy, end, compress=False))
    # No intervals kept: every claim may count a cycle another claim of its shape found.
    assert figures(play_all(events, policy, end, compress=True, keep=frozenset())) == \
        figures(play_all(events, policy, end, compress=False, keep=frozenset()))


def counted_ticks(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The times the player calls ``tick``, from now on."""
    calls: list[float] = []

    class Counted(TurnGroup):
        def tick(self, now: float) -> list[Action]:
            calls.append(now)
            return super().tick(now)

    monkeypatch.setattr(placement.turns.play, "TurnGroup", Counted)
    return calls


def test_a_claim_counts_the_cycle_another_claim_of_its_shape_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted_ticks(monkeypatch)
    # The same memories and owners, other names, seated 1,000.25 seconds later.
    events: list[Event] = [(0, "join", "c0", "a", 2**30, None), (0, "join", "c0", "b", 2**31, None),
                           (50, "join", "c0", "c", 2**32, None),
                           (1000.25, "join", "c1", "x", 2**30, None),
                           (1000.25, "join", "c1", "y", 2**31, None),
                           (1050.25, "join", "c1", "z", 2**32, None)]
    play_all(events[:3], POLICY, 86_400, compress=True, keep=frozenset())
    first_calls = len(calls)
    calls.clear()
    both = play_all(events, POLICY, 86_400, compress=True, keep=frozenset())
    assert len(calls) < 2 * first_calls  # the second claim skipped looking for its cycle
    assert figures(both) == figures(play_all(events, POLICY, 86_400, compress=False,
                                             keep=frozenset()))
    assert both.claims["c1"].switches > 1000


def test_a_day_of_constant_demand_is_played_for_a_few_cycles_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted_ticks(monkeypatch)
    events: list[Event] = [(0, "join", "c0", "a", 2**30, None), (0, "join", "c0", "b", 2**31, None),
                           (5, "join", "c0", "c", 2**32, None)]
    fast = play_all(events, POLICY, 86_400, compress=True)
    assert len(calls) < 100  # a day is hundreds of switches
    assert figures(fast) == figures(play_all(events, POLICY, 86_400, compress=False))
    assert fast.claims["c0"].switches > 1000


def test_a_claim_whose_demand_changes_faster_than_any_cycle_is_played_switch_by_switch() -> None:
    edges = tuple((float(t), float(t + 7)) for t in range(0, 5000, 11))
    events: list[Event] = [(0, "join", "c0", "a", 2**30, edges), (0, "join", "c0", "b", 2**30,
                                                                   None)]
    policy = TurnSettings(quantum=5, min_resident=1, yield_grace=30)
    assert figures(play_all(events, policy, 6000, compress=True)) == \
        figures(play_all(events, policy, 6000, compress=False))


def test_a_cycle_longer_than_the_states_remembered_is_played_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement.turns.play, "CYCLE_STATES", 2)
    events: list[Event] = [(0, "join", "c0", f"w{i}", 2**30, None) for i in range(4)]
    assert figures(play_all(events, POLICY, 20_000, compress=True)) == \
        figures(play_all(events, POLICY, 20_000, compress=False))


def test_times_that_are_not_exact_in_binary_still_agree_to_the_bit() -> None:
    # The player's clock counts whole nanoseconds: no sum of seconds is rounded.
    events: list[Event] = [(0.1, "join", "c0", "a", 10**9 + 7, None),
                           (0.3, "join", "c0", "b", 3 * 10**9 + 1, None)]
    fast = play_all(events, POLICY, 100_000.7, compress=True)
    slow = play_all(events, POLICY, 100_000.7, compress=False)
    assert fast.claims["c0"].switches == slow.claims["c0"].switches
    for a, b in zip(sorted(fast.members, key=lambda m: m.worker),
                    sorted(slow.members, key=lambda m: m.worker), strict=True):
        assert a.turns == b.turns and a.resident == b.resident
    assert figures(fast) == figures(slow)


def figures_of(play: TurnPlay, claim: str) -> tuple[object, ...]:
    """One claim's figures and its workers', intervals left out."""
    members = sorted((m.worker, m.owner, m.joined, m.left, m.resident, m.turns, m.evictions,
                      sorted(m.waits.items())) for m in play.members if m.claim == claim)
    turns = play.claims.get(claim)
    return members, None if turns is None else (turns.first, turns.last, turns.switches,
                                                 turns.switching)


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.sampled_from(["c0", "c1", "c2"]), st.booleans())
def test_a_claims_figures_do_not_depend_on_which_other_claims_were_played(
        scenario: tuple[list[Event], TurnSettings, float], claim: str, kept: bool) -> None:
    """Played among every claim or alone, recorded or not: the same figures to the bit,
    though alone it can count no cycle another claim found."""
    events, policy, end = scenario
    # Times off the binary grid, as a scenario's tenths of seconds are.
    events = [(at + 0.1, what, c, worker, memory, demand)
              for at, what, c, worker, memory, demand in events]
    everything = play_all(events, policy, end + 0.1, compress=True, keep=frozenset())
    alone = play_all([event for event in events if event[2] == claim], policy, end + 0.1,
                     compress=True, keep=frozenset({claim}) if kept else frozenset())
    assert figures_of(everything, claim) == figures_of(alone, claim)
