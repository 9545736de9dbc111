"""What a worker's pod asks of its node's memory: what it may park there.

A worker whose turn is over, another worker of its claim on the devices, is
parked in host RAM and holds its whole memory estimate there. Placement counts
that against the node's parking budget (``controller.fleet.requests``);
the pod asks for it too, so kube-scheduler and the kubelet count it as well
(the kubelet evicts first the pods using more than they asked).

Rules (the worker container's ``resources.requests.memory``; nothing else is
touched):

  the pod starts                            the worker container asks
  ----------------------------------------  --------------------------------------------
  on a node that may share claims           the larger of the template's request and the
    (max-workers-per-claim > 1): on a new     worker's memory estimate
    claim or joining one, alone or not
  on a node that never shares, or with no   the template's request, unchanged
    node chosen yet (a standing claim)

* Why every pod on a sharing node, a lone one too: placement counts every
  worker booked there against the node's parking budget, alone on its claim
  or not, since a lone worker may be joined at any moment and then parks --
  and a pod's requests cannot grow once it exists. So what the pods on such
  a node ask is what placement reserved there: kube-scheduler refuses none
  that placement admitted, and the kubelet, under memory pressure, finds no
  parked worker above its request.
* A standing claim's pod (autoscaling) names no node, so it keeps the
  template's request; placement counts such a worker once its claim is
  allocated on a node, which its pod then cannot follow.
* A worker container whose template sets a memory limit below the estimate
  cannot ask for it (a request above its limit is invalid): the pod is not
  made; ``ask`` raises a ``TemplateError`` naming the limit and the estimate.
* A pod creation a LimitRange or a ResourceQuota refuses (the API server's
  answer names memory) fails the worker (``writes.ON_FAILURE``) with the API
  server's message and what the pod asked (``memory_bound``): its memory
  estimate, the memory a parked worker holds.
* Every other container keeps its template's requests: only the worker
  container holds the devices' memory when parked.
"""

from __future__ import annotations

from controller.fleet.rules import FleetReading
from controller.k8s import kube
from controller.k8s.objects import Obj, Worker
from controller.reconcile.render import TemplateError, worker_container_index
from placement.quantity import QuantityError, format_quantity, parse_quantity

__all__ = ["ask", "memory_bound", "parks"]


def parks(view: FleetReading, node: str) -> bool:
    """Whether a worker pod starting on ``node`` asks for what it may park (the table):
    the node is known and may share claims."""
    known = view.nodes.get(node)
    return known is not None and known.max_workers_per_claim > 1


def _bytes(value: object) -> int | None:
    if value is None:
        return None
    try:
        return parse_quantity(str(value), allow_zero=True)
    except QuantityError:
        return None


def ask(pod: Obj, worker: Worker, node: str) -> None:
    """Make the worker container of ``pod`` (a stamped pod, changed in place) ask for
    the worker's memory estimate, unless its template asks for more."""
    spec = pod["spec"]
    container = spec["containers"][worker_container_index(spec, "template")]
    resources = container.setdefault("resources", {})
    requests = resources.get("requests") or {}
    limit = _bytes((resources.get("limits") or {}).get("memory"))
    if limit is not None and limit < worker.memory:
        where = f"spec.containers[{container.get('name', '?')}].resources.limits.memory"
        raise TemplateError(where, f"{format_quantity(limit)} is below the worker's memory "
                            f"estimate {format_quantity(worker.memory)}, which its pod must "
                            f"request of node {node}'s memory, a node that may share "
                            "claims: a worker parked there holds it in host RAM; raise or "
                            "remove the limit")
    asked = _bytes(requests.get("memory"))
    if asked is None or asked < worker.memory:
        resources["requests"] = {**requests, "memory": format_quantity(worker.memory)}


# What the API server's refusals say when a namespace's bounds refused memory.
_BOUNDS = {"maximum memory usage": "a LimitRange", "exceeded quota": "a ResourceQuota"}


def memory_bound(worker: Worker, error: kube.KubeError) -> str:
    """What to add to a refused pod's reason where a namespace's bound refused its memory:
    the bound, and the memory the pod asked for and why; "" otherwise."""
    text = error.message
    bound = next((who for says, who in _BOUNDS.items() if says in text), None)
    if bound is None or "memory" not in text:
        return ""
    return (f" ({bound} refused its memory: a worker pod on a node that may share claims "
            f"asks for the worker's memory estimate, {format_quantity(worker.memory)}, the "
            "host memory it holds when parked)")
