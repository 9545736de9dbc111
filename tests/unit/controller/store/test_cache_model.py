"""The fleet cache against a model of the API server: watch events (late, stale and
duplicated), re-lists, decisions assumed into the cache, write answers, failed writes
and restarts. After every step everything reconcile reads of the cache (its ``view``) is the plain
reading of the very objects it holds, and no seat has been promised twice."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from controller.fleet.claims import build_claim
from controller.fleet.reader import FleetView, build_fleet
from controller.fleet.rules import FleetReading
from controller.k8s import kube
from controller.k8s.objects import Obj, Worker
from controller.reconcile.housekeeping import census, tally
from controller.store.cache import Cache, strip
from controller.store.records import Record, to_obj, to_record
from controller.store.work import waiting_of
from placement import Fleet, JoinClaim, NewClaim, Request, Role, decide
from tests.strategies import fake_nodes, fake_slice, fake_worker, pod_for

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
Kind = kube.Resource
# What the class may say, each spelling selecting the same whole GPUs (hardware that
# shrinks under the claims on it is no promise of the controller's, and the invariant
# below would blame it): by type, by type and a memory floor, by a version.
SELECTORS = [f"device.attributes['{DRIVER}'].type == 'gpu'",
             f"device.attributes['{DRIVER}'].type == 'gpu' && "
             f"device.capacity['{DRIVER}'].memory.compareTo(quantity('1Gi')) >= 0",
             f"device.attributes['{DRIVER}'].type == 'gpu' && "
             f"device.attributes['{DRIVER}'].driverVersion.compareTo(semver('1.0.0')) > 0"]


def device_class(expression: str) -> Obj:
    return {"metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def mixed(slice_: Obj, extra: list[str], informed: bool) -> Obj:
    """The slice's GPUs typed as such (``informed``: with a taint that only informs),
    with devices beside them that no selector counts: MIG devices (on the first GPU's
    counters), tainted GPUs, one without memory."""
    note = {"taints": [{"key": "gpu.example.com/unmonitored", "effect": "None"}]}
    devices = [{**d, **(note if informed else {}),
                "attributes": {"type": {"string": "gpu"}, "driverVersion": {"version": "2.1.0"}},
                "consumesCounters": [{"counterSet": d["name"],
                                      "counters": {"memory": {"value": "1"}}}]}
               for d in slice_["spec"]["devices"]]
    memory = devices[0]["capacity"]["memory"]["value"]
    for i, kind in enumerate(extra):
        name = f"extra-{i}"
        if kind == "mig":
            devices.append({"name": name, "attributes": {"type": {"string": "mig"}},
                            "capacity": {"memory": {"value": memory}},
                            "consumesCounters": [{"counterSet": "gpu-0",
                                                  "counters": {"memory": {"value": "1"}}}]})
        elif kind == "no-memory":
            devices.append({"name": name, "attributes": {"type": {"string": "gpu"}}})
        else:
            devices.append({"name": name, "attributes": {"type": {"string": "gpu"}},
                            "capacity": {"memory": {"value": memory}},
                            "taints": [{"key": "gpu.example.com/xid", "effect": kind}]})
    counters = [{"name": d["name"], "counters": {"memory": {"value": "1"}}}
                for d in slice_["spec"]["devices"]]
    return {**slice_, "spec": {**slice_["spec"], "devices": devices,
                               "sharedCounters": counters}}


def _asking(memory: str, **more: Any) -> Obj:
    return {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": memory}},
            **more} if memory else {"name": "c", "image": "i"}


_MEMORY = st.sampled_from(["", "512Mi", "30Gi", "100Gi"])
# What a pod asks of its node's memory: containers, sidecars and init containers between
# them, an overhead; now and then more than a node has (its parking budget is then 0).
ASKS = st.builds(
    lambda containers, inits, overhead: {
        "containers": [_asking(m) for m in containers],
        **({"initContainers": [_asking(m, **({"restartPolicy": "Always"} if side else {}))
                               for m, side in inits]} if inits else {}),
        **({"overhead": {"memory": overhead}} if overhead else {})},
    st.lists(_MEMORY, min_size=1, max_size=2),
    st.lists(st.tuples(_MEMORY, st.booleans()), max_size=2), _MEMORY)

EXTRA = st.lists(st.sampled_from(["mig", "no-memory", "NoSchedule", "NoExecute"]), max_size=3)


def fleet_state(fleet: Fleet) -> Any:
    """Everything a decision reads, in a comparable form."""
    claims = sorted((c.name, c.node, c.devices, c.allocated,
                     tuple(sorted((b.worker, b.owner, b.parked_memory) for b in c.bookings)))
                    for c in fleet.claims)
    nodes = [(n, fleet.free_devices(n.name), fleet.parked_load(n.name)) for n in fleet.nodes]
    return nodes, claims


def reading_state(view: FleetReading, uids: list[str]) -> Any:
    """Everything reconcile reads of a fleet reading, in a comparable form."""
    return {
        "fleet": fleet_state(view.fleet),
        "nodes": dict(view.nodes),
        "claims": dict(view.claims),
        "closing": dict(view.closing),
        "bookings": dict(view.bookings),
        "seats": (view.seats_used, view.seats_total),
        "live": {uid: view.live_uid(uid) for uid in uids},
        "warnings": sorted(view.warnings),
        # Which claims give up a device two of ours were allocated (the model allocates
        # every claim on a node its first devices, whoever holds them).
        "conflicts": {name: (view.device_conflict(name), view.sharing(name))
                      for name in (*view.claims, *view.closing)},
    }


def read(objects: dict[str, dict[str, Obj]]) -> FleetView:
    def of(res: Kind) -> list[Obj]:
        return [objects[res.key][n] for n in sorted(objects.get(res.key, {}))]

    return build_fleet(slices=of(kube.SLICES), nodes=of(kube.NODES), claims=of(kube.CLAIMS),
                       workers=[Worker.from_obj(o) for o in of(kube.WORKERS)],
                       pods=of(kube.PODS), driver=DRIVER, node_pods=of(kube.NODE_PODS),
                       device_class=objects.get(kube.DEVICE_CLASSES.key, {}).get(CLASS),
                       foreign_claims=of(kube.OTHER_CLAIMS))


class Listener:
    """What a watch's feed hears of a re-list, in order."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def forget_missing(self, records: list[Record]) -> None:
        self.calls.append(("forget", records))

    def listed(self, record: Record, obj: Obj) -> None:
        self.calls.append(("listed", record, obj))


def rebuilt(objects: dict[str, dict[str, Obj]]) -> Fleet:
    return read(objects).fleet


def ours(objects: dict[str, dict[str, Obj]]) -> dict[str, dict[str, Obj]]:
    """The objects without the claims not ours: what our own promises are held to (a
    claim of another namespace may take a device the cache has not yet heard of, which
    DRA then refuses ours; that is the race the watch narrows, not a promise broken)."""
    return {**objects, kube.OTHER_CLAIMS.key: {}}


def over_promised(fleet: Fleet) -> list[str]:
    """Claims over their seats and nodes over their devices or host memory."""
    wrong = []
    for node in fleet.nodes:
        claims = [c for c in fleet.claims if c.node == node.name]
        if sum(c.devices for c in claims) > node.devices:
            wrong.append(f"node {node.name}: more devices reserved than it has")
        if node.host_memory is not None and fleet.parked_load(node.name) > node.host_memory:
            wrong.append(f"node {node.name}: parks more than its host memory")
        wrong += [f"claim {c.name}: {len(c.bookings)} seats" for c in claims
                  if len(c.bookings) > node.seats_per_claim]
    return wrong


class CacheModel(RuleBasedStateMachine):
    """The server holds the truth; the cache hears about it through a delayed channel."""

    workers = Bundle("workers")

    def __init__(self) -> None:
        super().__init__()
        self.rv = 0
        # By key: the managed pods and every namespace's (NODE_PODS) share a plural.
        kinds = (kube.SLICES, kube.NODES, kube.CLAIMS, kube.WORKERS, kube.PODS, kube.NODE_PODS,
                 kube.DEVICE_CLASSES, kube.OTHER_CLAIMS)
        self.server: dict[str, dict[str, Obj]] = {r.key: {} for r in kinds}
        self.resources = {r.key: r for r in kinds}
        self.pending: list[tuple[Kind, str, Obj]] = []  # sent by the server, not yet heard
        self.history: list[tuple[Kind, str, Obj]] = []  # everything ever sent
        self.in_flight: list[tuple[Kind, Obj]] = []  # assumed writes awaiting an answer
        self.cache = Cache(DRIVER, device_class=CLASS)
        self.decisions = 0

    # ------------------------------------------------------------ the server

    def _send(self, res: Kind, kind: str, obj: Obj) -> Obj:
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        key = strip(res, obj)["metadata"]["name"]  # a pod of any namespace: namespace/name
        if kind == "DELETED":
            self.server[res.key].pop(key, None)
        else:
            self.server[res.key][key] = obj
        self.pending.append((res, kind, obj))
        self.history.append((res, kind, obj))
        return obj

    @initialize(data=st.data())
    def nodes_appear(self, data: st.DataObject) -> None:
        self._send(kube.DEVICE_CLASSES, "ADDED", device_class(SELECTORS[0]))
        for node, slice_ in data.draw(fake_nodes()):
            self._send(kube.NODES, "ADDED", node)
            self._send(kube.SLICES, "ADDED", slice_)

    @rule(data=st.data())
    def node_relabelled(self, data: st.DataObject) -> None:
        names = sorted(self.server[kube.NODES.key])
        if not names:
            return
        node = self.server[kube.NODES.key][data.draw(st.sampled_from(names))]
        labels = dict(node["metadata"]["labels"])
        labels["openrl.io/enabled"] = "false" if labels.get(
            "openrl.io/enabled") == "true" else "true"
        self._send(kube.NODES, "MODIFIED", {**node, "metadata": {**node["metadata"],
                                                                 "labels": labels}})

    @rule(data=st.data())
    def slice_republished(self, data: st.DataObject) -> None:
        """A new generation, complete or (for a while) not."""
        names = sorted(self.server[kube.SLICES.key])
        if not names:
            return
        old = self.server[kube.SLICES.key][data.draw(st.sampled_from(names))]
        pool = old["spec"]["pool"]
        self._send(kube.SLICES, "MODIFIED", fake_slice(
            old["spec"]["nodeName"], len(old["spec"]["devices"]),
            old["spec"]["devices"][0]["capacity"]["memory"]["value"],
            generation=pool["generation"] + 1,
            count=data.draw(st.sampled_from([1, 1, 2]))))

    @rule(data=st.data(), extra=EXTRA, informed=st.booleans())
    def devices_tainted_partitioned_or_healed(self, data: st.DataObject, extra: list[str],
                                              informed: bool) -> None:
        """The same GPUs republished with other devices beside them (or none: a taint
        gone counts its device again)."""
        names = sorted(self.server[kube.SLICES.key])
        if not names:
            return
        old = self.server[kube.SLICES.key][data.draw(st.sampled_from(names))]
        gpus = [d for d in old["spec"]["devices"] if not d["name"].startswith("extra-")]
        pool = old["spec"]["pool"]
        self._send(kube.SLICES, "MODIFIED", mixed(fake_slice(
            old["spec"]["nodeName"], len(gpus), gpus[0]["capacity"]["memory"]["value"],
            generation=pool["generation"] + 1), extra, informed))

    @rule(expression=st.sampled_from(SELECTORS))
    def device_class_changed(self, expression: str) -> None:
        self._send(kube.DEVICE_CLASSES, "MODIFIED", device_class(expression))

    @rule(target=workers, worker=fake_worker())
    def worker_created(self, worker: Obj) -> str:
        name = worker["metadata"]["name"]
        if name not in self.server[kube.WORKERS.key]:
            self._send(kube.WORKERS, "ADDED", worker)
        return name

    @rule(name=workers, phase=st.sampled_from(["", "Pending", "Running", "Failed"]),
          reason=st.sampled_from(["", "NoCapacity: no node", "WaitingForCapacity: full"]),
          deleting=st.booleans())
    def worker_status_written(self, name: str, phase: str, reason: str, deleting: bool) -> None:
        """Our status write (or the worker's deletion starting) comes back as an event."""
        worker = self.server[kube.WORKERS.key].get(name)
        if worker is None:
            return
        changed = {**worker, "status": {"phase": phase, "reason": reason} if phase else {}}
        if deleting:
            changed["metadata"] = {**worker["metadata"],
                                   "deletionTimestamp": "2026-01-01T00:01:00Z"}
        self._send(kube.WORKERS, "MODIFIED", changed)

    @rule(name=workers)
    def worker_deleted(self, name: str) -> None:
        worker = self.server[kube.WORKERS.key].get(name)
        if worker is not None:
            self._send(kube.WORKERS, "DELETED", worker)

    def _end_pod(self, data: st.DataObject, resource: Kind, phase: str) -> None:
        """One of ``resource``'s pods is deleted, or reaches ``phase``."""
        names = sorted(self.server[resource.key])
        if not names:
            return
        pod = self.server[resource.key][data.draw(st.sampled_from(names))]
        if data.draw(st.booleans()):
            self._send(resource, "DELETED", pod)
        else:
            self._send(resource, "MODIFIED", {**pod, "status": {"phase": phase}})

    @rule(data=st.data())
    def pod_ends(self, data: st.DataObject) -> None:
        """A pod finishes (its seat frees) or is deleted."""
        self._end_pod(data, kube.PODS, "Succeeded")

    @rule(data=st.data(), namespace=st.sampled_from(["kube-system", "ns", "other"]),
          managed=st.booleans())
    def other_pod_bound(self, data: st.DataObject, namespace: str, managed: bool) -> None:
        """A DaemonSet's pod, say, lands on a node (or one labelled managed elsewhere)."""
        names = sorted(self.server[kube.NODES.key])
        if not names:
            return
        pod: Obj = {"metadata": {"name": f"p{self.rv}", "namespace": namespace},
                    "spec": {"nodeName": data.draw(st.sampled_from(names)),
                             **data.draw(ASKS)},
                    "status": {"phase": data.draw(st.sampled_from(["Pending", "Running"]))}}
        if managed:
            pod["metadata"]["labels"] = {"openrl.io/managed": "true"}
        self._send(kube.NODE_PODS, "ADDED", pod)

    @rule(data=st.data())
    def other_pod_resized(self, data: st.DataObject) -> None:
        """A pod's memory requests change in place (its node's parking budget with them)."""
        names = sorted(self.server[kube.NODE_PODS.key])
        if names:
            pod = self.server[kube.NODE_PODS.key][data.draw(st.sampled_from(names))]
            self._send(kube.NODE_PODS, "MODIFIED", {
                **pod, "spec": {"nodeName": pod["spec"]["nodeName"], **data.draw(ASKS)}})

    @rule(data=st.data())
    def other_pod_ends(self, data: st.DataObject) -> None:
        """It finishes (the server's selection then drops it) or is deleted."""
        self._end_pod(data, kube.NODE_PODS, "Failed")

    @rule(data=st.data(), where=st.sampled_from([("team", False), ("ns", False),
                                                  ("elsewhere", True)]),
          allocated=st.booleans())
    def foreign_claim_created(self, data: st.DataObject, where: tuple[str, bool],
                              allocated: bool) -> None:
        """A claim not ours: of another namespace, unmanaged beside ours, or another
        install's managed one; allocated at once, or not yet."""
        namespace, managed = where
        claim: Obj = {"metadata": {"name": f"fc{self.rv}", "namespace": namespace,
                                   "uid": f"fc-uid-{self.rv}"}}
        if managed:
            claim["metadata"]["labels"] = {"openrl.io/managed": "true"}
        if allocated:
            claim["status"] = self._foreign_allocation(data)
        self._send(kube.OTHER_CLAIMS, "ADDED", claim)

    @rule(data=st.data(), gone=st.booleans())
    def foreign_claim_allocated_or_released(self, data: st.DataObject, gone: bool) -> None:
        """DRA allocates it some free devices; or it lets them go: deallocated, or
        deleted."""
        names = sorted(self.server[kube.OTHER_CLAIMS.key])
        if not names:
            return
        claim = self.server[kube.OTHER_CLAIMS.key][data.draw(st.sampled_from(names))]
        if gone:
            self._send(kube.OTHER_CLAIMS, "DELETED", claim)
        elif claim.get("status"):
            self._send(kube.OTHER_CLAIMS, "MODIFIED", {**claim, "status": {}})
        else:
            self._send(kube.OTHER_CLAIMS, "MODIFIED",
                       {**claim, "status": self._foreign_allocation(data)})

    def _foreign_allocation(self, data: st.DataObject) -> Obj:
        """Devices of one pool that no claim not ours holds, and (by count) none of ours:
        DRA would hand them out. Sometimes of another driver, or none."""
        results: list[Obj] = []
        slices = sorted(self.server[kube.SLICES.key].values(), key=lambda o: o["metadata"]["name"])
        if slices:
            pool = data.draw(st.sampled_from(slices))
            node = pool["spec"]["nodeName"]
            held = {(r.get("pool"), r.get("device"))
                    for c in self.server[kube.OTHER_CLAIMS.key].values()
                    for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get(
                        "results", [])}
            free = [d["name"] for d in pool["spec"]["devices"] if (node, d["name"]) not in held]
            promised = rebuilt(self._truth())
            spare = next((promised.free_devices(n.name) for n in promised.nodes
                          if n.name == node), len(free))
            take = data.draw(st.lists(st.sampled_from(free), unique=True,
                                      max_size=min(spare, 2))) if free else []
            results = [{"driver": DRIVER, "pool": node, "device": d, "request": "r"}
                       for d in take]
            if data.draw(st.booleans()):
                results.append({"driver": "other.example.com", "pool": node,
                                "device": "gpu-0", "request": "r"})
        return {"allocation": {"devices": {"results": results}}}

    @rule()
    def dra_catches_up(self) -> None:
        for _, claim in sorted(self.server[kube.CLAIMS.key].items()):
            if claim.get("status", {}).get("allocation") is None:
                self._allocate(claim)

    @rule(data=st.data())
    def claim_allocated_or_swept(self, data: st.DataObject) -> None:
        names = sorted(self.server[kube.CLAIMS.key])
        if not names:
            return
        claim = self.server[kube.CLAIMS.key][data.draw(st.sampled_from(names))]
        if claim.get("status", {}).get("allocation") is None:
            self._allocate(claim)
            return
        promised = rebuilt(self._truth())
        on_it = next((c for c in promised.claims if c.name == claim["metadata"]["name"]), None)
        if on_it is None or not on_it.bookings:  # the sweep deletes only what nobody holds
            self._send(kube.CLAIMS, "DELETED", claim)

    def _allocate(self, claim: Obj) -> None:
        """DRA allocates the claim on the node it was sized for, as the pod's pin demands:
        its first devices, whoever holds them (as a lost answer can make kube-scheduler do)."""
        node = claim["metadata"]["annotations"]["openrl.io/sized-for-node"]
        count = claim["spec"]["devices"]["requests"][0]["exactly"]["count"]
        allocation = {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            "devices": {"results": [{"driver": DRIVER, "pool": node, "device": f"gpu-{i}"}
                                    for i in range(count)]}}
        self._send(kube.CLAIMS, "MODIFIED", {**claim, "status": {"allocation": allocation}})

    # ----------------------------------------------------------- the channel

    @precondition(lambda self: self.pending)
    @rule(count=st.sampled_from([1, 2, 5, 1000]))
    def deliver(self, count: int) -> None:
        for res, kind, obj in self.pending[:count]:
            self.cache.event(res, kind, obj)
        del self.pending[:count]

    @precondition(lambda self: self.history)
    @rule(data=st.data())
    def deliver_stale_or_duplicate(self, data: st.DataObject) -> None:
        heard = len(self.history) - len(self.pending)
        if heard:
            res, kind, obj = self.history[data.draw(st.integers(0, heard - 1))]
            self.cache.event(res, kind, obj)

    @rule(heard=st.booleans())
    def watch_expired_relist(self, heard: bool) -> None:
        """410 Gone: what was not yet heard is lost; a list brings the present."""
        self.pending.clear()
        for plural, objects in self.server.items():
            self._relist(self.resources[plural], list(objects.values()), heard)

    def _relist(self, res: Kind, objs: list[Obj], heard: bool) -> None:
        """The list into the cache; ``heard``: as a watch lists, its feed hearing each
        record on the object the fleet took (it must hear what a plain re-list gives)."""
        if not heard:
            self.cache.relist(res, objs, str(self.rv))
            return
        records = [to_record(res, strip(res, o)) for o in objs]
        listener = Listener()
        self.cache.relist_records(res, records, str(self.rv), then=listener)
        assert listener.calls == [("forget", records)] + [
            ("listed", r, to_obj(r)) for r in records]

    @rule(lands=st.booleans(), heard=st.booleans())
    def restart(self, lands: bool, heard: bool) -> None:
        """A new leader: writes in flight land on the server or not; it lists everything."""
        if lands:
            for res, obj in self.in_flight:
                if obj["metadata"]["name"] not in self.server[res.key]:
                    self._send(res, "ADDED", obj)
        self.in_flight.clear()
        self.pending.clear()
        self.cache = Cache(DRIVER, device_class=CLASS)
        for plural, objects in self.server.items():
            self._relist(self.resources[plural], list(objects.values()), heard)

    # ------------------------------------------------------ decide and write

    @rule()
    def decide_for_everyone(self) -> None:
        """A wake: every worker the cache knows, oldest name first."""
        for name in sorted(self.cache.stores[kube.WORKERS.key].objs):
            self.decide_and_assume(name)

    @rule(name=workers)
    def decide_and_assume(self, name: str) -> None:
        worker_obj = self.cache.get(kube.WORKERS, name)
        if worker_obj is None or self.cache.get(kube.PODS, f"orw-{name}") is not None:
            return
        worker = Worker.from_obj(worker_obj)
        if name in self.cache.view.bookings:
            return
        if worker.own_claim in self.cache.view.claims:  # cut before a lost pod write
            self._assume(kube.PODS, pod_for(worker_obj, worker.own_claim))
            return
        request = Request(name, Role(worker.role), worker.memory, worker.owner)
        decision = decide(request, self.cache.view.fleet)
        if isinstance(decision, NewClaim):
            claim = build_claim(worker.own_claim, decision, namespace="ns",
                                device_class=DRIVER, driver=DRIVER, worker=name)
            self._assume(kube.CLAIMS, claim)
            self._assume(kube.PODS, pod_for(worker_obj, worker.own_claim))
        elif isinstance(decision, JoinClaim):
            self._assume(kube.PODS, pod_for(worker_obj, decision.claim))
        self.decisions += 1

    def _assume(self, res: Kind, obj: Obj) -> None:
        self.cache.assume(res, obj)
        self.in_flight.append((res, obj))

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data(), succeeds=st.booleans())
    def write_answered(self, data: st.DataObject, succeeds: bool) -> None:
        res, obj = self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1)))
        name = obj["metadata"]["name"]
        if succeeds and name not in self.server[res.key]:
            # The claim's devices, or the pod's seat, are now the server's to tell.
            self.cache.confirm(res, self._send(res, "ADDED", obj))
        else:  # refused (or AlreadyExists): the assumption goes
            self.cache.forget(res, name)

    @rule()
    def everything_lands(self) -> None:
        """A quiet moment: every write succeeds, DRA allocates, the watches catch up."""
        while self.in_flight:
            res, obj = self.in_flight.pop(0)
            if obj["metadata"]["name"] in self.server[res.key]:
                self.cache.forget(res, obj["metadata"]["name"])
            else:
                self.cache.confirm(res, self._send(res, "ADDED", obj))
        self.dra_catches_up()
        self.deliver(len(self.pending))

    # ------------------------------------------------------------ the checks

    def _truth(self) -> dict[str, dict[str, Obj]]:
        """What has been promised: the server's objects and the writes still in flight."""
        truth = {plural: {n: strip(self.resources[plural], o) for n, o in objs.items()}
                 for plural, objs in self.server.items()}
        for res, obj in self.in_flight:
            truth[res.key].setdefault(obj["metadata"]["name"], strip(res, obj))
        return truth

    @invariant()
    def cache_reading_is_the_reading_of_its_objects(self) -> None:
        """Everything reconcile reads of the cache (placement's fleet, nodes, claims, the
        ones being deleted, bookings, seat counts, live UIDs, warnings) is what the plain
        reading makes of the very objects the cache holds."""
        held = {plural: {n: to_obj(r) for n, r in store.objs.items()}
                for plural, store in self.cache.stores.items() if plural in self.server}
        uids = sorted({str(o["metadata"].get("uid", "")) for objs in self.server.values()
                       for o in objs.values()} | {"no-such-uid"})
        assert reading_state(self.cache.view, uids) == reading_state(read(held), uids)

    @invariant()
    def the_pending_workers_are_those_of_the_objects(self) -> None:
        """What a wake and a scrape read (kept as workers change) is what reading every
        worker the cache holds gives."""
        objs = self.cache.items(kube.WORKERS)
        plain = [w for w in map(waiting_of, objs) if w is not None]
        kept = self.cache.waiting()
        assert sorted(kept) == sorted(plain)
        assert tally(kept) == census(objs)

    @invariant()
    def no_seat_promised_twice(self) -> None:
        assert over_promised(rebuilt(ours(self._truth()))) == []

    @invariant()
    def heard_everything_means_equal_to_the_server(self) -> None:
        if self.pending or self.in_flight:
            return
        held = {plural: {n: to_obj(r) for n, r in store.objs.items()}
                for plural, store in self.cache.stores.items() if plural in self.server}
        assert held == {plural: {n: strip(self.resources[plural], o) for n, o in objs.items()}
                        for plural, objs in self.server.items()}


CacheModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_cache_model = CacheModel.TestCase
