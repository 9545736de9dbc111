"""The wait metrics: the census of Pending workers read at scrape time, and which status
writes end a wait."""

from __future__ import annotations

import datetime as dt
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.k8s import kube
from controller.k8s.objects import Worker, format_time
from controller.metrics import Metrics
from controller.reconcile import status
from controller.reconcile.housekeeping import census

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def worker(name: str, *, role: str = "trainer", created: dt.datetime = T0,
           phase: str | None = None, reason: str = "", placed_since: dt.datetime | None = None,
           deleting: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": format_time(created)},
        "spec": {"role": role, "memory": "10Gi"},
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = format_time(created)
    if phase:
        obj["status"] = {"phase": phase, "reason": reason or None}
        if placed_since:
            obj["status"]["conditions"] = [{"type": "Placed", "status": "True",
                                            "lastTransitionTime": format_time(placed_since)}]
    return obj


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


# ----------------------------------------------------------------- the census


def test_the_census_counts_pending_workers_by_reason_kind_and_each_roles_oldest() -> None:
    objs = [
        worker("new", created=T0 + dt.timedelta(minutes=5)),
        worker("full", phase="Pending", reason="WaitingForCapacity: every seat is taken",
               created=T0),
        worker("huge", phase="Pending", reason="NoCapacity: no node has 4 devices",
               role="sampler", created=T0 + dt.timedelta(minutes=1)),
        worker("odd", phase="Pending", reason="SomethingElse", role="sampler",
               created=T0 + dt.timedelta(minutes=2)),
        worker("running", phase="Running", created=T0 - dt.timedelta(hours=1)),
        worker("gone", created=T0 - dt.timedelta(hours=2), deleting=True),
        # Held back by its team's Kueue quota: counted, but not the fleet's longest wait.
        worker("quota", phase="Pending", reason="Queued: waiting for Kueue to admit it",
               created=T0 - dt.timedelta(hours=3)),
    ]
    kinds, oldest = census(objs)
    assert dict(kinds) == {"New": 1, "WaitingForCapacity": 1, "NoCapacity": 1,
                           "SomethingElse": 1, "Queued": 1}
    minute = dt.timedelta(minutes=1)
    assert oldest == {"trainer": T0.timestamp(), "sampler": (T0 + minute).timestamp()}


def test_a_scrape_reads_the_census_as_of_its_own_moment() -> None:
    clock = [T0.timestamp() + 600]
    metrics = Metrics(clock=lambda: clock[0])
    objs = [worker("a", phase="Pending", reason="NoCapacity: too big"),
            worker("b", phase="Pending", reason="Weird: not ours", role="sampler",
                   created=T0 + dt.timedelta(seconds=500))]
    metrics.census_from(lambda: census(objs))
    got = scrape(metrics)
    assert got["openrl_place_waiting_workers", (("reason", "NoCapacity"),)] == 1
    assert got["openrl_place_waiting_workers", (("reason", "Other"),)] == 1  # bounded labels
    assert got["openrl_place_waiting_workers", (("reason", "WaitingForCapacity"),)] == 0
    assert got["openrl_place_longest_wait_seconds", (("role", "trainer"),)] == 600
    assert got["openrl_place_longest_wait_seconds", (("role", "sampler"),)] == 100
    clock[0] += 60
    objs.pop(0)
    got = scrape(metrics)
    assert got["openrl_place_waiting_workers", (("reason", "NoCapacity"),)] == 0
    assert got["openrl_place_longest_wait_seconds", (("role", "trainer"),)] == 0
    assert got["openrl_place_longest_wait_seconds", (("role", "sampler"),)] == 160


def test_a_failing_census_never_fails_the_scrape() -> None:
    metrics = Metrics()

    def broken() -> Any:
        raise RuntimeError("cache gone")

    metrics.census_from(broken)
    got = scrape(metrics)
    assert got["openrl_place_waiting_workers", (("reason", "New"),)] == 0
    assert got["openrl_place_leader", ()] == 0


# ----------------------------------------------------------------- which writes end a wait


def ended(old: dict[str, Any], phase: str, now: dt.datetime) -> tuple[float | None, float | None]:
    return status.waits_ended(Worker.from_obj(old), {"phase": phase}, now)


def test_the_seat_wait_ends_when_a_worker_first_enters_placing() -> None:
    now = T0 + dt.timedelta(seconds=90)
    assert ended(worker("w"), "Placing", now) == (90, None)
    assert ended(worker("w", phase="Pending", reason="WaitingForCapacity"), "Placing",
                 now) == (90, None)


def test_the_start_wait_runs_from_the_seat_to_running() -> None:
    seat = T0 + dt.timedelta(seconds=90)
    placing = worker("w", phase="Placing", placed_since=seat)
    assert ended(placing, "Running", seat + dt.timedelta(seconds=12)) == (None, 12)


def test_a_worker_running_at_its_first_answer_ends_both_waits_at_once() -> None:
    now = T0 + dt.timedelta(seconds=30)
    assert ended(worker("w"), "Running", now) == (30, 0)


def test_other_writes_end_no_wait() -> None:
    now = T0 + dt.timedelta(hours=1)
    running = worker("w", phase="Running", placed_since=T0)
    assert ended(running, "Running", now) == (None, None)
    assert ended(worker("w", phase="Placing", placed_since=T0), "Placing", now) == (None, None)
    assert ended(worker("w"), "Pending", now) == (None, None)
    assert ended(running, "Failed", now) == (None, None)


def test_the_wait_histograms_take_known_roles_only() -> None:
    metrics = Metrics()
    metrics.seated("trainer", 42)
    metrics.seated("intruder", 1)
    metrics.started("sampler", -1)  # a clock step back counts as no wait, not a negative one
    got = scrape(metrics)
    assert got["openrl_place_wait_for_seat_seconds_count", (("role", "trainer"),)] == 1
    assert got["openrl_place_wait_for_seat_seconds_sum", (("role", "trainer"),)] == 42
    assert got["openrl_place_seat_to_running_seconds_sum", (("role", "sampler"),)] == 0
    assert not [k for k in got if ("role", "intruder") in k[1]]


# ----------------------------------------------------------------- through a reconcile


def test_a_worker_waits_then_is_seated_then_runs_and_each_wait_is_observed_once() -> None:
    from tests.unit.controller.conftest import Cluster

    c = Cluster(devices=1)
    metrics = c.reconciler.metrics
    c.place("first")  # takes the only device
    c.api.advance(5)
    assert c.place("second")["phase"] == "Pending"
    c.sync()
    # The census reads the cache the controller keeps (records, not the API's objects).
    kinds, oldest = census(c.cache.items(kube.WORKERS))
    assert dict(kinds) == {"WaitingForCapacity": 1}
    assert list(oldest) == ["trainer"]
    c.api.advance(40)
    c.allocate_and_run("first")  # seat -> Running, 45s after its seat
    c.api.delete(kube.WORKERS, "first")
    c.reconcile("first")
    c.api.advance(15)
    c.api.finish_pod("orw-first")
    c.reconcile("first")  # its pod gone: the seat is free
    c.reconcile("second")
    assert c.status("second")["phase"] == "Placing"
    c.reconcile("second")  # nothing new: nothing observed again
    got = scrape(metrics)
    role = (("role", "trainer"),)
    assert got["openrl_place_wait_for_seat_seconds_count", role] == 2
    assert got["openrl_place_seat_to_running_seconds_count", role] == 1
    assert got["openrl_place_seat_to_running_seconds_sum", role] == 45
    # "first" waited 0s for its seat, "second" from its creation (5s) to 60s.
    assert got["openrl_place_wait_for_seat_seconds_sum", role] == 55
