"""hack/chaos.py: what a round that did not converge prints about each unsettled worker."""

from __future__ import annotations

from typing import Any

import pytest

from hack import chaos
from hack.lib import invariants as inv


class StubApi:
    def __init__(self, pods: dict[str, dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self._pods, self._nodes = pods, nodes

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes

    def pod(self, name: str) -> dict[str, Any] | None:
        return self._pods.get(name)


def test_an_unsettled_worker_is_explained_by_its_pod_and_node(
        capsys: pytest.CaptureFixture[str]) -> None:
    shelved = {"metadata": {"name": "orw-a"}, "spec": {}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable",
                                            "message": "0/3 nodes are available"}]}}
    bound = {"metadata": {"name": "orw-b"}, "spec": {"nodeName": "n"},
             "status": {"phase": "Pending", "conditions": [
                 {"type": "PodScheduled", "status": "True"}]}}
    node = {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}
    api = StubApi({"orw-a": shelved, "orw-b": bound}, [node])
    left = [inv.Violation("final", w, f"worker {w} is Placing") for w in ("a", "b", "c")]
    chaos.explain_unsettled(api, left)  # type: ignore[arg-type]
    assert capsys.readouterr().out.splitlines() == [
        "    a: pod orw-a Pending on no node; PodScheduled False Unschedulable "
        "0/3 nodes are available",
        "    b: pod orw-b Pending on n (node ready); PodScheduled True",
        "    c: no pod",
    ]
