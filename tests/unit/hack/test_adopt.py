"""hack/fakenodes/adopt.py: the nodes an autoscaler adds, adopted and forgotten."""

from __future__ import annotations

import threading
from typing import Any

from hack.fakenodes.adopt import Adopter, profile_for


def test_a_gpu_instance_type_reads_as_its_devices() -> None:
    profile = profile_for({"node.kubernetes.io/instance-type": "gpu-8x80gi"})
    assert profile is not None and (profile.devices, profile.device_memory) == (8, "80Gi")
    assert profile_for({"node.kubernetes.io/instance-type": "c-4x-amd64-linux"}) is None
    assert profile_for({}) is None


class _Api:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    def list(self, res: Any, *, selector: str | None = None) -> list[dict[str, Any]]:
        assert selector == "openrl.io/autoscaled=true"
        return self.nodes


class _Fake:
    """What the adopter asks of FakeNodes."""

    def __init__(self, api: _Api) -> None:
        self._api, self.adopted, self.added, self.forgotten = api, set(), [], []
        self.stop = threading.Event()

    def api(self) -> _Api:
        return self._api

    def add(self, name: str, profile: Any, labels: dict[str, str]) -> None:
        self.added.append((name, profile.devices))

    def forget(self, name: str) -> None:
        self.adopted.discard(name)
        self.forgotten.append(name)


def _node(name: str, kind: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"node.kubernetes.io/instance-type": kind}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"metadata": meta}


def test_nodes_adopted_once_and_forgotten_when_gone() -> None:
    api = _Api([_node("kwok-a", "gpu-8x80gi"), _node("kwok-cpu", "c-1x-amd64-linux")])
    fake = _Fake(api)
    adopter = Adopter(fake, "openrl.io/autoscaled=true")  # type: ignore[arg-type]
    adopter.step()
    adopter.step()
    assert fake.added == [("kwok-a", 8)] and fake.adopted == {"kwok-a"}
    api.nodes = [_node("kwok-a", "gpu-8x80gi", deleting=True)]
    adopter.step()
    assert fake.forgotten == ["kwok-a"] and fake.adopted == set()
