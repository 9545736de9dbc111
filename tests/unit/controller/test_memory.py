"""Giving memory back after the start-up list: an optimization that never fails."""

from __future__ import annotations

import pytest

from controller import memory


def test_give_back_collects_and_trims_where_offered() -> None:
    kept = [bytes(1000) for _ in range(1000)]
    del kept
    assert memory.give_back() is (memory._TRIM is not None)


def test_without_malloc_trim_it_only_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_TRIM", None)
    assert memory.give_back() is False
