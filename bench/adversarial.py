"""Valid scenarios shaped to make a careless simulator slow (JSON documents).

Each shape is a worst case for one piece of bookkeeping: the pending queue's
length, the number of distinct pending classes, the other role's queue, a
retry on every arrival, a worker name whose claims keep their names. At
``events`` events each should cost the same per event as at a tenth of that;
a path that looks at every pending worker or class per event shows up as a
per-event cost growing ten times.

    .venv/bin/python bench/adversarial.py distinct-sizes 100000 > shape.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

Document = dict[str, Any]


def _arrive(name: str, memory: str, role: str = "trainer") -> dict[str, Any]:
    return {"arrive": {"name": name, "role": role, "memory": memory}}


def _node(name: str, devices: int, seats: int = 1, roles: list[str] | None = None) -> Document:
    node: Document = {"name": name, "devices": devices, "deviceMemory": "80Gi",
                      "hostMemory": "2Ti", "maxWorkersPerClaim": seats}
    if roles is not None:
        node["roles"] = roles
    return node


def distinct_sizes(events: int) -> Document:
    """One device; a holder, then n workers of n different sizes wait; each leaves in turn.

    Every departure frees the device for the oldest waiting worker, which
    leaves next: n departures, each with n distinct pending classes behind it.
    """
    waiting = (events - 1) // 2
    out = [_arrive("holder", "80Gi")]
    out += [_arrive(f"w{i:07d}", f"{1024 + i}Mi") for i in range(waiting)]
    out += [{"leave": "holder"}] + [{"leave": f"w{i:07d}"} for i in range(waiting - 1)]
    return {"nodes": [_node("gpu", 1)], "events": out[:events]}


def newest_first(events: int) -> Document:
    """One device, one pending class of n workers leaving newest first."""
    waiting = (events - 1) // 2
    out = [_arrive("holder", "80Gi")]
    out += [_arrive(f"w{i:07d}", "10Gi") for i in range(waiting)]
    out += [{"leave": f"w{i:07d}"} for i in reversed(range(waiting))]
    return {"nodes": [_node("gpu", 1)], "events": out[:events]}


def retry_on_arrival(events: int) -> Document:
    """n wide workers of n sizes wait; a small worker comes and goes on the last free device.

    With instant allocation every new claim is a capacity change (a seat to
    join), so each arrival and each departure retries the pending workers,
    none of which the one free device can hold.
    """
    waiting = events // 2
    out = [_arrive("holder", "560Gi")]  # 7 of 8 devices
    out += [_arrive(f"w{i:07d}", f"{82 * 1024 + i}Mi") for i in range(waiting)]  # 2 devices
    serial = 0
    while len(out) < events:
        serial += 1
        out += [_arrive(f"s{serial:07d}", "10Gi"), {"leave": f"s{serial:07d}"}]
    return {"nodes": [_node("gpu", 8, seats=2)], "events": out[:events]}


def other_role(events: int) -> Document:
    """n samplers of n sizes wait for a sampler node while trainers churn on a trainer node."""
    waiting = events // 2
    out: list[dict[str, Any]] = [_arrive(f"s{i:07d}", f"{1024 + i}Mi", "sampler")
                                 for i in range(waiting)]
    serial = 0
    while len(out) < events:
        serial += 1
        out += [_arrive(f"t{serial:07d}", "10Gi"), {"leave": f"t{serial:07d}"}]
    return {"nodes": [_node("train", 1, roles=["trainer"])], "events": out[:events]}


def reused_name(events: int) -> Document:
    """One worker name arrives again and again while the claims it cut live on.

    Each round a node joins, "x" cuts a claim there (claim-x, then claim-x-2,
    claim-x-3, ... as the earlier ones are still taken), a partner joins it,
    "x" leaves it to the partner, and a second partner fills it.
    """
    out: list[dict[str, Any]] = []
    round_ = 0
    while len(out) < events:
        round_ += 1
        out += [{"addNode": _node(f"n{round_:07d}", 1, seats=2)},
                _arrive("x", "10Gi"), _arrive(f"p{round_:07d}", "10Gi"), {"leave": "x"},
                _arrive(f"q{round_:07d}", "10Gi")]
    return {"nodes": [], "events": out[:events]}


def many_claims(events: int) -> Document:
    """One wide node; a worker waits for all of it while the others cut claims one by one.

    Every new claim is a capacity change on that node, so every arrival asks
    what the node can seat now, with ever more claims on it.
    """
    devices = events + 1
    out = [_arrive("first", "10Gi"), _arrive("wide", f"{devices * 80}Gi")]
    out += [_arrive(f"w{i:07d}", "10Gi") for i in range(events - 2)]
    return {"nodes": [_node("wide", devices, seats=2)], "events": out[:events]}


SHAPES: dict[str, Callable[[int], Document]] = {
    "distinct-sizes": distinct_sizes,
    "newest-first": newest_first,
    "retry-on-arrival": retry_on_arrival,
    "other-role": other_role,
    "reused-name": reused_name,
    "many-claims": many_claims,
}
# Shapes whose cost grows with something other than the pending queue: the
# claims on one node, which its device count bounds. Measured on request only.
OUTSIDE_TARGET = {"many-claims"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("events", type=int)
    args = parser.parse_args(argv)
    json.dump(SHAPES[args.shape](args.events), sys.stdout)


if __name__ == "__main__":
    main()
