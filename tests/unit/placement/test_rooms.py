"""The room index against a plain sorted dict, under random operations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.rooms import BLOCK, RoomIndex

names = st.integers(min_value=0, max_value=3 * BLOCK * 8).map(lambda i: f"claim-{i:05d}")
rooms = st.one_of(st.integers(min_value=-50, max_value=50), st.just(float("inf")))
operations = st.lists(st.tuples(st.sampled_from(["add", "remove", "update", "first"]),
                                names, rooms), max_size=600)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_room_index_agrees_with_a_plain_dict(ops: list[tuple[str, str, float]]) -> None:
    index, plain = RoomIndex(), {}
    for op, name, room in ops:
        if op == "add" and name not in plain:
            index.add(name, room)
            plain[name] = room
        elif op == "remove" and name in plain:
            index.remove(name)
            del plain[name]
        elif op == "update" and name in plain:
            index.update(name, room)
            plain[name] = room
        expected = next((n for n in sorted(plain) if plain[n] >= room), None)
        assert index.first(room) == expected
        assert len(index) == len(plain)
    assert list(index) == sorted(plain)


def test_many_blocks_and_chunks_stay_consistent() -> None:
    import random

    rng = random.Random(7)
    index, plain = RoomIndex(), dict[str, int]()
    for step in range(30_000):
        name = f"c{rng.randrange(20_000):05d}"
        room = rng.randrange(100)
        if name in plain and rng.random() < 0.3:
            index.remove(name)
            del plain[name]
        elif name in plain:
            index.update(name, room)
            plain[name] = room
        else:
            index.add(name, room)
            plain[name] = room
        if step % 500 == 0:
            for threshold in (0, 50, 95, 99, 100):
                expected = next((n for n in sorted(plain) if plain[n] >= threshold), None)
                assert index.first(threshold) == expected
    assert list(index) == sorted(plain)


def test_rooms_reads_every_room_as_it_changes() -> None:
    index = RoomIndex()
    for name, room in (("a", 5), ("b", 50), ("c", 20), ("d", -float("inf"))):
        index.add(name, room)
    rooms = index.rooms
    assert dict(rooms) == {"a": 5, "b": 50, "c": 20, "d": -float("inf")}
    index.update("a", 7)
    index.remove("d")
    assert dict(rooms) == {"a": 7, "b": 50, "c": 20}  # the same view, current
