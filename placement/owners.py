"""The join ranking's lists by owner: the index's open seats again, filed under each owner on them.

Internal to the package: the base of ``placement.index.Index``, so the index's
filing reads and writes these lists as its own attributes, with no call or
lookup added on the path that files a claim. The join ranking
(``policy.JOIN_RANKING``) reads a claim differently for a joiner whose owner
is on it: it pairs or not (owner affinity), and the joiner's share of its
turns is ``1/(k*(m+1))`` rather than the ``1/(k+1)`` of everyone else
(``policy.turn_round``). So a claim is filed once per owner on it, where that
owner's joiners find it ranked as they would rank it. Rules:

* A *rank* is (turn round, workers) as one integer, ``round << WORKER_BITS |
  workers`` (a claim seats at most 256), so the two keys after owner affinity
  compare as one number. ``share_rank`` gives it.
* An open claim with workers is filed, for each owner on it, under that
  owner (a claim of one worker only where a joiner its node takes pairs with
  it: only owner affinity reads those), then its *owner group* (the node's
  role policy, the roles the owner holds there; None: a role not known),
  then that owner's rank there, in a sorted list of names. An owner has a
  handful of groups: role policies times the roles it can hold.
* A joiner's search (``first_of_owner``; ``first_pairing`` for owner
  affinity) reads its owner's groups whose role policy takes it (and, for
  owner affinity, that ``policy.pairs`` with it: each group is listed, as it
  is made, under the joiner roles and pairings that read it, so a search
  passes over none), each group's ranks in ascending order, and in a rank's list the first
  claim with room (read from its open-seat bucket, so a node's parked load
  moving touches no owner list); a group stops at its first hit, or at a rank
  past the best found so far. Only an owner whose claims with no room fill
  its best ranks makes that long. The claims of one worker rank alike for
  every joiner (a half of the turns), so the open seats' buckets rank them
  with the rest, and past owner affinity an owner's lists of them are not
  read.
* The lists are filed only once a search reads them (owner affinity, or a
  join whose best claim one of its owner's could beat), all at once
  from the books' rows, and kept from then on: until then filing a claim
  costs one test for them. ``Index.describe`` lists them as filed, or before
  that as they would be, read plainly (``owner_keys``).
* A group's ranks are kept ascending (a new one not the largest re-sorts that
  group alone, a handful of keys); an emptied rank's list stays, empty, as
  that rank comes back (a claim's workers come and go).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Mapping

from placement.model import Role
from placement.policy import pairs, turn_round
from placement.records import ClaimRow, RankLists, Tally

__all__ = ["NO_RANK", "WORKER_BITS", "OwnerKey", "OwnerLists", "owner_keys", "share_rank",
           "tally"]

WORKER_BITS = 9  # a rank's low bits: workers on the claim, at most 256
NO_RANK = 1 << 62  # above every rank

# An owner group: a node's role policy and the roles one owner holds on a claim there.
OwnerGroup = tuple[frozenset[Role], frozenset[str | None]]
# A list as ``describe`` names it: owner, role policy, roles held, (turn round, workers).
OwnerKey = tuple[str, tuple[str, ...], tuple[str, ...], tuple[int, int]]


def share_rank(owners: int, mine: int, workers: int) -> int:
    """A claim's rank for a joiner: ``policy.turn_round`` above its workers, as one number."""
    return turn_round(owners, mine) << WORKER_BITS | workers


ALONE_RANK = share_rank(1, 1, 1)  # a claim of one worker, for that worker's owner


def tally(bookings: Mapping[str, tuple[str, int, bool, str | None]]) -> Tally:
    """Owner -> (its workers, the roles they hold) over a claim's bookings."""
    by_owner: Tally = {}
    for owner, _parked, _exclusive, role in bookings.values():
        had = by_owner.get(owner)
        if had is None:
            by_owner[owner] = (1, _ONLY[role])
        else:
            mine, held = had
            by_owner[owner] = (mine + 1, held if role in held else held | _ONLY[role])
    return by_owner


class OwnerLists:
    """The owner lists of an index; see the module's rules. Filed by ``Index.file_claim``."""

    __slots__ = ("_lone", "_owners", "_rows", "_searched")

    def __init__(self, rows: Mapping[str, ClaimRow]) -> None:
        """``rows``: the books' claims, read when a search first reads the lists."""
        self._rows = rows
        # owner -> its groups -> rank -> sorted names; None: not filed until a join
        # search first reads them.
        self._owners: dict[str, dict[OwnerGroup, RankLists]] | None = None
        # (owner, joiner role, pairing) -> the lists of the owner's groups a search of
        # that ``pairing`` reads: True, the groups that pair with such a joiner; False,
        # those that take it without pairing; None, both. Filed as a group is made, so
        # a search reads no group it would skip (one owner holds a handful).
        self._searched: dict[tuple[str, Role, bool | None], list[RankLists]] = {}
        # (owner, role policy, role) of a lone worker -> the owner's group it is filed
        # in, as its claim's ``owner_lists`` (one tuple for them all); None: in none, as
        # no joiner its node takes pairs with it.
        self._lone: dict[tuple[str, frozenset[Role], str | None],
                         tuple[tuple[RankLists, int]] | None] = {}

    def _file_owners(self, claim: ClaimRow, roles: frozenset[Role], workers: int) -> None:
        owners = self._owners
        assert owners is not None
        name = claim.name
        if workers == 1:  # the common case: one owner, one role
            for owner, _parked, _exclusive, role in claim.bookings.values():
                key = (owner, roles, role)
                lists = self._lone.get(key, _UNSEEN)
                if lists is _UNSEEN:
                    alone = self._lone_group(owner, roles, role)
                    lists = self._lone[key] = None if alone is None else ((alone, ALONE_RANK),)
                if lists is None:  # only owner affinity reads it, and no joiner pairs
                    return
                ranks = lists[0][0]
                names = ranks.get(ALONE_RANK)
                if names is None:
                    _new_rank(ranks, ALONE_RANK, name)
                else:
                    insort(names, name)
                claim.owner_lists = lists
            return
        by_owner = claim.tally
        assert by_owner is not None
        count = len(by_owner)
        filed = []
        for owner, (mine, held) in by_owner.items():
            groups = owners.get(owner)
            if groups is None:
                groups = owners[owner] = {}
            group = (roles, held)
            by_rank = groups.get(group)
            if by_rank is None:
                by_rank = groups[group] = self._new_group(owner, group)
            rank = (count + 1 if not mine else count * (mine + 1)) << WORKER_BITS | workers
            names = by_rank.get(rank)
            if names is None:
                _new_rank(by_rank, rank, name)
            else:
                insort(names, name)
            filed.append((by_rank, rank))
        claim.owner_lists = tuple(filed)

    def _lone_group(self, owner: str, roles: frozenset[Role],
                    role: str | None) -> RankLists | None:
        """The group a lone worker's claim is filed in for its owner, made if new; None:
        none, as no joiner its node takes pairs with it."""
        assert self._owners is not None
        if not _pairs_alone(roles, role):
            return None
        groups = self._owners.setdefault(owner, {})
        group = (roles, _ONLY[role])
        by_rank = groups.get(group)
        if by_rank is None:
            by_rank = groups[group] = self._new_group(owner, group)
        return by_rank

    def _file_every_owner(self) -> dict[str, dict[OwnerGroup, RankLists]]:
        """The first search that reads them: file every open claim by owner, from now on."""
        self._owners = {}
        for claim in self._rows.values():
            if claim.bucket is not None and claim.bookings:
                assert claim.open_key is not None
                self._file_owners(claim, claim.open_key.roles, len(claim.bookings))
        return self._owners

    @property
    def owners_filed(self) -> bool:
        """Whether the owner lists are filed (a search has read them)."""
        return self._owners is not None

    def first_of_owner(self, owner: str, role: Role, memory: int, *,
                       pairing: bool | None = None, alone: bool = True,
                       to_beat: tuple[int, str] = (NO_RANK, "")) -> tuple[int, str] | None:
        """The best-ranked open claim holding ``owner``'s workers that takes a joiner of
        ``owner``, ``role`` and ``memory`` bytes, as (rank, name), if it ranks before
        ``to_beat``; None: none does. ``pairing``: True, only the claims that
        ``policy.pairs`` with the joiner (none of the owner's workers in ``role``);
        False, only the others; None, all. ``alone``: False, not the claims of one worker
        (the open seats' buckets rank those for any joiner alike)."""
        if self._owners is None:
            self._file_every_owner()
        groups = self._searched.get((owner, role, pairing))
        if groups is None:
            return None
        rows = self._rows
        best_rank, best = to_beat
        found = False
        skip = -1 if alone else ALONE_RANK
        for by_rank in groups:
            for rank, names in by_rank.items():  # ascending: the group's first hit is its best
                if rank > best_rank:
                    break
                if rank == skip:
                    continue
                hit = None
                for name in names:  # the first with room (a listed claim is open: a bucket)
                    if rows[name].bucket.rooms[name] >= memory:  # type: ignore[union-attr]
                        hit = name
                        break
                if hit is not None:
                    if rank < best_rank or hit < best:
                        best_rank, best, found = rank, hit, True
                    break
        return (best_rank, best) if found else None

    def first_pairing(self, owner: str, role: Role, memory: int) -> str | None:
        """``first_of_owner(owner, role, memory, pairing=True)``'s name, for owner affinity
        (a search per join): an owner's joiners of one role mostly pair with one group
        of its, whose first claim with room, in its ranks' order, is the best."""
        if self._owners is None:
            self._file_every_owner()
        groups = self._searched.get((owner, role, True))
        if groups is None:
            return None
        if len(groups) > 1:
            found = self.first_of_owner(owner, role, memory, pairing=True)
            return None if found is None else found[1]
        rows = self._rows
        for names in groups[0].values():  # ascending ranks
            for name in names:
                if rows[name].bucket.rooms[name] >= memory:  # type: ignore[union-attr]
                    return name
        return None

    def _new_group(self, owner: str, group: OwnerGroup) -> RankLists:
        """An owner's new group's lists, filed for its searches too."""
        roles, held = group
        by_rank: RankLists = {}
        searched = self._searched
        for role in Role:
            if not roles or role in roles:  # a joiner its node takes: it pairs, or not
                for pairing in (pairs(role, held), None):
                    searched.setdefault((owner, role, pairing), []).append(by_rank)
        return by_rank

    def _describe_owners(self) -> dict[OwnerKey, tuple[str, ...]]:
        """Every owner list by ``OwnerKey``: as filed, or before a join first searched, as
        they would be filed (read plainly, by ``owner_keys``)."""
        if self._owners is not None:
            return {(owner, _names(roles), _names(held), divmod(rank, 1 << WORKER_BITS)):
                    tuple(names)
                    for owner, groups in self._owners.items()
                    for (roles, held), by_rank in groups.items()
                    for rank, names in by_rank.items() if names}
        owners: dict[OwnerKey, list[str]] = {}
        for claim in self._rows.values():
            if claim.bucket is not None and claim.bookings:
                assert claim.open_key is not None
                for key in owner_keys(claim.bookings, claim.open_key.roles):
                    owners.setdefault(key, []).append(claim.name)
        return {key: tuple(sorted(names)) for key, names in owners.items()}

    def _ranks_ascending(self) -> bool:
        """Every group's ranks in ascending order (for ``describe``)."""
        return all(list(by_rank) == sorted(by_rank)
                   for groups in (self._owners or {}).values() for by_rank in groups.values())


def _pairs_alone(roles: frozenset[Role], role: str | None) -> bool:
    """Whether a lone worker of ``role`` pairs with any joiner a node of ``roles`` takes."""
    return any(pairs(joiner, {role}) for joiner in Role if not roles or joiner in roles)


def owner_keys(bookings: dict[str, tuple[str, int, bool, str | None]],
               roles: frozenset[Role]) -> tuple[OwnerKey, ...]:
    """The owner lists an open claim with these bookings, on a node of role policy
    ``roles``, is filed in, read plainly (the filing reads the index's tables)."""
    if len(bookings) == 1 and not any(_pairs_alone(roles, role)
                                      for _owner, _parked, _exclusive, role
                                      in bookings.values()):
        return ()
    held: dict[str, list[str | None]] = {}
    for owner, _parked, _exclusive, role in bookings.values():
        held.setdefault(owner, []).append(role)
    return tuple([(owner, _names(roles), _names(frozenset(mine)),
                   (turn_round(len(held), len(mine)), len(bookings)))
                  for owner, mine in held.items()])


def _new_rank(by_rank: RankLists, rank: int, name: str) -> None:
    """A group's first claim at ``rank``: its ranks kept ascending."""
    by_rank[rank] = [name]
    if len(by_rank) > 1 and max(by_rank) != rank:  # re-rank in place: a handful of keys
        ranked = sorted(by_rank.items())
        by_rank.clear()
        by_rank.update(ranked)


def _names(roles: frozenset[Role] | frozenset[str | None]) -> tuple[str, ...]:
    return tuple(sorted(str(role) for role in roles))


_UNSEEN: tuple[tuple[RankLists, int]] = (({}, 0),)  # a key not met yet

# A role's plain name (None: not known) alone, as the roles an owner holds.
_ONLY: dict[str | None, frozenset[str | None]] = {
    name: frozenset((name,)) for name in (*(role.value for role in Role), None)}
