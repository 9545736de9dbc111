"""The fleet cache's nodes: each filed in placement's fleet as it now reads, change by change.

Rules:

* The same reading of nodes as ``fleet_reader.build_fleet`` (which stays the
  plain reference), by the same rules: slices and nodes through
  ``read_slices`` and ``read_nodes``. This module only decides what a change
  touches; the claims and seats on these nodes are ``fleet_cache``'s.
* The configured DeviceClass's selectors are compiled once per version of
  the class; a class that changes re-reads every pool (rare, and what it
  selects may change anywhere). Another class's changes touch nothing.
* Every change costs what it touches:

    the change                                 what is read again
    -----------------------------------------  -----------------------------------------
    a slice (of the driver, or no longer)      its pool's slices, then each node they
                                               name or named: its hardware, and the node
                                               taken out of the fleet and put back
    the configured DeviceClass, its selectors  every pool, then every node
      changed
    a claim not ours, holding other devices    the pools of the devices it holds or
                                               held, then the nodes they name
    a node                                     that node, taken out and put back
    a pod other than a worker's, coming to a   that node (its pod slots changed)
      node or leaving it

* It holds no lock and does no I/O; the cache around it serializes changes.
* It keeps no object: what it must read again (a pool's slices, a node) it
  looks up in the cache (``Lookup``). Of claims not ours it keeps only the
  devices each holds; of other pods, the node each takes a slot on.
* What the fleet refuses (a node with fewer devices than a claim on it holds,
  say) is left out and reported among the warnings, never raised: one odd
  object must not stop the watches. Between a node and a claim wider than
  the node now reads, the node gives way, whichever came first (``make_way``):
  the claim's devices are really held. Such a node is kept in ``refused`` and
  filed again when it reads wide enough or the claim that stood in its way
  leaves (``refile``): no event of the node's own need come for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from controller.fleet.reader import Hardware, read_nodes, read_slices
from controller.fleet.rules import claim_holder, held_devices, other_pod_node
from controller.fleet.selectors import DeviceSelector
from controller.k8s import kube
from controller.k8s.objects import Obj
from placement import Fleet, Node, PlacementError

__all__ = ["FleetNodes", "Lookup"]

Lookup = Callable[[kube.Resource, str], Obj | None]  # the cache's current object, if any


class FleetNodes:
    """The nodes of ``fleet``, kept as the slices, the DeviceClass, the nodes, the claims
    not ours and the other pods now read."""

    def __init__(self, driver: str, fleet: Fleet, *, lookup: Lookup,
                 device_class: str | None = None) -> None:
        self.driver = driver
        self._fleet = fleet
        self._lookup = lookup
        self._class_name = device_class
        self._selector: DeviceSelector | None = None
        self.nodes: dict[str, Node] = {}  # as filed in the fleet
        self.pool_nodes: dict[str, str] = {}  # pool -> its node (a claim's node may be a pool's)
        # Claims not ours: what each holds ((pool, device)), and per pool each held
        # device's holders (sorted; the first names it): a small record, never the claim
        self._foreign: dict[str, tuple[tuple[str, str], ...]] = {}
        self._taken: dict[str, dict[str, tuple[str, ...]]] = {}
        self._slices: dict[str, tuple[str, str]] = {}  # slice -> (pool, node) it names
        self._pool_slices: dict[str, set[str]] = {}
        self._node_pools: dict[str, Counter[str]] = {}  # node -> pools naming it (slice count)
        self._hardware: dict[str, Hardware] = {}
        self._pool_notes: dict[str, list[str]] = {}
        self._node_warnings: dict[str, list[str]] = {}
        self._pod_slot: dict[str, str] = {}  # namespace/name -> the node it takes a slot on
        self._other_pods: Counter[str] = Counter()  # node -> its pods that are not workers
        self.refused: set[str] = set()  # nodes the fleet would not take as they read

    # ---------------------------------------------------------------- changes

    def slice_changed(self, name: str, obj: Obj | None) -> None:
        old = self._slices.pop(name, None)
        touched_pools: set[str] = set()
        touched_nodes: set[str] = set()
        if old is not None:
            pool, node = old
            self._pool_slices[pool].discard(name)
            if not self._pool_slices[pool]:
                del self._pool_slices[pool]
            self._unname(node, pool)
            touched_pools.add(pool)
            touched_nodes.add(node)
        if obj is not None and (obj.get("spec") or {}).get("driver") == self.driver:
            pool, node = self._slices[name] = _pool_and_node(obj)
            self._pool_slices.setdefault(pool, set()).add(name)
            self._node_pools.setdefault(node, Counter())[pool] += 1
            touched_pools.add(pool)
            touched_nodes.add(node)
        for pool in touched_pools:
            touched_nodes |= self._reread_pool(pool)
        for node in sorted(touched_nodes - {""}):
            self._reread_hardware(node)

    def device_class_changed(self, name: str, obj: Obj | None) -> None:
        if name != self._class_name:
            return
        selector = DeviceSelector.of(obj) if obj is not None else None
        if selector == self._selector:
            return
        self._selector = selector
        nodes: set[str] = set()
        for pool in sorted(self._pool_slices):
            nodes |= self._reread_pool(pool)
        for node in sorted((nodes | set(self._hardware)) - {""}):
            self._reread_hardware(node)

    def foreign_claim_changed(self, name: str, obj: Obj | None) -> None:
        """A claim not ours (``namespace/name``): the devices it holds, and with them
        the counters those consume, are taken or given back."""
        old = self._foreign.pop(name, ())
        new = tuple(sorted(set(held_devices(obj, self.driver)))) if obj is not None else ()
        if new:
            self._foreign[name] = new
        if old == new:
            return
        holder = claim_holder(obj) if obj is not None else name
        for (pool, device), step in [*((d, -1) for d in old), *((d, 1) for d in new)]:
            devices = self._taken.setdefault(pool, {})
            rest = tuple(h for h in devices.get(device, ()) if h != holder)
            rest = tuple(sorted((*rest, holder))) if step > 0 else rest
            if rest:
                devices[device] = rest
            else:
                devices.pop(device, None)
            if not devices:
                del self._taken[pool]
        nodes: set[str] = set()
        for pool in sorted({pool for pool, _ in (*old, *new)} & set(self._pool_slices)):
            nodes |= self._reread_pool(pool)
        for node in sorted(nodes - {""}):
            self._reread_hardware(node)

    def node_changed(self, name: str, obj: Obj | None) -> None:
        self._refile_node(name, obj)

    def refile(self, name: str) -> None:
        """File a node the fleet refused again, as it now reads (a claim left it)."""
        self._refile_node(name)

    def make_way(self, name: str, why: str) -> None:
        """Leave a node out for a claim on it wider than it reads: the claim is what the
        cluster allocated, the node's free devices would include some the claim holds.
        Filed again when it reads wide enough (its own change) or the claim goes."""
        if name in self.nodes:
            self._fleet.remove_node(name)
            del self.nodes[name]
        self._node_warnings.setdefault(name, []).append(
            f"node {name}: left out of placement: {why}")
        self.refused.add(name)

    def node_pod_changed(self, name: str, obj: Obj | None) -> None:
        """A pod of any namespace (``namespace/name``): the pod slot it takes, if any."""
        old = self._pod_slot.pop(name, "")
        new = other_pod_node(obj) if obj is not None else ""
        if new:
            self._pod_slot[name] = new
        if old == new:
            return
        for node, step in ((old, -1), (new, 1)):
            if node:
                self._other_pods[node] += step
                if self._other_pods[node] <= 0:
                    del self._other_pods[node]
                self._refile_node(node)

    # -------------------------------------------------------------- warnings

    def reading_notes(self) -> Iterator[str]:
        """What reading the slices found: the class's selectors', then each pool's."""
        yield from self._selector.warnings if self._selector is not None else ()
        for pool in sorted(self._pool_notes):
            yield from self._pool_notes[pool]

    def node_warnings(self) -> Iterator[str]:
        """Each node's warnings, by node: left out of placement, and why."""
        for node in sorted(self._node_warnings):
            yield from self._node_warnings[node]

    # ------------------------------------------------------------- hardware

    def _unname(self, node: str, pool: str) -> None:
        pools = self._node_pools.get(node)
        if pools is None:
            return
        pools[pool] -= 1
        if pools[pool] <= 0:
            del pools[pool]
        if not pools:
            del self._node_pools[node]

    def _reread_pool(self, pool: str) -> set[str]:
        """Re-read one pool's slices; the nodes whose hardware may have changed."""
        before = {self.pool_nodes[pool]} if pool in self.pool_nodes else set()
        names = sorted(self._pool_slices.get(pool, ()))
        slices = self._objs(kube.SLICES, names)
        _, pool_nodes, notes = self._read(slices, [pool])
        self._pool_notes.pop(pool, None)
        if notes:
            self._pool_notes[pool] = notes
        self.pool_nodes.pop(pool, None)
        if pool in pool_nodes:
            self.pool_nodes[pool] = pool_nodes[pool]
        named = {self._slices[s][1] for s in names}
        return before | named | set(pool_nodes.values())

    def _read(self, slices: list[Obj], pools: Iterable[str],
              ) -> tuple[dict[str, Hardware], dict[str, str], list[str]]:
        """``read_slices`` with the class's selector and what claims not ours hold of
        these pools."""
        taken = {pool: {device: holders[0] for device, holders in self._taken[pool].items()}
                 for pool in pools if pool in self._taken}
        return read_slices(slices, self.driver, self._selector, taken)

    def _objs(self, res: kube.Resource, names: list[str]) -> list[Obj]:
        found = (self._lookup(res, name) for name in names)
        return [obj for obj in found if obj is not None]

    def _reread_hardware(self, node: str) -> None:
        pools = self._node_pools.get(node, Counter())
        slices = self._objs(kube.SLICES, [s for pool in sorted(pools)
                                          for s in sorted(self._pool_slices.get(pool, ()))])
        hardware, _, _ = self._read(slices, pools)
        if node in hardware:
            self._hardware[node] = hardware[node]
        else:
            self._hardware.pop(node, None)
        self._refile_node(node)

    def _refile_node(self, name: str, obj: Obj | None = None) -> None:
        """File the node as it now reads (``obj``: the node, when the caller has it)."""
        obj = obj if obj is not None else self._lookup(kube.NODES, name)
        hardware = self._hardware.get(name)
        desired: Node | None = None
        self._node_warnings.pop(name, None)
        self.refused.discard(name)
        if obj is not None and hardware is not None:
            nodes, warnings = read_nodes([obj], {name: hardware}, self._other_pods)
            desired = nodes[0] if nodes else None
            if warnings:
                self._node_warnings[name] = warnings
        current = self.nodes.get(name)
        if desired == current:
            return
        if current is not None:
            self._fleet.remove_node(name)
            del self.nodes[name]
        if desired is not None:
            try:
                self._fleet.add_node(desired)
            except PlacementError as exc:  # e.g. fewer devices than a claim on it holds
                self._node_warnings.setdefault(name, []).append(
                    f"node {name}: left out of placement: {exc}")
                self.refused.add(name)
                return
            self.nodes[name] = desired


def _pool_and_node(item: Obj) -> tuple[str, str]:
    spec = item.get("spec") or {}
    return str((spec.get("pool") or {}).get("name", "")), str(spec.get("nodeName") or "")
