"""What must hold on a live openrl-place fleet, checked from objects alone.

Pure functions over a ``World`` (workers, pods, claims, nodes as plain
dicts); the chaos driver feeds it from watches and checks it on every change
and on a periodic full read. Each problem is a ``Violation`` with a kind and a
key, so the same problem seen twice counts once.

Kinds:

* ``seats``: a claim with more live pods consuming it, more ``reservedFor``
  entries of pods that still exist, or more booked workers than its node's seats
  per claim (the most
  the node was ever labelled with during the run: lowering the label moves
  nobody).
* ``device-twice``: one device in two claims' allocations past a bound.
  kube-scheduler alone allocates, and can do that when the answer to its
  allocation write is lost (an API server killed under it): the device looks
  free in its cache until its watch catches up. The controller must end it
  (both claims' workers placed again, the claims deleted): seen, it is
  noted; lasting past the bound, or at a round's end, it is a violation.
* ``host-memory``: a node whose workers on shared claims park more than its
  allocatable memory.
* ``moved``: a placed worker now on another claim, although its old claim was
  never deleted and its status records no move off it (``status.moves``: a
  lost or not-ready node, a wedged pod).
* ``stranded``: a worker placed on a node that is gone, still there (not
  placed again, nor Pending with a reason) past a bound; or on a node not
  ready, not saying so (``NodeNotReady``) past the bound.
* ``pod-outlived-worker``: a worker gone while a pod it owned still exists.
* ``orphan-claim``: a managed claim nothing references (no worker's status,
  pod or reservation, and not cut for a live worker under either of its two
  names), older than the sweep's grace plus its interval plus a margin.
* ``final``: at the end of a round, a worker neither Running nor Pending with
  a reason, or whose status disagrees with its pod, claim or node, or one
  still placed on a node that is gone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter, defaultdict
from typing import Any

# The controller's names as the checker spells them (hack/lib/names.py says why).
from hack.lib.names import LABEL_MANAGED, NODE_MAX_WORKERS, SIZED_FOR

__all__ = ["Violation", "World", "continuous", "devices_twice", "final", "given_twice",
           "not_ready", "stranded"]

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Violation:
    kind: str
    key: str
    detail: str


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _uid(obj: Obj) -> str:
    return str(obj["metadata"].get("uid", ""))


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def pod_claim(pod: Obj) -> str:
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            return str(ref["resourceClaimName"])
    return ""


def pod_owner(pod: Obj) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "OpenRLWorker":
            return str(ref.get("uid", ""))
    return ""


def pod_alive(pod: Obj) -> bool:
    return _status(pod).get("phase") not in ("Succeeded", "Failed")


def claim_node(claim: Obj) -> str:
    allocation = _status(claim).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and len(field.get("values") or []) == 1:
                return str(field["values"][0])
    return str((claim["metadata"].get("annotations") or {}).get(SIZED_FOR, ""))


def memory_bytes(value: Any) -> int:
    from placement.quantity import parse_quantity

    try:
        return int(parse_quantity(value))
    except Exception:
        return 0


@dataclasses.dataclass
class World:
    """The objects of one namespace and the cluster's nodes, plus what the run remembers."""

    workers: dict[str, Obj] = dataclasses.field(default_factory=dict)
    pods: dict[str, Obj] = dataclasses.field(default_factory=dict)
    claims: dict[str, Obj] = dataclasses.field(default_factory=dict)
    nodes: dict[str, Obj] = dataclasses.field(default_factory=dict)
    max_seats: dict[str, int] = dataclasses.field(default_factory=dict)  # node -> most seen
    placed: dict[str, str] = dataclasses.field(default_factory=dict)  # worker uid -> claim
    deleted_claims: set[str] = dataclasses.field(default_factory=set)
    unreferenced: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)  # since
    # worker uid -> since when it has sat on a node gone or not ready
    stuck: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)
    # device -> since when two claims' allocations have named it
    doubled: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)

    def seen_node(self, node: Obj) -> None:
        raw = str((node["metadata"].get("labels") or {}).get(NODE_MAX_WORKERS, "1"))
        seats = int(raw) if raw.isdigit() and int(raw) >= 1 else 1
        self.nodes[_name(node)] = node
        self.max_seats[_name(node)] = max(seats, self.max_seats.get(_name(node), 1))

    def seen_claim(self, claim: Obj, gone: bool = False) -> None:
        if gone or claim["metadata"].get("deletionTimestamp"):
            self.deleted_claims.add(_name(claim))
        if gone:
            self.claims.pop(_name(claim), None)
        else:
            self.claims[_name(claim)] = claim

    def booked(self) -> dict[str, list[Obj]]:
        """claim -> workers whose status books a seat on it (not Failed, not gone)."""
        out: dict[str, list[Obj]] = defaultdict(list)
        for w in self.workers.values():
            claim = _status(w).get("claimName")
            if claim and _status(w).get("phase") not in ("Failed", "Succeeded"):
                out[str(claim)].append(w)
        return out


def continuous(world: World) -> list[Violation]:
    """What must hold at every instant."""
    found: list[Violation] = []
    live_pods: dict[str, list[str]] = defaultdict(list)
    pod_uids = {_uid(pod) for pod in world.pods.values()}
    for pod in world.pods.values():
        if pod_alive(pod) and pod_claim(pod):
            live_pods[pod_claim(pod)].append(_name(pod))
    booked = world.booked()
    for name, claim in world.claims.items():
        if (claim["metadata"].get("labels") or {}).get(LABEL_MANAGED) != "true":
            continue
        node = claim_node(claim)
        cap = world.max_seats.get(node, 1)
        # An entry for a pod already gone is DRA's bookkeeping behind (the claim controller
        # drops it later, later still while the API server restarts), not a seat taken.
        reserved = [r for r in _status(claim).get("reservedFor") or []
                    if isinstance(r, dict) and str(r.get("uid")) in pod_uids]
        for what, count in (("pods", len(live_pods.get(name, []))),
                            ("reservedFor entries", len(reserved)),
                            ("booked workers", len(booked.get(name, [])))):
            if count > cap:
                found.append(Violation("seats", f"{name}/{what}",
                                       f"claim {name} on {node}: {count} {what} > {cap} seats"))
    parked: Counter[str] = Counter()
    for name, workers in booked.items():
        sharing = world.claims.get(name)
        if sharing is None or len(workers) < 2:
            continue
        for w in workers:
            parked[claim_node(sharing)] += memory_bytes((w.get("spec") or {}).get("memory"))
    for node, load in parked.items():
        host = memory_bytes(((_status(world.nodes.get(node) or {}).get("allocatable")) or {})
                            .get("memory"))
        if host and load > host:
            found.append(Violation("host-memory", node,
                                   f"node {node}: {load >> 30}Gi parked > {host >> 30}Gi"))
    for w in world.workers.values():
        held = str(_status(w).get("claimName") or "")
        if not held or _status(w).get("phase") not in ("Placing", "Running"):
            continue
        before = world.placed.get(_uid(w))
        left = {str(m.get("claim")) for m in _status(w).get("moves") or []
                if isinstance(m, dict)}
        if before and before != held and before not in world.deleted_claims | left:
            found.append(Violation("moved", _uid(w),
                                   f"worker {_name(w)} moved from claim {before} to {held}"))
        world.placed[_uid(w)] = held
    return found


def devices_twice(world: World) -> list[Violation]:
    """Each device two of our claims' allocations name (a round's end must have none)."""
    found = []
    devices: dict[str, str] = {}
    for name, claim in sorted(world.claims.items()):
        if (claim["metadata"].get("labels") or {}).get(LABEL_MANAGED) != "true":
            continue
        results = ((_status(claim).get("allocation") or {}).get("devices") or {}).get(
            "results") or []
        for result in results:
            device = "/".join(str(result.get(k)) for k in ("driver", "pool", "device"))
            if device in devices and devices[device] != name:
                found.append(Violation("device-twice", device, f"device {device} in claims "
                                       f"{devices[device]} and {name}"))
            devices.setdefault(device, name)
    return found


def given_twice(world: World, now: dt.datetime, bound: float,
                ) -> tuple[list[Violation], list[Violation]]:
    """(newly seen, lasting past ``bound`` s): devices two claims' allocations name."""
    seen, lasting, doubled = [], [], set()
    for v in devices_twice(world):
        doubled.add(v.key)
        if v.key not in world.doubled:
            world.doubled[v.key] = now
            seen.append(v)
        elif (now - world.doubled[v.key]).total_seconds() > bound:
            lasting.append(dataclasses.replace(v, detail=f"{v.detail} for over {bound:.0f}s"))
    for key in set(world.doubled) - doubled:
        del world.doubled[key]
    return seen, lasting


def not_ready(node: Obj) -> bool:
    """Whether a node cannot keep its workers though it exists (the controller's rule)."""
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") in ("node.kubernetes.io/out-of-service",
                                "node.kubernetes.io/not-ready",
                                "node.kubernetes.io/unreachable"):
            return True
    return any(c.get("type") == "Ready" and c.get("status") != "True"
               for c in _status(node).get("conditions") or [])


def stranded(world: World, now: dt.datetime, bound: float) -> list[Violation]:
    """Workers left on a lost node, or silent on a node not ready, for over ``bound`` s."""
    found = []
    stuck = set()
    for w in world.workers.values():
        s = _status(w)
        node = str(s.get("nodeName") or "")
        if not node or s.get("phase") not in ("Placing", "Running"):
            continue
        lost = node not in world.nodes
        silent = not lost and not_ready(world.nodes[node]) and \
            not str(s.get("reason") or "").startswith("NodeNotReady")
        if not (lost or silent):
            continue
        stuck.add(_uid(w))
        since = world.stuck.setdefault(_uid(w), now)
        if (now - since).total_seconds() > bound:
            what = "gone" if lost else "not ready, and the worker does not say so"
            found.append(Violation("stranded", _uid(w),
                                   f"worker {_name(w)} still {s.get('phase')} on node {node} "
                                   f"({what}) after {bound:.0f}s"))
    for uid in set(world.stuck) - stuck:
        del world.stuck[uid]
    return found


def worker_gone(world: World, worker: Obj, pod: Obj | None) -> list[Violation]:
    """A worker has just disappeared; ``pod`` is a fresh read of its pod (or None)."""
    if pod is not None and pod_owner(pod) == _uid(worker):
        return [Violation("pod-outlived-worker", _uid(worker),
                          f"worker {_name(worker)} gone while its pod {_name(pod)} exists")]
    return []


def orphans(world: World, now: dt.datetime, older_than: float) -> list[Violation]:
    """Managed claims nothing has referenced for ``older_than`` seconds (and older)."""
    referenced: set[str] = set()
    for w in world.workers.values():
        if _status(w).get("phase") != "Failed" and _status(w).get("claimName"):
            referenced.add(str(_status(w)["claimName"]))
        # A claim cut for a worker bears its UID last, or its UID then "-2" (the
        # second name, cut when it moves off the first while others stay there).
        referenced |= {c for c in world.claims
                       if c.endswith((f"-{_uid(w)}", f"-{_uid(w)}-2"))}
    referenced |= {pod_claim(p) for p in world.pods.values()}
    found = []
    for name in list(world.unreferenced):
        if name not in world.claims:
            del world.unreferenced[name]
    for name, claim in world.claims.items():
        if name in referenced or _status(claim).get("reservedFor") or \
                claim["metadata"].get("deletionTimestamp"):
            world.unreferenced.pop(name, None)
            continue
        since = world.unreferenced.setdefault(name, now)
        created = dt.datetime.fromisoformat(
            str(claim["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
        alone = (now - since).total_seconds()
        if alone >= older_than and (now - created).total_seconds() >= older_than:
            found.append(Violation("orphan-claim", name,
                                   f"claim {name} unreferenced for {alone:.0f}s"))
    return found


def final(world: World) -> list[Violation]:
    """At the end of a round: every worker settled, and its status true."""
    found = []
    for w in world.workers.values():
        s, name = _status(w), _name(w)
        phase = s.get("phase")
        if w["metadata"].get("deletionTimestamp"):
            found.append(Violation("final", name, f"worker {name} still deleting"))
        elif phase == "Pending":
            if not s.get("reason"):
                found.append(Violation("final", name, f"worker {name} Pending without a reason"))
        elif phase in ("Running", "Placing") and s.get("nodeName") and \
                s.get("nodeName") not in world.nodes:
            found.append(Violation("final", name, f"worker {name} still {phase} on node "
                                   f"{s.get('nodeName')}, which is gone"))
        elif phase == "Running":
            pod = world.pods.get(str(s.get("podName") or ""))
            claim = world.claims.get(str(s.get("claimName") or ""))
            if pod is None or pod_owner(pod) != _uid(w):
                found.append(Violation("final", name, f"worker {name} Running without its pod"))
            elif pod_claim(pod) != s.get("claimName"):
                found.append(Violation("final", name,
                                       f"worker {name}: status claim {s.get('claimName')}, "
                                       f"pod claim {pod_claim(pod)}"))
            elif (pod.get("spec") or {}).get("nodeName") != s.get("nodeName"):
                found.append(Violation("final", name, f"worker {name}: status node "
                                       f"{s.get('nodeName')}, pod node "
                                       f"{(pod.get('spec') or {}).get('nodeName')}"))
            elif claim is None or claim_node(claim) != s.get("nodeName"):
                found.append(Violation("final", name, f"worker {name}: claim "
                                       f"{s.get('claimName')} missing or on another node"))
        elif phase != "Failed" or not str(s.get("reason", "")).startswith(
                ("PodFailed", "TemplateError")):
            found.append(Violation("final", name, f"worker {name} is {phase} "
                                   f"({s.get('reason', 'no reason')})"))
    return found + devices_twice(world)
