"""The testbed's client layer against a recording HTTP server: what goes on the wire, and
which answers come back as return values rather than errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from kubernetes import client

from hack.lib import kube


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    nodes: ClassVar[dict[str, dict[str, Any]]] = {}

    def _record(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        entry = {"method": self.command, "path": self.path, "body": body,
                 "type": self.headers.get("Content-Type")}
        Recorder.seen.append(entry)
        return entry

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str) -> None:
        self._reply(code, {"kind": "Status", "code": code, "reason": reason,
                           "message": f"the server says {reason}"})

    def _node(self) -> str | None:
        prefix = "/api/v1/nodes/"
        return self.path[len(prefix):] if self.path.startswith(prefix) else None

    def do_GET(self) -> None:
        self._record()
        name = self._node()
        if name is None:
            self._reply(200, {"items": list(Recorder.nodes.values())})
        elif name in Recorder.nodes:
            self._reply(200, Recorder.nodes[name])
        else:
            self._status(404, "NotFound")

    def do_PATCH(self) -> None:
        entry = self._record()
        name = self._node()
        if name not in Recorder.nodes:
            self._status(404, "NotFound")
            return
        labels = Recorder.nodes[name]["metadata"].setdefault("labels", {})
        for key, value in entry["body"]["metadata"]["labels"].items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        self._reply(200, Recorder.nodes[name])

    def do_POST(self) -> None:
        self._record()
        if "forbidden" in self.path:
            self._status(403, "Forbidden")
        else:
            self._status(409, "AlreadyExists")

    def do_DELETE(self) -> None:
        entry = self._record()
        if (entry["body"] or {}).get("preconditions"):
            self._status(409, "Conflict")  # not that uid
        else:
            self._status(404, "NotFound")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[kube.Kube]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    Recorder.seen = []
    Recorder.nodes = {"n1": {"metadata": {"name": "n1", "labels": {"openrl.io/enabled": "x"}}}}
    yield kube.Kube(client.ApiClient(configuration), "ns", timeout=5)
    server.shutdown()


def test_expected_answers_are_return_values(api: kube.Kube) -> None:
    assert api.get(kube.NODES, "gone") is None
    assert api.create(kube.WORKERS, {"metadata": {"name": "w"}}) is None
    assert api.patch(kube.NODES, "gone", {"metadata": {"labels": {}}}) is None
    assert api.delete(kube.PODS, "p") is False
    assert api.delete(kube.PODS, "p", grace=0, uid="u1") is False
    assert api.requests == 5
    paths = [(e["method"], e["path"]) for e in Recorder.seen]
    assert paths == [
        ("GET", "/api/v1/nodes/gone"),
        ("POST", "/apis/openrl.io/v1alpha1/namespaces/ns/openrlworkers"),
        ("PATCH", "/api/v1/nodes/gone"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p"),
    ]
    assert Recorder.seen[2]["type"] == "application/merge-patch+json"
    assert Recorder.seen[4]["body"] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}


def test_a_refusal_is_a_kube_error_naming_the_request(api: kube.Kube) -> None:
    with pytest.raises(kube.KubeError) as info:
        api.create(kube.PODS, {"metadata": {"name": "p"}}, namespace="forbidden")
    assert info.value.status == 403 and info.value.reason == "Forbidden"
    assert "POST /api/v1/namespaces/forbidden/pods" in str(info.value)
    refused = kube.refusal(lambda: api.create(kube.PODS, {}, namespace="forbidden"))
    assert refused is not None and refused.status == 403
    assert kube.refusal(lambda: api.get(kube.NODES, "n1")) is None


def test_label_node_sets_and_removes_and_tells_what_was_there(api: kube.Kube) -> None:
    before = api.label_node("n1", {"openrl.io/enabled": "true",
                                   "openrl.io/max-workers-per-claim": "2"})
    assert before == {"openrl.io/enabled": "x", "openrl.io/max-workers-per-claim": None}
    assert Recorder.nodes["n1"]["metadata"]["labels"] == {
        "openrl.io/enabled": "true", "openrl.io/max-workers-per-claim": "2"}
    api.label_node("n1", before)  # restoring: None removes
    assert Recorder.nodes["n1"]["metadata"]["labels"] == {"openrl.io/enabled": "x"}
    assert api.label_node("gone", {"a": "b"}) is None


def test_a_namespaced_resource_needs_a_namespace() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        kube.PODS.path(None)
    assert kube.NODES.path("ignored", "a/b") == "/api/v1/nodes/a%2Fb"


def test_unreachable_server_is_a_kube_error() -> None:
    configuration = client.Configuration(host="http://127.0.0.1:9")
    api = kube.Kube(client.ApiClient(configuration), "ns", timeout=2)
    with pytest.raises(kube.KubeError) as info:
        api.list(kube.PODS)
    assert info.value.status == 0


def test_a_missing_kubeconfig_is_named(tmp_path: Any) -> None:
    with pytest.raises(kube.KubeError, match=r"nowhere\.kubeconfig"):
        kube.api_client(tmp_path / "nowhere.kubeconfig")


def test_wait_for_is_bounded() -> None:
    calls = []

    def never() -> tuple[bool, str]:
        calls.append(1)
        return False, "still not"

    done, took, detail = kube.wait_for("nothing", 0.05, never, every=0.01)
    assert not done and detail == "still not" and took >= 0.05 and len(calls) >= 2
    assert kube.wait_for("at once", 10, lambda: (True, "ok"))[0]
