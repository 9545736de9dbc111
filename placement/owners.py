"""Owner affinity's lists: the index's open seats again, by the joiners they pair with.

Internal to the package: the base of ``placement.index.Index``, so the index's
filing reads and writes these lists as its own attributes, with no call or
lookup added on the path that files a claim. Rules:

* An open claim's name is filed under (owner, role, workers) for each owner
  on it and each role its node accepts that ``policy.pairs`` with that
  owner's roles there (the other role; either, for a role not known), in
  sorted lists. A claim no joiner pairs with is filed nowhere.
* A joiner's search (``first_of_owner``) is a lookup per worker count,
  fewest first, of (its owner, its role, that count), and a walk of that
  list in name order, reading each claim's room from its open-seat bucket (so
  a node's parked load moving touches no owner list), that stops at the
  first claim with room: only an owner holding every claim of the fleet, with
  host memory blocking them all, makes it as long as the fleet. (Tried and
  slower on the bench's day: a room index per owner, its bounds re-tightened
  after each miss, 1.5x the replay; lists per (owner, roles held) under each
  role policy and worker count, three nested dictionaries to file through;
  one list per (owner, role) of (workers, name) pairs, whose tuple
  comparisons cost each filing twice a name's.)
* The lists are filed only once a search asks for them (owner affinity on, a
  join sought), all at once from the books' rows, and kept from then on:
  until then, and for good with owner affinity off, filing a claim costs one
  test for them. ``Index.describe`` lists them as filed, or before that as
  they would be, read plainly (``owner_keys``) rather than through the
  filing's tables.
* The worker counts ever filed are kept sorted and never dropped, so the
  search walks them in the join ranking's order without sorting.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Mapping

from placement.model import Role
from placement.policy import pairs
from placement.records import ClaimRow

__all__ = ["OwnerKey", "OwnerLists", "joiners", "owner_keys"]

# An owner list's key: an owner, the role of the joiners its claims there pair with,
# and their workers.
OwnerKey = tuple[str, Role, int]


class OwnerLists:
    """The owner lists of an index; see the module's rules. Filed by ``Index.file_claim``."""

    __slots__ = ("_owner_counts", "_owners", "_pairing", "_rows", "_solo")

    def __init__(self, rows: Mapping[str, ClaimRow]) -> None:
        """``rows``: the books' claims, read when owner affinity first searches."""
        self._rows = rows
        # Sorted names by (owner, role, workers) of the joiners they pair with;
        # None: not filed until owner affinity first searches.
        self._owners: dict[OwnerKey, list[str]] | None = None
        self._owner_counts: list[int] = []  # sorted: every worker count of its keys, ever
        # Per role policy, by the roles one owner holds on a claim: the joiner roles the
        # claim pairs with for that owner (a handful, filled as they are met).
        self._pairing: dict[frozenset[Role], dict[frozenset[str | None], tuple[Role, ...]]] = {}
        # The same for a claim's one worker, by its role (the index fills it with each
        # new role policy).
        # (Keyed by roles, read with a booking's role name: a Role equals its name.)
        self._solo: dict[frozenset[Role], dict[str | None, tuple[Role, ...]]] = {}

    def _file_owners(self, claim: ClaimRow, roles: frozenset[Role], workers: int) -> None:
        owners = self._owners
        assert owners is not None
        keys: tuple[OwnerKey, ...]
        if workers == 1:  # the common case: one owner, one role, read from a table
            for owner, _parked, _exclusive, role in claim.bookings.values():
                joiners = self._solo[roles][role]
                if not joiners:
                    claim.owner_keys = ()
                    return
                keys = (((owner, joiners[0], 1),) if len(joiners) == 1 else
                        tuple([(owner, joiner, 1) for joiner in joiners]))
        else:
            keys = self._owner_keys(claim.bookings, roles, workers)
        claim.owner_keys = keys
        name = claim.name
        for key in keys:
            names = owners.get(key)
            if names is None:
                owners[key] = [name]
                if workers not in self._owner_counts:
                    insort(self._owner_counts, workers)
            else:
                insort(names, name)

    def _owner_keys(self, bookings: dict[str, tuple[str, int, bool, str | None]],
                    roles: frozenset[Role], workers: int) -> tuple[OwnerKey, ...]:
        """The owner lists a claim of several workers is filed in: ``owner_keys`` read
        with the index's table of pairings."""
        pairing = self._pairing.get(roles)
        if pairing is None:
            pairing = self._pairing[roles] = {}
        by_owner: dict[str, frozenset[str | None]] = {}
        for owner, _parked, _exclusive, role in bookings.values():
            mine = by_owner.get(owner)
            by_owner[owner] = _ONLY[role] if mine is None else mine | _ONLY[role]
        keys = []
        for owner, held in by_owner.items():
            found = pairing.get(held)
            if found is None:
                found = pairing[held] = joiners(roles, held)
            for joiner in found:
                keys.append((owner, joiner, workers))
        return tuple(keys)

    def _file_every_owner(self) -> dict[OwnerKey, list[str]]:
        """Owner affinity's first search: file every open claim by owner, from now on."""
        self._owners = {}
        for claim in self._rows.values():
            if claim.bucket is not None and claim.bookings:
                assert claim.open_key is not None
                self._file_owners(claim, claim.open_key.roles, len(claim.bookings))
        return self._owners

    @property
    def owners_filed(self) -> bool:
        """Whether the owner lists are filed (owner affinity has searched)."""
        return self._owners is not None

    def first_of_owner(self, owner: str, role: Role, memory: int) -> str | None:
        """The best-ranked open claim that pairs with a joiner of ``owner``, ``role`` and
        ``memory`` bytes (``policy.pairs``: workers of ``owner`` on it, none in ``role``)
        and takes it: fewest workers, then name; None: none does."""
        owners = self._owners
        if owners is None:
            owners = self._file_every_owner()
        rows = self._rows
        for workers in self._owner_counts:  # the join ranking: fewest workers, then name
            names = owners.get((owner, role, workers))
            if names is not None:
                for name in names:  # the first with room
                    bucket = rows[name].bucket
                    if bucket is not None and bucket.rooms[name] >= memory:
                        return name
        return None

    def _describe_owners(self) -> dict[OwnerKey, tuple[str, ...]]:
        """(owner, joiner role, workers) -> names: as filed, or before owner affinity
        first searched, as they would be filed (read plainly, by ``owner_keys``)."""
        if self._owners is not None:
            return {key: tuple(names) for key, names in self._owners.items()}
        owners: dict[OwnerKey, list[str]] = {}
        for claim in self._rows.values():
            if claim.bucket is not None and claim.bookings:
                assert claim.open_key is not None
                for key in owner_keys(claim.bookings, claim.open_key.roles):
                    owners.setdefault(key, []).append(claim.name)
        return {key: tuple(sorted(names)) for key, names in owners.items()}


def joiners(roles: frozenset[Role], held: frozenset[str | None]) -> tuple[Role, ...]:
    """The joiner roles a claim pairs with, its role policy ``roles`` and one owner's
    roles ``held`` there (None: not known): those ``policy.pairs`` names, where the node
    takes them."""
    return tuple(role for role in Role if (not roles or role in roles) and pairs(role, held))


def owner_keys(bookings: dict[str, tuple[str, int, bool, str | None]],
               roles: frozenset[Role]) -> tuple[OwnerKey, ...]:
    """The owner lists an open claim with these bookings, on a node of role policy
    ``roles``, is filed in, read plainly (the filing reads the index's tables)."""
    held: dict[str, set[str | None]] = {}
    for owner, _parked, _exclusive, role in bookings.values():
        held.setdefault(owner, set()).add(role)
    return tuple([(owner, joiner, len(bookings)) for owner, mine in held.items()
                  for joiner in joiners(roles, frozenset(mine))])


_ONLY: dict[str | None, frozenset[str | None]] = {
    role: frozenset((role,)) for role in (*Role, None)}
