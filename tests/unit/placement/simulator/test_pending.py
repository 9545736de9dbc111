"""The pending queue against a plain list: same oldest worker under every bound."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.model import Role
from placement.simulator import pending
from placement.simulator.pending import PendingQueue

# Few sizes and few bounds, so classes repeat, empty and fill again.
sizes = st.integers(min_value=1, max_value=40)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(list(Role)), sizes),
        st.tuples(st.just("remove"), st.integers(min_value=0, max_value=10**6)),
        st.tuples(st.just("oldest"), st.sampled_from(list(Role)),
                  st.integers(min_value=0, max_value=45)),
    ),
    max_size=300,
)


@pytest.fixture(autouse=True)
def small_blocks() -> object:
    # Blocks of two classes: every split and every tree level is exercised.
    with mock.patch.object(pending, "BLOCK", 2):
        yield


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_queue_agrees_with_a_plain_list(script: list[tuple[object, ...]]) -> None:
    queue = PendingQueue()
    plain: list[tuple[int, str, Role, int]] = []  # oldest first
    serial = 0
    for operation in script:
        if operation[0] == "add":
            _, role, memory = operation
            assert isinstance(role, Role) and isinstance(memory, int)
            serial += 1
            queue.add(serial, f"w{serial}", role, memory)
            plain.append((serial, f"w{serial}", role, memory))
        elif operation[0] == "remove":
            if plain:
                index = int(str(operation[1])) % len(plain)
                arrival = plain.pop(index)[0]
                queue.remove(arrival)
        else:
            _, role, bound = operation
            expected = next(((a, w, m) for a, w, r, m in plain if r is role and m <= bound), None)
            assert queue.oldest(role, bound) == expected  # type: ignore[arg-type]
        assert len(queue) == len(plain)


def test_a_worker_leaving_from_the_middle_is_skipped_when_its_turn_comes() -> None:
    queue = PendingQueue()
    for arrival in range(5):
        queue.add(arrival, f"w{arrival}", Role.TRAINER, 10)
    queue.remove(2)
    queue.remove(0)
    assert queue.oldest(Role.TRAINER, 10) == (1, "w1", 10)
    queue.remove(1)
    assert queue.oldest(Role.TRAINER, 10) == (3, "w3", 10)
    assert queue.oldest(Role.TRAINER, 9) is None
    assert queue.oldest(Role.SAMPLER, 10) is None
    assert len(queue) == 2


def test_the_oldest_that_fits_not_the_oldest() -> None:
    queue = PendingQueue()
    queue.add(1, "big", Role.TRAINER, 100)
    queue.add(2, "small", Role.TRAINER, 10)
    queue.add(3, "middle", Role.TRAINER, 50)
    assert queue.oldest(Role.TRAINER, 60) == (2, "small", 10)
    assert queue.oldest(Role.TRAINER, 100) == (1, "big", 100)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "a-2", "a-3", "b", "a-2-2"]),
                          st.integers(min_value=0, max_value=50)), max_size=200))
def test_claim_names_are_the_first_free_in_turn(script: list[tuple[bool, str, int]]) -> None:
    from placement.simulator.simulation import _ClaimNames, _spell

    taken: set[str] = set()
    names = _ClaimNames(taken.__contains__)
    for cut, base, index in script:
        if cut:
            expected = next(_spell(base, k) for k in range(1, 10**6)
                            if _spell(base, k) not in taken)
            name = names.new(base)
            assert name == expected
            taken.add(name)
        elif taken:
            name = sorted(taken)[index % len(taken)]
            taken.remove(name)
            names.released(name)
