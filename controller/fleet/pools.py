"""Autoscaled pools: what the operator says an autoscaler can add, and the device sizes
a standing claim lists.

Rules:

* A declared pool reads ``COUNTxMEMORY`` or ``COUNTxMEMORY:ROLE[+ROLE]``: a node
  the autoscaler can add with COUNT devices of MEMORY each, for the roles named
  (none: both). Entries are separated by commas, semicolons or spaces, e.g.
  ``8x80Gi:trainer, 4x40Gi:sampler``.
* A size is a device memory S with the most devices D one node of it has. A
  worker fits it when ``devices_for(memory, S, N) <= D``: with ``spec.devices``
  N, exactly N devices each holding ``ceil(memory / N)``, else
  ``devices_needed``.
* The sizes a standing claim lists (``alternatives``): every size of the nodes
  that accept the worker's role, and of the declared pools that do, the worker
  fits; smallest device first, each with its count, a per-device floor (the
  worker's share) and the size as ceiling, so DRA hands out exactly one of the
  shapes placement would have priced. At most ``MAX_ALTERNATIVES``, the
  smallest kept.
* Whether a worker can ever be seated (``Verdict``): with pools declared, only
  they and the nodes present count; none fitting is NoCapacity. With none
  declared nobody can say: the worker waits "for a node to be added", and its
  claim lists one open size, a device of at least its memory with no ceiling,
  when no present node fits either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from placement.model import Node, Role, devices_for, per_device_share
from placement.quantity import QuantityError, format_quantity, parse_quantity

__all__ = ["MAX_ALTERNATIVES", "Alternative", "DeclaredPool", "PoolError", "Verdict",
           "alternatives", "can_grow", "parse_pools"]

# DRA lists at most this many subrequests in one request's prioritized list.
MAX_ALTERNATIVES = 8

_ENTRY = re.compile(r"^(\d+)x([0-9.]+[A-Za-z]*)(?::([a-z+]+))?$")


class PoolError(ValueError):
    """A declared pool the controller cannot read."""


@attrs.frozen
class DeclaredPool:
    """A node an autoscaler can add: ``devices`` of ``device_memory`` bytes, for ``roles``."""

    devices: int
    device_memory: int
    roles: frozenset[Role] = frozenset()

    def accepts(self, role: Role) -> bool:
        return not self.roles or role in self.roles

    def __str__(self) -> str:
        roles = "+".join(sorted(r.value for r in self.roles))
        return f"{self.devices}x{format_quantity(self.device_memory)}" + (
            f":{roles}" if roles else "")


def parse_pools(value: str | Iterable[DeclaredPool]) -> tuple[DeclaredPool, ...]:
    """``8x80Gi:trainer, 4x40Gi`` as declared pools; a clear error naming a bad entry."""
    if not isinstance(value, str):
        return tuple(value)
    pools = []
    for entry in re.split(r"[,;\s]+", value.strip()):
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if match is None:
            raise PoolError(f"autoscale-pools entry {entry!r} is not COUNTxMEMORY[:ROLE[+ROLE]] "
                            "(e.g. 8x80Gi:trainer)")
        count, memory, roles = match.groups()
        try:
            size = parse_quantity(memory)
        except QuantityError as exc:
            raise PoolError(f"autoscale-pools entry {entry!r}: {exc}") from exc
        if int(count) < 1 or size < 1:
            raise PoolError(f"autoscale-pools entry {entry!r}: devices and memory must be "
                            "greater than zero")
        try:
            named = frozenset(Role(r) for r in (roles or "").split("+") if r)
        except ValueError:
            raise PoolError(f"autoscale-pools entry {entry!r}: roles are "
                            f"{', '.join(r.value for r in Role)}") from None
        pools.append(DeclaredPool(int(count), size, named))
    return tuple(pools)


@attrs.frozen
class Alternative:
    """One shape a standing claim accepts: ``devices`` devices each within [floor, ceiling]."""

    devices: int
    memory_floor: int
    memory_ceiling: int | None  # None: no ceiling (nothing known fits; see the rules)

    @property
    def name(self) -> str:
        """The subrequest's name: a DNS label naming the shape."""
        ceiling = (format_quantity(self.memory_ceiling).lower()
                   if self.memory_ceiling is not None else "any")
        return f"d{self.devices}-{ceiling}".replace(".", "-")

    def __str__(self) -> str:
        ceiling = format_quantity(self.memory_ceiling) if self.memory_ceiling else "any"
        return f"{self.devices} x {format_quantity(self.memory_floor)}..{ceiling}"


@attrs.frozen
class Verdict:
    """What a waiting worker can stand for: its shapes, and whether it can never fit."""

    shapes: tuple[Alternative, ...]
    never: bool  # pools are declared and neither they nor any present node fit
    declared: bool

    @property
    def reason(self) -> str:
        """Stable while the worker stands (a node coming up changes no status): the
        shapes themselves are on the claim, and in the log when it is created."""
        if self.never:
            return "no declared autoscaled pool fits it"
        if not self.declared:
            return "waiting for a node to be added"
        return "waiting for kube-scheduler or the autoscaler to add a node"


def can_grow(role: Role, memory: int, pools: tuple[DeclaredPool, ...],
             devices: int | None = None) -> bool:
    """Whether a node the autoscaler adds could hold the worker (``devices``: the count
    it names, if any): some declared pool fits it, or none is declared (then nobody can
    say it cannot)."""
    return not pools or any(p.accepts(role) and _fits(memory, p.device_memory, devices,
                                                      p.devices) for p in pools)


def _fits(memory: int, device_memory: int, devices: int | None, most: int) -> bool:
    need = devices_for(memory, device_memory, devices)
    return need is not None and need <= most


def alternatives(role: Role, memory: int, nodes: Iterable[Node],
                 pools: tuple[DeclaredPool, ...], devices: int | None = None) -> Verdict:
    """The shapes a standing claim for a worker of ``role`` and ``memory`` lists
    (``devices``: the count it names, if any)."""
    most: dict[int, int] = {}
    for size, count in [*((n.device_memory, n.devices) for n in nodes if n.accepts(role)),
                        *((p.device_memory, p.devices) for p in pools if p.accepts(role))]:
        most[size] = max(most.get(size, 0), count)
    shapes = []
    for size in sorted(most):
        need = devices_for(memory, size, devices)
        if need is not None and need <= most[size]:
            shapes.append(Alternative(need, per_device_share(memory, need), size))
    shapes = shapes[:MAX_ALTERNATIVES]
    if shapes or pools:
        return Verdict(tuple(shapes), never=not shapes, declared=bool(pools))
    # Nothing known fits: one open shape, its count (one, unless it names more).
    count = devices or 1
    return Verdict((Alternative(count, per_device_share(memory, count), None),), never=False,
                   declared=False)
