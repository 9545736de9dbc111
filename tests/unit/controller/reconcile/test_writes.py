"""The write table: what each kind of failed write means for its worker, and a plan
that finishes its worker's story itself (no second writer, no trip through the loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.k8s import kube
from controller.reconcile.vocabulary import Write
from controller.reconcile.writes import (
    NotLeading,
    Plan,
    Then,
    Verdict,
    Writer,
    after_failure,
)
from controller.store.cache import Cache
from tests.unit.controller.fake_kube import FakeKube

POD = Write("create", kube.PODS, "orw-w", {"metadata": {"name": "orw-w"}})
CLAIM = Write("create", kube.CLAIMS, "c", {"metadata": {"name": "c"}})
STATUS = Write("patch", kube.WORKERS, "w", {}, subresource="status")
DELETE = Write("delete", kube.PODS, "orw-w", {})


@pytest.mark.parametrize(("write", "error", "then"), [
    (POD, NotLeading(0, "NotLeading", "lease"), Verdict.DROP),
    (STATUS, kube.NotFound(404, "NotFound", "gone"), Verdict.DROP),
    (DELETE, kube.NotFound(404, "NotFound", "gone"), Then.GO_ON),
    (POD, kube.AlreadyExists(409, "AlreadyExists", "exists"), Then.SETTLE),
    (CLAIM, kube.AlreadyExists(409, "AlreadyExists", "exists"), Verdict.RETRY),
    (POD, kube.Invalid(422, "Invalid", "spec.containers: Required value"), Then.REFUSED),
    (POD, kube.Forbidden(403, "Forbidden", 'violates PodSecurity "restricted"'), Then.REFUSED),
    (POD, kube.Forbidden(403, "Forbidden", 'User "x" cannot create pods'), Verdict.RETRY),
    (CLAIM, kube.Conflict(409, "Conflict", "stale"), Verdict.SOON),
    (Write("delete", kube.CLAIMS, "c", {}), kube.Conflict(409, "Conflict", "rv"), Then.GO_ON),
    (DELETE, kube.Conflict(409, "Conflict", "uid precondition"), Verdict.SOON),
    (CLAIM, kube.KubeError(500, "InternalError", "boom"), Verdict.RETRY),
])
def test_each_failure_has_one_meaning(write: Write, error: kube.KubeError,
                                      then: Verdict | Then) -> None:
    assert after_failure(write, error) == then


def run(plan: Plan, api: FakeKube) -> list[tuple[object, ...]]:
    reported: list[tuple[object, ...]] = []
    Writer(api, Cache("gpu.example.com"), concurrency=0,  # type: ignore[arg-type]
           done=lambda *args: reported.append(args)).submit(plan)
    return reported


def test_a_refused_pod_finishes_in_its_own_plan_and_stops_the_rest() -> None:
    api = FakeKube()
    api.fail_next[("create", "pods")] = kube.Invalid(422, "Invalid", "bad")
    follow = Write("create", kube.CLAIMS, "why", {"metadata": {"name": "why"}})
    plan = Plan("w", [CLAIM, POD, STATUS],
                refused=lambda error: (Plan("w", [follow]), Verdict.DROP))
    ((key, failed, error, verdict),) = run(plan, api)
    assert (key, failed, verdict) == ("w", POD, Verdict.DROP)
    assert isinstance(error, kube.Invalid)
    assert {n["metadata"]["name"] for n in api.all(kube.CLAIMS)} == {"c", "why"}
    assert api.calls[("patch", "openrlworkers")] == 0  # the status after the pod never went


def test_a_delete_of_something_gone_goes_on() -> None:
    api = FakeKube()
    plan = Plan("w", [DELETE, CLAIM])
    assert run(plan, api) == [("w", None, None, None)]
    assert api.obj(kube.CLAIMS, "c") is not None


def test_the_pools_default_width_is_the_loops() -> None:
    """One figure, 16 plans in flight: the writer's default, the loop's and design.md's."""
    from controller import loop
    from controller.reconcile.writes import CONCURRENCY

    writer = Writer(FakeKube(), Cache("gpu.example.com"))
    try:
        assert writer.concurrency == CONCURRENCY == loop.WRITE_CONCURRENCY == 16
    finally:
        writer.close()
    assert f"writes.py`, {CONCURRENCY} in" in " ".join(
        (Path(__file__).resolve().parents[4] / "docs" / "design.md").read_text().split())
