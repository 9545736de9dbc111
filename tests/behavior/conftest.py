"""Shared hardware for the stories: the reference machines and the estimator's tiers."""

from __future__ import annotations

from placement import GiB, Node, Request, Role
from placement.simulator.simulation import Simulation

LORA = 10 * GiB  # the estimator's L4 tier
FFT_8B = 60 * GiB  # the estimator's 80Gi tier: an 8B full fine-tune


def dev_box(max_workers_per_claim: int = 4) -> Node:
    return Node("devbox", devices=2, device_memory=24 * GiB, host_memory=94 * GiB,
                max_workers_per_claim=max_workers_per_claim, product="NVIDIA L4")


def prod_node(name: str, *, roles: frozenset[Role] = frozenset(), max_workers: int = 2,
              devices: int = 1, host_memory: int | None = 180 * GiB) -> Node:
    return Node(name, devices=devices, device_memory=80 * GiB, host_memory=host_memory,
                roles=roles, max_workers_per_claim=max_workers, product="H100 80GB")


def trainer(name: str, memory: int, owner: str = "") -> Request:
    return Request(name, Role.TRAINER, memory, owner)


def sampler(name: str, memory: int, owner: str = "") -> Request:
    return Request(name, Role.SAMPLER, memory, owner)


def claim_of(sim: Simulation, worker: str) -> str | None:
    return sim.state(worker).claim


def node_of(sim: Simulation, worker: str) -> str | None:
    return sim.state(worker).node
