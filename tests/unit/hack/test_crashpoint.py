"""hack/crashpoint.py: the planted crash meets exactly its request, and the product is unchanged."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from controller.k8s import kube
from hack import crashpoint
from hack.crashpoint import CrashPoint


class Answer:
    def __init__(self, status: int) -> None:
        self.status = status
        self.data = b'{"reason": "AlreadyExists"}' if status == 409 else b"{}"

    def read(self) -> bytes:
        return self.data


class FakeApi:
    """Just enough of the client's ApiClient for ``Kube._send``; 409 for names in ``taken``."""

    def __init__(self, taken: frozenset[str] = frozenset()) -> None:
        self.sent: list[tuple[str, str]] = []
        self.taken = taken

    def param_serialize(self, method: str, resource_path: str, body: Any = None,
                        **_: Any) -> tuple[Any, ...]:
        return method, resource_path, {}, body, None

    def call_api(self, method: str, url: str, body: Any = None, **_: Any) -> Answer:
        self.sent.append((method, url))
        name = (body or {}).get("metadata", {}).get("name", "")
        return Answer(409 if name in self.taken else 200)


Kills = list[tuple[int, int]]  # (requests sent when it came, signal)


@contextlib.contextmanager
def planted(spec: str, api: FakeApi) -> Iterator[Kills]:
    kills: Kills = []
    unplant = crashpoint.plant(CrashPoint.parse(spec),
                               kill=lambda _pid, sig: kills.append((len(api.sent), sig)))
    try:
        yield kills
    finally:
        unplant()


def pods(api: FakeApi, count: int) -> None:
    k = kube.Kube(api, "ns")  # type: ignore[arg-type]
    for i in range(count):
        k.get(kube.PODS, f"p{i}")  # another verb: not counted toward create
        with contextlib.suppress(kube.AlreadyExists):
            k.create(kube.PODS, {"metadata": {"name": f"p{i}"}})


@pytest.mark.parametrize(("when", "sent", "sig"), [
    ("before", 5, signal.SIGKILL),  # p0, p1 each got and created, p2 got: its create not sent
    ("stop", 5, signal.SIGSTOP),
    ("after", 6, signal.SIGKILL),  # p2's create answered
])
def test_the_kth_request_of_its_verb_and_resource(when: str, sent: int, sig: int) -> None:
    api = FakeApi()
    with planted(f"create:pods:3:{when}", api) as kills:
        pods(api, 5)
        assert kills == [(sent, sig)]


def test_a_refused_request_raises_kills_nothing_and_is_not_counted_after() -> None:
    """The second create is refused (p1 exists): nothing is killed then, and the point
    waits for the second answered create (p2's), as a write written again after a
    conflict is the write the point means."""
    api = FakeApi(taken=frozenset({"p1"}))
    with planted("create:pods:2:after", api) as kills:
        pods(api, 2)
        assert kills == []  # p1's create refused: raised, not counted
        pods(api, 3)  # p0's create answered again: the second answered one
        assert kills == [(6, signal.SIGKILL)]


def test_a_subresource_is_named_as_rbac_names_it() -> None:
    api = FakeApi()
    with planted("patch:openrlworkers/status:1:before", api) as kills:
        k = kube.Kube(api, "ns")  # type: ignore[arg-type]
        k.patch(kube.WORKERS, "w", {"metadata": {}})
        assert kills == []
        k.patch(kube.WORKERS, "w", {"status": {}}, subresource="status")
        assert kills == [(1, signal.SIGKILL)]


def test_unplanted_the_client_is_the_products_own() -> None:
    original = kube.Kube._send
    unplant = crashpoint.plant(CrashPoint.parse("get:pods:1:before"))
    assert kube.Kube._send is not original
    unplant()
    assert kube.Kube._send is original


@pytest.mark.parametrize("spec", ["", "create:pods:3", "create:pods:0:before",
                                  "create:pods:x:before", "create::3:before",
                                  "create:pods:3:later"])
def test_a_bad_spec_is_refused_naming_it(spec: str) -> None:
    with pytest.raises(ValueError, match=f"crash point {spec!r}: want VERB:RESOURCE:K:WHEN"):
        CrashPoint.parse(spec)
    if spec:
        with pytest.raises(ValueError, match="crash point"):
            crashpoint.launcher(spec)


def test_the_launcher_runs_the_plain_command_when_nothing_is_planted() -> None:
    assert crashpoint.launcher("")[-1] == "controller"
    assert crashpoint.launcher("create:pods:1:stop")[-3:] == [
        "-m", "hack.crashpoint", "create:pods:1:stop"]
