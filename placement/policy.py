"""The policy: how candidates rank and when a worker may join a claim, stated once as data.

Read top to bottom, this is the placement policy; ``placement.decide``
carries it out over the fleet's index, ``placement.fleet`` refuses a join by
the first check that fails (so its message names the rule), and
``placement.index`` files each open claim with the room ``join_room`` gives.
``tests/reference.py`` transcribes the same rules plainly.

Rules:

* A node takes another worker, by a new claim or a join alike, only while
  it has a pod slot free (``has_pod_slot``): the cluster would refuse the
  pod otherwise.
* Spread candidates (a node with enough free devices for a new claim, and a
  pod slot) compare by ``spread_rank``, in the order ``SPREAD_RANKING`` names.
* A worker may join a claim when every one of ``JOIN_CHECKS`` holds, checked
  in order; the first that fails is the refusal.
* Join candidates compare by ``join_rank``, in the order ``JOIN_RANKING``
  names: load evens out across claims before any claim fills up.
* A claim's *room* (``join_room``) is the largest joiner it takes now, so the
  fit and host-memory checks are one comparison.

Only the model and ``rooms.Room`` are imported: the policy reads plain values,
never the fleet, so everything else can import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from placement.model import Node, Request, per_device_share
from placement.rooms import Room

__all__ = [
    "JOIN_CHECKS",
    "JOIN_RANKING",
    "SPREAD_RANKING",
    "JoinCandidate",
    "has_pod_slot",
    "join_rank",
    "join_room",
    "spread_rank",
]

def has_pod_slot(node: Node, workers: int) -> bool:
    """Whether ``node``, with ``workers`` workers booked on its claims, can run one more."""
    return node.pods is None or workers < node.pods


# Step 1, spread: candidates compare by ``spread_rank``, smallest first.
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
    node: Node | None  # None: the fleet does not know the claim's node
    devices: int
    workers: int
    footprint: int  # the parked memory of its workers, shared or not
    node_parked: int  # its node's parked load now
    node_workers: int  # workers booked on its node's claims now


def _parked_after_join(claim: JoinCandidate, request: Request) -> int:
    # A claim of one worker turns shared: that worker starts parking too.
    return claim.node_parked + request.memory + (claim.footprint if claim.workers == 1 else 0)


# Step 2, share: a worker may join a claim when every check holds, in this order.
JOIN_CHECKS: tuple[tuple[str, Callable[[JoinCandidate, Request], bool]], ...] = (
    # Nothing about a claim without a node can be checked against anything
    # real, so an unallocated claim is never joined.
    ("the claim is allocated",
     lambda claim, request: claim.allocated and claim.node is not None),
    ("its node accepts the role",
     lambda claim, request: claim.node is not None and claim.node.accepts(request.role)),
    # Estimates are never summed: one worker of a claim is resident at a time.
    ("the worker fits the claim's devices by itself",
     lambda claim, request: claim.node is not None
     and per_device_share(request.memory, claim.devices) <= claim.node.device_memory),
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

# Candidates compare by ``join_rank``, smallest first: load evens out across
# claims before any claim fills up.
JOIN_RANKING = ("fewest workers", "claim name")


def join_rank(workers: int, claim: str) -> tuple[int, str]:
    """An open claim's place in ``JOIN_RANKING``."""
    return workers, claim


def join_room(devices: int, workers: int, footprint: int, device_memory: int,
              host_left: Room) -> Room:
    """A claim's *room*: the largest joiner it takes now, for the fit and host-memory checks.

    A worker of ``m`` bytes fits ``devices`` devices of ``device_memory``
    exactly when ``m <= devices * device_memory``, and the node can park it
    exactly when ``m`` (plus, if the claim turns shared, its one worker's
    ``footprint``) is at most ``host_left``, what the node can still park
    (``inf`` when its host memory is unknown). So both checks are
    ``m <= room``; the index files each open claim with its room.
    """
    holds = devices * device_memory
    if workers == 0:
        # The joiner would be alone and park nothing: any size its devices hold,
        # unless the node is already over its host memory (a cluster can be).
        return holds if host_left >= 0 else -math.inf
    if workers == 1:
        host_left -= footprint
    return host_left if host_left < holds else holds
