"""A name-ordered set of claims, each with its room, that finds the first name with enough room.

Internal to the package: the index files each open claim here, and each
node among the free pools.

A claim's *room* is the largest worker that could join it now: what its
devices hold, capped by the host memory its node can still park (the policy
in ``policy.py`` states it as ``join_room``); ``-inf`` when nothing may join.
A free pool's node has a room too: the largest worker a new claim there may
take as far as host memory goes (``policy.new_claim_room``, which bounds only
a node that may share claims).

``OwnedRooms`` is the same for claims with owners, and also finds the first
name with room among the claims one owner is not on (a joiner ranks its own
owner's claims apart), by a second bound per block and chunk.

Why it exists: among allocated claims with the same number of workers, the
join goes to the smallest claim name whose node can still park the joiner.
Rooms differ per claim, and walking names until one has room turns into
a scan of the whole fleet exactly when host memory is tight. So names are
kept sorted in blocks, each block remembers its largest room, and blocks
are grouped into chunks that remember theirs: a query skips every chunk and
block that has no room and reads names only inside one that does.

What a block or chunk remembers is a bound, never below its largest room:
raised at once when a room grows, but left alone when one shrinks or goes
away. Rooms shrink all the time (every worker parked on a node shrinks its
claims' rooms) and most blocks are never asked about before they grow again,
so a bound is made exact only when a query reads a block and finds nothing.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Final

BLOCK = 64  # names per block (split at twice this)
CHUNK = 32  # blocks per chunk

Room = int | float  # bytes, or -inf: nothing may join


class RoomIndex:
    __slots__ = ("_blocks", "_chunk_maxima", "_heads", "_maxima", "_rooms", "heads", "rooms")

    def __init__(self) -> None:
        self._blocks: list[list[str]] = []
        self._heads: list[str] = []  # first name of each block, for bisecting
        self._maxima: list[Room] = []  # largest room of each block
        self._chunk_maxima: list[Room] = []  # largest room of each CHUNK blocks
        self._rooms: dict[str, Room] = {}
        # Every name's room, read-only and current: a walk over names of several
        # indexes, or over one node's claims, reads each room here (one dict read per
        # name, where a method call per name cost ~5% of the bench's replay).
        self.rooms: Final[Mapping[str, Room]] = self._rooms
        # The first name of each block, read-only (``heads[0]``: the smallest name, for
        # a caller whose first candidate mostly has room).
        self.heads: Final[Sequence[str]] = self._heads

    def __len__(self) -> int:
        return len(self._rooms)

    def __bool__(self) -> bool:
        return bool(self._rooms)

    def __contains__(self, name: object) -> bool:
        return name in self._rooms

    def __iter__(self) -> Iterator[str]:
        for block in self._blocks:
            yield from block

    def room(self, name: str) -> Room:
        return self._rooms[name]

    def first(self, at_least: Room) -> str | None:
        """The smallest name whose room is at least ``at_least``, if any."""
        maxima = self._maxima
        for chunk, chunk_top in enumerate(self._chunk_maxima):
            if chunk_top < at_least:
                continue
            start = chunk * CHUNK
            for index in range(start, min(start + CHUNK, len(maxima))):
                if maxima[index] >= at_least:
                    rooms = self._rooms
                    for name in self._blocks[index]:
                        if rooms[name] >= at_least:
                            return name
                    maxima[index] = max(map(rooms.__getitem__, self._blocks[index]))
            # Nothing here was large enough: tighten the chunk's bound too.
            self._chunk_maxima[chunk] = max(maxima[start:start + CHUNK])
        return None

    def add(self, name: str, room: Room) -> None:
        if name in self._rooms:
            raise KeyError(f"{name!r} is already indexed")
        self._rooms[name] = room
        if not self._blocks:
            self._blocks.append([name])
            self._heads.append(name)
            self._maxima.append(room)
            self._chunk_maxima.append(room)
            return
        index = bisect_right(self._heads, name) - 1
        if index < 0:  # a new smallest name opens the first block
            index = 0
        block = self._blocks[index]
        insort(block, name)
        self._heads[index] = block[0]
        if len(block) > 2 * BLOCK:
            self._split(index)
        elif room > self._maxima[index]:
            self._maxima[index] = room
            self._raise_chunk(index, room)

    def remove(self, name: str) -> None:
        del self._rooms[name]
        index = bisect_right(self._heads, name) - 1
        block = self._blocks[index]
        del block[bisect_left(block, name)]
        if not block:
            del self._blocks[index], self._heads[index], self._maxima[index]
            self._rebuild_chunks()
            return
        self._heads[index] = block[0]

    def update(self, name: str, room: Room) -> int:
        """Set a name's room; its block's index, or -1 where the room did not change."""
        old = self._rooms[name]
        if old == room:
            return -1
        self._rooms[name] = room
        index = bisect_right(self._heads, name) - 1
        if room > self._maxima[index]:
            self._maxima[index] = room
            self._raise_chunk(index, room)
        return index

    def hold_only(self, name: str, room: Room) -> None:
        """Of one name, now hold ``name`` alone with ``room``, as a new index given it would:
        a bucket emptied and filled again (the free pools' refiling) costs no new index.
        A plain ``RoomIndex``'s, not an ``OwnedRooms``'."""
        rooms = self._rooms
        assert len(rooms) == 1 and len(self._blocks) == 1 and type(self) is RoomIndex
        rooms.clear()
        rooms[name] = room
        self._blocks[0][0] = self._heads[0] = name
        self._maxima[0] = self._chunk_maxima[0] = room

    def bounds_hold(self) -> bool:
        """Blocks sorted and headed right, and no bound below what it bounds (for tests)."""
        names = [name for block in self._blocks for name in block]
        if names != sorted(self._rooms) or self._heads != [block[0] for block in self._blocks]:
            return False
        rooms = self._rooms
        blocks_hold = all(top >= max(rooms[name] for name in block)
                          for top, block in zip(self._maxima, self._blocks, strict=True))
        chunks_hold = all(self._chunk_maxima[i // CHUNK] >= top
                          for i, top in enumerate(self._maxima))
        return blocks_hold and chunks_hold

    def _split(self, index: int) -> None:
        block = self._blocks[index]
        upper = block[BLOCK:]
        del block[BLOCK:]
        self._blocks.insert(index + 1, upper)
        self._heads.insert(index + 1, upper[0])
        lookup = self._rooms.__getitem__
        self._maxima[index] = max(map(lookup, block))
        self._maxima.insert(index + 1, max(map(lookup, upper)))
        self._rebuild_chunks()

    def _raise_chunk(self, index: int, room: Room) -> None:
        chunk = index // CHUNK
        if room > self._chunk_maxima[chunk]:
            self._chunk_maxima[chunk] = room

    def _rebuild_chunks(self) -> None:
        # Blocks shifted: rare (one split per BLOCK insertions), so rebuild them all.
        maxima = self._maxima
        self._chunk_maxima = [max(maxima[i:i + CHUNK]) for i in range(0, len(maxima), CHUNK)]


class OwnedRooms(RoomIndex):
    """A ``RoomIndex`` whose claims each have owners, which also finds the first name with
    room among the claims that one owner is not on (``first_without``), for a joiner
    that ranks its own owner's claims apart.

    Each block and chunk also remembers a *top* owner and a bound on the rooms of the
    claims the top is not on, so a search that leaves out the top skips a block whose
    other claims have no room, however many of the top's do. Like the largest room,
    these are bounds: raised at once (a room of a claim the top is not on raises the
    others' bound), made exact when a search reads a block and finds nothing, where the
    owner it left out becomes the top.
    """

    __slots__ = ("_chunk_others", "_chunk_tops", "_others", "_owners", "_owners_of", "_tops")

    def __init__(self, owners_of: Callable[[str], Collection[str]]) -> None:
        """``owners_of``: a claim's owners, read once as it is added."""
        super().__init__()
        self._owners_of = owners_of
        self._owners: dict[str, Collection[str]] = {}
        self._tops: list[str] = []  # per block
        self._others: list[Room] = []  # per block: no room of a claim its top is not on is above
        self._chunk_tops: list[str] = []
        self._chunk_others: list[Room] = []

    def add(self, name: str, room: Room) -> None:
        owners = self._owners[name] = self._owners_of(name)
        blocks = len(self._blocks)
        super().add(name, room)
        if blocks == 0:
            top = next(iter(owners), "")
            self._tops.append(top)
            self._others.append(-math.inf)
            self._chunk_tops.append(top)
            self._chunk_others.append(-math.inf)
        elif len(self._blocks) == blocks:  # no split: raise the bounds
            self._raise_others(bisect_right(self._heads, name) - 1, room, owners)

    def remove(self, name: str) -> None:
        index = bisect_right(self._heads, name) - 1
        blocks = len(self._blocks)
        super().remove(name)
        del self._owners[name]
        if len(self._blocks) < blocks:
            del self._tops[index], self._others[index]
            self._rebuild_others()

    def update(self, name: str, room: Room) -> int:
        index = super().update(name, room)
        if index >= 0:
            self._raise_others(index, room, self._owners[name])
        return index

    def first_without(self, at_least: Room, owner: str) -> str | None:
        """The smallest name whose room is at least ``at_least`` and that ``owner`` is not
        on, if any."""
        maxima, tops, others = self._maxima, self._tops, self._others
        rooms, owners = self._rooms, self._owners
        for chunk, chunk_top in enumerate(self._chunk_tops):
            if (self._chunk_maxima[chunk] if chunk_top != owner
                    else self._chunk_others[chunk]) < at_least:
                continue
            start = chunk * CHUNK
            for index in range(start, min(start + CHUNK, len(maxima))):
                if (maxima[index] if tops[index] != owner else others[index]) >= at_least:
                    for name in self._blocks[index]:
                        if rooms[name] >= at_least and owner not in owners[name]:
                            return name
                    self._tighten(index, owner)
            self._rebuild_others(chunk, owner)
        return None

    def bounds_hold(self) -> bool:
        if not RoomIndex.bounds_hold(self) or len(self._tops) != len(self._blocks) or (
                len(self._chunk_tops) != len(self._chunk_maxima)):
            return False
        rooms, owners = self._rooms, self._owners
        for index, block in enumerate(self._blocks):
            chunk = index // CHUNK
            for name in block:
                if self._tops[index] not in owners[name] and rooms[name] > self._others[index]:
                    return False
                if self._chunk_tops[chunk] not in owners[name] and (
                        rooms[name] > self._chunk_others[chunk]):
                    return False
        return True

    def _raise_others(self, index: int, room: Room, owners: Collection[str]) -> None:
        if self._tops[index] not in owners and room > self._others[index]:
            self._others[index] = room
        chunk = index // CHUNK
        if self._chunk_tops[chunk] not in owners and room > self._chunk_others[chunk]:
            self._chunk_others[chunk] = room

    def _tighten(self, index: int, top: str | None = None) -> None:
        """Make a block's bounds exact, with ``top`` as its top (None: an owner of its
        largest room)."""
        rooms, owners = self._rooms, self._owners
        block = self._blocks[index]
        largest = max(block, key=rooms.__getitem__)
        if top is None:
            top = next(iter(owners[largest]), "")
        self._maxima[index] = rooms[largest]
        self._tops[index] = top
        self._others[index] = max((rooms[name] for name in block if top not in owners[name]),
                                  default=-math.inf)

    def _split(self, index: int) -> None:
        super()._split(index)
        self._tops.insert(index + 1, "")
        self._others.insert(index + 1, -math.inf)
        self._tighten(index)
        self._tighten(index + 1)
        self._rebuild_others()

    def _rebuild_others(self, only: int | None = None, top: str | None = None) -> None:
        """A chunk's bounds from its blocks' (every chunk's, or chunk ``only``'s, with
        ``top`` as its top; None: the top of its largest block)."""
        maxima, tops, others = self._maxima, self._tops, self._others
        chunks = range(0, len(maxima), CHUNK) if only is None else (only * CHUNK,)
        if only is None:
            self._chunk_tops = []
            self._chunk_others = []
        for start in chunks:
            span = range(start, min(start + CHUNK, len(maxima)))
            chunk_top = tops[max(span, key=maxima.__getitem__)] if top is None else top
            bound = max(maxima[i] if tops[i] != chunk_top else others[i] for i in span)
            if only is None:
                self._chunk_tops.append(chunk_top)
                self._chunk_others.append(bound)
            else:
                self._chunk_tops[only], self._chunk_others[only] = chunk_top, bound
                self._chunk_maxima[only] = max(maxima[i] for i in span)
