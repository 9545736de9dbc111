"""The turns player: well-behaved workers on shared claims, driven over a clock."""

from __future__ import annotations

import math

from placement.turnplay import TurnPlay
from placement.turns import TurnSettings

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
    assert b.waits == [62]


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
    assert late.waits and late.waits[0] <= POLICY.quantum + 1
    assert busy.resident > 850  # alone for ten minutes, then half of the next ten
    intervals = play.claims["c"].intervals
    assert intervals is not None and {who for _, _, who in intervals} == {"busy", "late", ""}
