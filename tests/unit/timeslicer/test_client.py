"""The worker's client against a fake agent on a real Unix socket, in both forms."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.unit.timeslicer.fake_agent import FakeAgent
from timeslicer import AgentError, AgentUnavailable, AsyncTurnClient, TurnClient, TurnError


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    fake = FakeAgent()
    yield fake
    fake.stop()


def test_a_turn_from_want_to_parked(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        assert turn.welcome is not None and turn.welcome.member == "pod-1"
        turn.want()
        assert turn.wait_for_turn(0.05) is False
        agent.send({"op": "grant"})
        assert turn.wait_for_turn(5) is True
        turn.resident()
        assert turn.yield_requested() is None
        agent.send({"op": "yield", "grace": 30})
        asked = turn.wait_for_yield(5)
        assert asked is not None and asked.grace == 30.0 and 0 < asked.remaining() <= 30
        turn.parked()
        agent.wait_for("parked")
        assert not turn.holds_turn and turn.yield_requested() is None
    assert agent.ops() == ["hello", "want", "resident", "parked"]
    assert agent.received[0] == {"op": "hello", "v": 1, "resident": False}


def test_the_socket_comes_from_the_environment(agent: FakeAgent,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENRL_TURN_SOCKET", str(agent.path))
    with TurnClient(connect_timeout=5) as turn:
        assert turn.path == str(agent.path)
    monkeypatch.delenv("OPENRL_TURN_SOCKET")
    with pytest.raises(TurnError, match="OPENRL_TURN_SOCKET is not set"):
        TurnClient()


def test_a_restarted_agent_hears_hello_again_with_resident_and_want(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.send({"op": "grant"})
        assert turn.wait_for_turn(5)
        turn.resident()
        agent.wait_for("resident")
        agent.state = "Resident"
        agent.restart()
        assert turn.wait_for_yield(0.3) is None  # reading finds the agent gone, and back
        # Still the holder once welcomed again: the hello said resident.
        assert turn.wait_for_turn(5) and turn.welcome is not None
        assert agent.wait_for("hello", 2) == {"op": "hello", "v": 1, "resident": True}
        agent.wait_for("want", 2)
        agent.state = "Waiting"
        turn.parked()
        agent.restart()
        assert turn.wait_for_turn(0.5) is False
        assert agent.wait_for("hello", 3)["resident"] is False


def test_while_the_agent_is_away_a_wait_just_times_out(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.stop()
        assert turn.wait_for_turn(0.2) is False and turn.wait_for_yield(0.1) is None
        agent.start()
        assert turn.wait_for_turn(0.3) is False
        assert agent.wait_for("hello", 2)["resident"] is False


def test_no_agent_is_a_clear_error_within_the_timeout() -> None:
    with pytest.raises(AgentUnavailable, match=r"/nowhere/turn\.sock"):
        TurnClient("/nowhere/turn.sock").connect(timeout=0.2)


def test_an_agent_error_or_a_bad_line_is_raised_on_the_next_call(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        agent.send({"op": "error", "message": "resident before a grant"})
        with pytest.raises(AgentError, match="resident before a grant"):
            turn.wait_for_turn(1)
        agent.send(b"{oops\n")
        with pytest.raises(AgentError, match="not JSON"):
            turn.wait_for_turn(1)
        agent.send({"op": "grant"})
        assert turn.wait_for_turn(5)


def test_the_asyncio_client_takes_a_turn_and_reconnects(agent: FakeAgent) -> None:
    async def story() -> None:
        async with AsyncTurnClient(agent.path, resident=True, connect_timeout=5) as turn:
            await turn.want()
            agent.send({"op": "grant"})
            assert await turn.wait_for_turn(5)
            await turn.resident()
            agent.send({"op": "yield", "grace": 2})
            asked = await turn.wait_for_yield(5)
            assert asked is not None and asked.grace == 2.0
            assert turn.yield_requested() == asked
            await turn.parked()
            agent.restart()
            assert await turn.wait_for_turn(0.3) is False
            assert turn.welcome is not None

    asyncio.run(story())
    assert agent.received[0]["resident"] is True
    assert agent.wait_for("hello", 2) == {"op": "hello", "v": 1, "resident": False}
    agent.wait_for("want", 2)
