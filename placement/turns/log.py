"""A shared claim's resident intervals, kept compressed where its turns repeat.

The turns player (``placement.turns.play``) counts a repeating cycle of turns
instead of playing each repeat; what the cycle recorded is then kept once,
with its period and how many times it came again. Rules:

* An interval is ``(start, end, worker)``, ``worker`` "" while the claim is
  switching (parking or restoring). Times are recorded in the player's units
  (``unit`` to the second, whole nanoseconds there) and read back in seconds.
* ``Intervals`` holds plain intervals and ``Repeat`` blocks in the order they
  were recorded; iterating expands every repeat, in that same order, so the
  expanded sequence is what playing every switch would have recorded. Only
  the claims a figure draws are ever expanded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Interval", "Intervals", "Repeat"]

Interval = tuple[float, float, str]


@dataclass(frozen=True, slots=True)
class Repeat:
    """``block`` again ``count`` times, each time ``period`` (its units) after the time before."""

    block: tuple[Interval, ...]
    period: float
    count: int

    def __iter__(self) -> Iterator[Interval]:
        for time in range(1, self.count + 1):
            offset = time * self.period
            for start, end, worker in self.block:
                yield start + offset, end + offset, worker


class Intervals:
    """Recorded intervals, repeats kept compressed; ``len`` and iteration count them expanded."""

    __slots__ = ("_length", "parts", "unit")

    def __init__(self, unit: int = 1) -> None:
        self.unit = unit  # recorded times per second
        self.parts: list[Interval | Repeat] = []
        self._length = 0

    def append(self, interval: Interval) -> None:
        self.parts.append(interval)
        self._length += 1

    def repeat(self, since: int, period: float, count: int) -> None:
        """The parts recorded from index ``since`` on, again ``count`` times ``period`` apart."""
        block = tuple(part for part in self.parts[since:] if isinstance(part, tuple))
        if count > 0 and block:
            self.parts.append(Repeat(block, period, count))
            self._length += count * len(block)

    def __len__(self) -> int:
        return self._length

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Intervals):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # it grows while played

    def __iter__(self) -> Iterator[Interval]:
        """Every interval in seconds, repeats expanded."""
        unit = self.unit
        for part in self.parts:
            for start, end, worker in part if isinstance(part, Repeat) else (part,):
                yield start / unit, end / unit, worker
