"""The loop's error handling, the watches' change filters, leader election, HTTP endpoints."""

from __future__ import annotations

import datetime as dt
import threading
import urllib.request

import pytest

from controller.k8s import kube
from controller.leader import LeaderElector
from controller.loop import Controller
from controller.metrics import Health, Metrics, serve
from controller.reconcile.vocabulary import Write
from controller.reconcile.writes import NotLeading, Verdict
from controller.settings import Settings
from controller.store.queue import WorkQueue
from controller.store.watches import Feed, feeds
from controller.store.work import WAKE, Result
from tests.unit.controller.fake_kube import FakeKube


class Scripted:
    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.seen: list[str] = []

    def __call__(self, key: str) -> Result:
        self.seen.append(key)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        assert isinstance(outcome, Result)
        return outcome


def controller(*outcomes: object) -> Controller:
    c = Controller(FakeKube(), Settings(namespace="openrl", identity="t"))  # type: ignore[arg-type]
    c.reconciler = Scripted(*outcomes)  # type: ignore[assignment]
    return c


def test_errors_never_escape_and_are_retried() -> None:
    c = controller(kube.KubeError(500, "x", "boom"), ValueError("bug"),
                   kube.Conflict(409, "Conflict", "stale"), Result(requeue_after=5))
    for _ in range(3):
        c.queue.add("w")
        key = c.queue.get(timeout=0) or c.queue.get(timeout=2)
        c.process(key)
    assert len(c.queue) == 1  # retried each time
    samples = {s.labels["result"]: s.value for s in c.metrics.reconciles.collect()[0].samples
               if s.name.endswith("_total")}
    assert samples["error"] == 3


def test_failed_writes_are_counted_by_resource_and_error_kind() -> None:
    c = controller()
    pod = Write("create", kube.PODS, "orw-w", {})
    c._written("w", pod, kube.Conflict(409, "AlreadyExists", "exists"), Verdict.SOON)
    c._written("w", pod, kube.KubeError(500, "InternalError", "etcd"), Verdict.RETRY)
    c._written("w", None, kube.KubeError(0, "Crashed", "bug"), None)
    c._written("w", pod, NotLeading(0, "NotLeading", "lease in doubt"), Verdict.DROP)
    c._written("w", pod, None, None)
    samples = {(s.labels["resource"], s.labels["error"]): s.value
               for s in c.metrics.write_failures.collect()[0].samples
               if s.name.endswith("_total")}
    assert samples == {("pods", "Conflict"): 1, ("pods", "KubeError"): 1,
                       ("plan", "KubeError"): 1}


def test_result_requeues_wakes_and_enqueues() -> None:
    c = controller(Result(requeue_after=100, wake=True, enqueue=(("p1", ("1", "a")),)))
    c.queue.add("w")
    c.process(c.queue.get(timeout=0))
    assert c.queue.get(timeout=0) == "p1"
    assert c.queue.get(timeout=1) == WAKE


def test_feed_only_reports_changed_signatures() -> None:
    seen: list[tuple[str, str]] = []
    feed = Feed(kube.PODS, lambda o: o.get("v"),
                lambda k, o: seen.append((k, o["metadata"]["name"])))
    a = {"metadata": {"name": "a"}, "v": 1}
    feed.event("ADDED", a)
    feed.event("MODIFIED", {**a, "noise": 1})
    feed.event("MODIFIED", {**a, "v": 2})
    feed.relist([{"metadata": {"name": "b"}, "v": 1}])  # a vanished while disconnected
    feed.event("DELETED", {"metadata": {"name": "zzz"}})  # never seen: nothing to say
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "b")]


def test_feeds_route_events_to_keys() -> None:
    q = WorkQueue()
    worker_feed, pod_feed, claim_feed, slice_feed, node_feed, _, _ = feeds(q, "gpu.example.com")
    worker_feed.event("ADDED", {"metadata": {"name": "w", "uid": "1",
                                             "creationTimestamp": "2026-01-01T00:00:00Z"}})
    worker_feed.event("MODIFIED", {"metadata": {"name": "w", "uid": "1",
                                                "creationTimestamp": "2026-01-01T00:00:00Z"},
                                   "status": {"phase": "Running"}})  # our own write: ignored
    owned = {"name": "orw-x", "ownerReferences": [
        {"kind": "OpenRLWorker", "name": "x", "uid": "2", "controller": True}]}
    pod_feed.event("ADDED", {"metadata": owned})  # just created, unscheduled: nothing to say
    assert sorted(q._due) == ["w"]
    pod_feed.event("MODIFIED", {"metadata": owned, "spec": {"nodeName": "n"}})
    assert sorted(q._due) == ["w", "x"]
    node_feed.event("ADDED", {"metadata": {"name": "n", "labels": {}}})
    node_feed.event("MODIFIED", {"metadata": {"name": "n", "labels": {"kubernetes.io/x": "1"}},
                                 "status": {"conditions": []}})
    slice_feed.event("ADDED", {"metadata": {"name": "s"}, "spec": {"driver": "other"}})
    assert WAKE in q._due  # from the node's first sighting
    claim_feed.event("ADDED", {"metadata": {"name": "c", "uid": "3"}})


def test_a_claims_allocation_queues_the_workers_it_lists() -> None:
    q = WorkQueue()
    _, _, claim_feed, *_ = feeds(q, "gpu.example.com")
    claim = {"metadata": {"name": "orw-a-1", "uid": "1"}}
    claim_feed.event("ADDED", claim)  # cut by us: nobody to tell
    assert q._due == {}
    consumers = [{"resource": "pods", "name": "orw-a", "uid": "p"},
                 {"resource": "pods", "name": "not-ours", "uid": "q"}]
    claim_feed.event("MODIFIED", {**claim, "status": {
        "allocation": {"nodeSelector": {"n": 1}}, "reservedFor": consumers}})
    assert "a" in q._due and WAKE in q._due  # its worker learns the node; the rest may fit
    assert "not-ours" not in q._due and "" not in q._due


def test_a_claim_allocated_a_device_another_holds_queues_the_workers_giving_it_up() -> None:
    q = WorkQueue()
    asked: list[str] = []

    def in_conflict(claim: str) -> list[str]:
        asked.append(claim)
        return ["b", "d"] if claim == "orw-b-1" else []

    _, _, claim_feed, *_ = feeds(q, "gpu.example.com", in_conflict=in_conflict)
    claim = {"metadata": {"name": "orw-b-1", "uid": "1"}}
    claim_feed.event("ADDED", claim)  # cut by us, unallocated: nothing to ask
    assert asked == []
    allocation = {"nodeSelector": {"n": 1}, "devices": {"results": [
        {"driver": "gpu.example.com", "pool": "n", "device": "gpu-0"}]}}
    claim_feed.event("MODIFIED", {**claim, "status": {"allocation": allocation}})
    assert asked == ["orw-b-1"] and {"b", "d"} <= set(q._due)
    moved = {"nodeSelector": {"n": 1}, "devices": {"results": [
        {"driver": "gpu.example.com", "pool": "n", "device": "gpu-1"}]}}
    claim_feed.event("MODIFIED", {**claim, "status": {"allocation": moved}})
    assert asked == ["orw-b-1"] * 2  # which device is news too


def test_a_pod_leaving_an_enabled_node_wakes_the_pending_workers() -> None:
    q = WorkQueue()
    *_, others = feeds(q, "gpu.example.com", enabled=lambda node: node == "gpu-0")
    assert others.resource == kube.NODE_PODS and others.field_selector
    system = {"metadata": {"name": "kube-system/ds-1"}, "spec": {"nodeName": "gpu-0"},
              "status": {"phase": "Running"}}
    elsewhere = {"metadata": {"name": "default/web"}, "spec": {"nodeName": "cpu-0"},
                 "status": {"phase": "Running"}}
    others.event("ADDED", system)  # a slot taken: nobody can gain
    others.event("ADDED", elsewhere)
    others.event("DELETED", elsewhere)  # not a node placement knows
    assert WAKE not in q._due
    others.event("DELETED", system)  # a slot free on gpu-0
    assert WAKE in q._due


class Ticker:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def elector(api: FakeKube, identity: str, clock: Ticker) -> LeaderElector:
    return LeaderElector(api, name="lease", namespace="openrl", identity=identity,  # type: ignore[arg-type]
                         lease_duration=15, renew_deadline=10, retry_period=2, clock=clock,
                         now=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))


def test_leader_election_one_at_a_time_and_takeover_after_expiry() -> None:
    api, clock = FakeKube(), Ticker()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew() and a.leading
    assert not b.try_acquire_or_renew()
    clock.t = 10
    assert a.try_acquire_or_renew()  # renewals keep it
    assert not b.try_acquire_or_renew()
    clock.t = 40  # a stopped renewing 30s ago (by b's own clock, not a's timestamps)
    assert b.try_acquire_or_renew()
    lease = api.obj(kube.LEASES, "lease")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew() and not a.leading


def test_a_leader_stops_acting_before_anyone_can_take_the_lease() -> None:
    api, clock = FakeKube(), Ticker()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew() and a.valid()
    assert not b.try_acquire_or_renew()  # b sees a's record at t=0
    clock.t = 9.9
    assert a.valid()
    clock.t = 10  # no renewal for the renew deadline: a may no longer decide or write...
    assert not a.valid()
    clock.t = 14.9
    assert not b.try_acquire_or_renew()  # ...while b cannot take over until the lease lapses
    clock.t = 15
    assert b.try_acquire_or_renew() and b.valid()


def test_no_decision_and_no_write_once_the_lease_is_in_doubt() -> None:
    allowed = [True]
    c = Controller(FakeKube(), Settings(namespace="openrl", identity="t"),  # type: ignore[arg-type]
                   may_act=lambda: allowed[0])
    c.reconciler = Scripted(Result())  # type: ignore[assignment]
    c.writer.fence()  # leading: writes go out
    allowed[0] = False
    with pytest.raises(kube.KubeError, match="lease"):
        c.writer.fence()
    c.queue.add("a")
    stop = threading.Event()
    c.health.set_ready(True, "test")
    runner = threading.Thread(target=c.run, args=(stop,), daemon=True)
    c.start_watches = lambda _stop: True  # type: ignore[method-assign]
    runner.start()
    runner.join(5)
    assert not runner.is_alive()  # the loop ended by itself...
    assert c.reconciler.seen == []  # type: ignore[attr-defined]  # ...deciding nothing


def test_release_hands_the_lease_over_at_once() -> None:
    api, clock = FakeKube(), Ticker()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    a.release()
    assert not a.leading
    assert b.try_acquire_or_renew()


def test_a_standby_stays_alive_while_it_waits_for_the_lease() -> None:
    # The liveness probe restarted a standby every two minutes (first seen on
    # the real node of hack/node.sh): waiting for the lease never beat.
    api, clock = FakeKube(), Ticker()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    b.retry_period = 0.01
    assert a.try_acquire_or_renew()
    beats = Ticker()
    health = Health(stall_after=120, clock=beats)
    stop = threading.Event()
    tries = 0

    def waiting() -> None:
        nonlocal tries
        tries += 1
        health.beat()
        beats.t += 60.0  # two minutes a standby by the third try, beating all along
        if tries == 4:
            stop.set()

    assert not b.acquire(stop, waiting=waiting)
    assert health.alive()[0]


def test_keep_steps_down_when_renewals_fail() -> None:
    api, clock = FakeKube(), Ticker()
    a = elector(api, "a", clock)
    a.retry_period = 0.01
    assert a.try_acquire_or_renew()
    api.objects[api.key(kube.LEASES, "lease")]["spec"]["holderIdentity"] = "thief"
    lost = threading.Event()
    stop = threading.Event()
    a.keep(stop, lost.set)
    assert lost.wait(2)
    stop.set()


@pytest.fixture
def server():
    metrics, health = Metrics(), Health()
    srv = serve(("127.0.0.1", 0), metrics, health)
    yield srv, metrics, health
    srv.shutdown()


def get(srv, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{srv.server_address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_ready_and_metrics(server) -> None:
    srv, metrics, health = server
    assert get(srv, "/healthz") == (200, "ok")
    assert get(srv, "/readyz")[0] == 503
    health.set_ready(True, "leading")
    assert get(srv, "/readyz") == (200, "leading")
    metrics.decisions.labels(outcome="new_claim").inc()
    metrics.api_request("list", "pods", 200)
    code, body = get(srv, "/metrics")
    assert code == 200
    for name in ("openrl_place_reconciles_total", "openrl_place_decisions_total",
                 "openrl_place_pending_workers", "openrl_place_claims",
                 "openrl_place_seats_used", "openrl_place_seats_total",
                 "openrl_place_reconcile_duration_seconds_bucket",
                 "openrl_place_api_requests_total"):
        assert name in body
    assert 'openrl_place_decisions_total{outcome="new_claim"} 1.0' in body
    assert get(srv, "/nope")[0] == 404


def test_health_fails_when_the_loop_stalls() -> None:
    clock = Ticker()
    health = Health(stall_after=120, clock=clock)
    assert health.alive()[0]
    clock.t = 121
    ok, why = health.alive()
    assert not ok and "121" in why
