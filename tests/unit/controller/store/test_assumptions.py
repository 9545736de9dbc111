"""Assumptions always resolve: a seat promised to a write that will never happen comes back.

One device, so a seat held by a phantom claim or pod is plain to see: the next
worker waits. Each story makes a decision's writes fail in a way that is not
an API error, or loses them altogether, and checks the next worker is placed.
"""

from __future__ import annotations

import http.client
import threading
from typing import Any

import pytest

from controller.k8s import kube
from controller.loop import Controller
from controller.reconcile.vocabulary import Write
from controller.reconcile.writes import NotLeading, Plan, Writer
from controller.store.cache import Cache
from controller.store.work import WAKE
from tests.unit.controller.conftest import Cluster
from tests.unit.controller.fake_kube import FakeKube

FAILURES: dict[str, Exception] = {
    "a transport error the client does not wrap": http.client.IncompleteRead(b""),
    "a crash inside the plan": RuntimeError("a bug in the write path"),
    "a connection reset": ConnectionResetError("reset by peer"),
}


def assumed(c: Cluster) -> dict[str, list[str]]:
    return {plural: sorted(store.assumed) for plural, store in c.cache.stores.items()
            if store.assumed}


def seat_comes_back(c: Cluster) -> None:
    assert assumed(c) == {}
    status = c.place("b", "50Gi")
    assert status["phase"] == "Placing", status


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("at", ["resourceclaims", "pods"])
def test_a_failed_write_forgets_itself_and_every_later_one(failure: str, at: str) -> None:
    c = Cluster(devices=1)
    c.api.fail_next[("create", at)] = FAILURES[failure]
    c.place("a", "50Gi")
    assert c.api.obj(kube.PODS, "orw-a") is None
    if at == "pods":  # the claim landed; the sweep takes it once its grace is over
        c.api.advance(3600)
        c.api.delete(kube.CLAIMS, c.api.all(kube.CLAIMS)[0]["metadata"]["name"])
    seat_comes_back(c)


def test_a_fence_refusal_forgets_the_plans_assumptions() -> None:
    c = Cluster(devices=1)
    fenced = {"on": False}

    def fence() -> None:
        if fenced["on"]:
            raise NotLeading(0, "NotLeading", "the lease may have passed")
        fenced["on"] = True  # the finalizer goes; the claim does not

    c.reconciler.writer = Writer(c.api, c.cache, concurrency=0, fence=fence)  # type: ignore[arg-type]
    c.place("a", "50Gi")
    assert c.api.all(kube.CLAIMS) == []
    c.reconciler.writer = Writer(c.api, c.cache, concurrency=0)  # type: ignore[arg-type]
    seat_comes_back(c)


def test_a_plan_that_cannot_start_forgets_its_assumptions() -> None:
    c = Cluster(devices=1)
    writer = Writer(c.api, c.cache, concurrency=2)  # type: ignore[arg-type]
    writer.close()  # shut down: a submitted plan never runs
    c.reconciler.writer = writer
    c.place("a", "50Gi")
    assert writer.assumed_in_flight() == set() and not writer.busy("a")
    c.reconciler.writer = Writer(c.api, c.cache, concurrency=0)  # type: ignore[arg-type]
    seat_comes_back(c)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def controller(c: Cluster, clock: Clock) -> Controller:
    loop = Controller(c.api, c.settings, concurrency=0, now=c.api.clock,  # type: ignore[arg-type]
                      clock=clock)
    c.cache, c.reconciler = loop.cache, loop.reconciler
    c.sync()
    return loop


def test_an_assumption_nothing_answers_expires_and_gives_its_seat_back() -> None:
    c = Cluster(devices=1)
    clock = Clock()
    loop = controller(c, clock)
    lost: list[Plan] = []
    loop.writer.submit = lost.append  # type: ignore[method-assign]  # the plan is lost
    c.place("a", "50Gi")
    assert assumed(c) == {"pods": ["orw-a"], "resourceclaims": [lost[0].writes[1].name]}
    clock.now += loop.settings.assume_timeout - 1
    assert loop.expire_assumptions() == []
    c.place("b", "50Gi")  # its plan is lost too: what it would have written says why
    (status,) = [w.body["status"] for w in lost[-1].writes if w.subresource == "status"]
    assert status["reason"].startswith("WaitingForCapacity")
    clock.now += 1
    expired = loop.expire_assumptions()
    assert sorted(res.plural for res, _ in expired) == ["pods", "resourceclaims"]
    assert WAKE in loop.queue.due_within(0.0)
    loop.writer.submit = Writer.submit.__get__(loop.writer)  # type: ignore[method-assign]
    c.reconcile("b")
    assert c.status("b")["phase"] == "Placing"


class SlowApi(FakeKube):
    """Creates wait for ``go``: a plan stays in flight as long as the test wants."""

    def __init__(self, go: threading.Event, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.go = go

    def create(self, res: kube.Resource, body: Any, **kwargs: Any) -> Any:
        assert self.go.wait(10)
        return super().create(res, body, **kwargs)


def test_an_assumption_whose_write_is_still_in_flight_is_kept() -> None:
    go = threading.Event()
    api = SlowApi(go)
    clock = Clock()
    cache = Cache("gpu.example.com", clock=clock)
    writer = Writer(api, cache, concurrency=1)  # type: ignore[arg-type]
    pod = {"metadata": {"name": "orw-a", "labels": {"openrl.io/managed": "true"}}}
    cache.assume(kube.PODS, pod)
    writer.submit(Plan("a", [Write("create", kube.PODS, "orw-a", pod, assumed=True)]))
    clock.now += 3600
    assert cache.expire(30, keep=writer.assumed_in_flight()) == []
    go.set()
    writer.close(wait=True)
    assert writer.assumed_in_flight() == set()
    assert cache.stores["pods"].assumed == {} and cache.get(kube.PODS, "orw-a") is not None
