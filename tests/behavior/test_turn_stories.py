"""Sharing a claim, told over time: four samplers of two owners take turns on one GPU."""

from __future__ import annotations

from cli.replay import replay
from cli.scenario import load_scenario
from cli.turns import Turns

FOUR_SAMPLERS = """
turns: {quantum: 2m, minResident: 10s, yieldGrace: 30s}
nodes:
  - {name: gpu, devices: 1, deviceMemory: 80Gi, hostMemory: 512Gi, maxWorkersPerClaim: 4,
     hostToDeviceBandwidth: 20GB/s}
events:
  - {at: 0, arrive: {name: a1, role: sampler, memory: 20G, owner: alice}}
  - {arrive: {name: a2, role: sampler, memory: 20G, owner: alice}}
  - {arrive: {name: b1, role: sampler, memory: 20G, owner: bob}}
  - {arrive: {name: b2, role: sampler, memory: 20G, owner: bob}}
  - {at: 10h, expect: {worker: a1, sharesWith: b2}}
"""


def played(text: str) -> Turns:
    turns = replay(load_scenario(text)).turns
    assert turns is not None and turns.note is None
    return turns


def test_four_samplers_of_two_owners_each_get_a_quarter_of_the_gpu() -> None:
    turns = played(FOUR_SAMPLERS)
    # Every switch parks 20GB and restores 20GB at 20GB/s: two seconds of a 122-second turn.
    (claim,) = turns.claims
    assert 0.015 < claim.switching / claim.span(turns.end) < 0.017
    for worker in turns.workers:
        assert 0.23 < worker.share < 0.25, worker
    # Owner by owner, then member by member: nobody waits more than three others' turns.
    assert max(w.longest_wait for w in turns.workers) <= 3 * 122 + 1
    alice, bob = turns.owners
    assert abs(alice.share - bob.share) < 0.01


def test_one_worker_of_alice_against_three_of_bob_gets_half_the_gpu() -> None:
    text = FOUR_SAMPLERS.replace("name: a2, role: sampler, memory: 20G, owner: alice",
                                 "name: b3, role: sampler, memory: 20G, owner: bob")
    turns = played(text.replace("sharesWith: b2", "sharesWith: b3"))
    shares = {w.worker: w.share for w in turns.workers}
    assert 0.45 < shares["a1"] < 0.5
    assert all(0.14 < shares[b] < 0.17 for b in ("b1", "b2", "b3"))


def test_a_sampler_that_wants_no_turn_leaves_its_owners_share_to_its_teammate() -> None:
    text = FOUR_SAMPLERS.replace("owner: bob}}\n  - {at: 10h",
                                 "owner: bob, demand: [{from: 5h}]}}\n  - {at: 10h")
    shares = {w.worker: w.share for w in played(text).workers}
    # Owners are served alike: for five hours b1 has bob's half alone, then a quarter.
    assert 0.36 < shares["b1"] < 0.38
    assert 0.11 < shares["b2"] < 0.13
    assert all(0.24 < shares[a] < 0.26 for a in ("a1", "a2"))


def test_a_scenario_without_a_clock_says_turns_need_one() -> None:
    untimed = FOUR_SAMPLERS.replace("at: 0, ", "").replace("at: 10h, ", "")
    turns = replay(load_scenario(untimed)).turns
    assert turns is not None and turns.claims == ()
    assert turns.note is not None and "need a clock" in turns.note
