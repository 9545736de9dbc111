"""Events on workers: a name the API server takes, whatever the worker's name."""

from __future__ import annotations

import re

import pytest

from controller.k8s import kube
from controller.k8s.events import Recorder
from tests.unit.controller.fake_kube import FakeKube

SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@pytest.mark.parametrize("name", [
    "w",
    "a" * 199 + ".b" * 27,  # the 200-character cut ends on a '.'
    "a" * 199 + "-" + "b" * 53,  # ... or on a '-'
    ("x" * 63 + ".") * 3 + "y" * 61,  # 253 characters of 63-character labels
])
def test_an_events_name_is_a_valid_object_name(name: str) -> None:
    api = FakeKube()
    worker = {"metadata": {"name": name, "uid": "u1", "namespace": "openrl"}}
    Recorder(api, "test", api.clock).record(worker, "Normal", "Placed", "Place", "placed")  # type: ignore[arg-type]
    (event,) = api.all(kube.EVENTS)
    event_name = event["metadata"]["name"]
    assert len(event_name) <= 253 and SUBDOMAIN.fullmatch(event_name), event_name
