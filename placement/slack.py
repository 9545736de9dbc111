"""A name-ordered set of claims, each with a slack, that finds the first name with enough slack.

Why it exists: among allocated claims with the same number of workers, the
join goes to the smallest claim name whose node can still park the joiner.
Host room differs per claim, and walking names until one has room turns into
a scan of the whole fleet exactly when host memory is tight. So names are
kept sorted in blocks, each block remembers its largest slack, and blocks
are grouped into chunks that remember theirs: a query skips every chunk and
block that has no room and reads names only inside one that does.

What a block or chunk remembers is a bound, never below its largest slack:
raised at once when a slack grows, but left alone when one shrinks or goes
away. Slacks shrink all the time (every worker parked on a node shrinks its
claims' room) and most blocks are never asked about before they grow again,
so a bound is made exact only when a query reads a block and finds nothing.

Slack is "how large a joiner still fits": an ``int`` of bytes (the fleet
caps it by what the claim's devices hold), or ``-inf`` for a claim nothing
may join.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

BLOCK = 64  # names per block (split at twice this)
CHUNK = 32  # blocks per chunk

Slack = int | float


class SlackIndex:
    __slots__ = ("_blocks", "_chunk_maxima", "_heads", "_maxima", "_slack")

    def __init__(self) -> None:
        self._blocks: list[list[str]] = []
        self._heads: list[str] = []  # first name of each block, for bisecting
        self._maxima: list[Slack] = []  # largest slack of each block
        self._chunk_maxima: list[Slack] = []  # largest slack of each CHUNK blocks
        self._slack: dict[str, Slack] = {}

    def __len__(self) -> int:
        return len(self._slack)

    def __bool__(self) -> bool:
        return bool(self._slack)

    def __contains__(self, name: object) -> bool:
        return name in self._slack

    def __iter__(self) -> Iterator[str]:
        for block in self._blocks:
            yield from block

    def slack(self, name: str) -> Slack:
        return self._slack[name]

    def first(self, at_least: Slack) -> str | None:
        """The smallest name whose slack is at least ``at_least``, if any."""
        maxima = self._maxima
        for chunk, chunk_top in enumerate(self._chunk_maxima):
            if chunk_top < at_least:
                continue
            start = chunk * CHUNK
            for index in range(start, min(start + CHUNK, len(maxima))):
                if maxima[index] >= at_least:
                    slack = self._slack
                    for name in self._blocks[index]:
                        if slack[name] >= at_least:
                            return name
                    maxima[index] = max(map(slack.__getitem__, self._blocks[index]))
            # Nothing here was large enough: tighten the chunk's bound too.
            self._chunk_maxima[chunk] = max(maxima[start:start + CHUNK])
        return None

    def add(self, name: str, slack: Slack) -> None:
        if name in self._slack:
            raise KeyError(f"{name!r} is already indexed")
        self._slack[name] = slack
        if not self._blocks:
            self._blocks.append([name])
            self._heads.append(name)
            self._maxima.append(slack)
            self._chunk_maxima.append(slack)
            return
        index = bisect_right(self._heads, name) - 1
        if index < 0:  # a new smallest name opens the first block
            index = 0
        block = self._blocks[index]
        insort(block, name)
        self._heads[index] = block[0]
        if len(block) > 2 * BLOCK:
            self._split(index)
        elif slack > self._maxima[index]:
            self._maxima[index] = slack
            self._raise_chunk(index, slack)

    def remove(self, name: str) -> None:
        del self._slack[name]
        index = bisect_right(self._heads, name) - 1
        block = self._blocks[index]
        del block[bisect_left(block, name)]
        if not block:
            del self._blocks[index], self._heads[index], self._maxima[index]
            self._rebuild_chunks()
            return
        self._heads[index] = block[0]

    def update(self, name: str, slack: Slack) -> None:
        old = self._slack[name]
        if old == slack:
            return
        self._slack[name] = slack
        index = bisect_right(self._heads, name) - 1
        if slack > self._maxima[index]:
            self._maxima[index] = slack
            self._raise_chunk(index, slack)

    def _split(self, index: int) -> None:
        block = self._blocks[index]
        upper = block[BLOCK:]
        del block[BLOCK:]
        self._blocks.insert(index + 1, upper)
        self._heads.insert(index + 1, upper[0])
        lookup = self._slack.__getitem__
        self._maxima[index] = max(map(lookup, block))
        self._maxima.insert(index + 1, max(map(lookup, upper)))
        self._rebuild_chunks()

    def _raise_chunk(self, index: int, slack: Slack) -> None:
        chunk = index // CHUNK
        if slack > self._chunk_maxima[chunk]:
            self._chunk_maxima[chunk] = slack

    def _rebuild_chunks(self) -> None:
        # Blocks shifted: rare (one split per BLOCK insertions), so rebuild them all.
        maxima = self._maxima
        self._chunk_maxima = [max(maxima[i:i + CHUNK]) for i in range(0, len(maxima), CHUNK)]
