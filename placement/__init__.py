"""openrl-place's placement core: the decision as pure functions over plain data.

Standard library only, no I/O. Callers (the controller, the offline simulator)
turn the world into ``Node``, ``Claim`` and ``Request`` values, build a
``Fleet``, ask ``decide`` and act on the answer.
"""

from placement.decide import (
    Decision,
    JoinClaim,
    NewClaim,
    Reason,
    Wait,
    WaitKind,
    decide,
    explain,
    find_seat,
)
from placement.fleet import Fleet
from placement.model import (
    Booking,
    Claim,
    Node,
    PlacementError,
    Request,
    Role,
    devices_needed,
    per_device_share,
)
from placement.quantity import GiB, format_gib
from placement.simulation import Phase, Placement, Simulation, WorkerState


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
    "Decision",
    "Fleet",
    "GiB",
    "JoinClaim",
    "NewClaim",
    "Node",
    "Phase",
    "Placement",
    "PlacementError",
    "Reason",
    "Request",
    "Role",
    "Simulation",
    "Wait",
    "WaitKind",
    "WorkerState",
    "__version__",
    "decide",
    "devices_needed",
    "explain",
    "find_seat",
    "format_gib",
    "per_device_share",
]
