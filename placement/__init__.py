"""openrl-place's placement core: the decision as pure functions over plain data.

Standard library only, no I/O. Callers (the controller, the offline simulator)
turn the world into ``Node``, ``Claim`` and ``Request`` values, build a
``Fleet``, ask ``decide`` and act on the answer.
"""

from importlib.metadata import PackageNotFoundError, version

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
    GiB,
    Node,
    PlacementError,
    Request,
    Role,
    devices_needed,
    format_gib,
    per_device_share,
)
from placement.simulation import Phase, Placement, Simulation, WorkerState

try:
    __version__ = version("openrl-place")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

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
