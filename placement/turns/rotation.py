"""Who waits for a turn, kept in round-robin order: for ``placement.turns``.

Rules:

* An entry is placed by two numbers: its owner's place in the rotation and
  its own place among that owner's entries. Both are distinct integers the
  caller hands out (join order); this module only orders them.
* The next entry after a served one is the owner placed next after the last
  owner served (wrapping around to the first), then that owner's entry placed
  next after the one it last had served (wrapping likewise).
* Adding, removing and finding the next cost a binary search each, never a
  walk over every waiting entry, so a turn passes as fast in a group of
  hundreds as in a group of two.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from typing import Generic, TypeVar

__all__ = ["Rotation"]

_T = TypeVar("_T")


class Rotation(Generic[_T]):
    """Waiting entries by (owner place, entry place)."""

    __slots__ = ("_by_owner", "_entries", "_owners")

    def __init__(self) -> None:
        self._owners: list[int] = []                # sorted: owners with an entry waiting
        self._by_owner: dict[int, list[int]] = {}   # owner place -> its entries' places, sorted
        self._entries: dict[int, _T] = {}           # entry place -> entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, place: object) -> bool:
        return place in self._entries

    def add(self, owner: int, place: int, entry: _T) -> None:
        if place in self._entries:
            raise ValueError(f"place {place} is already waiting")
        self._entries[place] = entry
        places = self._by_owner.get(owner)
        if places is None:
            self._by_owner[owner] = [place]
            insort(self._owners, owner)
        else:
            insort(places, place)

    def remove(self, owner: int, place: int) -> None:
        if self._entries.pop(place, None) is None:
            raise KeyError(f"place {place} is not waiting")
        places = self._by_owner[owner]
        del places[bisect_right(places, place) - 1]
        if not places:
            del self._by_owner[owner]
            del self._owners[bisect_right(self._owners, owner) - 1]

    def next_owner(self, last: int) -> int | None:
        """The place of the waiting owner after ``last``, or None while nobody waits."""
        return _after(self._owners, last) if self._owners else None

    def next_entry(self, owner: int, last: int) -> _T:
        """That owner's waiting entry placed after ``last``."""
        return self._entries[_after(self._by_owner[owner], last)]


def _after(places: list[int], last: int) -> int:
    i = bisect_right(places, last)
    return places[i] if i < len(places) else places[0]
