"""Node health: whether a node can keep the workers placed on it.

Rules, first matching row wins:

  the Node object                                    verdict
  -------------------------------------------------  --------------------------------------
  absent (deleted: a cloud took the machine)         lost: Kubernetes collects its pods;
                                                     its slices went with it
  tainted node.kubernetes.io/out-of-service          not ready: the operator's word that
                                                     the machine is down
  its Ready condition False or Unknown               not ready: the kubelet stopped
                                                     reporting, or reports trouble
  tainted node.kubernetes.io/not-ready, unreachable  not ready (the node controller's word)
  anything else (no Ready condition at all too)      healthy

A not-ready node is left out of placement (``fleet_reader.read_nodes``): no
new seat goes there. What happens to the workers already there is
``moves.py``'s.

A healthy node can still be closing (``closing``): being deleted (its Node
object has a deletion timestamp: whoever deletes it, its pods go with it),
cordoned (``spec.unschedulable``), or tainted by a node autoscaler that is removing it
(Karpenter's ``karpenter.sh/disrupted``, cluster-autoscaler's
``ToBeDeletedByClusterAutoscaler``). Its workers stay where they are, but it
gets no new seat: a pod pinned there could not be scheduled, and a node being
removed would take the new worker with it (the worker would be placed twice
for nothing). Only the node's ``Ready`` condition, ``spec.unschedulable``,
the ``node.kubernetes.io/`` taints and those two autoscalers' taints are kept
in the cache for this (``strip``).
"""

from __future__ import annotations

import attrs

from controller.k8s.naming import ReasonKind
from controller.k8s.objects import Obj

__all__ = ["CLOSING_TAINTS", "NOT_READY_TAINTS", "OUT_OF_SERVICE", "Trouble", "closing",
           "kept_taint", "ready_signature", "trouble"]

OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
TAINT_PREFIX = "node.kubernetes.io/"
# The taints a node autoscaler puts on a node it is about to remove.
CLOSING_TAINTS = ("karpenter.sh/disrupted", "ToBeDeletedByClusterAutoscaler")


def kept_taint(key: object) -> bool:
    """Whether a taint with this key says anything about the node's health or closing."""
    return str(key).startswith(TAINT_PREFIX) or key in CLOSING_TAINTS


@attrs.frozen
class Trouble:
    """Why a node cannot keep its workers: ``kind`` is NodeLost or NodeNotReady."""

    kind: ReasonKind
    why: str

    @property
    def lost(self) -> bool:
        return self.kind == ReasonKind.NODE_LOST


def _taints(node: Obj) -> list[Obj]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]


def _ready(node: Obj) -> Obj | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def trouble(node: Obj | None, name: str) -> Trouble | None:
    """The node's verdict (the module's table): None while it can keep its workers."""
    if node is None:
        return Trouble(ReasonKind.NODE_LOST, f"node {name} is gone (its Node object was deleted)")
    taints = _taints(node)
    if any(t.get("key") == OUT_OF_SERVICE for t in taints):
        return Trouble(ReasonKind.NODE_NOT_READY, f"node {name} is marked out-of-service")
    ready = _ready(node)
    if ready is not None and ready.get("status") != "True":
        since = ready.get("lastTransitionTime")
        said = ready.get("reason") or ready.get("status")
        return Trouble(ReasonKind.NODE_NOT_READY,
                       f"node {name} is not ready ({said}"
                       f"{' since ' + str(since) if since else ''})")
    for taint in taints:
        if taint.get("key") in NOT_READY_TAINTS:
            return Trouble(ReasonKind.NODE_NOT_READY,
                           f"node {name} is tainted {taint.get('key')}")
    return None


def closing(node: Obj, name: str) -> str:
    """Why a node that keeps its workers takes no new one ('' when it takes them)."""
    if (node.get("metadata") or {}).get("deletionTimestamp"):
        return f"node {name} is being deleted"
    if (node.get("spec") or {}).get("unschedulable"):
        return f"node {name} is cordoned (unschedulable)"
    for taint in _taints(node):
        if taint.get("key") in CLOSING_TAINTS:
            return f"node {name} is being removed by its autoscaler (tainted {taint['key']})"
    return ""


def ready_signature(node: Obj) -> tuple[object, ...]:
    """What of a node its health depends on, for the watch's signature."""
    ready = _ready(node) or {}
    return (ready.get("status"), bool((node.get("metadata") or {}).get("deletionTimestamp")),
            bool((node.get("spec") or {}).get("unschedulable")),
            tuple(sorted(str(t.get("key")) for t in _taints(node) if kept_taint(t.get("key")))))
