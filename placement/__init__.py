"""openrl-place's placement core: the decision as pure functions over plain data.

Standard library only, no I/O. Callers (the controller, the offline simulator)
turn the world into ``Node``, ``Claim`` and ``Request`` values, build a
``Fleet``, ask ``decide`` and act on the answer::

    from placement import GiB, Fleet, Node, Request, Role, decide

    fleet = Fleet([Node("box", devices=2, device_memory=24 * GiB, host_memory=94 * GiB)])
    answer = decide(Request("lora-1", Role.TRAINER, memory=10 * GiB), fleet)
    print(answer)  # NewClaim(node='box', devices=1, memory_floor=10737418240, ...)

The names here are the library. Beyond them: ``placement.quantity`` reads and
prints Kubernetes quantities, ``placement.simulator.simulation`` plays arrivals and
departures offline, ``placement.decide`` also has ``explain`` and
``find_seat``, and ``placement.model`` the arithmetic (``devices_needed``,
``per_device_share``), and ``placement.remedy`` tells why a worker waits,
node by node, and the smallest change that would seat it. A ``Policy``
(``spread`` or ``binpack``, owner affinity on or off) is the scheduler's one
setting; ``decide`` takes it, the default being spread with owner affinity.
"""

from placement.decide import JoinClaim, NewClaim, Reason, Wait, WaitKind, decide
from placement.fleet import Fleet
from placement.model import Booking, Claim, Node, PlacementError, Request, Role
from placement.policy import Policy, Strategy
from placement.quantity import GiB


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs tens of milliseconds at start-up,
    # which every ``openrl-place simulate`` would pay for nothing.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("openrl-place")
        except PackageNotFoundError:  # pragma: no cover - a source tree without install
            return "0+unknown"
    raise AttributeError(f"module 'placement' has no attribute {name!r}")


__all__ = [
    "Booking",
    "Claim",
    "Fleet",
    "GiB",
    "JoinClaim",
    "NewClaim",
    "Node",
    "PlacementError",
    "Policy",
    "Reason",
    "Request",
    "Role",
    "Strategy",
    "Wait",
    "WaitKind",
    "__version__",
    "decide",
]
