"""The worker's client against a fake agent on a real Unix socket, in both forms."""

from __future__ import annotations

import asyncio
import time
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
        agent.send({"op": "grant", "turn": 7})
        assert turn.wait_for_turn(5) is True and turn.turn == 7
        turn.resident()
        assert turn.yield_requested() is None
        agent.send({"op": "yield", "grace": 30, "turn": 7})
        asked = turn.wait_for_yield(5)
        assert asked is not None and asked.grace == 30.0 and 0 < asked.remaining() <= 30
        turn.parked()
        agent.wait_for("parked")
        assert not turn.holds_turn and turn.yield_requested() is None
    assert agent.ops() == ["hello", "want", "resident", "parked"]
    assert agent.received[0] == {"op": "hello", "v": 2, "resident": False, "turn": 0}
    assert agent.received[2:] == [{"op": "resident", "turn": 7}, {"op": "parked", "turn": 7}]


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
        agent.send({"op": "grant", "turn": 3})
        assert turn.wait_for_turn(5)
        turn.resident()
        agent.wait_for("resident")
        agent.state = "Resident"
        agent.restart()
        assert turn.wait_for_yield(0.3) is None  # reading finds the agent gone, and back
        # Still the holder once welcomed again: the hello said resident, naming its turn.
        assert turn.wait_for_turn(5) and turn.welcome is not None
        assert agent.wait_for("hello", 2) == {"op": "hello", "v": 2, "resident": True,
                                              "turn": 3}
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
        agent.send({"op": "grant", "turn": 1})
        assert turn.wait_for_turn(5)


def test_the_asyncio_client_takes_a_turn_and_reconnects(agent: FakeAgent) -> None:
    async def story() -> None:
        async with AsyncTurnClient(agent.path, resident=True, connect_timeout=5) as turn:
            await turn.want()
            agent.send({"op": "grant", "turn": 1})
            assert await turn.wait_for_turn(5)
            await turn.resident()
            agent.send({"op": "yield", "grace": 2, "turn": 1})
            asked = await turn.wait_for_yield(5)
            assert asked is not None and asked.grace == 2.0
            assert turn.yield_requested() == asked
            await turn.parked()
            agent.restart()
            assert await turn.wait_for_turn(0.3) is False
            assert turn.welcome is not None

    asyncio.run(story())
    assert agent.received[0]["resident"] is True
    assert agent.wait_for("hello", 2) == {"op": "hello", "v": 2, "resident": False, "turn": 1}
    agent.wait_for("want", 2)


def test_a_grant_not_above_the_last_turn_parked_is_never_taken_for_a_turn(
        agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.send({"op": "grant", "turn": 5})
        assert turn.wait_for_turn(5)
        turn.resident()
        turn.parked()
        for stale in (5, 4):  # a duplicate, and an older one
            agent.send({"op": "grant", "turn": stale})
            assert turn.wait_for_turn(0.2) is False
        agent.send({"op": "yield", "grace": 1, "turn": 5})  # not the turn it holds: none
        assert turn.wait_for_yield(0.2) is None
        agent.send({"op": "grant", "turn": 6})
        assert turn.wait_for_turn(5) and turn.turn == 6


def test_a_parked_said_before_the_grant_is_read_names_the_earlier_turn(
        agent: FakeAgent) -> None:
    # The sidecar's race: waiting, it parks a server it found awake while the grant is
    # already on the wire. Its parked names turn 0, so the agent frees nothing.
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.send({"op": "grant", "turn": 8})
        turn.parked()  # before anything is read
        assert agent.wait_for("parked") == {"op": "parked", "turn": 0}
        assert turn.wait_for_turn(5) and turn.turn == 8


def test_a_reconnect_mid_restore_still_says_resident(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.send({"op": "grant", "turn": 2})
        assert turn.wait_for_turn(5)  # restoring: resident() not said yet
        agent.restart()
        turn.wait_for_yield(0.3)
        agent.restart()  # again, before any welcome is read
        assert turn.wait_for_turn(5)
        hellos = [m for m in agent.received if m["op"] == "hello"][1:]
        assert hellos and all(h["resident"] is True and h["turn"] == 2 for h in hellos)


def test_a_yield_stays_asked_across_a_reconnect_and_is_told_again(agent: FakeAgent) -> None:
    with TurnClient(agent.path, connect_timeout=5) as turn:
        turn.want()
        agent.send({"op": "grant", "turn": 4})
        assert turn.wait_for_turn(5)
        turn.resident()
        agent.send({"op": "yield", "grace": 30, "turn": 4})
        first = turn.wait_for_yield(5)
        assert first is not None
        agent.after_hello = [{"op": "yield", "grace": 10, "turn": 4}]  # the time left
        agent.restart()
        deadline = time.monotonic() + 5
        while turn.welcome is not None and time.monotonic() < deadline:
            assert turn.yield_requested() is not None  # kept while away
        turn.connect(5)
        assert agent.wait_for("hello", 2)["resident"] is True
        # The re-told yield follows the welcome on the wire: read until it is in (the turn
        # is already held, so waiting for the turn would not read anything).
        until = time.monotonic() + 5
        again = turn.yield_requested()
        while again is not None and again.deadline >= first.deadline \
                and time.monotonic() < until:
            time.sleep(0.01)
            again = turn.yield_requested()
        assert again is not None and again.deadline < first.deadline
