"""What a worker wanted and got: its time wanting the turn, the part of it resident (served),
and a claim's useful time (a resident member wanting the turn)."""

from __future__ import annotations

import math

from hypothesis import given, settings

from placement.turns import TurnSettings
from placement.turns.play import TurnPlay
from tests.unit.placement.turns.test_play import POLICY, Event, play_all, scenarios

GB = 10**9
Windows = tuple[tuple[float, float], ...]


def served(play: TurnPlay) -> tuple[object, ...]:
    members = sorted((m.worker, m.claim, m.wanting, m.served) for m in play.members)
    claims = sorted((c.claim, c.first, c.useful) for c in play.claims.values())
    return members, claims


def test_a_trainer_and_a_sampler_in_alternate_phases_are_served_all_they_want() -> None:
    # The sampler wants the device for rollouts, the trainer between them: nobody waits.
    play = TurnPlay(POLICY)
    rollouts = ((0.0, 600.0), (1000.0, 1600.0))
    training = ((600.0, 1000.0), (1600.0, 2000.0))
    play.join("c", "n", 100 * GB, "sampler", "job", 1 * GB, rollouts, 0)
    play.join("c", "n", 100 * GB, "trainer", "job", 1 * GB, training, 0)
    play.end(2000)
    sampler, trainer = sorted(play.members, key=lambda m: m.worker)
    assert sampler.wanting == 1200 and trainer.wanting == 800
    # Each loses only the switch (the other's park and its own restore, a hundredth of a
    # second each) at the start of each of its phases; the very first needs no park.
    assert math.isclose(sampler.served, 1200 - 0.03) and math.isclose(trainer.served, 800 - 0.04)
    assert play.claims["c"].useful == sampler.served + trainer.served


def test_a_holder_that_stops_wanting_stays_resident_but_is_no_longer_useful() -> None:
    play = TurnPlay(POLICY)
    play.join("c", "n", 100 * GB, "early", "a", 1 * GB, ((0.0, 100.0),), 0)
    play.join("c", "n", 100 * GB, "late", "b", 1 * GB, ((500.0, 600.0),), 0)
    play.end(1000)
    early = next(m for m in play.members if m.worker == "early")
    # Nobody waits after its window: it keeps the turn until the late one wants it.
    assert early.resident > 490 and math.isclose(early.served, 100 - 0.01)
    assert play.claims["c"].useful < 200


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_counting_repeats_adds_what_playing_them_would(
        scenario: tuple[list[Event], TurnSettings, float]) -> None:
    events, policy, end = scenario
    played = served(play_all(events, policy, end, compress=False))
    assert served(play_all(events, policy, end, compress=True)) == played
    assert served(play_all(events, policy, end, compress=True, keep=frozenset())) == played


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_served_is_the_resident_time_inside_the_demand_windows(
        scenario: tuple[list[Event], TurnSettings, float]) -> None:
    """The plain reading: the resident intervals recorded, cut by each worker's windows."""
    events, policy, end = scenario
    claims = frozenset({"c0", "c1", "c2"})
    play = play_all(events, policy, end, compress=True, keep=claims)
    demand: dict[str, Windows] = {
        worker: windows if windows is not None else ((0.0, math.inf),)
        for _, what, _, worker, _, windows in events if what == "join"}
    resident: dict[str, list[tuple[float, float]]] = {}
    for claim in play.claims.values():
        assert claim.intervals is not None
        for start, stop, worker in claim.intervals:
            if worker:
                resident.setdefault(worker, []).append((start, stop))
    useful: dict[str, float] = {}
    for member in play.members:
        if member.joined < play.claims[member.claim].first:
            continue  # an earlier claim of that name: the figures keep the last one
        stay = ((member.joined, member.left if member.left is not None else end),)
        wanted = _overlap(demand[member.worker], stay)
        got = _overlap(demand[member.worker], tuple(resident.get(member.worker, ())))
        assert math.isclose(member.wanting, wanted, abs_tol=1e-6)
        assert math.isclose(member.served, got, abs_tol=1e-6)
        useful[member.claim] = useful.get(member.claim, 0.0) + got
    for claim in play.claims.values():
        assert math.isclose(claim.useful, useful.get(claim.claim, 0.0), abs_tol=1e-6)


def _overlap(windows: Windows, spans: Windows) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in windows for c, d in spans)
