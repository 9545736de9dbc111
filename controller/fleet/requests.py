"""What other pods take of a node's memory, as kube-scheduler counts it, and what is left.

Rules:

* A pod's memory request (``memory_request``) is kube-scheduler's:

    part                              what it adds
    --------------------------------  ------------------------------------------------
    containers                        the sum of their ``resources.requests.memory``
    sidecars (init containers with    each adds its request to that sum, and runs on
      ``restartPolicy: Always``)      beside every init container started after it
    a regular init container          runs alone with the sidecars started before it:
                                      the pod asks at least its request plus theirs
    the pod                           the larger of the two above
    ``spec.overhead.memory``          added on top (the runtime's own share)

  A quantity that cannot be read counts as nothing: the API server would not
  have taken it, and one odd pod must not stop the reading.
* Other pods: bound to a node, not finished (not Succeeded or Failed), not
  our managed workers (placement counts those through their bookings):
  DaemonSet pods and anything else count (``rules.other_pod_node``).
* A node's parking budget (``parking_budget``), what placement reads as its
  ``host_memory``: its allocatable memory less its other pods' requests. A
  budget below zero is zero, with a ``Kind.NODE`` warning saying why; an
  unreadable allocatable leaves it unchecked (``None``), as before.
* ``Budget`` is the account ``snapshot`` and ``explain`` show: allocatable,
  the other pods' requests (the largest few by name, and how many), what is
  left for parking. Only the plain reading keeps names; the incremental one
  keeps each node's sum and count (no list per decision).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import attrs

from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s.objects import Obj
from placement.quantity import QuantityError, format_quantity, parse_quantity

__all__ = ["Budget", "budget_of", "memory_request", "parking_budget"]

LARGEST = 3  # the other pods an account names, largest first


@functools.lru_cache(maxsize=4096)
def _bytes(text: str) -> int:
    # A fleet spells its requests in a few ways ("2Gi", "512Mi"): each is parsed once.
    try:
        return parse_quantity(text, allow_zero=True)
    except QuantityError:
        return 0


def _quantity(value: object) -> int:
    if isinstance(value, str):
        return _bytes(value)
    return _bytes(str(value)) if isinstance(value, int) and not isinstance(value, bool) else 0


def _request(container: object) -> int:
    if not isinstance(container, dict):
        return 0
    return _quantity(((container.get("resources") or {}).get("requests") or {}).get("memory"))


def memory_request(pod: Obj) -> int:
    """The pod's memory request, in bytes, the way kube-scheduler counts it (the table)."""
    spec = pod.get("spec") or {}
    total = sum(_request(c) for c in spec.get("containers") or ())
    sidecars = 0
    alone = 0  # the most an init container asks while it runs
    for init in spec.get("initContainers") or ():
        asks = _request(init)
        if isinstance(init, dict) and init.get("restartPolicy") == "Always":
            total += asks
            sidecars += asks
            asks = sidecars
        else:
            asks += sidecars
        alone = max(alone, asks)
    return max(total, alone) + _quantity((spec.get("overhead") or {}).get("memory"))


def parking_budget(node: str, allocatable: int | None, others: int,
                   ) -> tuple[int | None, FleetWarning | None]:
    """The node's parking budget (None: unchecked), and the warning where its other pods
    ask more than its allocatable memory."""
    if allocatable is None or allocatable >= others:
        return (None if allocatable is None else allocatable - others), None
    return 0, warning(Kind.NODE, node, f"other pods request {format_quantity(others)} of "
                      f"allocatable memory {format_quantity(allocatable)}; parking budget 0")


@attrs.frozen
class Budget:
    """A node's parking budget, and what took the rest of its allocatable memory."""

    allocatable: int | None  # None: unreadable, unchecked
    others: int  # the other pods' memory requests, summed
    pods: int  # how many other pods
    largest: tuple[tuple[str, int], ...] = ()  # (namespace/name, request), largest first

    @property
    def left(self) -> int | None:
        """What parking may take: allocatable less the other pods (never below zero)."""
        return None if self.allocatable is None else max(0, self.allocatable - self.others)


def budget_of(allocatable: int | None, others: Iterable[tuple[str, int]]) -> Budget:
    """The account of a node whose other pods are ``others`` (name, request)."""
    pods = list(others)
    top = sorted(pods, key=lambda p: (-p[1], p[0]))[:LARGEST]
    return Budget(allocatable, sum(m for _, m in pods), len(pods),
                  tuple(p for p in top if p[1] > 0))
