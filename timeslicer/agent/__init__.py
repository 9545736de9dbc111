"""The node agent (``openrl-place timeslicer``): turns on shared claims, enforced.

``core`` is the loop around the pure policy, ``channels`` each member's socket
and connection, ``kube`` its Kubernetes side, ``local`` the no-Kubernetes mode
over a directory, ``nvml`` the device-memory check, ``metrics`` what it
exports, ``run`` the whole put together.
"""

from timeslicer.agent.channels import Member
from timeslicer.agent.core import Agent
from timeslicer.agent.run import Options, run, serve

__all__ = ["Agent", "Member", "Options", "run", "serve"]
