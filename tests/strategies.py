"""Hypothesis strategies for fleets, requests and event sequences: the one place they live."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from placement import GiB, Node, Request, Role

# A few hardware shapes, as in real fleets: few distinct device sizes, small
# counts, so collisions (ties, full nodes, contention) are common.
device_memories = st.sampled_from([16 * GiB, 24 * GiB, 40 * GiB, 80 * GiB])
host_memories = st.one_of(st.none(), st.sampled_from([32 * GiB, 94 * GiB, 180 * GiB, 1024 * GiB]))
role_sets = st.sampled_from(
    [frozenset(), frozenset({Role.TRAINER}), frozenset({Role.SAMPLER}),
     frozenset({Role.TRAINER, Role.SAMPLER})]
)
roles = st.sampled_from([Role.TRAINER, Role.SAMPLER])
# Memory tiers, including odd sizes that do not divide devices evenly.
memories = st.one_of(
    st.sampled_from([10 * GiB, 25 * GiB, 35 * GiB, 45 * GiB, 55 * GiB, 60 * GiB, 100 * GiB]),
    st.integers(min_value=1, max_value=200 * GiB),
)


@st.composite
def nodes(draw: st.DrawFn, name: str | None = None) -> Node:
    return Node(
        name=name if name is not None else draw(st.sampled_from("abcdefgh")),
        devices=draw(st.integers(min_value=1, max_value=4)),
        device_memory=draw(device_memories),
        host_memory=draw(host_memories),
        roles=draw(role_sets),
        max_workers_per_claim=draw(st.integers(min_value=1, max_value=3)),
    )


@st.composite
def node_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = 5) -> list[Node]:
    count = draw(st.integers(min_value=min_size, max_value=max_size))
    names = draw(st.lists(st.sampled_from([f"node-{c}" for c in "abcdefghij"]),
                          min_size=count, max_size=count, unique=True))
    return [draw(nodes(name=name)) for name in names]


@st.composite
def requests(draw: st.DrawFn, name: str = "w") -> Request:
    return Request(name=name, role=draw(roles), memory=draw(memories),
                   owner=draw(st.sampled_from(["", "qwen", "llama"])))


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
