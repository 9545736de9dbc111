"""When the agent's one timer must next fire: each group's next deadline, the earliest kept.

Rules:

* Each group has at most one deadline, the latest one it was given; giving
  None clears it.
* The earliest is found in a heap, not by asking every group: a change to
  one group costs a push, never a walk over the node's groups. Entries a
  later change made stale stay in the heap and are skipped when they reach
  its top; the heap is rebuilt from the live deadlines once the stale ones
  outnumber them, so it stays within a few times the number of groups.
"""

from __future__ import annotations

import heapq

__all__ = ["Deadlines"]

_SLACK = 64  # stale entries let in before any rebuild, so few groups never rebuild often


class Deadlines:
    __slots__ = ("_at", "_heap")

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._at)

    def set(self, group: str, when: float | None) -> None:
        if when is None:
            self._at.pop(group, None)
            return
        if self._at.get(group) == when:
            return
        self._at[group] = when
        heapq.heappush(self._heap, (when, group))
        if len(self._heap) > 2 * len(self._at) + _SLACK:
            self._heap = [(at, name) for name, at in self._at.items()]
            heapq.heapify(self._heap)

    def earliest(self) -> float | None:
        heap = self._heap
        while heap and self._at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[str]:
        """The groups whose deadline is ``now`` or before, each once; their deadlines cleared."""
        found: list[str] = []
        while (when := self.earliest()) is not None and when <= now:
            found.append(heapq.heappop(self._heap)[1])
            del self._at[found[-1]]
        return found
