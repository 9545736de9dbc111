"""The behaviors the product promises, told as arrivals and departures.

Figures are the estimator's tiers (10Gi LoRA, 60Gi 8B full fine-tune) on the
hardware we run: the 2x L4 dev box (24Gi each, 94Gi host) and production
nodes with single 80Gi devices and 180Gi of host memory.
"""

from __future__ import annotations

from placement import GiB, NewClaim, Node, Policy, Request, Role, Strategy, WaitKind, decide
from placement.simulator.simulation import Seating, Simulation
from tests.behavior.conftest import (
    FFT_8B,
    LORA,
    claim_of,
    dev_box,
    node_of,
    prod_node,
    sampler,
    trainer,
)
from tests.behavior.test_turn_stories import played


def test_free_gpus_are_used_before_anyone_shares() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b"), prod_node("gpu-c")))
    for name in ("w1", "w2", "w3"):
        sim.arrive(trainer(name, 30 * GiB))
    # Three workers, three GPUs: nobody shares although every node allows two per claim.
    assert {node_of(sim, w) for w in ("w1", "w2", "w3")} == {"gpu-a", "gpu-b", "gpu-c"}
    assert len({claim_of(sim, w) for w in ("w1", "w2", "w3")}) == 3

    sim.arrive(trainer("w4", 30 * GiB))
    assert claim_of(sim, "w4") in {claim_of(sim, w) for w in ("w1", "w2", "w3")}


def test_workers_share_whether_or_not_their_sum_fits() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b")))
    sim.arrive(trainer("a45", 45 * GiB))
    sim.arrive(trainer("b55", 55 * GiB))
    # 45 + 25 = 70 fits 80Gi; 55 + 35 = 90 does not. Neither matters: one is resident at a time.
    sim.arrive(trainer("c25", 25 * GiB))
    sim.arrive(trainer("d35", 35 * GiB))
    assert claim_of(sim, "c25") == claim_of(sim, "a45")
    assert claim_of(sim, "d35") == claim_of(sim, "b55")
    assert sim.state("d35").phase is Seating.PLACED


def test_a_full_claim_makes_the_next_worker_wait_and_a_departure_frees_the_seat() -> None:
    sim = Simulation((prod_node("gpu-a", max_workers=2),))
    sim.arrive(trainer("first", FFT_8B))
    sim.arrive(trainer("second", FFT_8B))
    sim.arrive(trainer("third", FFT_8B))
    waiting = sim.state("third")
    assert waiting.phase is Seating.PENDING
    assert waiting.reason is not None and waiting.reason.kind is WaitKind.WAITING_FOR_CAPACITY
    assert "full at 2 workers" in str(waiting.reason)

    shared = claim_of(sim, "first")
    sim.leave("first")
    # The claim outlives the worker that cut it, and the waiting worker takes the seat.
    assert claim_of(sim, "second") == shared == "claim-first"
    assert claim_of(sim, "third") == shared


def test_role_labels_hide_hardware_from_other_roles() -> None:
    trainers_only = frozenset({Role.TRAINER})
    sim = Simulation((prod_node("train-1", roles=trainers_only),
                      prod_node("train-2", roles=trainers_only)))
    sim.arrive(sampler("rollout", LORA))
    state = sim.state("rollout")
    assert state.phase is Seating.PENDING
    assert str(state.reason) == "NoCapacity: no enabled node accepts sampler workers"

    sim.add_node(prod_node("sample-1", roles=frozenset({Role.SAMPLER})))
    assert node_of(sim, "rollout") == "sample-1"


def test_host_memory_bounds_admission() -> None:
    # 180Gi of host RAM parks three 60Gi workers, not four.
    sim = Simulation((prod_node("gpu-a", max_workers=8),))
    for name in ("w1", "w2", "w3", "w4"):
        sim.arrive(trainer(name, FFT_8B))
    assert [sim.state(w).phase for w in ("w1", "w2", "w3")] == [Seating.PLACED] * 3
    blocked = sim.state("w4")
    assert blocked.phase is Seating.PENDING
    assert blocked.reason is not None and "host memory" in str(blocked.reason)

    sim.leave("w2")
    assert sim.state("w4").phase is Seating.PLACED


def test_too_big_for_any_node_waits_forever_but_fits_as_a_multi_device_claim_on_one_node() -> None:
    # 120Gi over two single-GPU nodes: capacity split across nodes places nothing.
    split = Simulation((prod_node("gpu-a"), prod_node("gpu-b")))
    split.arrive(trainer("big", 120 * GiB))
    state = split.state("big")
    assert state.phase is Seating.PENDING
    assert state.reason is not None and state.reason.never
    assert "120Gi" in str(state.reason) and "1 x 80Gi" in str(state.reason)

    # The same memory on one node with two GPUs places as a two-device claim.
    together = Simulation((prod_node("gpu-ab", devices=2),))
    together.arrive(trainer("big", 120 * GiB))
    placed = together.state("big")
    assert placed.phase is Seating.PLACED
    assert placed.devices == 2
    assert placed.memory_per_device == 60 * GiB


def test_placed_workers_stay_put_when_a_gpu_frees_and_the_freed_gpu_serves_new_work() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b")))
    sim.arrive(trainer("solo", FFT_8B))
    sim.arrive(trainer("pair-1", FFT_8B))
    sim.arrive(trainer("pair-2", FFT_8B))  # shares: no GPU left
    assert claim_of(sim, "pair-2") in {claim_of(sim, "solo"), claim_of(sim, "pair-1")}
    partner = "solo" if claim_of(sim, "pair-2") == claim_of(sim, "solo") else "pair-1"
    loner = "pair-1" if partner == "solo" else "solo"
    before = {w: (claim_of(sim, w), node_of(sim, w)) for w in ("pair-2", partner)}

    sim.leave(loner)  # a GPU frees...
    assert {w: (claim_of(sim, w), node_of(sim, w)) for w in ("pair-2", partner)} == before

    sim.arrive(trainer("newcomer", FFT_8B))  # ...and serves new work, alone.
    assert sim.state("newcomer").devices == 1
    assert node_of(sim, "newcomer") not in {node_of(sim, "pair-2")}
    assert [w for w in sim.workers() if claim_of(sim, w) == claim_of(sim, "newcomer")] == [
        "newcomer"]


def test_dev_box_spreads_loras_refuses_the_8b_fft_and_doubles_up_on_the_emptiest_claim() -> None:
    sim = Simulation((dev_box(),))
    sim.arrive(trainer("lora-1", LORA, "qwen"))
    sim.arrive(trainer("lora-2", LORA, "qwen"))
    assert claim_of(sim, "lora-1") != claim_of(sim, "lora-2")  # one per L4

    sim.arrive(trainer("fft-8b", FFT_8B))
    fft = sim.state("fft-8b")
    assert fft.phase is Seating.PENDING
    assert fft.reason is not None and fft.reason.kind is WaitKind.NO_CAPACITY
    assert "2 x 24Gi" in str(fft.reason)

    sim.arrive(trainer("lora-3", LORA))
    sim.arrive(trainer("lora-4", LORA))
    sim.arrive(trainer("lora-5", LORA))
    claims = [claim_of(sim, f"lora-{i}") for i in range(1, 6)]
    # Fewest workers first, then claim name: lora-3 and lora-5 on claim-lora-1, lora-4 on -2.
    assert claims == ["claim-lora-1", "claim-lora-2", "claim-lora-1", "claim-lora-2",
                      "claim-lora-1"]

    sim.leave("lora-1")
    sim.leave("lora-3")
    sim.arrive(trainer("lora-6", LORA))
    assert claim_of(sim, "lora-6") == "claim-lora-1"  # one worker left there, the fewest
    assert sim.state("fft-8b").phase is Seating.PENDING  # never


def test_an_unallocated_claim_reserves_its_pool_but_is_never_joined() -> None:
    sim = Simulation((prod_node("gpu-a", max_workers=4),), deferred_allocation=True)
    sim.arrive(trainer("early", LORA))
    assert sim.state("early").phase is Seating.PLACING
    assert sim.state("early").node is None  # no node until DRA allocates

    sim.arrive(trainer("eager", LORA))
    eager = sim.state("eager")
    assert eager.phase is Seating.PENDING  # the pool is reserved, the claim not joinable
    assert eager.reason is not None and "not yet allocated" in str(eager.reason)
    assert eager.reason.kind is WaitKind.WAITING_FOR_CAPACITY

    sim.allocate("early")
    assert claim_of(sim, "eager") == "claim-early"
    assert sim.state("eager").phase is Seating.PLACED


# ------------------------------------------------------ what the cluster refuses


def test_the_110_pod_node_seats_110_workers_and_the_rest_wait_naming_its_pod_limit() -> None:
    node = Node("gpu-node-0", devices=8, device_memory=80 * GiB, max_workers_per_claim=16,
                pods=110)
    sim = Simulation((node,))
    for i in range(120):
        sim.arrive(trainer(f"w{i:03}", 5 * GiB))
    states = [sim.state(worker) for worker in sim.workers()]
    # 128 seats on 8 claims, but only 110 pods fit the node: the first 110 get a seat.
    assert [s.phase for s in states[:110]] == [Seating.PLACED] * 110
    assert len({s.claim for s in states[:110]}) == 8
    for state in states[110:]:
        assert state.phase is Seating.PENDING
        assert str(state.reason) == "WaitingForCapacity: gpu-node-0 is at its pod limit (110 pods)"

    # One departure frees one pod slot: the oldest waiting worker takes it, the next waits on.
    sim.leave("w000")
    assert sim.state("w110").phase is Seating.PLACED
    assert sim.state("w111").phase is Seating.PENDING


def test_a_new_claim_needs_a_pod_slot_as_much_as_a_join_does() -> None:
    # Two free devices, one pod slot left for workers (the rest run other pods).
    sim = Simulation((Node("gpu-a", devices=2, device_memory=80 * GiB, pods=1),
                      prod_node("gpu-b", max_workers=1)))
    sim.arrive(trainer("w1", FFT_8B))
    sim.arrive(trainer("w2", FFT_8B))
    sim.arrive(trainer("w3", FFT_8B))
    assert {node_of(sim, "w1"), node_of(sim, "w2")} == {"gpu-a", "gpu-b"}
    reason = sim.state("w3").reason
    # gpu-a still has a free device, but no pod slot; gpu-b has neither a device nor a seat.
    assert str(reason) == ("WaitingForCapacity: gpu-a is at its pod limit (1 pod); no other node "
                           "has 1 free device of 80Gi for 60Gi; claims it fits are full at "
                           "1 worker")


def test_a_node_with_no_pod_slot_for_workers_can_never_hold_one() -> None:
    sim = Simulation((Node("gpu-a", devices=8, device_memory=80 * GiB, pods=0),))
    sim.arrive(trainer("w1", LORA))
    reason = sim.state("w1").reason
    assert reason is not None and reason.never
    assert str(reason) == ("NoCapacity: no trainer node it fits runs worker pods: gpu-a is at "
                           "its pod limit (0 pods)")


def test_a_claim_seats_at_most_256_workers_whatever_its_node_allows() -> None:
    # DRA lists at most 256 consumers of one claim: a setting of 300 is 256 seats.
    sim = Simulation((Node("gpu-a", devices=1, device_memory=80 * GiB,
                           max_workers_per_claim=300),))
    for i in range(257):
        sim.arrive(sampler(f"s{i:03}", GiB))
    claims = {claim_of(sim, f"s{i:03}") for i in range(256)}
    assert len(claims) == 1
    waiting = sim.state("s256")
    assert waiting.phase is Seating.PENDING
    assert str(waiting.reason) == ("WaitingForCapacity: no node has 1 free device of 80Gi for "
                                   "1Gi; claims it fits are full at 256 workers")


# ------------------------------------------------- binpack, exclusive, owner affinity

BINPACK = Policy(Strategy.BINPACK)


def test_binpack_joins_a_claim_before_cutting_a_new_one() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b")), policy=BINPACK)
    sim.arrive(trainer("w1", FFT_8B))  # nothing to join yet: a new claim
    sim.arrive(trainer("w2", FFT_8B))
    # gpu-b is free, but w1's claim can seat w2: it joins, and gpu-b stays whole.
    assert claim_of(sim, "w2") == claim_of(sim, "w1") == "claim-w1"
    assert sim.fleet.free_devices("gpu-b") == 1

    # Under spread, the default, the same arrivals take a device each.
    spread = Simulation((prod_node("gpu-a"), prod_node("gpu-b")))
    spread.arrive(trainer("w1", FFT_8B))
    spread.arrive(trainer("w2", FFT_8B))
    assert claim_of(spread, "w2") == "claim-w2"


def test_binpack_cuts_a_new_claim_only_when_no_claim_can_seat_the_worker() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b", devices=2)), policy=BINPACK)
    sim.arrive(trainer("w1", FFT_8B))
    sim.arrive(trainer("w2", FFT_8B))
    assert claim_of(sim, "w2") == "claim-w1"
    # claim-w1 is full at two workers: w3 gets a claim of its own.
    sim.arrive(trainer("w3", FFT_8B))
    assert claim_of(sim, "w3") == "claim-w3"
    # 120Gi fits no one-device claim by itself: a two-device claim, though claim-w3 has a seat.
    sim.arrive(trainer("big", 120 * GiB))
    assert sim.state("big").phase is Seating.PENDING  # gpu-b's devices: one taken by w3
    sim.leave("w3")
    assert sim.state("big").devices == 2 and node_of(sim, "big") == "gpu-b"


def test_an_exclusive_worker_is_never_joined_and_waits_for_a_device_of_its_own() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b")))
    sim.arrive(Request("solo", Role.TRAINER, FFT_8B, exclusive=True))
    sim.arrive(trainer("w2", FFT_8B))
    # claim-solo ranks first by name, but no one joins an exclusive worker's claim.
    sim.arrive(trainer("w3", FFT_8B))
    assert claim_of(sim, "w3") == claim_of(sim, "w2") == "claim-w2"
    assert [w for w in sim.workers() if claim_of(sim, w) == "claim-solo"] == ["solo"]

    # A second exclusive worker joins no claim: claim-w2 is full anyway, claim-solo is not
    # open to anyone. It waits, and says why.
    sim.arrive(Request("solo-2", Role.TRAINER, LORA, exclusive=True))
    waiting = sim.state("solo-2")
    assert waiting.phase is Seating.PENDING
    assert str(waiting.reason) == (
        "WaitingForCapacity: exclusive: it shares no claim and waits for devices of its own; "
        "no node has 1 free device of 80Gi for 10Gi")
    # A plain worker waiting beside it is told about the claim it cannot join.
    sim.arrive(trainer("w4", LORA))
    assert "1 claim it fits holds an exclusive worker" in str(sim.state("w4").reason)

    # w2 leaving frees a seat, not a device: w4 takes it, solo-2 waits on.
    sim.leave("w2")
    assert claim_of(sim, "w4") == "claim-w2" and claim_of(sim, "solo-2") is None
    sim.leave("w3")
    sim.leave("w4")  # gpu-b frees: solo-2 takes it, alone
    assert node_of(sim, "solo-2") == "gpu-b"


def test_under_binpack_an_exclusive_worker_still_cuts_its_own_claim() -> None:
    sim = Simulation((prod_node("gpu-a"), prod_node("gpu-b")), policy=BINPACK)
    sim.arrive(trainer("w1", FFT_8B))
    sim.arrive(Request("solo", Role.TRAINER, LORA, exclusive=True))
    assert claim_of(sim, "solo") == "claim-solo" and node_of(sim, "solo") == "gpu-b"


def test_a_joiner_goes_to_a_claim_of_its_own_owner_first() -> None:
    nodes = (prod_node("gpu-a", max_workers=4), prod_node("gpu-b", max_workers=4))
    sim = Simulation(nodes)
    sim.arrive(trainer("a-train", LORA, "alpha"))
    sim.arrive(trainer("b-train", LORA, "beta"))
    sim.arrive(sampler("b-sample-1", LORA, "beta"))
    # Contention: both claims hold one worker, claim-a-train ranks first by name; but
    # beta's sampler takes turns with beta's trainer, so it joins claim-b-train.
    assert claim_of(sim, "b-sample-1") == "claim-b-train"
    # beta's second sampler would roll out with the first: claim-b-train earns it no
    # preference now, so its share of turns decides, as for anyone: a half beside alpha's
    # trainer, a third as beta's third worker of claim-b-train.
    sim.arrive(sampler("b-sample-2", LORA, "beta"))
    assert claim_of(sim, "b-sample-2") == "claim-a-train"
    # A worker of neither owner: claim-a-train now holds two owners (a third of the turns
    # for a third), claim-b-train one (a half), so claim-b-train.
    sim.arrive(sampler("c-sample", LORA, "gamma"))
    assert claim_of(sim, "c-sample") == "claim-b-train"

    # With owner affinity off, the ranking is the share of turns (a half on either), then
    # fewest workers, then name.
    off = Simulation(nodes, policy=Policy(owner_affinity=False))
    for request in (trainer("a-train", LORA, "alpha"), trainer("b-train", LORA, "beta"),
                    sampler("b-sample-1", LORA, "beta")):
        off.arrive(request)
    assert claim_of(off, "b-sample-1") == "claim-a-train"


def test_a_joiner_goes_where_it_gets_the_larger_share_of_turns() -> None:
    # Turns go round a claim's owners, then round one owner's workers.
    sim = Simulation((prod_node("gpu-a", max_workers=4), prod_node("gpu-b", max_workers=4)))
    sim.arrive(sampler("a1", LORA, "alice"))
    sim.arrive(sampler("c1", LORA, "carol"))
    sim.arrive(sampler("b1", LORA, "bob"))  # a half on either: one worker each, by name
    assert claim_of(sim, "b1") == "claim-a1"
    sim.arrive(sampler("c2", LORA, "carol"))  # a half beside carol's own, a third beside two
    assert claim_of(sim, "c2") == "claim-c1"
    # Both claims hold two workers. claim-a1's are of two owners: dave would get a third
    # of the turns there (the old ranking sent it there, by name). claim-c1's are both
    # carol's: a half for dave, a quarter for each of carol's.
    sim.arrive(sampler("d1", LORA, "dave"))
    assert claim_of(sim, "d1") == "claim-c1"
    # With owner affinity off the share ranks first just the same.
    off = Simulation((prod_node("gpu-a", max_workers=4), prod_node("gpu-b", max_workers=4)),
                     policy=Policy(owner_affinity=False))
    for name, owner in (("a1", "alice"), ("c1", "carol"), ("b1", "bob"), ("c2", "carol"),
                        ("d1", "dave")):
        off.arrive(sampler(name, LORA, owner))
    assert claim_of(off, "d1") == "claim-c1"


def test_the_joiner_is_served_the_share_of_turns_its_claim_promised() -> None:
    # The story above with turns played (examples/turn-share.yaml tells it too): every
    # worker wants the device all the time, so what each is served is its share.
    text = """
turns: {}
nodes:
  - {name: gpu, devices: 2, deviceMemory: 80Gi, hostMemory: 1Ti, maxWorkersPerClaim: 4,
     hostToDeviceBandwidth: 25GB/s}
events:
  - {at: 0, arrive: {name: a1, role: sampler, memory: 20Gi, owner: alice}}
  - {arrive: {name: c1, role: sampler, memory: 20Gi, owner: carol}}
  - {arrive: {name: b1, role: sampler, memory: 20Gi, owner: bob}}
  - {arrive: {name: c2, role: sampler, memory: 20Gi, owner: carol}}
  - {arrive: {name: d1, role: sampler, memory: 20Gi, owner: dave}}
  - {at: 10h, expect: {worker: d1, sharesWith: c2}}
"""
    served = {w.worker: w.served_share for w in played(text).workers}
    # A half, less the switches (a second or two of every two minutes); a third where the
    # names alone would have sent it.
    assert 0.47 < served["d1"] <= 0.5
    assert all(0.23 < served[c] <= 0.25 for c in ("c1", "c2"))
    assert all(0.47 < served[w] <= 0.5 for w in ("a1", "b1"))


def test_a_sampler_joins_its_own_jobs_trainer_not_its_jobs_other_sampler() -> None:
    nodes = tuple(prod_node(f"gpu-{x}", max_workers=4) for x in "abc")
    sim = Simulation(nodes)
    sim.arrive(trainer("a-train", LORA, "alpha"))
    sim.arrive(sampler("b-sample-1", LORA, "beta"))
    sim.arrive(trainer("b-train", LORA, "beta"))
    # Contention: three claims of one worker each. claim-a-train is another owner's and
    # ranks first by name; claim-b-sample-1 is beta's, but its sampler rolls out when
    # b-sample-2 does, so they would wait for each other. beta's trainer trains while
    # its samplers wait: b-sample-2 joins claim-b-train.
    sim.arrive(sampler("b-sample-2", LORA, "beta"))
    assert claim_of(sim, "b-sample-2") == "claim-b-train"
    # The pairing ranks before fewest workers: gamma's trainer joins claim-a-train (by
    # name), and gamma's sampler follows it there, past claim-b-sample-1's one worker.
    sim.arrive(trainer("g-train", LORA, "gamma"))
    assert claim_of(sim, "g-train") == "claim-a-train"
    sim.arrive(sampler("g-sample", LORA, "gamma"))
    assert claim_of(sim, "g-sample") == "claim-a-train"


def test_a_worker_whose_owner_has_no_claim_in_the_other_role_joins_by_fewest_workers() -> None:
    nodes = (prod_node("gpu-a", max_workers=4), prod_node("gpu-b", max_workers=4))
    sim = Simulation(nodes)
    sim.arrive(sampler("g-sample-1", LORA, "gamma"))
    sim.arrive(trainer("a-train", LORA, "alpha"))
    # gamma holds only a sampler's claim: no preference for it, so by name, claim-a-train.
    sim.arrive(sampler("g-sample-2", LORA, "gamma"))
    assert claim_of(sim, "g-sample-2") == "claim-a-train"
    # Then by fewest workers: claim-g-sample-1 holds one, claim-a-train two.
    sim.arrive(sampler("g-sample-3", LORA, "gamma"))
    assert claim_of(sim, "g-sample-3") == "claim-g-sample-1"


def test_a_lost_nodes_workers_are_placed_again_oldest_first_on_what_is_left() -> None:
    sim = Simulation((prod_node("gpu-a", devices=2), prod_node("gpu-b", devices=2)))
    for name in ("w1", "w2", "w3", "w4"):
        sim.arrive(trainer(name, 30 * GiB))
    lost = node_of(sim, "w2")
    on_lost = [w for w in ("w1", "w2", "w3", "w4") if node_of(sim, w) == lost]
    stayers = {w: claim_of(sim, w) for w in ("w1", "w2", "w3", "w4") if w not in on_lost}
    moved = sim.lose_node(lost)
    # Oldest first, each with a seat on what is left (the survivor's claims, joined).
    assert [m.worker for m in moved] == on_lost
    assert all(m.placed is not None and m.placed.node != lost for m in moved)
    assert all(m.node == lost for m in moved)
    # Nobody on the healthy node moved.
    assert {w: claim_of(sim, w) for w in stayers} == stayers


def test_a_lost_node_without_room_leaves_its_worker_waiting_with_a_reason() -> None:
    sim = Simulation((prod_node("gpu-a", max_workers=1), prod_node("gpu-b", max_workers=1)))
    sim.arrive(trainer("old", 60 * GiB))
    sim.arrive(trainer("new", 60 * GiB))
    lost = node_of(sim, "new")
    (moved,) = sim.lose_node(lost)
    assert moved.placed is None and moved.reason is not None
    assert sim.state("new").phase == Seating.PENDING
    # It waits at its first arrival's place: when the survivor's seat frees, it is next.
    sim.arrive(trainer("later", 60 * GiB))
    sim.leave("old")
    assert sim.state("new").phase == Seating.PLACED
    assert sim.state("later").phase == Seating.PENDING


def test_a_finished_worker_gives_its_seat_back_at_once() -> None:
    sim = Simulation((prod_node("gpu-a", max_workers=1),))
    sim.arrive(trainer("done", 60 * GiB))
    sim.arrive(trainer("next", 60 * GiB))
    assert sim.state("next").phase == Seating.PENDING
    placed = sim.finish("done")
    assert [p.worker for p in placed] == ["next"]


def test_a_tensor_parallel_server_gets_exactly_the_devices_it_names() -> None:
    # 100Gi alone would take 2 of 8 x 80Gi; devices: 4 takes 4, each holding 25Gi.
    eight = Node("gpu-8", devices=8, device_memory=80 * GiB, host_memory=1024 * GiB,
                 max_workers_per_claim=2, product="H100 80GB")
    sim = Simulation((eight,))
    assert decide(Request("tp-1", Role.SAMPLER, 100 * GiB, devices=4), sim.fleet) == \
        NewClaim("gpu-8", 4, 25 * GiB, 80 * GiB)
    sim.arrive(Request("tp-1", Role.SAMPLER, 100 * GiB, devices=4))
    assert sim.state("tp-1").devices == 4 and sim.state("tp-1").memory_per_device == 25 * GiB
    sim.arrive(Request("tp-2", Role.SAMPLER, 100 * GiB, devices=4))
    assert sim.state("tp-2").devices == 4 and node_of(sim, "tp-2") == "gpu-8"

    # The node's 8 devices are taken. A third server joins neither claim, though each has
    # a seat its share fits: it waits for 4 devices of its own.
    sim.arrive(Request("tp-3", Role.SAMPLER, 100 * GiB, devices=4))
    waiting = sim.state("tp-3")
    assert waiting.phase is Seating.PENDING
    assert str(waiting.reason) == (
        "WaitingForCapacity: devices: 4: it joins no claim and waits for devices of its own; "
        "no node has 4 free devices of 80Gi for 100Gi")
    # A worker that names no count may still join a server's claim: it is an ordinary one.
    sim.arrive(sampler("small", LORA))
    assert claim_of(sim, "small") == "claim-tp-1"

    sim.leave("tp-2")  # 4 devices free: tp-3 takes them
    assert claim_of(sim, "tp-3") == "claim-tp-3" and sim.state("tp-3").devices == 4


def test_a_server_naming_more_devices_than_any_node_has_never_fits() -> None:
    sim = Simulation((prod_node("gpu-a", devices=8), prod_node("gpu-b", devices=4)))
    sim.arrive(Request("tp-16", Role.TRAINER, 100 * GiB, devices=16))
    waiting = sim.state("tp-16")
    assert waiting.phase is Seating.PENDING and waiting.reason is not None
    assert waiting.reason.never
    assert str(waiting.reason) == (
        "NoCapacity: devices: 16: no trainer node has 16 devices of at least 6.25Gi "
        "(100Gi over 16); the largest trainer pool offers 8 x 80Gi")
    # Its memory spread over 8 devices would have fit; the count it names is the rule.
    sim.arrive(Request("tp-8", Role.TRAINER, 100 * GiB, devices=8))
    assert node_of(sim, "tp-8") == "gpu-a" and sim.state("tp-8").devices == 8
