"""Giving memory back after the start-up list: an optimization that never fails."""

from __future__ import annotations

import gc

import pytest

from controller import memory


def test_give_back_collects_and_trims_where_offered() -> None:
    kept = [bytes(1000) for _ in range(1000)]
    del kept
    assert memory.give_back() is (memory._TRIM is not None)


def test_without_malloc_trim_it_only_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_TRIM", None)
    assert memory.give_back() is False


def test_the_collector_is_paused_inside_and_as_it_was_after() -> None:
    assert gc.isenabled()
    with memory.collection_paused() as pause:
        assert not gc.isenabled() and pause.paused
    assert gc.isenabled()


def test_a_late_list_resumes_collection_early() -> None:
    with memory.collection_paused() as pause:
        pause.resume()
        assert gc.isenabled() and not pause.paused
        pause.resume()  # twice: nothing more
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with memory.collection_paused() as pause:
            assert not pause.paused
        assert not gc.isenabled()
    finally:
        gc.enable()
