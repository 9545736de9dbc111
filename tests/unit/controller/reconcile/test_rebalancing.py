"""Moves for efficiency (controller/reconcile/rebalancing.py): a movable worker taking turns
gets the devices that freed, at its turn's boundary, its new seat held first."""

from __future__ import annotations

from controller.k8s import kube, naming
from controller.k8s.objects import Worker
from controller.reconcile.rebalancing import outlook
from controller.reconcile.vocabulary import claim_to_cut
from controller.store.work import REBALANCE, SWEEP
from placement.policy import Strategy
from placement.rebalance import MoveLimit
from tests.unit.controller.conftest import Cluster

TWO = {"openrl.io/max-workers-per-claim": "2"}


def running(c: Cluster, name: str, **spec: object) -> None:
    c.place(name, **spec)
    c.allocate_and_run(name)


def sharing_story(**settings: object) -> tuple[Cluster, str, str, str]:
    """Two nodes of one device: a and b each alone, then c joins one of them; the worker
    not sharing leaves. Only c is movable. Returns (cluster, the claim's cutter, the
    joiner c, the free node)."""
    c = Cluster(nodes=2, devices=1, node_labels=TWO, rebalance_after="2m", **settings)
    running(c, "a")
    running(c, "b")
    running(c, "c", movable=True)
    shared = c.status("c")["claimName"]
    cutter = next(w for w in ("a", "b") if c.status(w)["claimName"] == shared)
    leaver = "b" if cutter == "a" else "a"
    free_node = c.status(leaver)["nodeName"]
    leave(c, leaver)
    return c, cutter, "c", free_node


def leave(c: Cluster, name: str) -> None:
    """The worker is deleted; its pod and claim go after it (the garbage collector)."""
    claim = c.status(name)["claimName"]
    c.api.delete(kube.WORKERS, name)
    c.reconcile(name)
    c.api.finish_pod(f"orw-{name}")
    c.reconcile(name)
    c.reconcile(name)
    assert c.api.obj(kube.WORKERS, name) is None
    if c.api.obj(kube.CLAIMS, claim) is not None:
        c.api.delete(kube.CLAIMS, claim)


def rebalance(c: Cluster) -> object:
    c.sync()
    return c.reconciler(REBALANCE)


def moving_story(**settings: object) -> tuple[Cluster, str, str]:
    """The sharing story, the free device's two minutes passed: the joiner's move decided."""
    c, cutter, joiner, _ = sharing_story(**settings)
    rebalance(c)
    c.api.advance(121)
    rebalance(c)
    assert c.status(joiner)["move"]
    return c, cutter, joiner


def test_a_joiner_moves_to_the_freed_device_at_its_turns_end_seat_held_first() -> None:
    c, cutter, joiner, free_node = sharing_story()
    old = c.status(joiner)["claimName"]
    rebalance(c)  # the free device's clock starts
    assert "move" not in c.status(joiner)
    c.api.advance(119)
    rebalance(c)
    assert "move" not in c.status(joiner), "not free for two minutes yet"
    c.api.advance(2)
    result = rebalance(c)
    status = c.status(joiner)
    new = f"orw-{joiner}-{c.worker(joiner)['metadata']['uid']}"
    assert status["move"]["from"] == old and status["move"]["to"] == new
    assert status["reason"].startswith(f"Moving: moving from claim {old}")
    assert status["moves"][-1]["reason"] == "OwnDevices"
    assert [k for k, _ in result.enqueue] == [joiner]  # type: ignore[attr-defined]
    # The new seat is held first: its claim exists, sized for the free node.
    claim = c.api.obj(kube.CLAIMS, new)
    assert claim["metadata"]["annotations"][naming.ANNOTATION_SIZED_FOR] == free_node
    # Its node's time-slicer is asked to end its turns; the pod stays until it says so.
    c.reconcile(joiner)
    pod = c.api.obj(kube.PODS, f"orw-{joiner}")
    assert pod["metadata"]["annotations"][naming.ANNOTATION_DRAIN]
    assert not pod["metadata"].get("deletionTimestamp")
    c.reconcile(joiner)
    assert "waiting for its node's time-slicer" in c.status(joiner)["reason"]
    c.api.edit(kube.PODS, f"orw-{joiner}", {"metadata": {"annotations": {
        naming.ANNOTATION_DRAINED: "2026-01-01T00:00:00Z"}}})
    c.reconcile(joiner)
    assert c.api.obj(kube.PODS, f"orw-{joiner}")["metadata"].get("deletionTimestamp")
    assert "the time-slicer says it parked" in c.status(joiner)["reason"]
    c.api.finish_pod(f"orw-{joiner}")
    c.reconcile(joiner)  # off the old claim's list
    assert c.worker(joiner)["metadata"]["uid"] not in (
        c.api.obj(kube.CLAIMS, old)["metadata"].get("annotations") or {}).get(
        naming.ANNOTATION_BOOKED, "")
    c.reconcile(joiner)  # its pod on the new claim
    status = c.status(joiner)
    assert status["phase"] == "Placing" and status["claimName"] == new
    assert status["reason"].startswith(f"Placed: moved from claim {old}")
    assert f"to claim {new} on node {free_node}" in status["reason"]
    assert "move" not in status
    c.allocate_and_run(joiner)
    assert c.status(joiner)["phase"] == "Running"
    assert c.status(cutter)["claimName"] == old  # the other stays, now alone
    rebalance(c)
    assert "move" not in c.status(cutter)


def test_unmovable_workers_never_move() -> None:
    c = Cluster(nodes=2, devices=1, node_labels=TWO, rebalance_after="1m")
    running(c, "a")
    running(c, "b")
    running(c, "c")  # joins one of them
    leaver = "b" if c.status("c")["claimName"] == c.status("a")["claimName"] else "a"
    leave(c, leaver)
    for _ in range(3):
        rebalance(c)
        c.api.advance(120)
    assert all("move" not in c.status(w) for w in ("a", "b", "c") if w != leaver)


def test_the_claims_cutter_moves_under_its_second_name_and_leaves_its_claim_to_the_joiner() -> None:
    """a cut its claim and c joined it; only a is movable. a's new claim cannot bear the
    name of the one it leaves (c stays on it): it takes the other name a claim of a's may
    bear, and its old claim stays c's, a off its booked list."""
    c = Cluster(nodes=2, devices=1, node_labels=TWO, rebalance_after="1m")
    running(c, "a", movable=True)
    running(c, "b")
    running(c, "c")
    cutter = "a"
    assert c.status("c")["claimName"] == c.status("a")["claimName"]  # ties go by name
    leave(c, "b")
    uid = c.worker(cutter)["metadata"]["uid"]
    old = c.status(cutter)["claimName"]
    assert old == f"orw-{cutter}-{uid}"
    rebalance(c)
    c.api.advance(61)
    rebalance(c)
    move = c.status(cutter)["move"]
    assert move["from"] == old and move["to"] == f"orw-{cutter}-{uid}-2"
    assert c.api.obj(kube.CLAIMS, move["to"]) is not None
    c.reconcile(cutter)  # asked to drain
    c.api.edit(kube.PODS, f"orw-{cutter}", {"metadata": {"annotations": {
        naming.ANNOTATION_DRAINED: "2026-01-01T00:00:00Z"}}})
    c.reconcile(cutter)
    c.api.finish_pod(f"orw-{cutter}")
    c.reconcile(cutter)  # off its old claim's list: the claim stays, c's
    claim = c.api.obj(kube.CLAIMS, old)
    assert claim is not None and not claim["metadata"].get("deletionTimestamp")
    assert uid not in claim["metadata"]["annotations"][naming.ANNOTATION_BOOKED]
    c.reconcile(cutter)
    c.allocate_and_run(cutter)
    assert c.status(cutter)["phase"] == "Running"
    assert c.status(cutter)["claimName"] == move["to"]
    assert c.status("c")["claimName"] == old
    c.api.advance(3600)
    c.reconcile(SWEEP)  # both claims stay: each is someone's
    assert c.api.obj(kube.CLAIMS, old) is not None
    assert c.api.obj(kube.CLAIMS, move["to"]) is not None
    # c leaves: a's old claim books nobody now, a's name on it notwithstanding: it goes.
    c.api.delete(kube.WORKERS, "c")
    c.reconcile("c")
    c.api.finish_pod("orw-c")
    c.reconcile("c")
    c.reconcile("c")
    assert c.api.obj(kube.WORKERS, "c") is None
    c.api.advance(3600)
    c.reconcile(SWEEP)
    assert c.api.obj(kube.CLAIMS, old) is None
    assert c.api.obj(kube.CLAIMS, move["to"]) is not None


def test_waiting_workers_come_first_and_a_worker_moves_once_an_hour_at_most() -> None:
    c, _, joiner, _ = sharing_story()
    waiting = c.add_worker("x", role="sampler")
    c.api.edit(kube.WORKERS, "x", {"status": {"phase": "Pending",
                                              "reason": "WaitingForCapacity: not yet"}})
    rebalance(c)
    c.api.advance(600)
    rebalance(c)
    assert "move" not in c.status(joiner), "a worker waiting for a seat comes first"
    assert waiting
    c.api.edit(kube.WORKERS, "x", {"status": {"reason": "NoCapacity: never on this fleet"}})
    rebalance(c)
    assert c.status(joiner)["move"]
    c.api.edit(kube.WORKERS, joiner, {"status": {"move": None}})
    c.reconcile(joiner)  # the claim it cut is left behind: deleted
    c.api.advance(3000)
    rebalance(c)
    assert "move" not in c.status(joiner), "an hour has not passed since its last move"
    c.api.advance(601)
    rebalance(c)
    assert c.status(joiner)["move"]


def test_a_worker_waiting_for_what_the_fleet_lacks_does_not_hold_moves_back() -> None:
    c, _, joiner, _ = sharing_story()
    c.add_worker("huge", role="sampler", memory="200Gi")  # no node has two devices
    c.api.edit(kube.WORKERS, "huge", {"status": {
        "phase": "Pending", "reason": "WaitingForCapacity: no node has 3 free devices"}})
    rebalance(c)
    c.api.advance(121)
    rebalance(c)
    assert c.status(joiner)["move"]


def test_a_silent_time_slicer_keeps_the_old_pod_no_longer_than_the_bound() -> None:
    c, _, joiner = moving_story(drain_timeout="30s")
    c.reconcile(joiner)  # asked
    c.reconcile(joiner)
    assert not c.api.obj(kube.PODS, f"orw-{joiner}")["metadata"].get("deletionTimestamp")
    c.api.advance(31)
    c.reconcile(joiner)
    assert "said nothing in 31s" in c.status(joiner)["reason"]
    assert c.api.obj(kube.PODS, f"orw-{joiner}")["metadata"].get("deletionTimestamp")


def test_a_pod_left_alone_on_its_claim_goes_at_once() -> None:
    c, cutter, joiner = moving_story()
    c.reconcile(joiner)  # asked
    leave(c, cutter)  # its claim-mate leaves meanwhile: no turn to wait for
    c.reconcile(joiner)
    assert "nobody shares its claim now" in c.status(joiner)["reason"]
    assert c.api.obj(kube.PODS, f"orw-{joiner}")["metadata"].get("deletionTimestamp")


def test_a_move_whose_status_never_landed_leaves_no_claim_behind() -> None:
    c, _, joiner = moving_story()
    new = c.status(joiner)["move"]["to"]
    # The controller died after the claim, before the status: the status says nothing.
    c.api.edit(kube.WORKERS, joiner, {"status": {"move": None, "reason": None}})
    c.reconcile(joiner)
    assert c.api.obj(kube.CLAIMS, new) is None
    assert c.status(joiner)["phase"] == "Running"


def test_a_move_whose_new_claim_went_before_the_ask_is_dropped() -> None:
    c, _, joiner = moving_story()
    old, new = c.status(joiner)["move"]["from"], c.status(joiner)["move"]["to"]
    c.api.delete(kube.CLAIMS, new)
    c.reconcile(joiner)
    status = c.status(joiner)
    assert "move" not in status and status["claimName"] == old and status["phase"] == "Running"
    assert not (c.api.obj(kube.PODS, f"orw-{joiner}")["metadata"].get("annotations") or {}).get(
        naming.ANNOTATION_DRAIN)


def test_explain_says_where_a_worker_would_move_or_why_it_stays() -> None:
    c, cutter, joiner, free_node = sharing_story()
    c.sync()

    def says(name: str, **overrides: object) -> str:
        worker = Worker.from_obj(c.worker(name))
        args: dict = {"claim": c.status(name)["claimName"],
                      "names_taken": claim_to_cut(c.cache.view, worker) is None,
                      "now": c.api.clock(), "after": 120.0, "strategy": Strategy.SPREAD,
                      "limit": MoveLimit(apart=3600)}
        return outlook(worker, c.cache.view.fleet, **{**args, **overrides})

    assert says(joiner) == (f"would move to 1 device(s) of its own on node {free_node} once "
                            "they have stayed free 120s and no worker waits for a seat")
    assert says(cutter) == "stays: not movable (spec.movable is false)"
    assert says(joiner, names_taken=True).startswith("stays: both names")
    assert says(joiner, after=0.0).startswith("moves for efficiency are off")
    assert says(joiner, strategy=Strategy.BINPACK).startswith("under binpack a worker moves")
    c.place("x", memory="70Gi")  # takes the free device
    c.sync()
    assert says(joiner) == "stays for now: no node has free devices it would take as a newcomer"
    leave(c, "x")
    rebalance(c)
    c.api.advance(121)
    rebalance(c)
    c.sync()
    assert says(joiner).startswith(f"moving from claim {c.status(cutter)['claimName']}")


def test_the_time_slicers_drained_mark_wakes_the_moving_worker() -> None:
    """The old pod goes as soon as the agent says the worker parked, not a bound later:
    the mark is news to the pod watch; the turn annotation's churn is not."""
    from controller.store.queue import WorkQueue
    from controller.store.watches import feeds
    q = WorkQueue()
    pod_feed = next(f for f in feeds(q, "gpu.example.com") if f.resource == kube.PODS)
    pod = {"metadata": {"name": "orw-w1", "uid": "p", "annotations": {
        naming.ANNOTATION_DRAIN: "2026-01-01T00:00:00Z"}, "ownerReferences": [
        {"kind": "OpenRLWorker", "name": "w1", "uid": "w", "controller": True}]},
           "spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    pod_feed.event("ADDED", pod)
    q._due.clear()
    turned = {**pod, "metadata": {**pod["metadata"], "annotations": {
        **pod["metadata"]["annotations"], naming.ANNOTATION_TURN: '{"phase":"Waiting"}'}}}
    pod_feed.event("MODIFIED", turned)
    assert "w1" not in q._due
    marked = {**turned, "metadata": {**turned["metadata"], "annotations": {
        **turned["metadata"]["annotations"], naming.ANNOTATION_DRAINED: "2026-01-01T00:00:01Z"}}}
    pod_feed.event("MODIFIED", marked)
    assert "w1" in q._due


def test_under_binpack_a_lone_worker_joins_a_claim_elsewhere_and_its_node_empties() -> None:
    """Autoscaling on, binpack: x alone on one node, a and b on a claim with a free seat on
    the other; after two minutes alone, x joins that claim (the join committed first), its
    pod goes at once (nobody to take turns with), its own claim is released, and its pod
    is made on the claim it joined."""
    c = Cluster(nodes=2, devices=1, node_labels={"openrl.io/max-workers-per-claim": "3"},
                rebalance_after="2m", strategy="binpack", autoscaling=True)
    running(c, "a", movable=True)
    running(c, "b", movable=True)  # binpack: joins a's claim
    shared = c.status("a")["claimName"]
    assert c.status("b")["claimName"] == shared
    # x lands alone on the other node: the claim it would join is made full for a moment.
    c.api.edit(kube.NODES, c.status("a")["nodeName"], {"metadata": {"labels": {
        "openrl.io/max-workers-per-claim": "2"}}})
    running(c, "x", movable=True)
    lone, own = c.status("x")["nodeName"], c.status("x")["claimName"]
    assert lone != c.status("a")["nodeName"]
    c.api.edit(kube.NODES, c.status("a")["nodeName"], {"metadata": {"labels": {
        "openrl.io/max-workers-per-claim": "3"}}})
    rebalance(c)
    c.api.advance(121)
    rebalance(c)
    status = c.status("x")
    assert status["move"]["to"] == shared and status["move"]["reason"] == "EmptiesNode"
    assert c.worker("x")["metadata"]["uid"] in c.api.obj(kube.CLAIMS, shared)["metadata"][
        "annotations"][naming.ANNOTATION_BOOKED]
    c.reconcile("x")  # alone on its claim: its pod goes at once
    assert "nobody shares its claim now" in c.status("x")["reason"]
    c.api.finish_pod("orw-x")
    c.reconcile("x")  # its own claim released
    assert c.api.obj(kube.CLAIMS, own) is None or c.api.obj(kube.CLAIMS, own)["metadata"].get(
        "deletionTimestamp")
    c.reconcile("x")
    status = c.status("x")
    assert status["phase"] == "Placing" and status["claimName"] == shared, status
    assert status["reason"].startswith(f"Placed: moved from claim {own} on node {lone}")
    assert "it empties its node" in status["reason"]


def test_under_binpack_a_lone_worker_no_claim_takes_cuts_its_second_name_on_a_busy_node() -> None:
    """Autoscaling on, binpack: x alone on one node, a (not movable) alone on the other,
    whose claim is full (one worker per claim there) but which has a device free. After
    two minutes alone, x moves onto a new claim on that node, under the other name a
    claim of x's may bear (its own still stands until its pod is gone), and its own claim
    is released."""
    c = Cluster(nodes=2, devices=2, node_labels={"openrl.io/max-workers-per-claim": "1"},
                rebalance_after="2m", strategy="binpack", autoscaling=True)
    running(c, "a")
    busy = c.status("a")["nodeName"]
    # x lands alone on the other node: a's node is left out for a moment.
    c.api.edit(kube.NODES, busy, {"metadata": {"labels": {naming.NODE_ENABLED: "false"}}})
    running(c, "x", movable=True)
    lone, own = c.status("x")["nodeName"], c.status("x")["claimName"]
    assert lone != busy
    c.api.edit(kube.NODES, busy, {"metadata": {"labels": {naming.NODE_ENABLED: "true"}}})
    rebalance(c)
    c.api.advance(121)
    rebalance(c)
    status = c.status("x")
    uid = c.worker("x")["metadata"]["uid"]
    assert status["move"]["to"] == f"{own}-2" == f"orw-x-{uid}-2", status
    assert status["move"]["node"] == busy and status["move"]["reason"] == "EmptiesNode"
    c.reconcile("x")  # alone on its claim: its pod goes at once
    c.api.finish_pod("orw-x")
    c.reconcile("x")  # its own claim released
    assert c.api.obj(kube.CLAIMS, own) is None or c.api.obj(kube.CLAIMS, own)["metadata"].get(
        "deletionTimestamp")
    c.reconcile("x")
    assert c.status("x")["claimName"] == f"{own}-2"
    assert c.status("x")["phase"] == "Placing"
