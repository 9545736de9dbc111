"""The wire: every message round-trips; every bad line is refused with what is wrong."""

from __future__ import annotations

import re

import pytest

from timeslicer import protocol as wire

MESSAGES = [wire.Hello(resident=True, turn=4), wire.Want(), wire.Idle(), wire.Resident(turn=4),
            wire.Parked(turn=4), wire.Welcome(group="claim-a", member="pod-1", state="Waiting"),
            wire.Grant(turn=5), wire.Yield(grace=30.0, turn=5),
            wire.Wait(reason="pod-2 holds the turn"), wire.Error(message="unknown op")]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.op)
def test_every_message_round_trips_on_one_line(message: wire.Message) -> None:
    line = wire.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert wire.decode(line) == message


def test_the_contract_spelling() -> None:
    assert wire.encode(wire.Hello(resident=False)) == \
        b'{"op":"hello","resident":false,"turn":0,"v":2}\n'
    assert wire.decode(b'{"op":"yield","grace":5,"turn":9,"extra":[1]}') == \
        wire.Yield(grace=5.0, turn=9)


@pytest.mark.parametrize(("line", "says"), [
    (b"not json", "not JSON"),
    (b"\xff\n", "not UTF-8"),
    (b"[1]", "must be a JSON object, not list"),
    (b'{"grace":1}', 'has no "op"'),
    (b'{"op":3}', '"op" must be a string'),
    (b'{"op":"dance"}', "unknown op 'dance'"),
    (b'{"op":"hello"}', "hello: missing 'resident'"),
    (b'{"op":"hello","resident":1}', "'resident' must be true or false"),
    (b'{"op":"hello","resident":true,"v":1}', "version 1 is not supported"),
    (b'{"op":"yield","grace":-1,"turn":1}', "'grace' must be a number of seconds >= 0"),
    (b'{"op":"parked"}', "parked: missing 'turn'"),
    (b'{"op":"grant","turn":-1}', "'turn' must be a whole number >= 0"),
    (b'{"op":"grant","turn":1.5}', "'turn' must be a whole number >= 0"),
    (b'{"op":"resident","turn":true}', "'turn' must be a whole number >= 0"),
    (b'{"op":["want"]}', '"op" must be a string, not ["want"]'),
    (b'{"op":{"a":1}}', '"op" must be a string'),
    (b'{"op":"want","x":' + b"[" * 2000 + b"]" * 2000 + b"}", "nested too deeply"),
    (b'{"op":"welcome","group":"g","member":null,"state":"Idle"}', "'member' must be a string"),
    (b'{"op":"x","pad":"' + b"a" * 5000 + b'"}', "over the 4096-byte limit"),
])
def test_a_bad_line_is_refused_naming_what_is_wrong(line: bytes, says: str) -> None:
    with pytest.raises(wire.ProtocolError, match=re.escape(says)):
        wire.decode(line)


def test_each_side_accepts_only_the_other_sides_messages() -> None:
    with pytest.raises(wire.ProtocolError, match="unknown op 'hello'"):
        wire.decode(wire.encode(wire.Hello(resident=True)), wire.FROM_AGENT)


def test_the_line_reader_splits_refuses_a_long_line_once_and_goes_on() -> None:
    reader = wire.LineReader()
    reader.feed(b'{"op":"want"}\n{"op":')
    assert reader.next_line() == b'{"op":"want"}\n'
    assert reader.next_line() is None
    reader.feed(b'"idle"}\n' + b"x" * 5000)
    assert reader.next_line() == b'{"op":"idle"}\n'
    with pytest.raises(wire.ProtocolError, match="longer than the 4096-byte limit"):
        reader.next_line()
    reader.feed(b"yyy\n" + b'{"op":"parked","turn":1}\n')
    assert reader.next_line() == b'{"op":"parked","turn":1}\n'
