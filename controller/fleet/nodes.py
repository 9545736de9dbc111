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
    a pod other than a worker's, coming to a   that node (its pod slots and its
      node, leaving it, or asking other        parking budget changed)
      memory

* It holds no lock and does no I/O; the cache around it serializes changes.
* It keeps no object: what it must read again (a pool's slices, a node) it
  looks up in the cache (``Lookup``). Of claims not ours it keeps only the
  devices each holds; of other pods, the node each takes a slot on and its
  memory request, summed per node (``requests``): no list per decision.
* What the fleet refuses is left out and reported among the warnings, never
  raised: one odd object must not stop the watches. Between a node and a
  claim wider than the node now reads, the node gives way whichever came
  first, as ``fleet_rules.make_way`` decides (the one rule, the plain
  reading's too). A node that gave way is kept as it reads, with its warning,
  and decided again when it reads anew or the claims on it change
  (``settle``): no event of the node's own need come for it.
* The fleet cache talks to its nodes through this interface only:

    the cache                                  its nodes
    -----------------------------------------  -----------------------------------------
    reads ``nodes``, ``pool_nodes``            the nodes as filed; each pool's node
                                               (read-only)
    hands on a change (``*_changed``)          the table above
    is about to file a claim, or took one      ``settle(node, coming)``: the node gives
      off a node or changed its width            way, or is filed again, as the rule says
    reads the warnings                         ``reading_notes()``, ``node_warnings()``
    is asked for the claims on a node          ``claims_on``, given at construction: the
                                               claims the fleet holds filed on it
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

from controller.fleet.reader import Hardware, read_nodes, read_slices
from controller.fleet.requests import memory_request
from controller.fleet.rules import claim_holder, held_devices, make_way, other_pod_node
from controller.fleet.selectors import DeviceSelector
from controller.fleet.warning import FleetWarning, Kind, warning
from controller.k8s import kube
from controller.k8s.objects import Obj
from placement import Claim, Fleet, Node, PlacementError

__all__ = ["ClaimsOn", "FleetNodes", "Lookup"]

Lookup = Callable[[kube.Resource, str], Obj | None]  # the cache's current object, if any
ClaimsOn = Callable[[str], Iterable[Claim]]  # the claims the fleet holds filed on a node


class FleetNodes:
    """The nodes of ``fleet``, kept as the slices, the DeviceClass, the nodes, the claims
    not ours and the other pods now read."""

    def __init__(self, driver: str, fleet: Fleet, *, lookup: Lookup, claims_on: ClaimsOn,
                 device_class: str | None = None) -> None:
        self.driver = driver
        self._fleet = fleet
        self._lookup = lookup
        self._claims_on = claims_on
        self._class_name = device_class
        self._selector: DeviceSelector | None = None
        self._nodes: dict[str, Node] = {}  # as filed in the fleet
        self._pool_nodes: dict[str, str] = {}  # pool -> its node (a claim's may be a pool's)
        self.nodes: Mapping[str, Node] = MappingProxyType(self._nodes)
        self.pool_nodes: Mapping[str, str] = MappingProxyType(self._pool_nodes)
        # Claims not ours: what each holds ((pool, device)), and per pool each held
        # device's holders (sorted; the first names it): a small record, never the claim
        self._foreign: dict[str, tuple[tuple[str, str], ...]] = {}
        self._taken: dict[str, dict[str, tuple[str, ...]]] = {}
        self._slices: dict[str, tuple[str, str]] = {}  # slice -> (pool, node) it names
        self._pool_slices: dict[str, set[str]] = {}
        self._node_pools: dict[str, Counter[str]] = {}  # node -> pools naming it (slice count)
        self._hardware: dict[str, Hardware] = {}
        self._pool_notes: dict[str, list[FleetWarning]] = {}
        self._node_warnings: dict[str, list[FleetWarning]] = {}  # each node's, as read
        # namespace/name -> the node it takes a slot on, and its memory request
        self._pod_slot: dict[str, tuple[str, int]] = {}
        self._other_pods: Counter[str] = Counter()  # node -> its pods that are not workers
        self._other_memory: Counter[str] = Counter()  # node -> what those request of memory
        # Nodes left out as they read, each with why (``make_way``'s warning, mostly)
        self._refused: dict[str, tuple[Node, FleetWarning]] = {}

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

    def settle(self, name: str, coming: Claim | None = None) -> None:
        """The claims on node ``name`` changed: one left it or changed its width, or
        ``coming`` is about to be filed on it. The node gives way or is filed again as
        ``make_way`` now says."""
        filed = self._nodes.get(name)
        if filed is not None:
            if coming is not None:  # the claims the fleet holds on it fit: the fleet checks
                self._file(filed, [coming])
        elif name in self._refused:
            self._file(self._refused[name][0],
                       [*self._claims_on(name), *((coming,) if coming is not None else ())])

    def node_pod_changed(self, name: str, obj: Obj | None) -> None:
        """A pod of any namespace (``namespace/name``): the pod slot it takes, if any, and
        the memory it asks of that node."""
        old = self._pod_slot.pop(name, _NO_SLOT)
        node = other_pod_node(obj) if obj is not None else ""
        new = (node, memory_request(obj)) if node and obj is not None else _NO_SLOT
        if node:
            self._pod_slot[name] = new
        if old == new:
            return
        for (on, memory), step in ((old, -1), (new, 1)):
            if on:
                self._other_pods[on] += step
                self._other_memory[on] += step * memory
                if self._other_pods[on] <= 0:
                    del self._other_pods[on]
                    del self._other_memory[on]
        for on in sorted({old[0], new[0]} - {""}):
            self._refile_node(on)

    # -------------------------------------------------------------- warnings

    def reading_notes(self) -> Iterator[FleetWarning]:
        """What reading the slices found: the class's selectors', then each pool's."""
        yield from self._selector.warnings if self._selector is not None else ()
        for pool in sorted(self._pool_notes):
            yield from self._pool_notes[pool]

    def node_warnings(self) -> Iterator[FleetWarning]:
        """Each node's warnings, by node: its reading's, then why it is left out."""
        for node in sorted(self._node_warnings.keys() | self._refused.keys()):
            yield from self._node_warnings.get(node, ())
            if node in self._refused:
                yield self._refused[node][1]

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
        before = {self._pool_nodes[pool]} if pool in self._pool_nodes else set()
        names = sorted(self._pool_slices.get(pool, ()))
        slices = self._objs(kube.SLICES, names)
        _, pool_nodes, notes = self._read(slices, [pool])
        self._pool_notes.pop(pool, None)
        if notes:
            self._pool_notes[pool] = notes
        self._pool_nodes.pop(pool, None)
        if pool in pool_nodes:
            self._pool_nodes[pool] = pool_nodes[pool]
        named = {self._slices[s][1] for s in names}
        return before | named | set(pool_nodes.values())

    def _read(self, slices: list[Obj], pools: Iterable[str],
              ) -> tuple[dict[str, Hardware], dict[str, str], list[FleetWarning]]:
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
        if obj is not None and hardware is not None:
            nodes, warnings = read_nodes([obj], {name: hardware}, self._other_pods,
                                         self._other_memory)
            desired = nodes[0] if nodes else None
            if warnings:
                self._node_warnings[name] = warnings
        current = self._nodes.get(name)
        if desired is not None and desired == current:
            return  # filed as it reads: the claims on it fit
        if current is not None:
            self._fleet.remove_node(name)
            del self._nodes[name]
        if desired is None:
            self._refused.pop(name, None)
        else:
            self._file(desired, self._claims_on(name))

    def _file(self, node: Node, claims: Iterable[Claim]) -> None:
        """File ``node`` as it reads (it may be filed so already), or leave it out when it
        gives way to one of ``claims`` on it (``make_way``)."""
        name = node.name
        way = make_way([node], claims).get(name)
        if way is None and name not in self._nodes:
            try:
                self._fleet.add_node(node)
            except PlacementError as exc:  # should placement ever refuse more than the rule
                way = warning(Kind.NODE_LEFT_OUT, name, str(exc))
            else:
                self._nodes[name] = node
        elif way is not None and name in self._nodes:
            self._fleet.remove_node(name)
            del self._nodes[name]
        if way is None:
            self._refused.pop(name, None)
        else:
            self._refused[name] = (node, way)


_NO_SLOT = ("", 0)  # a pod that takes no slot


def _pool_and_node(item: Obj) -> tuple[str, str]:
    spec = item.get("spec") or {}
    return str((spec.get("pool") or {}).get("name", "")), str(spec.get("nodeName") or "")
