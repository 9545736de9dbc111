"""A worker's spec read once: ``spec.movable`` reaches placement's request, a wrong type is
a spec error, never an exception."""

from __future__ import annotations

from typing import Any

from controller.k8s.objects import Worker


def worker(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "w", "uid": "u1"},
            "spec": {"role": "sampler", "modelId": "m", "memory": "10Gi", **spec}}


def test_movable_reaches_the_request_placement_is_asked() -> None:
    assert Worker.from_obj(worker(movable=True)).request.movable is True
    # Absent (a spec written before the field, or an API server that did not default it).
    assert Worker.from_obj(worker()).request.movable is False
    assert Worker.from_obj(worker(movable=False)).spec_error is None


def test_movable_and_exclusive_that_are_not_booleans_are_spec_errors() -> None:
    read = Worker.from_obj(worker(movable="yes", exclusive=1))
    assert read.spec_error == ("spec.exclusive 1 is not true or false; "
                               "spec.movable 'yes' is not true or false")
    assert read.request.movable is False and read.request.exclusive is False
