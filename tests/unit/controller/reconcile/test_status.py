import datetime as dt

from controller.k8s.objects import Worker
from controller.reconcile import status
from controller.reconcile.vocabulary import Outcome
from tests.unit.controller.conftest import worker_obj

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def worker(current: dict | None = None, **spec: object) -> Worker:
    obj = worker_obj("w", "60Gi", **spec)
    obj["metadata"].update(uid="u", generation=3)
    if current:
        obj["status"] = current
    return Worker.from_obj(obj)


def test_pending_carries_the_placement_reason() -> None:
    new = status.desired(worker(), Outcome("Pending", "WaitingForCapacity", "no free device"), T0)
    assert new["phase"] == "Pending"
    assert new["reason"] == "WaitingForCapacity: no free device"
    assert new["claimName"] is None and new["nodeName"] is None
    assert new["observedGeneration"] == 3
    (cond,) = new["conditions"]
    assert cond == {"type": "Placed", "status": "False", "reason": "WaitingForCapacity",
                    "message": "no free device", "observedGeneration": 3,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_placing_reports_shape_and_parked_footprint() -> None:
    new = status.desired(worker(estimatorVersion="v7"),
                         Outcome("Placing", "Placed", "new claim", claim="c", devices=1,
                                 memory_per_device=60 << 30, pod="orw-w"), T0)
    assert new["deviceCount"] == 1
    assert new["memoryPerDevice"] == "60Gi"
    assert new["hostMemoryWhenParked"] == "60Gi"
    assert new["estimatorVersion"] == "v7"
    assert new["nodeName"] is None  # not until the allocation is observed
    assert new["conditions"][0]["status"] == "True"


def test_transition_time_holds_while_condition_status_holds() -> None:
    first = status.desired(worker(), Outcome("Placing", "Placed", "a", claim="c", devices=1,
                                             memory_per_device=1), T0)
    later = status.desired(worker(first), Outcome("Running", "Running", "b", claim="c",
                                                  devices=1, memory_per_device=1), T1)
    assert later["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    failed = status.desired(worker(later), Outcome("Failed", "PodFailed", "x"), T1)
    assert failed["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:05:00Z"


def test_changed_ignores_timestamps_only() -> None:
    outcome = Outcome("Pending", "NoCapacity", "nothing fits")
    first = status.desired(worker(), outcome, T0)
    stored = {k: v for k, v in first.items() if v is not None}
    assert not status.changed(worker(stored), status.desired(worker(stored), outcome, T1))
    other = Outcome("Pending", "NoCapacity", "nothing fits at all")
    assert status.changed(worker(stored), status.desired(worker(stored), other, T1))


def test_events_on_phase_changes_and_pending_kind_changes() -> None:
    pending = {k: v for k, v in status.desired(
        worker(), Outcome("Pending", "NoCapacity", "x"), T0).items() if v is not None}
    w = worker(pending)
    assert not status.transition(w, Outcome("Pending", "NoCapacity", "y"))
    assert status.transition(w, Outcome("Pending", "WaitingForCapacity", "y"))
    assert status.transition(w, Outcome("Placing", "Placed", "y"))
    placing = worker({"phase": "Placing", "conditions": [{"type": "Placed", "reason": "Placed"}]})
    assert not status.transition(placing, Outcome("Placing", "Placed", "pod starting"))
    assert status.event_type(Outcome("Failed", "PodConflict")) == "Warning"
    assert status.event_type(Outcome("Pending", "WaitingForCapacity")) == "Normal"
