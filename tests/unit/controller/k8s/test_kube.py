"""The API layer: paths, error mapping, and what goes over the wire (a local HTTP server)."""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from kubernetes import client

from controller.k8s import kube


def test_paths() -> None:
    assert kube.PODS.path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert kube.NODES.path("ignored") == "/api/v1/nodes"
    assert kube.WORKERS.path("ns", "w", "status") == \
        "/apis/openrl.io/v1alpha1/namespaces/ns/openrlworkers/w/status"
    assert kube.SLICES.path(None) == "/apis/resource.k8s.io/v1/resourceslices"
    assert kube.CLAIMS.path("ns") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"


@pytest.mark.parametrize(("status", "reason", "kind"), [
    (404, "NotFound", kube.NotFound),
    (409, "AlreadyExists", kube.AlreadyExists),
    (409, "Conflict", kube.Conflict),
    (403, "Forbidden", kube.Forbidden),
    (410, "Expired", kube.Gone),
    (422, "Invalid", kube.Invalid),
    (500, "InternalError", kube.KubeError),
])
def test_errors(status: int, reason: str, kind: type) -> None:
    error = kube._error(status, f'{{"reason": "{reason}", "message": "m"}}'.encode())
    assert type(error) is kind
    assert error.status == status and error.message == "m"


def test_unparseable_error_body() -> None:
    error = kube._error(502, b"<html>bad gateway</html>")
    assert error.status == 502 and "bad gateway" in error.message


class FakeRaw:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt=None, decode_content=True):
        yield from self.chunks


def test_watch_lines_are_split_across_chunks() -> None:
    raw = FakeRaw([b'{"a":', b'1}\n{"b"', b':2}\n\n{"c":3}'])
    assert list(kube._lines(raw)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


# ------------------------------------------------------- against a tiny server


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict]] = []

    def _reply(self, code: int, payload: object, chunks: list[bytes] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        if chunks is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps(payload).encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        entry = {"method": self.command, "path": self.path,
                 "type": self.headers.get("Content-Type"),
                 "body": json.loads(self.rfile.read(length)) if length else None}
        Recorder.seen.append(entry)
        return entry

    def do_GET(self) -> None:
        self._record()
        if "watch=true" in self.path:
            events = [json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in [
                ("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}}),
                ("BOOKMARK", {"metadata": {"resourceVersion": "6"}}),
                ("ERROR", {"code": 410, "reason": "Expired", "message": "too old"}),
            ]]
            self._reply(200, None, chunks=events)
        elif self.path.startswith("/api/v1/nodes?limit=2"):
            # Two pages; the list's version is the first page's.
            last = "continue=" in self.path
            self._reply(200, {
                "items": [{"metadata": {"name": n}} for n in (["c"] if last else ["a", "b"])],
                "metadata": {"resourceVersion": "43" if last else "42",
                             **({} if last else {"continue": "tok"})}})
        elif self.path.startswith("/api/v1/namespaces/ns/pods/missing"):
            self._reply(404, {"kind": "Status", "reason": "NotFound", "message": "nope"})
        else:
            self._reply(200, {"items": [{"metadata": {"name": "p"}}],
                              "metadata": {"resourceVersion": "42"}})

    def do_PATCH(self) -> None:
        entry = self._record()
        self._reply(200, entry["body"])

    def do_POST(self) -> None:
        self._record()
        self._reply(409, {"kind": "Status", "reason": "AlreadyExists", "message": "exists"})

    def do_DELETE(self) -> None:
        self._record()
        self._reply(200, {})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server_api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    hooked: list[tuple[str, str, int]] = []
    api = kube.Kube(client.ApiClient(configuration), "ns",
                    hook=lambda verb, res, code, _s: hooked.append((verb, res, code)))
    Recorder.seen = []
    yield api, hooked
    server.shutdown()


def test_requests_on_the_wire(server_api) -> None:
    api, hooked = server_api
    items, version = api.list_with_version(kube.PODS, label_selector="openrl.io/managed=true")
    assert items == [{"metadata": {"name": "p"}}] and version == "42"
    api.patch(kube.WORKERS, "w", {"status": {"phase": "Running"}}, subresource="status")
    api.delete(kube.CLAIMS, "c", uid="u1", resource_version="7")
    with pytest.raises(kube.AlreadyExists):
        api.create(kube.PODS, {"metadata": {"name": "p"}})
    with pytest.raises(kube.NotFound):
        api.get(kube.PODS, "missing")
    listed, patched, deleted, created, _ = Recorder.seen
    assert listed["path"] == "/api/v1/namespaces/ns/pods?labelSelector=openrl.io/managed%3Dtrue"
    assert patched["path"] == "/apis/openrl.io/v1alpha1/namespaces/ns/openrlworkers/w/status"
    assert patched["type"] == "application/merge-patch+json"
    assert deleted["body"]["preconditions"] == {"uid": "u1", "resourceVersion": "7"}
    assert deleted["body"]["propagationPolicy"] == "Background"
    assert created["method"] == "POST"
    assert hooked == [("list", "pods", 200), ("patch", "openrlworkers/status", 200),
                      ("delete", "resourceclaims", 200), ("create", "pods", 409),
                      ("get", "pods", 404)]
    assert api.calls[("list", "pods")] == 1


def test_watch_streams_events_and_raises_gone(server_api) -> None:
    api, _ = server_api
    seen = []
    with pytest.raises(kube.Gone):
        for kind, obj in api.watch(kube.PODS, "4"):
            seen.append((kind, obj["metadata"].get("name")))
    assert seen == [("ADDED", "a"), ("BOOKMARK", None)]
    assert "resourceVersion=4" in Recorder.seen[0]["path"]
    assert "allowWatchBookmarks=true" in Recorder.seen[0]["path"]


def test_unreachable_server_is_a_kube_error() -> None:
    configuration = client.Configuration(host="http://127.0.0.1:9")
    api = kube.Kube(client.ApiClient(configuration), "ns")
    with pytest.raises(kube.KubeError) as info:
        api.get(kube.PODS, "p")
    assert info.value.status == 0


def test_a_paged_list_is_reduced_page_by_page(server_api) -> None:
    api, _ = server_api
    items, version = api.list_with_version(
        kube.NODES, page=2,
        keep=lambda o: None if o["metadata"]["name"] == "b" else o["metadata"]["name"])
    assert items == ["a", "c"] and version == "42"
    first, second = Recorder.seen
    assert first["path"] == "/api/v1/nodes?limit=2"
    assert second["path"] == "/api/v1/nodes?limit=2&continue=tok"


def test_the_namespace_a_kubeconfig_context_names(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: here\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts:\n- {name: here, context: {cluster: c, user: u}}\n"
        "- {name: there, context: {cluster: c, user: u, namespace: team-b}}\n"
        "users: [{name: u, user: {token: t}}]\n")
    assert kube.context_namespace(str(path)) is None
    assert kube.context_namespace(str(path), "there") == "team-b"
    assert kube.context_namespace(str(path), "nowhere") is None
    assert kube.context_namespace(str(tmp_path / "missing")) is None


def test_a_missing_kubeconfig_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(kube.NoConfig, match=f"kubeconfig {missing}: no such file"):
        kube.load_api_client(missing)
    monkeypatch.setenv("KUBECONFIG", missing)
    with pytest.raises(kube.NoConfig, match=f"KUBECONFIG={missing}: no such file"):
        kube.load_api_client(None)
    # Not in a cluster (no service account token) and no ~/.kube/config: both said.
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(kube.NoConfig, match="not running in a cluster, and no kubeconfig at "
                                              f"{tmp_path}/.kube/config"):
        kube.load_api_client(None)
    with pytest.raises(kube.NoConfig, match=f"context far: no kubeconfig at {tmp_path}"):
        kube.load_api_client(None, "far")
    # The client library's own complaints come out as ours too.
    garbled = tmp_path / "garbled"
    garbled.write_text("clusters: [\n")
    with pytest.raises(kube.NoConfig):
        kube.load_api_client(str(garbled))


def test_a_kubeconfig_from_a_pipe_is_read() -> None:
    # --kubeconfig <(vault read ...): no regular file, but there all the same.
    read, write = os.pipe()
    os.write(write, b"apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    b"clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    b"contexts: [{name: c, context: {cluster: c, user: u}}]\n"
                    b"users: [{name: u, user: {token: t}}]\n")
    os.close(write)
    try:
        api = kube.load_api_client(f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert api.configuration.host == "https://127.0.0.1:1"
