"""The rules of reading the fleet, once: who holds which seat, and what placement is told.

Both readings call these: ``fleet_reader.build_fleet`` (the plain reference,
everything from lists) and ``fleet_cache.FleetCache`` (kept current change by
change). Each rule is a pure function of the objects it names.

Rules:

* A worker's booking, strongest first: the claim its live pod consumes (the
  pod wins after a lost status write; among several live pods the last by
  name), then, unless the worker is Failed, its ``status.claimName``, then a
  join committed on a claim's booked list and not yet carried out (the last
  claim by name where several list it). No claim: no booking.
* A pod books for its worker while that worker is known (whatever its
  phase). A live managed pod whose worker is gone holds its seat as
  ``pod/<name>`` until it is gone, with the memory and owner stamped on it.
* A claim commits the seats of the UIDs on its booked list only while it is
  not being deleted.
* A claim goes to placement when it has a node (allocated, or sized for
  one); it takes joiners only when allocated and not being deleted; its
  seats are its bookings, by holder.
* Seats: the total is every node's devices times its seats per claim (never
  more than its pod slots for workers); the used ones are the bookings on
  claims not being deleted.
* Pod slots: a pod takes one of its node's slots from the moment it is bound
  until it finishes. Workers take theirs through their bookings (placement
  counts those), so a node's slots for workers are its allocatable ``pods``
  less its other pods: bound, not finished, and not labelled managed.
"""

from __future__ import annotations

import operator
from collections.abc import Container, Iterable, Mapping
from typing import Protocol

import attrs

from controller import naming
from controller.claims import ClaimView, booked_uids
from controller.objects import (
    Obj,
    annotations_of,
    is_deleting,
    labels_of,
    name_of,
    pod_alive,
    pod_claim,
    pod_node,
)
from placement import Booking, Claim, Fleet, Node

__all__ = ["Booked", "FleetReading", "committed_uids", "live_pod_claim", "orphan_booking",
           "other_pod_node", "placement_claim", "seats_total", "seats_used", "worker_booking",
           "worker_pod_slots"]

ORPHAN_PREFIX = "pod/"
_HOLDER = operator.attrgetter("holder")


@attrs.frozen
class Booked:
    holder: str  # worker name, or pod/<name> for a pod whose worker is gone
    claim: str
    owner: str
    memory: int


class FleetReading(Protocol):
    """What reconcile (and the read-only tools) read of the fleet; both readings offer it.

    ``claims`` holds the managed claims not being deleted, ``closing`` the ones
    being deleted (booked until gone); ``nodes`` the nodes placement knows, by name.
    """

    @property
    def fleet(self) -> Fleet: ...
    @property
    def nodes(self) -> Mapping[str, Node]: ...
    @property
    def claims(self) -> Mapping[str, ClaimView]: ...
    @property
    def closing(self) -> Mapping[str, ClaimView]: ...
    @property
    def bookings(self) -> Mapping[str, Booked]: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...
    @property
    def seats_total(self) -> int: ...
    @property
    def seats_used(self) -> int: ...
    def live_uid(self, uid: str) -> bool: ...


def live_pod_claim(pod: Obj) -> str:
    """The claim a pod holds a seat on: its claim while it is alive, else none."""
    return pod_claim(pod) if pod_alive(pod) else ""


class SeatHolder(Protocol):
    """What a worker's seat depends on: a ``Worker`` has it, and so does the cache's
    compact copy of one."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def claim(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def memory(self) -> int: ...


def worker_booking(worker: SeatHolder, pod_claims: Iterable[tuple[str, str]],
                   committed: Iterable[str]) -> Booked | None:
    """The worker's seat, if any. ``pod_claims``: (pod name, live claim) of the pods it
    controls; ``committed``: the claims whose booked list commits it."""
    live = [(pod, claim) for pod, claim in pod_claims if claim]
    if live:
        claim = max(live)[1]
    elif worker.phase == naming.Phase.FAILED:
        return None
    else:
        claim = worker.claim or max(committed, default="")
    if not claim:
        return None
    return Booked(worker.name, claim, worker.owner, worker.memory)


def orphan_booking(pod: Obj) -> Booked | None:
    """The seat a pod holds whose worker is gone (the caller knows that it is)."""
    claim = live_pod_claim(pod)
    if not claim or labels_of(pod).get(naming.LABEL_MANAGED) != "true":
        return None
    notes = annotations_of(pod)
    try:
        memory = max(0, int(notes.get(naming.ANNOTATION_MEMORY, "0")))
    except ValueError:
        memory = 0
    holder = ORPHAN_PREFIX + name_of(pod)
    return Booked(holder, claim, notes.get(naming.ANNOTATION_OWNER, holder), memory)


def other_pod_node(pod: Obj) -> str:
    """The node whose pod slot this pod takes besides the workers; "" for none."""
    if not pod_alive(pod) or labels_of(pod).get(naming.LABEL_MANAGED) == "true":
        return ""
    return pod_node(pod)


def worker_pod_slots(allocatable: int | None, others: int) -> int | None:
    """A node's pod slots for workers: what its other pods leave (None: unchecked)."""
    return None if allocatable is None else max(0, allocatable - others)


def committed_uids(claim: Obj) -> list[str]:
    """The workers whose seat the claim commits (none while it is being deleted)."""
    return [] if is_deleting(claim) else booked_uids(claim)


def placement_claim(view: ClaimView, seats: Iterable[Booked]) -> Claim | None:
    """The claim as placement books it, with its seats; None while it has no node."""
    if not view.node:
        return None
    return Claim(view.name, view.node, view.devices, allocated=view.joinable, bookings=tuple([
        Booking(b.holder, b.owner, b.memory) for b in sorted(seats, key=_HOLDER)]))


def seats_total(nodes: Iterable[Node]) -> int:
    total = 0
    for node in nodes:
        seats = node.devices * node.seats_per_claim
        total += seats if node.pods is None else min(seats, node.pods)
    return total


def seats_used(bookings: Iterable[Booked], live_claims: Container[str]) -> int:
    return sum(1 for b in bookings if b.claim in live_claims)
