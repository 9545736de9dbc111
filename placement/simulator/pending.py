"""Pending workers, oldest first, indexed by the memory they need.

The simulation asks one question after a capacity change on a node: which
is the oldest pending worker of a role the node accepts that needs at most
``capacity`` bytes? Everything here serves that question, and removal of a
worker that leaves while pending, at a cost that does not grow with the
number of pending workers or of distinct sizes among them:

* Workers of one (role, memory) are a *class*; the decision reads nothing
  else, so within a class only the oldest matters. A class keeps its workers
  in arrival order; a worker that leaves is only forgotten (its arrival
  number no longer names anyone) and skipped when it reaches the front, so
  removal is O(1) and each entry is skipped at most once.
* Per role, classes are kept sorted by memory in blocks of at most
  ``2 * BLOCK``; each block knows the oldest arrival among its classes, and a
  small tree over the blocks answers "the oldest among the first j blocks".
  A query is a bisection, one tree walk and a scan of one block (in C, via
  ``min`` over a slice). A class emptied of workers stays in its block as
  "nobody" until the block is next split: sizes seen once tend to come back.

Arrival numbers are the simulation's; every worker's is distinct and they
only grow.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque

from placement.model import Role

NOBODY = 1 << 62  # an arrival number no worker has: a class with no one waiting
BLOCK = 64


class _Classes:
    """One role's classes, sorted by memory, each with its oldest worker's arrival number."""

    __slots__ = ("_firsts", "_heads", "_memories", "_tree", "_width")

    def __init__(self) -> None:
        self._memories: list[list[int]] = []  # per block, sorted
        self._heads: list[list[int]] = []  # per block, parallel: oldest arrival or NOBODY
        self._firsts: list[int] = []  # per block, its smallest memory (for bisection)
        self._tree: list[int] = []  # oldest arrival per block, as a min-tree (leaves at _width)
        self._width = 0

    def oldest_within(self, capacity: float) -> int:
        """The oldest arrival among classes of at most ``capacity`` bytes, or NOBODY."""
        block = bisect_right(self._firsts, capacity) - 1
        if block < 0:
            return NOBODY
        memories = self._memories[block]
        inside = bisect_right(memories, capacity)
        best = min(self._heads[block][:inside]) if inside else NOBODY
        # Blocks before this one lie wholly within the capacity: the tree's prefix minimum.
        tree, low, high = self._tree, self._width, self._width + block
        while low < high:
            if low & 1:
                if tree[low] < best:
                    best = tree[low]
                low += 1
            if high & 1:
                high -= 1
                if tree[high] < best:
                    best = tree[high]
            low >>= 1
            high >>= 1
        return best

    def set_head(self, memory: int, arrival: int) -> None:
        """Record the class's oldest arrival (NOBODY when empty), adding the class if new."""
        block = bisect_right(self._firsts, memory) - 1
        if block < 0:
            if not self._memories:
                self._memories.append([memory])
                self._heads.append([arrival])
                self._firsts.append(memory)
                self._rebuild()
                return
            block = 0
        memories = self._memories[block]
        position = bisect_left(memories, memory)
        if position < len(memories) and memories[position] == memory:
            self._heads[block][position] = arrival
        else:
            insort(memories, memory)
            self._heads[block].insert(position, arrival)
            self._firsts[block] = memories[0]
            if len(memories) > 2 * BLOCK:
                self._split(block)
                return
        self._update(block)

    def _split(self, block: int) -> None:
        memories, heads = self._memories[block], self._heads[block]
        # Drop classes nobody waits in while the block is being copied anyway.
        kept = [(m, h) for m, h in zip(memories, heads, strict=True) if h != NOBODY]
        if len(kept) <= BLOCK:
            parts = [kept] if kept else []
        else:
            half = len(kept) // 2
            parts = [kept[:half], kept[half:]]
        self._memories[block:block + 1] = [[m for m, _ in part] for part in parts]
        self._heads[block:block + 1] = [[h for _, h in part] for part in parts]
        self._firsts[block:block + 1] = [part[0][0] for part in parts]
        self._rebuild()

    def _rebuild(self) -> None:
        width = 1
        while width < len(self._heads):
            width *= 2
        self._width = width
        tree = [NOBODY] * (2 * width)
        tree[width:width + len(self._heads)] = [min(heads) for heads in self._heads]
        for index in range(width - 1, 0, -1):
            left, right = tree[2 * index], tree[2 * index + 1]
            tree[index] = left if left < right else right
        self._tree = tree

    def _update(self, block: int) -> None:
        tree = self._tree
        index = self._width + block
        tree[index] = min(self._heads[block])
        index >>= 1
        while index:
            left, right = tree[2 * index], tree[2 * index + 1]
            best = left if left < right else right
            if tree[index] == best:
                break  # nothing above changes
            tree[index] = best
            index >>= 1


class PendingQueue:
    """Pending workers by (role, memory), answering "the oldest that fits" per role."""

    __slots__ = ("_classes", "_queues", "_who", "size")

    def __init__(self) -> None:
        self._classes = {role: _Classes() for role in Role}
        self._queues: dict[tuple[Role, int], deque[int]] = {}
        self._who: dict[int, tuple[str, Role, int]] = {}  # arrival -> (worker, role, memory)
        self.size = 0  # workers waiting (read, not written, outside: a call costs more)

    def __len__(self) -> int:
        return self.size

    def add(self, arrival: int, worker: str, role: Role, memory: int) -> None:
        self._who[arrival] = (worker, role, memory)
        self.size += 1
        queue = self._queues.get((role, memory))
        if queue is None:
            self._queues[(role, memory)] = deque((arrival,))
            self._classes[role].set_head(memory, arrival)
        else:
            queue.append(arrival)  # the front is always someone still waiting

    def remove(self, arrival: int) -> None:
        """Forget a pending worker (it left, or it was placed)."""
        _, role, memory = self._who.pop(arrival)
        self.size -= 1
        queue = self._queues[(role, memory)]
        if queue[0] == arrival:
            self._advance(role, memory, queue)

    def oldest(self, role: Role, capacity: float) -> tuple[int, str, int] | None:
        """(arrival, worker, memory) of the oldest ``role`` worker needing <= ``capacity``."""
        arrival = self._classes[role].oldest_within(capacity)
        if arrival == NOBODY:
            return None
        worker, _, memory = self._who[arrival]
        return arrival, worker, memory

    def _advance(self, role: Role, memory: int, queue: deque[int]) -> None:
        who = self._who
        while queue and queue[0] not in who:
            queue.popleft()
        if not queue:
            del self._queues[(role, memory)]
        self._classes[role].set_head(memory, queue[0] if queue else NOBODY)
