"""Hypothesis strategies for fleets, requests and event sequences: the one place they live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from placement import GiB, Node, Policy, Request, Role, Strategy

# A few hardware shapes, as in real fleets: few distinct device sizes, small
# counts, so collisions (ties, full nodes, contention) are common.
device_memories = st.sampled_from([16 * GiB, 24 * GiB, 40 * GiB, 80 * GiB])
host_memories = st.one_of(st.none(), st.sampled_from([32 * GiB, 94 * GiB, 180 * GiB, 1024 * GiB]))
role_sets = st.sampled_from(
    [frozenset(), frozenset({Role.TRAINER}), frozenset({Role.SAMPLER}),
     frozenset({Role.TRAINER, Role.SAMPLER})]
)
roles = st.sampled_from([Role.TRAINER, Role.SAMPLER])
# Pod slots for workers: mostly unchecked or ample, sometimes tight or none at all.
pod_limits = st.one_of(st.none(), st.none(), st.integers(min_value=0, max_value=6))
# Memory tiers, including odd sizes that do not divide devices evenly.
memories = st.one_of(
    st.sampled_from([10 * GiB, 25 * GiB, 35 * GiB, 45 * GiB, 55 * GiB, 60 * GiB, 100 * GiB]),
    st.integers(min_value=1, max_value=200 * GiB),
)


@st.composite
def nodes(draw: st.DrawFn, name: str | None = None) -> Node:
    # Now and then a mixed node: two or three device sizes on one host.
    groups = draw(st.one_of(st.just(()), st.just(()), st.lists(
        st.tuples(st.integers(min_value=1, max_value=3), device_memories),
        min_size=2, max_size=3, unique_by=lambda group: group[1])))
    if groups:
        return Node.grouped(
            name if name is not None else draw(st.sampled_from("abcdefgh")), groups,
            host_memory=draw(host_memories), roles=draw(role_sets),
            max_workers_per_claim=draw(st.integers(min_value=1, max_value=3)),
            pods=draw(pod_limits))
    return Node(
        name=name if name is not None else draw(st.sampled_from("abcdefgh")),
        devices=draw(st.integers(min_value=1, max_value=4)),
        device_memory=draw(device_memories),
        host_memory=draw(host_memories),
        roles=draw(role_sets),
        max_workers_per_claim=draw(st.integers(min_value=1, max_value=3)),
        pods=draw(pod_limits),
    )


@st.composite
def node_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = 5) -> list[Node]:
    count = draw(st.integers(min_value=min_size, max_value=max_size))
    names = draw(st.lists(st.sampled_from([f"node-{c}" for c in "abcdefghij"]),
                          min_size=count, max_size=count, unique=True))
    return [draw(nodes(name=name)) for name in names]


# Owners shared often enough that owner affinity has a choice to make; now and then a
# worker that runs alone.
owners = st.sampled_from(["", "qwen", "llama"])
exclusive = st.sampled_from([False, False, False, True])
policies = st.builds(Policy, st.sampled_from(list(Strategy)), st.booleans())
# Now and then a worker naming its device count, up to more than any drawn node has.
exact_devices = st.one_of(st.none(), st.none(), st.none(), st.none(),
                          st.integers(min_value=1, max_value=5))


@st.composite
def requests(draw: st.DrawFn, name: str = "w") -> Request:
    return Request(name=name, role=draw(roles), memory=draw(memories), owner=draw(owners),
                   exclusive=draw(exclusive), devices=draw(exact_devices))


# Arrivals outnumber the rest so that fleets fill up and contention happens.
EVENT_KINDS = ["arrive", "arrive", "arrive", "leave", "allocate", "add_node"]


@dataclass(frozen=True)
class Event:
    kind: str  # arrive | leave | allocate | add_node
    request: Request | None = None
    index: int = 0  # which present worker (modulo) leave/allocate picks
    node: Node | None = None


@st.composite
def events(draw: st.DrawFn, max_size: int = 40) -> list[Event]:
    out: list[Event] = []
    count = draw(st.integers(min_value=1, max_value=max_size))
    added = 0
    for i in range(count):
        kind = draw(st.sampled_from(EVENT_KINDS))
        if kind == "arrive":
            out.append(Event("arrive", request=draw(requests(name=f"w{i}"))))
        elif kind == "add_node":
            added += 1
            out.append(Event("add_node", node=draw(nodes(name=f"extra-{added}"))))
        else:
            out.append(Event(kind, index=draw(st.integers(min_value=0, max_value=1000))))
    return out


# ------------------------------------------------------- scenario documents
# Plain data a scenario reader may be handed: mostly the scenario's own
# vocabulary (so documents get past the first checks and into the fields),
# with the values that have broken readers before -- huge and odd numbers,
# text with control characters, escapes and lone surrogates, wrong types.

SCENARIO_KEYS = ["dra", "nodes", "events", "name", "devices", "deviceMemory", "hostMemory",
                 "roles", "maxWorkersPerClaim", "product", "arrive", "leave", "allocate",
                 "addNode", "expect", "role", "memory", "owner", "worker", "phase", "node",
                 "sharesWith", "alone", "reason", "at", "exclusive", "strategy",
                 "ownerAffinity"]
awkward_text = st.one_of(
    st.sampled_from(["", "a", "b", "box", "trainer", "sampler", "instant", "deferred",
                     "Placed", "Pending", "10Gi", "1Ti", "0", "-1Gi", "10Gb", "1e400", "1.5",
                     "12:30", "90s", "1h30m", "\n", "a\nb", "\x1b[2J", "w\ud800", "\u202e",
                     "9" * 500, "x" * 200]),
    st.text(max_size=20),
)
awkward_numbers = st.one_of(
    st.integers(min_value=-3, max_value=10),
    st.integers(),
    st.sampled_from([10**30, 10**400, -(10**20), 2**63]),
    st.floats(allow_nan=False),
)
scalars = st.one_of(st.none(), st.booleans(), awkward_numbers, awkward_text)


def scenario_documents() -> st.SearchStrategy[object]:
    keys = st.one_of(st.sampled_from(SCENARIO_KEYS), awkward_text)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(keys, inner, max_size=5)),
        max_leaves=25,
    )


@st.composite
def near_valid_documents(draw: st.DrawFn) -> dict[str, object]:
    """A small valid scenario with a few of its values (or keys) swapped for awkward ones."""
    anything = st.one_of(scalars, scenario_documents())
    node = {"name": "a", "devices": 2, "deviceMemory": "24Gi", "hostMemory": "94Gi",
            "maxWorkersPerClaim": 2, "roles": ["trainer", "sampler"], "product": "L4"}
    arrive = {"name": "w", "role": "trainer", "memory": "10Gi", "owner": "o"}
    expect = {"worker": "w", "phase": "Placed", "node": "a", "alone": True,
              "reason": "x", "devices": 1}
    document: dict[str, object] = {
        "dra": "instant",
        "nodes": [node],
        "events": [{"arrive": arrive}, {"expect": expect}, {"at": "1m", "leave": "w"},
                   {"addNode": dict(node, name="b")}, {"allocate": "w"}],
    }
    targets: list[dict[str, object]] = [document, node, arrive, expect]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = draw(st.sampled_from(targets))
        key = draw(st.one_of(st.sampled_from(sorted(target)), st.sampled_from(SCENARIO_KEYS)))
        target[key] = draw(anything)
    return document


# ------------------------------------------------------------- API objects
# Shaped like the API server's, for the controller's cache.

def fake_slice(node: str, devices: int, memory: str, *, generation: int = 1,
               count: int = 1, driver: str = "gpu.example.com",
               more: tuple[str, ...] = ()) -> dict[str, Any]:
    """One ResourceSlice of ``node``'s pool; ``count`` > 1 leaves the generation incomplete.
    ``more``: the memory of further devices (a node of mixed devices)."""
    sizes = [memory] * devices + list(more)
    return {
        "metadata": {"name": f"{node}-slice"},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                 "devices": [{"name": f"gpu-{i}", "capacity": {"memory": {"value": size}}}
                             for i, size in enumerate(sizes)]},
    }


@st.composite
def fake_nodes(draw: st.DrawFn) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Node, ResourceSlice) pairs: enabled GPU nodes with their policy labels."""
    out = []
    for i in range(draw(st.integers(min_value=1, max_value=3))):
        name = f"node-{i}"
        labels = {"openrl.io/enabled": "true",
                  "openrl.io/max-workers-per-claim": str(draw(st.integers(1, 3)))}
        labels.update(draw(st.sampled_from([{}, {"openrl.io/trainer": "true"},
                                            {"openrl.io/sampler": "true"}])))
        host = draw(st.sampled_from(["64Gi", "200Gi", "1Ti"]))
        allocatable = {"memory": host}
        pods = draw(st.sampled_from([None, "110", "3", "1"]))  # tight limits reach the rule
        if pods is not None:
            allocatable["pods"] = pods
        node = {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
                "status": {"allocatable": allocatable}}
        memory = draw(st.sampled_from(["24Gi", "80Gi"]))
        # Now and then a node of mixed devices: read as device groups by both readings.
        more = draw(st.sampled_from([(), (), ("48Gi",), ("48Gi", "80Gi")]))
        out.append((node, fake_slice(name, draw(st.integers(1, 2)), memory, more=more)))
    return out


@st.composite
def fake_worker(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from([f"w{i}" for i in range(10)]))
    return {
        "apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
        "metadata": {"name": name, "uid": f"uid-{name}-{draw(st.integers(0, 3))}",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"role": draw(st.sampled_from(["trainer", "sampler"])), "modelId": "m",
                 "memory": draw(st.sampled_from(["10Gi", "10Gi", "30Gi", "50Gi", "90Gi"])),
                 "ownerId": draw(st.sampled_from(["", "team-a"])),
                 "exclusive": draw(st.sampled_from([False, False, False, True]))},
    }


def pod_for(worker: dict[str, Any], claim: str) -> dict[str, Any]:
    """The managed pod a decision creates for ``worker`` on ``claim`` (the fields we read)."""
    name = worker["metadata"]["name"]
    return {
        "metadata": {"name": f"orw-{name}",
                     "labels": {"openrl.io/managed": "true", "openrl.io/worker": name},
                     "annotations": {"openrl.io/memory": "1",
                                     "openrl.io/owner": worker["spec"].get("ownerId") or name},
                     "ownerReferences": [{
                         "apiVersion": "openrl.io/v1alpha1", "kind": "OpenRLWorker",
                         "name": name, "uid": worker["metadata"]["uid"], "controller": True}]},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
        "status": {"phase": "Pending"},
    }
