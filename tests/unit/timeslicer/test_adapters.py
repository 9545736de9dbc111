"""The sidecars against fake vLLM and SGLang servers on 127.0.0.1 and a fake agent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.unit.timeslicer.fake_agent import FakeAgent
from timeslicer.adapters import Sidecar, loopback_url
from timeslicer.adapters import main as adapter_main
from timeslicer.adapters.sglang import SglangServer
from timeslicer.adapters.vllm import VllmServer


class FakeServer:
    """vLLM's or SGLang's sleep endpoints, holding one bit: asleep or not."""

    def __init__(self) -> None:
        self.asleep = False
        self.fail_sleep = False
        self.calls: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _answer(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.calls.append(f"GET {self.path}")
                if self.path == "/is_sleeping":
                    self._answer(200, {"is_sleeping": fake.asleep})
                elif self.path == "/get_model_info":
                    self._answer(200, {"model_path": "m"})
                else:
                    self._answer(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                fake.calls.append(f"POST {self.path} {body.decode()}".strip())
                if self.path in ("/sleep?level=1", "/release_memory_occupation"):
                    if fake.fail_sleep:
                        return self._answer(500, {"error": "busy"})
                    fake.asleep = True
                elif self.path in ("/wake_up", "/resume_memory_occupation"):
                    fake.asleep = False
                else:
                    return self._answer(404)
                return self._answer(200)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def posts(self) -> list[str]:
        return [c for c in self.calls if c.startswith("POST")]


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    fake = FakeAgent()
    yield fake
    fake.stop()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def _sidecar(kind: str, server: FakeServer, agent: FakeAgent) -> Sidecar:
    made = VllmServer(server.url) if kind == "vllm" else SglangServer(server.url)
    sidecar = Sidecar(made, str(agent.path), poll=0.05)
    assert sidecar.start(threading.Event())
    return sidecar


def _steps(sidecar: Sidecar, n: int = 5) -> None:
    for _ in range(n):
        sidecar.step()


PARK = {"vllm": "POST /sleep?level=1", "sglang": "POST /release_memory_occupation {}"}
RESTORE = {"vllm": "POST /wake_up", "sglang": "POST /resume_memory_occupation {}"}


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_a_turn_parks_on_yield_and_restores_on_grant(kind: str, server: FakeServer,
                                                     agent: FakeAgent) -> None:
    agent.state = "Resident"  # the server came up holding memory, and the turn is free
    sidecar = _sidecar(kind, server, agent)
    agent.wait_for("want")
    assert agent.received[:2] == [{"op": "hello", "v": 2, "resident": True, "turn": 0},
                                  {"op": "want"}]
    agent.send({"op": "yield", "grace": 5, "turn": 0})
    _steps(sidecar)
    assert agent.wait_for("parked") == {"op": "parked", "turn": 0}
    assert server.asleep and server.posts() == [PARK[kind]]
    agent.send({"op": "grant", "turn": 1})
    _steps(sidecar)
    assert agent.wait_for("resident") == {"op": "resident", "turn": 1}
    assert not server.asleep and server.posts() == [PARK[kind], RESTORE[kind]]


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_a_failed_park_is_never_reported_as_parked(kind: str, server: FakeServer,
                                                   agent: FakeAgent) -> None:
    agent.state = "Resident"
    sidecar = _sidecar(kind, server, agent)
    server.fail_sleep = True
    agent.send({"op": "yield", "grace": 5, "turn": 0})
    _steps(sidecar)
    assert "parked" not in agent.ops()
    assert server.posts().count(PARK[kind]) >= 2  # it keeps trying within the grace
    server.fail_sleep = False
    _steps(sidecar)
    agent.wait_for("parked")


def test_vllm_asleep_at_start_says_so_and_a_restart_awake_is_parked(server: FakeServer,
                                                                    agent: FakeAgent) -> None:
    server.asleep = True
    sidecar = _sidecar("vllm", server, agent)
    assert agent.wait_for("hello")["resident"] is False
    server.asleep = False  # the server restarted: loaded, without the turn
    _steps(sidecar, 2)
    assert server.asleep and server.posts() == ["POST /sleep?level=1"]
    agent.wait_for("parked")


def test_the_sidecar_survives_an_agent_restart(server: FakeServer, agent: FakeAgent) -> None:
    agent.state = "Resident"
    sidecar = _sidecar("vllm", server, agent)
    agent.restart()
    _steps(sidecar, 10)
    assert agent.wait_for("hello", 2) == {"op": "hello", "v": 2, "resident": True, "turn": 0}
    agent.wait_for("want", 2)
    assert server.posts() == []  # still the holder: nothing parked


def test_the_sidecar_waits_for_the_server_and_says_nothing_while_it_is_down(
        agent: FakeAgent) -> None:
    sidecar = Sidecar(VllmServer("http://127.0.0.1:9"), str(agent.path), poll=0.01)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    assert sidecar.start(stop) is False
    assert agent.ops() == []


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000", "http://example.com", "ftp://127.0.0.1"])
def test_only_loopback_servers_are_driven(url: str) -> None:
    with pytest.raises(ValueError, match=r"not loopback|must be an http"):
        loopback_url(url)
    assert loopback_url("http://localhost:8000/") == "http://localhost:8000"
    assert loopback_url("http://[::1]:30000") == "http://[::1]:30000"
    assert loopback_url("http://10.0.0.5:8000", allow_remote=True) == "http://10.0.0.5:8000"


def test_the_command_refuses_a_remote_server_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        adapter_main("vllm", VllmServer, ["--server", "http://10.1.2.3", "--socket", "/x"])
    assert exit_.value.code == 2
    assert "host '10.1.2.3' is not loopback" in capsys.readouterr().err


# -- the races the fencing is for, driven through a fake server ----------------------------


def test_a_park_that_crosses_its_grant_is_fenced_and_the_grant_still_restores(
        server: FakeServer, agent: FakeAgent) -> None:
    server.asleep = True
    sidecar = _sidecar("vllm", server, agent)
    agent.wait_for("want")
    # The grant is on the wire when the server comes back awake (it restarted): the sidecar
    # parks it and says so before reading the grant.
    agent.send({"op": "grant", "turn": 3})
    server.asleep = False
    sidecar.step()
    assert agent.wait_for("parked") == {"op": "parked", "turn": 0}  # names no turn it had
    _steps(sidecar)
    assert agent.wait_for("resident") == {"op": "resident", "turn": 3}
    assert not server.asleep and server.posts() == ["POST /sleep?level=1", "POST /wake_up"]


def _restored(server: FakeServer, agent: FakeAgent, turn: int) -> Sidecar:
    """A vLLM sidecar that started asleep, was granted ``turn`` and restored."""
    server.asleep = True
    sidecar = _sidecar("vllm", server, agent)
    agent.send({"op": "grant", "turn": turn})
    _steps(sidecar, 2)
    agent.wait_for("resident")
    return sidecar


def test_an_agent_restart_mid_turn_says_resident_with_its_turn(
        server: FakeServer, agent: FakeAgent) -> None:
    sidecar = _restored(server, agent, turn=6)
    agent.restart()
    agent.restart()  # twice, before any welcome is read
    _steps(sidecar, 5)
    hellos = [m for m in agent.received if m["op"] == "hello"][1:]
    assert hellos and all(h["resident"] is True and h["turn"] == 6 for h in hellos)
    assert server.posts() == ["POST /wake_up"]  # nothing parked


def test_a_yield_lost_with_the_connection_is_told_again_and_parks(
        server: FakeServer, agent: FakeAgent) -> None:
    sidecar = _restored(server, agent, turn=2)
    # The agent asks it to yield on a connection that drops before the sidecar reads it;
    # the restarted agent tells it again with the time left.
    agent.after_hello = [{"op": "yield", "grace": 4, "turn": 2}]
    agent.send({"op": "yield", "grace": 5, "turn": 2})
    agent.restart()
    _steps(sidecar, 5)
    assert server.asleep
    # Said as parked (turn 2), or, if that went down the dropped connection, by the hello.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        heard = [m for m in agent.received if m["op"] in ("parked", "hello")][-1]
        if heard in ({"op": "parked", "turn": 2},
                     {"op": "hello", "v": 2, "resident": False, "turn": 2}):
            break
        sidecar.step()
    else:
        raise AssertionError(f"the agent never heard turn 2 parked: {agent.received}")


def test_a_resident_server_welcomed_without_the_turn_parks_only_when_asked(
        server: FakeServer, agent: FakeAgent) -> None:
    agent.state = "Waiting"  # the welcome says another holds the turn...
    agent.after_hello = [{"op": "grant", "turn": 9}]  # ...but the grant follows it
    sidecar = _sidecar("vllm", server, agent)
    _steps(sidecar, 3)
    assert server.posts() == [] and "parked" not in agent.ops()
    assert sidecar.client is not None and sidecar.client.holds_turn
