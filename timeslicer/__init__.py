"""Taking turns on a shared claim, the worker's side (standard library only).

``timeslicer.client`` is what a worker uses (``TurnClient``,
``AsyncTurnClient``), ``timeslicer.protocol`` the wire it speaks, and
``timeslicer.adapters`` the sidecars that drive an unmodified vLLM or SGLang
server. The node agent lives in ``timeslicer.agent`` and is never imported
from here: it needs the Kubernetes client, a worker pod does not.
"""

from timeslicer.client import (
    AgentError,
    AgentUnavailable,
    AsyncTurnClient,
    TurnClient,
    TurnError,
    YieldRequest,
)
from timeslicer.protocol import ProtocolError

__all__ = [
    "AgentError",
    "AgentUnavailable",
    "AsyncTurnClient",
    "ProtocolError",
    "TurnClient",
    "TurnError",
    "YieldRequest",
]
