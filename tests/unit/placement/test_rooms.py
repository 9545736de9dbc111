"""The room index against a plain sorted dict, under random operations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.rooms import BLOCK, OwnedRooms, RoomIndex

names = st.integers(min_value=0, max_value=3 * BLOCK * 8).map(lambda i: f"claim-{i:05d}")
rooms = st.one_of(st.integers(min_value=-50, max_value=50), st.just(float("inf")))
operations = st.lists(st.tuples(st.sampled_from(["add", "remove", "update", "first"]),
                                names, rooms), max_size=600)


def apply(index: RoomIndex, plain: dict[str, float], op: str, name: str, room: float) -> None:
    """One operation on both the index and the plain dict."""
    if op == "add" and name not in plain:
        index.add(name, room)
        plain[name] = room
    elif op == "remove" and name in plain:
        index.remove(name)
        del plain[name]
    elif op == "update" and name in plain:
        index.update(name, room)
        plain[name] = room


@settings(max_examples=150, deadline=None)
@given(operations)
def test_room_index_agrees_with_a_plain_dict(ops: list[tuple[str, str, float]]) -> None:
    index, plain = RoomIndex(), {}
    for op, name, room in ops:
        apply(index, plain, op, name, room)
        expected = next((n for n in sorted(plain) if plain[n] >= room), None)
        assert index.first(room) == expected
        assert len(index) == len(plain)
    assert list(index) == sorted(plain)


@settings(max_examples=150, deadline=None)
@given(operations, st.lists(st.sampled_from("abc"), min_size=1, max_size=4))
def test_owned_rooms_leave_out_one_owner_as_a_plain_dict_does(
        ops: list[tuple[str, str, float]], owners: list[str]) -> None:
    # A claim's owners follow from its name, as its bookings give them: one or two.
    def owners_of(name: str) -> frozenset[str]:
        number = int(name[-5:])
        return frozenset({owners[number % len(owners)], owners[number // 7 % len(owners)]})

    index, plain = OwnedRooms(owners_of), {}
    for op, name, room in ops:
        apply(index, plain, op, name, room)
        for left_out in "abc":
            expected = next((n for n in sorted(plain)
                             if plain[n] >= room and left_out not in owners_of(n)), None)
            assert index.first_without(room, left_out) == expected
        assert index.first(room) == next((n for n in sorted(plain) if plain[n] >= room), None)
        assert index.bounds_hold()


def test_one_owner_on_the_first_blocks_claims_is_skipped_by_their_bounds() -> None:
    # 4,000 claims of owner "o" (each with another owner) with room, then one of "p": the
    # search for a joiner of "o" reads the blocks' bounds, not 4,000 names (once made
    # exact by a first search).
    index = OwnedRooms(lambda name: {"p"} if name == "z" else {"o", f"q{name}"})
    for i in range(4000):
        index.add(f"c{i:05d}", 10)
    index.add("z", 10)
    assert index.first_without(5, "o") == "z"
    reads = 0
    rooms = index.rooms

    class Counting(dict[str, float]):
        def __getitem__(self, name: str) -> float:
            nonlocal reads
            reads += 1
            return rooms[name]

    index._rooms = Counting(rooms)  # type: ignore[misc]
    assert index.first_without(5, "o") == "z"
    assert reads < 2 * BLOCK


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


@settings(max_examples=100, deadline=None)
@given(operations, names, rooms, operations)
def test_an_index_of_one_name_taken_over_is_a_new_one(
        before: list[tuple[str, str, float]], name: str, room: float,
        after: list[tuple[str, str, float]]) -> None:
    # A pool bucket gone and taken again (``hold_only``) reads as a new index given the
    # name, then under more operations as the plain dict does.
    index, plain = RoomIndex(), {}
    for op, other, other_room in before:
        apply(index, plain, op, other, other_room)
    for other in sorted(plain)[1:]:
        index.remove(other)
    if not len(index):
        index.add("claim-x", 0)
    index.hold_only(name, room)
    fresh = RoomIndex()
    fresh.add(name, room)
    assert (list(index), index.room(name), index.heads, index.first(room)) == (
        list(fresh), fresh.room(name), fresh.heads, fresh.first(room))
    plain = {name: room}
    for op, other, other_room in after:
        apply(index, plain, op, other, other_room)
        assert index.first(other_room) == next(
            (n for n in sorted(plain) if plain[n] >= other_room), None)
        assert index.bounds_hold()
    assert list(index) == sorted(plain)
