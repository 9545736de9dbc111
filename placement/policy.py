"""The policy: which step comes first, how candidates rank, and when a worker may join a claim.

Read top to bottom, this is the placement policy; ``placement.decide``
carries it out over the fleet's index, ``placement.fleet`` refuses a join by
the first check that fails (so its message names the rule), and
``placement.index`` files each open claim with the room ``join_room`` gives.
``tests/reference.py`` transcribes the same rules plainly.

Rules:

* One ``Policy`` holds for the whole scheduler: a ``Strategy`` and whether
  owner affinity is on. It chooses among the seats a worker could take,
  never whether one exists: a worker waits under one policy exactly when it
  waits under every other.
* The strategy orders the two steps (``STEPS``). ``spread``, the default,
  cuts a new claim on free devices while any node can give them and shares
  only under contention. ``binpack`` joins a claim that can seat the worker
  first (the same join checks and ranking) and cuts a new claim only when
  none can: what an autoscaled pool wants, since a new claim, and so a new
  node, is asked for only when nothing existing can seat the worker.
* An *exclusive* worker never shares: it takes only the new-claim step,
  whatever the strategy, and no one joins a claim it is on (two of the
  ``JOIN_CHECKS``). It waits for devices of its own.
* A worker that names its device count (``Request.devices``: N) never joins
  either: it takes only the new-claim step, a claim of exactly N devices of
  one group whose devices each hold ``ceil(memory / N)``. Claims it might
  join were cut to other workers' widths, and finding one of exactly N would
  file the join search by width too; so it waits for N free devices. Others
  may still join its claim: it is an ordinary claim of N devices.
* A node takes another worker, by a new claim or a join alike, only while
  it has a pod slot free (``has_pod_slot``): the cluster would refuse the
  pod otherwise.
* New-claim candidates (a node's device group with enough free devices, on
  a node with a pod slot; a mixed node offers each of its groups) compare by
  ``spread_rank``, in the order ``SPREAD_RANKING`` names.
* A worker may join a claim when every one of ``JOIN_CHECKS`` holds, checked
  in order; the first that fails is the refusal.
* Join candidates compare by ``join_rank``, in the order ``JOIN_RANKING``
  names: with owner affinity on, a claim that *pairs* with the joiner comes
  first (``pairs``): it holds workers of the joiner's owner, all of them in
  the *other* role. A job's trainer trains while its samplers wait and the
  samplers roll out while the trainer waits, so a trainer and a sampler of
  one job hand the devices to each other at the turn of each phase and never
  wait on each other. Two samplers of one job roll out at the same time:
  sharing a claim, each waits for the other through every rollout. So a
  claim holding a worker of the joiner's owner in the joiner's own role earns
  no preference, even beside one in the other role (a job's second sampler
  is not sent to the claim its trainer already shares with its first).
* Then, and first with owner affinity off, the joiner's share of the claim's
  turns once it joins, largest first (``turn_round``): the node's time-slicer
  hands turns round by owner, then among one owner's workers, so on a claim
  of ``k`` distinct owners a joiner of a new owner gets ``1/(k+1)`` of the
  turns, and one whose owner already has ``m`` workers there ``1/(k*(m+1))``
  (never more; equal only for ``k = m = 1``). Two workers of two owners
  leave a joiner a third, two of one other owner a half.
* Then load evens out across claims before any claim fills up (fewest
  workers), and the claim name breaks ties.
* Host memory (``host_memory``, the node's parking budget; unknown: never
  checked) is counted only on a node that may share claims (``shares``: its
  ``max_workers_per_claim`` above 1), and there it counts *every* worker
  booked on the node's claims, a lone one too: a lone worker may be joined
  at any moment and then parks, and its pod asks its estimate of the node's
  memory from the start (the cluster reserves memory by request, at once).
  So on such a node a new claim is cut only while the node can still park
  the newcomer (``new_claim_room``), and a join only while it can park the
  joiner on top of everyone there (``parked_after_join``). A node that
  never shares is not checked for a new claim; its claims are shared only
  where the cluster says so (a node relabelled), and those park as before:
  all their workers once two are on one.
* A claim's *room* (``join_room``) is the largest joiner it takes now, so the
  fit and host-memory checks are one comparison.

Only the model and ``rooms.Room`` are imported: the policy reads plain values,
never the fleet, so everything else can import it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass

from placement.model import Node, PlacementError, Request, Role, per_device_share
from placement.rooms import Room

__all__ = [
    "ALONE",
    "DEFAULT_POLICY",
    "JOIN_CHECKS",
    "JOIN_RANKING",
    "SPREAD_RANKING",
    "STEPS",
    "JoinCandidate",
    "Policy",
    "Step",
    "Strategy",
    "has_pod_slot",
    "join_rank",
    "join_room",
    "new_claim_room",
    "pairs",
    "parked_after_join",
    "shares",
    "spread_rank",
    "steps_for",
    "turn_round",
]


class Strategy(enum.StrEnum):
    SPREAD = "spread"
    BINPACK = "binpack"


class Step(enum.StrEnum):
    NEW_CLAIM = "new claim"  # free devices on one node, cut for this worker
    JOIN = "join"  # a seat on an allocated claim


# Step 0, the order: what each strategy tries first. An exclusive worker takes
# only the new-claim step, under any strategy.
STEPS: dict[Strategy, tuple[Step, ...]] = {
    Strategy.SPREAD: (Step.NEW_CLAIM, Step.JOIN),
    Strategy.BINPACK: (Step.JOIN, Step.NEW_CLAIM),
}
ALONE: tuple[Step, ...] = (Step.NEW_CLAIM,)


@dataclass(frozen=True, slots=True)
class Policy:
    """The scheduler's one setting of the policy: its strategy, and owner affinity on or off."""

    strategy: Strategy = Strategy.SPREAD
    owner_affinity: bool = True

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "strategy", Strategy(self.strategy))
        except ValueError:
            raise PlacementError(f"strategy must be one of {', '.join(Strategy)}, "
                                 f"got {self.strategy!r}") from None
        if type(self.owner_affinity) is not bool:
            raise PlacementError(f"owner_affinity must be True or False, "
                                 f"got {self.owner_affinity!r}")


DEFAULT_POLICY = Policy()


def steps_for(policy: Policy, request: Request) -> tuple[Step, ...]:
    """The steps ``request`` tries under ``policy``, in order."""
    # ``request.joins`` inlined: every decision asks.
    return ALONE if request.exclusive or request.devices is not None else STEPS[policy.strategy]

def shares(node: Node) -> bool:
    """Whether ``node`` may share claims: then every worker on it counts against its host
    memory, alone on its claim or not."""
    return node.max_workers_per_claim > 1


def new_claim_room(node: Node, parked: int) -> Room:
    """The largest worker a new claim on ``node`` may take as far as host memory goes, the
    node's parked load being ``parked``: what it can still park where it shares claims
    (``inf`` elsewhere, or when its host memory is unknown)."""
    if node.host_memory is None or node.max_workers_per_claim <= 1:
        return math.inf
    return node.host_memory - parked


def has_pod_slot(node: Node, workers: int) -> bool:
    """Whether ``node``, with ``workers`` workers booked on its claims, can run one more."""
    return node.pods is None or workers < node.pods


# The new-claim step: candidates compare by ``spread_rank``, smallest first.
SPREAD_RANKING = (
    "fewest devices needed",
    "smallest device memory",  # the tightest fit keeps big devices for big workers
    "fewest free devices left after placing",  # pack; keep whole nodes for wide workers
    "node name",
)


def spread_rank(needed: int, device_memory: int, free_left: int,
                node: str) -> tuple[int, int, int, str]:
    """A free pool's place in ``SPREAD_RANKING``."""
    return needed, device_memory, free_left, node


@dataclass(frozen=True, slots=True)
class JoinCandidate:
    """What the join checks read about one claim."""

    allocated: bool
    exclusive: bool  # an exclusive worker is booked on it
    node: Node | None  # None: the fleet does not know the claim's node
    devices: int
    workers: int
    footprint: int  # the parked memory of its workers, shared or not
    node_parked: int  # its node's parked load now (``shares``: every worker on it)
    node_workers: int  # workers booked on its node's claims now
    device_memory: int = 0  # its devices' size (its node's group); 0: its node's device_memory


def parked_after_join(sharing: bool, node_parked: int, workers: int, footprint: int,
                      memory: int) -> int:
    """The node's parked load once a joiner of ``memory`` bytes is on a claim of
    ``workers`` workers parking ``footprint`` when shared, the node's load being
    ``node_parked`` now. ``sharing``: the node may share claims, where everyone on it
    is counted already and the joiner adds itself, alone or not."""
    if sharing or workers >= 2:
        return node_parked + memory
    # A node that never shares: alone the joiner parks nothing; beside one worker
    # (a claim the cluster shares) the claim turns shared and both park.
    return node_parked + memory + footprint if workers else node_parked


def _parked_after_join(claim: JoinCandidate, request: Request) -> int:
    node = claim.node
    assert node is not None
    return parked_after_join(node.max_workers_per_claim > 1, claim.node_parked,
                             claim.workers, claim.footprint, request.memory)


# The join step: a worker may join a claim when every check holds, in this order.
JOIN_CHECKS: tuple[tuple[str, Callable[[JoinCandidate, Request], bool]], ...] = (
    ("the worker joins claims (neither exclusive nor asking exact devices)",
     lambda claim, request: request.joins),
    ("no exclusive worker is on the claim", lambda claim, request: not claim.exclusive),
    # Nothing about a claim without a node can be checked against anything
    # real, so an unallocated claim is never joined.
    ("the claim is allocated",
     lambda claim, request: claim.allocated and claim.node is not None),
    ("its node accepts the role",
     lambda claim, request: claim.node is not None and claim.node.accepts(request.role)),
    # Estimates are never summed: one worker of a claim is resident at a time.
    ("the worker fits the claim's devices by itself",
     lambda claim, request: claim.node is not None
     and per_device_share(request.memory, claim.devices)
     <= (claim.device_memory or claim.node.device_memory)),
    ("the claim has a free seat",
     lambda claim, request: claim.node is not None
     and claim.workers < claim.node.seats_per_claim),
    ("its node has a pod slot free",
     lambda claim, request: claim.node is not None
     and has_pod_slot(claim.node, claim.node_workers)),
    ("the node's host memory holds the parked load after the join",
     lambda claim, request: claim.node is not None
     and (claim.node.host_memory is None
          or _parked_after_join(claim, request) <= claim.node.host_memory)),
)

# Candidates compare by ``join_rank``, smallest first: with owner affinity on, a
# claim whose workers of the joiner's owner are all of the other role first (their
# phases alternate with the joiner's); then the largest share of the claim's turns the
# joiner would get (``turn_round``, fewest first); then load evens out across claims
# before any claim fills up.
JOIN_RANKING = ("same owner, other role only (with owner affinity on)",
                "largest share of turns for the joiner", "fewest workers", "claim name")


def pairs(joiner: Role, owners_roles: Collection[str | None]) -> bool:
    """Whether a claim pairs with a joiner of role ``joiner``: ``owners_roles``, the roles
    of the claim's workers of the joiner's owner, are some, and none is the joiner's (its
    phases coincide with the joiner's; the other role's alternate). A role not known
    (None: a reader that cannot tell) is taken as the other."""
    return bool(owners_roles) and joiner not in owners_roles


def turn_round(owners: int, mine: int) -> int:
    """Turns in one round of a claim's time-slicing per turn of a joiner, once it joins:
    its share of the turns is the inverse. ``owners``: distinct owners on the claim now;
    ``mine``: workers of the joiner's owner there. Rounds go by owner, then among one
    owner's workers: a new owner gets one turn in ``owners + 1``, a present one one in
    ``owners`` times its ``mine + 1`` workers."""
    return owners + 1 if not mine else owners * (mine + 1)


def join_rank(paired: bool, owners: int, mine: int, workers: int,
              claim: str) -> tuple[bool, int, int, str]:
    """An open claim's place in ``JOIN_RANKING``; ``paired``: it ``pairs`` with the joiner
    (always False with affinity off); ``owners``, ``mine``: as ``turn_round`` reads them."""
    return not paired, turn_round(owners, mine), workers, claim


def join_room(devices: int, device_memory: int, host_left: Room, sharing: bool) -> Room:
    """A claim's *room*: the largest joiner it takes now, for the fit and host-memory checks.

    A worker of ``m`` bytes fits ``devices`` devices of ``device_memory``
    exactly when ``m <= devices * device_memory``. On a node that may share
    (``sharing``) everyone there is counted already, so the node can park the
    joiner exactly when ``m`` is at most ``host_left``, what the node can
    still park (``inf`` when its host memory is unknown). A claim with a free
    seat on a node that never shares is empty: the joiner would be alone and
    park nothing. So both checks are ``m <= room``; the index files each open
    claim with its room.
    """
    holds = devices * device_memory
    if sharing:
        return host_left if host_left < holds else holds
    # Any size its devices hold, unless the node is already over its host memory (a
    # cluster can be).
    return holds if host_left >= 0 else -math.inf
