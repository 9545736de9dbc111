"""The API layer's paths and error mapping (no server needed)."""

import pytest

from controller import kube


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
