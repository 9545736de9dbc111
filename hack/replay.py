#!/usr/bin/env python3
"""Play scenarios against a live control plane and compare with ``simulate``, step by step.

The simulator is only worth trusting if it predicts the cluster. This plays a
scenario against a real kube-apiserver, kube-scheduler and DRA (the local
control plane of hack/cluster.sh, or any cluster KUBECONFIG names) with the
controller running in this process, and after every step compares the
cluster with ``openrl-place simulate -o json`` of the scenario up to that
step.

How a scenario is played:

* Its nodes are fake GPU nodes (hack/fakenodes) with the scenario's geometry,
  host memory (allocatable memory; a node without ``hostMemory`` gets 1Pi,
  which no parked load reaches), role labels and max-workers-per-claim. A node
  whose scenario declares ``leftOut`` devices is a mixed node: its slice
  carries that many more devices beside its own, each with a ``NoSchedule``
  taint (whatever reason the scenario gives), so DRA never allocates them and
  the controller leaves them out, as the simulator never counts them. Each
  scenario gets its own DRA driver and DeviceClass, namespace and node names,
  so scenarios never see each other's fleet (nor the cluster's own nodes).
* The scenario's ``strategy`` is the controller's; ``ownerAffinity: false``
  cannot be played (the controller always places with owner affinity).
* ``arrive`` creates an OpenRLWorker, ``leave`` deletes one, ``addNode``
  registers one more fake node and publishes its devices. ``expect`` events
  are the simulator's own checks and are not played.
* Only ``dra: instant`` can be played: on a cluster DRA allocates a claim as
  soon as kube-scheduler binds its pod, so there is no moment at which to
  play ``allocate``. A deferred scenario is refused, naming this.
* Arrival order is creation time (which the API server keeps to the second),
  then name: two arrivals in one second would be ordered by name, not as the
  scenario says, so an arrival waits for the next second when it must.
* Each step is settled before the next: every worker has been reconciled
  (Pending or Running, none Placing or deleting), every claim is allocated
  and held by a worker (an orphan is swept first), the controller's queue has
  nothing due and no write in flight, and that held twice in a row.

What is compared (claim names differ on a cluster, so groups are compared,
not names): which workers share a claim, each claim's node and device count,
each worker's phase (Running on the cluster is Placed in the simulator), and
for a pending worker the kind of its reason (NoCapacity or
WaitingForCapacity). A settled cluster that differs is given a few seconds to
catch up (a wake may still be on its way) before the step counts as a
disagreement.

A scenario with a node group (hack/replay_pool.py has the mapping and its
limits: one group, min 0, a template that is one of Karpenter's instance
types) is played with Karpenter (hack/karpenter.sh up, and no other NodePool)
adding and removing the group's nodes as a NodePool of the scenario's own,
and the controller in autoscaling mode (standing claims and pods, the pool
declared). Its fixed nodes publish in Karpenter's driver, so the controller
sees both. Then:

* Settled also means Karpenter is done (replay_pool.PoolWatch.busy): every
  node it asked for is up, Ready, published and booked by the controller,
  none of the group's nodes is empty (it would remove it), every standing pod
  not on a node has been looked at, and the pool has not changed for a few
  seconds. An unallocated standing claim whose worker is Pending is expected,
  not a sign of motion.
* The simulator is read at the same point: ``simulate -o json`` of the steps
  so far followed by a marker (a worker nothing fits, left out of the
  comparison) at twice bootTime + idleTime after the last step, so every node
  asked for is up and every idle one gone, as on the settled cluster. Events
  must be further apart than that (generated ones are ten minutes apart).
* The placement's last tie-break between two nodes is their names: the
  fixed nodes are named so they sort against Karpenter's (kwok-...) as their
  scenario names sort against the group's (<group>-<n>). Between two of the
  group's nodes no such mapping exists (Karpenter's names are random), so a
  tie there can show as a difference in the partition.
* Karpenter names its nodes itself, so a claim on a group node is compared
  as on ``<group>/*``, and the group's nodes as their number and the
  partition of claims among them (which claims share a node; an empty node
  would show as one holding none), not by name. Fixed nodes keep their names.
* Not compared: when anything happened. Karpenter's nodes take seconds, not
  bootTime, and are removed after the NodePool's consolidateAfter, not
  idleTime; the harness waits for both to be over, so only the order of
  events and the end state of each step can be held to the simulator, not
  its clock (waits, node-hours). Which standing pod a new node takes is
  kube-scheduler's and how many nodes to add is Karpenter's own packing: both
  show up as a difference in the partition or the count when they differ.

A scenario that sets ``rebalanceAfter`` (``--moves`` generates them) is played
with moves on: arrivals marked ``movable`` are created so, and the controller
moves workers for efficiency ``FIDELITY_MOVE_AFTER`` seconds (2) after devices
free, on this clock; the fake nodes run no time-slicer, so a moving worker's
old pod goes half a second after it is asked to drain (the controller's drain
timeout). Then:

* Settled also means no worker is moving (``status.move``), and the settled
  cluster has held still long enough for every move the step made due to
  have begun: rebalanceAfter, then two passes of the move rule.
* The simulator is read once the step's moves are made: the steps so far and
  the marker at rebalanceAfter and a second after the last step. The events
  must be further apart than rebalanceAfter (each step's moves come before
  the next) and span less than an hour (a worker moves at most once an hour,
  and the cluster plays the scenario in minutes); moves are not played with
  node groups.
* A move is compared as what it leaves: which workers share a claim, where,
  on how many devices (the moved worker's new claim among them).

Known disagreement (``--groups``, seed 17): Karpenter's own simulation of a
pending pod's claims does not honour DRA device taints. A standing claim
whose shape a mixed fixed node fits only by counting its tainted devices has
its pod nominated to that node, so no node is added, while kube-scheduler
cannot allocate the tainted devices: the worker stands for ever, where the
simulator (and the controller, which never counts them either) adds a node.

Known disagreement (``--moves``, seed 21; not a move): a departure frees its
pod's slot on the node before its claim's devices (the claim goes after the
pod, by the garbage collector or the sweep), where the simulator frees both
at once. A worker waiting only for a pod slot on a node that shares claims
is seated in that moment by a join, where the simulator gives it the device
that frees; a move cannot mend it there (the node's pod slots are full, so
the freed device is no newcomer's).

  python -m hack.replay [SCENARIO.yaml ...]        play these files
  python -m hack.replay --generate N --seed S  play N generated scenarios
  --moves (generated scenarios set rebalanceAfter and mark workers movable;
  not with --groups),
  --groups (generated scenarios declare a node group, a Karpenter instance
  type as template, events ten minutes apart: played with Karpenter),
  --keep-going, --save DIR (write each generated scenario), --verbose,
  --stay (leave the last fleet standing, for snapshot and explain to look at)

Environment: KUBECONFIG (default: the local control plane's admin
kubeconfig). The last line reads ``fidelity: A/N scenarios, S/T steps agree``;
exit status 0 when everything agreed, 1 when something did not, 2 when a
scenario cannot be played.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs
import yaml

from cli.model import NodeGroupSpec
from cli.render_json import to_document
from cli.replay import replay
from cli.scenario import (
    AddNode,
    Arrive,
    Expect,
    Leave,
    NodeSpec,
    Scenario,
    ScenarioError,
    build_scenario,
    load_scenario,
)
from controller.fleet.claims import read_claim
from controller.k8s import kube, naming
from controller.loop import Controller
from controller.main import run
from controller.reconcile.rebalancing import APART as MOVE_APART
from controller.reconcile.rebalancing import pass_interval
from controller.settings import Settings
from controller.store.work import REBALANCE, SWEEP
from hack import replay_pool as pool
from hack.fakenodes import fakenodes
from hack.lib import kube as testbed
from hack.lib.install import ensure_crd
from hack.lib.names import FAKE_NODE_LABEL
from placement.model import Role
from placement.quantity import format_quantity

ROOT = Path(__file__).resolve().parents[1]

log = logging.getLogger("replay")

LOCAL_KUBECONFIG = ROOT / ".cluster" / "admin.kubeconfig"
SERVICE_ACCOUNTS = testbed.Resource("", "v1", "serviceaccounts")
TEMPLATES = ROOT / "manifests" / "base" / "pod-templates.yaml"
UNCHECKED_HOST_MEMORY = "1Pi"
UNCHECKED_PODS = "100000"  # a node always has a pod limit: one no scenario reaches
SETTLE_TIMEOUT = float(os.environ.get("FIDELITY_SETTLE_TIMEOUT", "90"))
CATCH_UP = float(os.environ.get("FIDELITY_CATCH_UP", "6"))
# With a group: Karpenter's node takes seconds to come and consolidation waits its
# consolidateAfter (replay_pool); a pod it nominated to a node that cannot take it is
# provisioned for once the nomination lapses.
GROUP_SETTLE_TIMEOUT = float(os.environ.get("FIDELITY_GROUP_SETTLE_TIMEOUT", "180"))
GROUP_CATCH_UP = float(os.environ.get("FIDELITY_GROUP_CATCH_UP", "30"))
# With moves: the controller's rebalanceAfter (seconds of this clock) and how long a
# moving worker's old pod waits for a time-slicer the fake nodes do not run.
LIVE_AFTER = float(os.environ.get("FIDELITY_MOVE_AFTER", "2"))
DRAIN_TIMEOUT = 0.5
POLL = 0.25
GiB = 1 << 30


class Unplayable(Exception):
    """A scenario this harness cannot play against a cluster."""


# ----------------------------------------------------------------- generation


def generate(seed: int, *, groups: bool = False, moves: bool = False) -> dict[str, Any]:
    """A small scenario that keeps a small fleet busy: mixed hardware, roles, host memory, churn.

    Small on purpose: each step costs real API round trips. Every node names
    its host memory, since a cluster always has one; about a third name a
    small pod limit (the fake nodes' allocatable pods), so it binds before
    devices or seats do; about one in six is a mixed node, publishing one or
    two tainted devices the scenario declares as ``leftOut``. The limits and
    the mixed nodes come from streams of their own: the rest of a seed's
    scenario is what it always was.

    With ``groups`` (opt-in) it also declares one node group, drawn from a
    stream of its own: its template one of Karpenter's instance types (so it
    can be played live; hack/replay_pool.py) with its host memory and pods,
    roles and max-workers-per-claim drawn like a node's; none up at first, up
    to one to three, a minute to come up, two idle before going. The events
    get times ten minutes apart (groups need a clock, and each step must
    settle before the next: replay_pool.horizon); the rest is unchanged.

    With ``moves`` (opt-in, not with ``groups``) it sets ``rebalanceAfter``
    (two minutes), gives the events times five minutes apart (so each step's
    moves come before the next, and the whole stays within the hour a worker
    waits between two moves) and marks about three arrivals in four movable,
    from a stream of its own; the rest is unchanged.
    """
    rng = random.Random(seed)
    extras = _Extras(random.Random(f"pods-{seed}"), random.Random(f"mixed-{seed}"))
    names = iter(f"n{i}" for i in range(100))
    nodes = [_generated_node(rng, next(names), extras) for _ in range(rng.randint(1, 3))]
    events: list[dict[str, Any]] = []
    present: list[str] = []
    arrived = 0
    added = False
    count = rng.randint(8, 11)
    for index in range(count):
        # With moves: arrivals crowd the fleet first, then departures and a node added
        # free devices while others still share (what a move needs).
        leaves, adds = ((0.25, 0.07) if not moves else
                        (0.0, 0.0) if index < count * 0.6 else (0.5, 0.2))
        roll = rng.random()
        if present and roll < leaves:
            worker = present.pop(rng.randrange(len(present)))
            events.append({"leave": worker})
        elif not added and roll < leaves + adds:
            added = True
            events.append({"addNode": _generated_node(rng, next(names), extras)})
        else:
            worker = f"w{arrived}"
            arrived += 1
            present.append(worker)
            arrive: dict[str, Any] = {
                "name": worker,
                "role": rng.choice(["trainer", "trainer", "sampler"]),
                # Mostly one device's worth, so workers contend for seats rather
                # than wait for ever; now and then one that needs a wide claim or
                # more than any node has.
                "memory": f"{rng.choice([10, 20, 20, 30, 30, 40, 45, 60, 70, 100, 250])}Gi",
            }
            if rng.random() < 0.5:
                arrive["owner"] = rng.choice(["qwen", "llama"])
            events.append({"arrive": arrive})
    document: dict[str, Any] = {"dra": "instant", "nodes": nodes, "events": events}
    if groups:
        document["nodeGroups"] = [_generated_group(random.Random(f"groups-{seed}"))]
        for index, event in enumerate(events):
            event["at"] = index * GROUP_EVENTS_APART
    elif moves:
        movable = random.Random(f"moves-{seed}")
        document["rebalanceAfter"] = f"{MOVES_AFTER:.0f}s"
        # Claims that may be shared (a move is from one), with room to park.
        for node in [*nodes, *(e["addNode"] for e in events if "addNode" in e)]:
            node["maxWorkersPerClaim"] = movable.choice([2, 2, 3, 4])
            node["hostMemory"] = movable.choice(["256Gi", "512Gi", "1024Gi"])
        for index, event in enumerate(events):
            event["at"] = index * MOVE_EVENTS_APART
            if "arrive" in event and movable.random() < 0.75:
                event["arrive"]["movable"] = True
    return document


GROUP_EVENTS_APART = 600  # seconds: more than replay_pool.horizon of the generated group
MOVES_AFTER = 120.0  # a generated scenario's rebalanceAfter (scenario seconds)
MOVE_EVENTS_APART = 300  # more than MOVES_AFTER; 11 events stay within the hour


def _generated_group(rng: random.Random) -> dict[str, Any]:
    kind = pool.instance_types()[rng.choice(sorted(pool.instance_types()))]
    template: dict[str, Any] = {
        "devices": kind.devices, "deviceMemory": format_quantity(kind.device_memory),
        "hostMemory": format_quantity(kind.memory), "pods": kind.pods,
        "maxWorkersPerClaim": rng.choice([1, 2, 3, 4]),
    }
    roles = rng.choice([[], [], ["trainer"], ["sampler"]])
    if roles:
        template["roles"] = roles
    return {"name": "pool", "template": template, "min": 0, "max": rng.choice([1, 2, 2, 3]),
            "bootTime": "1m", "idleTime": "2m"}


@dataclass(frozen=True)
class _Extras:
    """The streams a node's later additions draw from, apart from the scenario's own."""

    pods: random.Random
    mixed: random.Random


def _generated_node(rng: random.Random, name: str, extras: _Extras) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": name,
        "devices": rng.choice([1, 1, 2, 3]),
        "deviceMemory": rng.choice(["40Gi", "80Gi", "80Gi", "80Gi"]),
        "hostMemory": f"{rng.choice([64, 96, 128, 200, 1024])}Gi",
        "maxWorkersPerClaim": rng.choice([1, 2, 3, 3]),
    }
    roles = rng.choice([[], [], [], ["trainer"], ["sampler"], ["trainer", "sampler"]])
    if roles:
        node["roles"] = roles
    limit = extras.pods.choice([None, None, 1, 2, 3])
    if limit is not None:
        node["pods"] = limit
    if extras.mixed.random() < 1 / 6:
        node["leftOut"] = [{"devices": extras.mixed.choice([1, 2]),
                            "reason": fakenodes.TAINT_REASON}]
    return node


# ----------------------------------------------------------------- comparison

Groups = set[tuple[tuple[str, ...], str, int]]  # (workers, node, devices) per claim
Phases = dict[str, str]  # worker -> Placed | Pending:<kind> | something else


Hosts = tuple[tuple[tuple[str, ...], ...], ...]  # per group node, its claims' workers


@dataclass(frozen=True)
class View:
    """What is compared: the sharing groups, every worker's phase, and the group's nodes
    as the partition of their claims (a claim on one is on ``<group>/*``)."""

    groups: frozenset[tuple[tuple[str, ...], str, int]]
    phases: tuple[tuple[str, str], ...]
    hosts: Hosts = ()  # sorted; a node holding no claim is ()
    # What the step shows (shared claims, kinds of waiting), for the coverage line only.
    shows: frozenset[str] = field(default=frozenset(), compare=False)

    def differences(self, expected: View) -> list[str]:
        lines = []
        mine, theirs = dict(self.phases), dict(expected.phases)
        for worker in sorted(set(mine) | set(theirs)):
            if mine.get(worker) != theirs.get(worker):
                lines.append(f"worker {worker}: simulate {theirs.get(worker, 'absent')}, "
                             f"cluster {mine.get(worker, 'absent')}")
        for group in sorted(expected.groups - self.groups):
            lines.append(f"simulate only: {_group_text(group)}")
        for group in sorted(self.groups - expected.groups):
            lines.append(f"cluster only:  {_group_text(group)}")
        if self.hosts != expected.hosts:
            lines.append(f"group nodes: simulate {_hosts_text(expected.hosts)}, "
                         f"cluster {_hosts_text(self.hosts)}")
        return lines


def _hosts_text(hosts: Hosts) -> str:
    return f"{len(hosts)} " + (" ".join(
        "{" + " ".join(f"[{', '.join(workers)}]" for workers in node) + "}" for node in hosts)
        or "-")


def group_place(group: str) -> str:
    """Where a claim on one of the group's nodes is, in a View: not the node's name."""
    return f"{group}/*"


def _group_text(group: tuple[tuple[str, ...], str, int]) -> str:
    workers, node, devices = group
    return f"[{', '.join(workers)}] on {node} ({devices} device{'s' if devices > 1 else ''})"


# Arrives after a group scenario's last step, to read the simulator once its group is
# done (replay_pool.horizon): nothing fits it, so it changes nothing and is not compared.
MARKER = Arrive(name="fidelity-marker", role="trainer", memory=1 << 60)


def simulated_view(scenario: Scenario, steps: int) -> View:
    """``simulate -o json`` of the scenario's first ``steps`` events, as a View; with a
    node group, read once the group is done (the marker, replay_pool.horizon)."""
    if (scenario.groups or scenario.rebalance_after) and scenario.times is not None:
        # Read once the group is done, or once the step's moves are made (they are due
        # rebalanceAfter after the step; playable() keeps the next step further off).
        at = scenario.times[steps - 1] if steps else 0.0
        later = (pool.horizon(scenario) if scenario.groups else scenario.rebalance_after + 1)
        prefix = attrs.evolve(scenario, events=(*scenario.events[:steps], MARKER),
                              times=(*scenario.times[:steps], at + later))
    else:
        prefix = Scenario(scenario.dra, scenario.nodes, scenario.events[:steps],
                          policy=scenario.policy)
    report = replay(prefix)
    document = to_document(report)
    document["workers"].pop(MARKER.name, None)
    names = {group.name for group in scenario.groups}
    in_group = {summary.node.name: summary.node.name.rpartition("-")[0]
                for summary in report.nodes if summary.node.name.rpartition("-")[0] in names}
    on: dict[str, list[tuple[str, ...]]] = {node: [] for node in in_group}
    for claim in document["claims"].values():
        if claim["node"] in on:
            on[claim["node"]].append(tuple(sorted(claim["workers"])))
    hosts = tuple(sorted(tuple(sorted(claims)) for claims in on.values()))
    groups = frozenset((tuple(sorted(claim["workers"])),
                        group_place(in_group[claim["node"]]) if claim["node"] in in_group
                        else claim["node"], claim["devices"])
                       for claim in document["claims"].values())
    phases = tuple(sorted((name, _phase(worker["phase"], worker["reason"]))
                          for name, worker in document["workers"].items()))
    shows = {"a shared claim" for workers, _, _ in groups if len(workers) > 1}
    made = [step for step in document["steps"] if step["event"] == "move"]
    if any(step["at"] >= (scenario.times[steps - 1] if scenario.times and steps else 0)
           for step in made):
        shows.add("a move")
    shows |= {"a multi-device claim" for _, _, devices in groups if devices > 1}
    for worker in document["workers"].values():
        reason = worker["reason"] or ""
        shows |= {kind for kind in ("NoCapacity", "WaitingForCapacity")
                  if reason.startswith(kind)}
        if "host memory" in reason:
            shows.add("waiting on host memory")
        if "pod limit" in reason:
            shows.add("waiting on a pod limit")
        if "full at" in reason:
            shows.add("waiting on full claims")
    if hosts:
        shows.add("group nodes")
    if len(hosts) > 1:
        shows.add("two or more group nodes")
    return View(groups, phases, hosts, frozenset(shows))


def _phase(phase: str, reason: str | None) -> str:
    if phase == "Pending":
        return f"Pending:{(reason or '').split(':', 1)[0]}"
    return phase


# ----------------------------------------------------------------- the cluster


@dataclass
class Stage:
    """One scenario's corner of the cluster: driver, namespace, fake nodes, controller."""

    kubeconfig: str
    tag: str  # unique per scenario: names its driver, namespace and nodes
    admin: testbed.Kube = field(init=False)  # the harness's own requests
    kube: kube.Kube = field(init=False)  # the controller's
    fake: fakenodes.FakeNodes = field(init=False)
    controller: Controller | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    last_arrival: int = -1  # the second of the last creation
    moving: str = ""  # why the cluster was last found unsettled
    group: NodeGroupSpec | None = None  # played by Karpenter as a NodePool (replay_pool)
    watch: pool.PoolWatch | None = None  # that NodePool, once created
    moves: bool = False  # the scenario sets rebalanceAfter: the controller moves workers
    strategy: str = "spread"  # the scenario's, the controller's --strategy
    # How long a settled step must hold still to count (with moves): every move it makes
    # due has begun by then (rebalanceAfter, then a pass, its clock sampled a pass late).
    quiet: float = 0.0
    movable: set[str] = field(default_factory=set)  # the workers created movable

    def may_move(self, view: View) -> bool:
        """Whether a move could still come: a movable worker shares a claim."""
        return self.moves and any(len(workers) > 1 and self.movable.intersection(workers)
                                  for workers, _, _ in view.groups)

    def __post_init__(self) -> None:
        self.admin = testbed.Kube.connect(self.kubeconfig, self.namespace)
        self.kube = kube.Kube(kube.load_api_client(self.kubeconfig), self.namespace)
        self.fake = fakenodes.FakeNodes(self.kubeconfig, [], fakenodes.PROFILES["gpu80"],
                                        self.driver, {})

    @property
    def namespace(self) -> str:
        return f"fidelity-{self.tag}"

    @property
    def driver(self) -> str:
        # With a group, the driver Karpenter sizes its types in and adopt.py publishes in.
        return pool.DRIVER if self.group is not None else f"{self.tag}.fidelity.example.com"

    @property
    def pool_name(self) -> str:
        return pool.pool_name(self.tag)

    def node_name(self, name: str) -> str:
        if self.group is None:
            return f"{self.tag}-{name}"
        # Node names break the placement's last ties, and Karpenter's nodes are kwok-...:
        # a fixed node sorts against them as its scenario name does against <group>-<n>.
        side = "a" if name < f"{self.group.name}-" else "z"
        return f"{side}{self.tag}-{name}"

    def scenario_node(self, name: str) -> str:
        if self.group is not None and name[1:].startswith(f"{self.tag}-"):
            name = name[1:]
        return name.removeprefix(f"{self.tag}-")

    # ------------------------------------------------------------- set up

    def open(self, nodes: tuple[NodeSpec, ...]) -> None:
        admin = self.admin
        ensure_crd(admin, replace=False)  # a chart may own it: leave it as it is
        admin.create(testbed.NAMESPACES, {"metadata": {"name": self.namespace}})
        for document in yaml.safe_load_all(TEMPLATES.read_text()):
            if document:
                document["metadata"]["namespace"] = self.namespace
                admin.create(testbed.CONFIGMAPS, document)
        _wait(lambda: admin.get(SERVICE_ACCOUNTS, "default") is not None, 60,
              "the namespace's default ServiceAccount")
        self.fake.kubelet_version = admin.version()
        self.fake.ensure_device_class(admin)
        if self.group is not None:
            kind = pool.instance_type(self.group.template)
            assert not isinstance(kind, str), kind  # playable() refused it otherwise
            admin.create(pool.NODEPOOLS, pool.nodepool_body(self.pool_name, self.group, kind))
            self.watch = pool.PoolWatch(admin, self.pool_name, self.namespace)
        for spec in nodes:
            self.add_node(spec)
        threading.Thread(target=self.fake.heartbeat_loop, daemon=True,
                         name=f"heartbeat-{self.tag}").start()
        threading.Thread(target=self.fake.kubelet_loop, daemon=True,
                         name=f"kubelet-{self.tag}").start()
        self._start_controller()
        for spec in nodes:
            self.usable(spec)

    def usable(self, spec: NodeSpec) -> None:
        """Wait until the controller places on the node as the simulator does from the
        moment it is added: in its cache, healthy, with the devices and pod slots the
        scenario gives it. The API server taints a new Node not-ready (NoSchedule) until
        the node controller sees it Ready, a few seconds later, and the controller leaves
        a node so tainted out of placement: an arrival in that moment sees one node fewer
        than the simulator does (seed 9's first arrival went to n0, not n1, once)."""
        name = self.node_name(spec.name)
        want = spec.to_node()
        last: list[object] = [None]

        def seen() -> bool:
            controller = self.controller
            if controller is None:
                return False
            with controller.cache.lock:
                node = controller.cache.view.nodes.get(name)
            last[0] = node
            # A node without a pod limit in the scenario has a large one on the cluster.
            return node is not None and node.devices == want.devices \
                and (want.pods is None or node.pods == want.pods)

        try:
            _wait(seen, 60, f"node {name} to be ready in the controller's cache")
        except TimeoutError as e:
            raise TimeoutError(f"{e}: it reads {last[0]}, the scenario says {want}") from None

    def _start_controller(self) -> None:
        settings = Settings(
            namespace=self.namespace, device_class=self.driver, leader_elect=False,
            http_address="", identity=f"fidelity-{self.tag}",
            # Pending workers move on capacity changes only (no timer hides a missed
            # wake); a freed claim is swept at once, as the simulator releases it.
            retry_interval="600s", placement_timeout="1h",
            reclaim_interval="1s", reclaim_grace="0s",
            # With a group: standing claims and pods for Karpenter, the group's pool declared
            # (a worker it cannot fit either is NoCapacity, as in the simulator).
            autoscaling=self.group is not None,
            autoscale_pools=(pool.declared_pool(self.group.template)
                             if self.group is not None else ""),
            # Moves: due LIVE_AFTER after devices free (the scenario's rebalanceAfter is
            # its own clock's); the fake nodes run no time-slicer, so a moving worker's
            # old pod goes DRAIN_TIMEOUT after the ask.
            rebalance_after=LIVE_AFTER if self.moves else 0.0,
            drain_timeout=DRAIN_TIMEOUT,
            strategy=self.strategy,
        )
        if self.moves:
            self.quiet = LIVE_AFTER + 2 * pass_interval(settings) + 0.5
        ready = threading.Event()

        def started(controller: Controller) -> None:
            self.controller = controller
            ready.set()

        self.thread = threading.Thread(
            target=run, args=(settings,), kwargs={"stop": self.stop, "api": self.kube,
                                                  "started": started},
            name=f"controller-{self.tag}", daemon=True)
        self.thread.start()
        if not ready.wait(60):
            raise RuntimeError("the controller did not start")

    def close(self) -> None:
        """Let every worker go (the controller removes their finalizers), then take it all down."""
        admin = self.admin
        with contextlib.suppress(testbed.KubeError, TimeoutError):
            for obj in admin.list(testbed.WORKERS):
                admin.delete(testbed.WORKERS, obj["metadata"]["name"])
            _wait(lambda: not admin.list(testbed.WORKERS), 60, "every worker to be let go")
        self.stop.set()
        if self.thread is not None:
            self.thread.join(15)
        self.fake.stop.set()
        if self.watch is not None:
            with contextlib.suppress(testbed.KubeError):
                self.watch.remove()
        for name in list(self.fake.names):
            with contextlib.suppress(Exception):
                self.fake.remove(name)
        with contextlib.suppress(testbed.KubeError):
            admin.delete(testbed.NAMESPACES, self.namespace)
        if self.group is None:  # Karpenter's is hack/karpenter.sh's
            with contextlib.suppress(testbed.KubeError):
                admin.delete(testbed.DEVICECLASSES, self.driver)

    # ------------------------------------------------------------- events

    def add_node(self, spec: NodeSpec) -> None:
        # Not fake-gpu-node=true: the smoke and stress runs pick their nodes by that.
        labels = {FAKE_NODE_LABEL: "fidelity", naming.NODE_ENABLED: "true",
                  naming.NODE_MAX_WORKERS: str(spec.max_workers_per_claim)}
        for role in spec.roles:
            labels[naming.NODE_ROLE_LABELS[Role(role)]] = "true"
        self.fake.add(self.node_name(spec.name), node_profile(spec), labels)
        if self.controller is not None:  # else open() waits once the controller is up
            self.usable(spec)

    def arrive(self, event: Arrive) -> None:
        # Arrival order is creation time, kept to the second: never two in one second.
        while int(time.time()) <= self.last_arrival:
            time.sleep(0.05)
        spec: dict[str, Any] = {"role": event.role, "modelId": "fidelity",
                                "memory": format_quantity(event.memory)}
        if event.owner:
            spec["ownerId"] = event.owner
        if event.movable:
            spec["movable"] = True
            self.movable.add(event.name)
        body = {"apiVersion": f"{naming.GROUP}/v1alpha1", "kind": naming.KIND,
                "metadata": {"name": event.name, "namespace": self.namespace}, "spec": spec}
        created = self.admin.create(testbed.WORKERS, body)
        if created is None:
            raise ScenarioError("arrive", f"worker {event.name} already exists on the cluster")
        stamp = dt.datetime.fromisoformat(
            created["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        self.last_arrival = int(stamp.timestamp())

    def leave(self, worker: str) -> None:
        self.admin.delete(testbed.WORKERS, worker)

    # ------------------------------------------------------------- reading

    def settled_view(self, expected_workers: set[str]) -> View | None:
        """The cluster as a View once it is settled; None while anything is still moving."""
        workers = self.admin.list(testbed.WORKERS)
        claims = self.admin.list(testbed.CLAIMS, selector=naming.MANAGED_SELECTOR)
        names = {obj["metadata"]["name"] for obj in workers}
        if names != expected_workers:
            return self._unsettled(f"workers {sorted(names)}, expected {sorted(expected_workers)}")
        holders: dict[str, list[str]] = {}
        phases: list[tuple[str, str]] = []
        for obj in workers:
            status = obj.get("status") or {}
            phase = status.get("phase")
            name = obj["metadata"]["name"]
            if (status.get("move") or {}).get("to"):
                return self._unsettled(f"worker {name} is moving: {status.get('reason')}")
            if obj["metadata"].get("deletionTimestamp") or phase not in ("Pending", "Running",
                                                                         "Failed"):
                return self._unsettled(f"worker {name} is {phase or 'unreconciled'}"
                                       + (" and deleting" if obj["metadata"].get(
                                           "deletionTimestamp") else ""))
            if phase == "Running":
                holders.setdefault(str(status.get("claimName")), []).append(name)
                phases.append((name, "Placed"))
            else:
                phases.append((name, _phase(phase, status.get("reason"))))
        pending = {name for name, phase in phases if phase.startswith("Pending")}
        placed = self._claims(claims, holders, pending)
        if placed is None:
            return None
        groups, hosts = placed
        # The sweep comes round every second; a claim it has yet to take is caught above.
        # The sweep and the move pass come round on their own; a move shows on its worker.
        due = [key for key in (self.controller.queue.due_within(1.0) if self.controller else ["-"])
               if key not in (SWEEP, REBALANCE)]
        if due:
            return self._unsettled(f"the controller's queue has work due: {due}")
        if self.controller is not None and self.controller.writer.in_flight():
            return self._unsettled("the controller has writes in flight")
        if self.watch is not None:
            holding = {node for node, claims in hosts.items() if claims}
            busy = self.watch.busy(holding, self._booked)
            if busy:
                return self._unsettled(f"Karpenter: {busy}")
        self.moving = ""
        return View(frozenset(groups), tuple(sorted(phases)),
                    tuple(sorted(tuple(sorted(claims)) for claims in hosts.values())))

    def _claims(self, claims: list[dict[str, Any]], holders: dict[str, list[str]],
                pending: set[str]) -> tuple[Groups, dict[str, list[tuple[str, ...]]]] | None:
        """Each allocated claim as (workers, place, devices), and the group's nodes with
        their claims' workers; None (unsettled) while a claim is moving."""
        group_nodes = set(self.watch.nodes()) if self.watch is not None else set()
        hosts: dict[str, list[tuple[str, ...]]] = {node: [] for node in group_nodes}
        groups: Groups = set()
        for obj in claims:
            view = read_claim(obj, {})
            worker = ((obj["metadata"].get("annotations") or {})
                      .get(naming.ANNOTATION_WORKER, ""))
            if (self.group is not None and not view.allocated and not view.deleting
                    and (obj["metadata"].get("labels") or {}).get(pool.STANDING) == "true"
                    and worker in pending):
                continue  # a standing claim: its worker waits for a node, as it says
            if view.deleting or not view.allocated or view.name not in holders:
                # Being swept, not yet allocated, or held by no one (yet).
                self._unsettled(f"claim {view.name}: deleting={view.deleting}, "
                                f"allocated={view.allocated}, held={view.name in holders}")
                return None
            workers = tuple(sorted(holders.pop(view.name)))
            if view.node in group_nodes:
                hosts[view.node].append(workers)
                assert self.group is not None
                place = group_place(self.group.name)
            else:
                place = self.scenario_node(view.node)
            groups.add((workers, place, view.devices))
        if holders:
            self._unsettled(f"workers Running on unlisted claims: {sorted(holders)}")
            return None
        return groups, hosts

    def _booked(self, name: str) -> bool:
        """Whether the controller books the group's node with the template's devices."""
        controller = self.controller
        if controller is None or self.group is None:
            return False
        with controller.cache.lock:
            node = controller.cache.view.nodes.get(name)
        return node is not None and node.devices == self.group.template.devices

    def _unsettled(self, why: str) -> View | None:
        """Not settled yet (None), and why, kept for the timeout's message."""
        self.moving = why
        return None


def node_profile(spec: NodeSpec) -> fakenodes.Profile:
    """The fake node playing a scenario node: its left-out devices published tainted."""
    host = (format_quantity(spec.host_memory) if spec.host_memory is not None
            else UNCHECKED_HOST_MEMORY)
    return fakenodes.Profile(devices=spec.devices,
                             device_memory=format_quantity(spec.device_memory),
                             product=spec.product or "Fidelity GPU", host_memory=host, cpu="64",
                             pods=str(spec.pods) if spec.pods is not None else UNCHECKED_PODS,
                             tainted=sum(count for count, _ in spec.left_out))


def _wait(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL)


# ----------------------------------------------------------------- playing


@dataclass
class Outcome:
    name: str
    steps: int = 0
    agreed: int = 0
    disagreements: list[str] = field(default_factory=list)
    shows: Counter[str] = field(default_factory=Counter)  # steps showing each situation

    @property
    def ok(self) -> bool:
        return self.steps == self.agreed


def playable(scenario: Scenario) -> Scenario:
    if scenario.groups:
        why = pool.refusal(scenario)
        if why is not None:
            raise Unplayable(f"node groups are played with Karpenter, and {why}")
    if scenario.deferred:
        raise Unplayable("dra: deferred cannot be played against a cluster: DRA allocates a "
                         "claim as soon as its pod is scheduled, so there is no moment to play "
                         "allocate at; use dra: instant")
    if not scenario.policy.owner_affinity:
        raise Unplayable("ownerAffinity: false cannot be played: the controller always "
                         "places with owner affinity")
    if scenario.rebalance_after:
        why = _moves_refusal(scenario)
        if why is not None:
            raise Unplayable(f"rebalanceAfter: {why}")
    return scenario


def _moves_refusal(scenario: Scenario) -> str | None:
    """Why a scenario with moves cannot be played step by step, or None.

    Each step is settled, its moves included, before the next: on the scenario's
    clock the next event must come later than the moves the step makes due. And a
    worker moves at most once an hour: the cluster plays the scenario in minutes,
    so a scenario that spans an hour could move a worker twice where the cluster
    would not."""
    if scenario.groups:
        return "moves are not played with node groups (binpack moves empty a group's node)"
    times = scenario.times or ()
    played = [at for at, event in zip(times, scenario.events, strict=True)
              if not isinstance(event, Expect)]
    for before, after in itertools.pairwise(played):
        if after - before <= scenario.rebalance_after:
            return (f"events at {before:.0f}s and {after:.0f}s are not more than "
                    f"rebalanceAfter ({scenario.rebalance_after:.0f}s) apart: each step's "
                    "moves are played before the next step")
    if played and played[-1] - played[0] >= MOVE_APART:
        return (f"the events span {played[-1] - played[0]:.0f}s: a worker moves at most once "
                f"in {MOVE_APART:.0f}s, and the cluster plays the scenario in minutes")
    return None


def play(scenario: Scenario, name: str, tag: str, kubeconfig: str,
         keep_going: bool = False, stay: bool = False) -> Outcome:
    """Play every event, compare after each; stop at the first disagreement unless told not to.

    With ``stay`` the fleet is left standing (controller, fake nodes and all)
    until this process is interrupted: for ``openrl-place snapshot`` and
    ``explain`` to look at.
    """
    playable(scenario)
    outcome = Outcome(name)
    stage = Stage(kubeconfig, tag, group=scenario.groups[0] if scenario.groups else None,
                  moves=scenario.rebalance_after > 0,
                  strategy=str(scenario.policy.strategy))
    if stage.group is not None:
        why = pool.check_cluster(stage.admin)
        if why is not None:
            raise Unplayable(why)
    finished = False
    try:
        stage.open(scenario.nodes)
        present: set[str] = set()
        # Counted among what the steps show: a fleet with devices DRA must leave alone.
        mixed = any(node.left_out for node in scenario.nodes)
        for index, event in enumerate(scenario.events):
            if isinstance(event, Expect):
                continue
            if isinstance(event, Arrive):
                stage.arrive(event)
                present.add(event.name)
                what = f"arrive {event.name}"
            elif isinstance(event, Leave):
                stage.leave(event.worker)
                present.discard(event.worker)
                what = f"leave {event.worker}"
            elif isinstance(event, AddNode):
                stage.add_node(event.node)
                mixed = mixed or bool(event.node.left_out)
                what = f"addNode {event.node.name}"
            else:
                raise Unplayable(f"events[{index}]: {event.kind} cannot be played")
            expected = simulated_view(scenario, index + 1)
            outcome.shows.update(expected.shows | {f"{event.kind} events"}
                                 | ({"a mixed node"} if mixed else set()))
            seen = settle(stage, present, expected,
                          GROUP_CATCH_UP if stage.group is not None else CATCH_UP)
            outcome.steps += 1
            differences = seen.differences(expected)
            if differences:
                outcome.disagreements.append(
                    f"{name} events[{index}] {what}: " + "; ".join(differences))
                log.warning("%s", outcome.disagreements[-1])
                if not keep_going:
                    break
            else:
                outcome.agreed += 1
                log.info("%s events[%d] %s: agree", name, index, what)
        finished = True
        if stay:
            print(f"{name}: {outcome.agreed}/{outcome.steps} steps agree; left standing for "
                  f"--namespace {stage.namespace} --device-class {stage.driver} "
                  "(interrupt to take it down)", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
    finally:
        if finished or not stay:
            stage.close()
    return outcome


def settle(stage: Stage, present: set[str], expected: View, catch_up: float = CATCH_UP) -> View:
    """The settled cluster; once settled and different, a few seconds' grace to catch up."""
    timeout = SETTLE_TIMEOUT if stage.group is None else GROUP_SETTLE_TIMEOUT
    deadline = time.monotonic() + timeout
    previous: View | None = None
    agreed_by: float | None = None
    still_since = time.monotonic()
    while True:
        view = stage.settled_view(present)
        if view is None or view != previous:
            still_since = time.monotonic()
        elif stage.may_move(view) and time.monotonic() - still_since < stage.quiet:
            pass  # a move the step made due may not have begun yet
        else:
            if not view.differences(expected):
                return view
            agreed_by = agreed_by or time.monotonic() + catch_up
            if time.monotonic() > agreed_by:
                return view
        previous = view
        if time.monotonic() > deadline:
            if view is None:
                raise TimeoutError(f"the cluster did not settle within {timeout:.0f}s: "
                                   f"{stage.moving}")
            return view
        time.sleep(POLL)


def scenarios(paths: list[str], count: int, seed: int, save: Path | None,
              groups: bool = False, moves: bool = False) -> Iterator[tuple[str, Scenario]]:
    for path in paths:
        try:
            yield path, load_scenario(Path(path).read_text(encoding="utf-8"))
        except (OSError, ScenarioError) as error:
            raise Unplayable(f"{path}: {error}") from None
    for index in range(count):
        document = generate(seed + index, groups=groups, moves=moves)
        name = f"seed-{seed + index}"
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            (save / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        yield name, build_scenario(document)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="scenario files (dra: instant)")
    parser.add_argument("--generate", type=int,
                        default=int(os.environ.get("FIDELITY_SCENARIOS", "0")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FIDELITY_SEED", "1")))
    parser.add_argument("--keep-going", action="store_true",
                        help="play every step of a scenario after a disagreement")
    parser.add_argument("--save", type=Path, help="write each generated scenario here")
    parser.add_argument("--groups", action="store_true",
                        help="generated scenarios declare a node group (played with Karpenter)")
    parser.add_argument("--moves", action="store_true",
                        help="generated scenarios set rebalanceAfter and mark workers movable")
    parser.add_argument("--stay", action="store_true",
                        help="leave the last scenario's fleet standing until interrupted")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    for noisy in ("openrl", "fakenodes", "kubernetes", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    kubeconfig = os.environ.get("KUBECONFIG") or str(LOCAL_KUBECONFIG)
    if not Path(kubeconfig).exists():
        print(f"no kubeconfig at {kubeconfig}: start the local control plane "
              "(hack/cluster.sh up) or set KUBECONFIG", file=sys.stderr)
        return 2
    outcomes = []
    run_tag = f"{int(time.time()) % 100000:05d}"
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # taken down like Ctrl-C
    try:
        if args.groups and args.moves:
            print("cannot play: --moves and --groups together (moves are not played with "
                  "node groups)", file=sys.stderr)
            return 2
        every = list(scenarios(args.files, args.generate, args.seed, args.save, args.groups,
                               args.moves))
        for number, (name, scenario) in enumerate(every):
            outcome = play(playable(scenario), name, f"r{run_tag}-{number}", kubeconfig,
                           args.keep_going, stay=args.stay and number == len(every) - 1)
            outcomes.append(outcome)
            print(f"{name}: {outcome.agreed}/{outcome.steps} steps agree"
                  + ("" if outcome.ok else " -- " + outcome.disagreements[0]), flush=True)
    except Unplayable as error:
        print(f"cannot play: {error}", file=sys.stderr)
        return 2
    agreed = sum(1 for o in outcomes if o.ok)
    steps = sum(o.steps for o in outcomes)
    steps_agreed = sum(o.agreed for o in outcomes)
    shows: Counter[str] = Counter()
    for outcome in outcomes:
        shows.update(outcome.shows)
    print("steps showing: " + ", ".join(f"{what} {count}" for what, count in sorted(shows.items())))
    print(f"fidelity: {agreed}/{len(outcomes)} scenarios, {steps_agreed}/{steps} steps agree")
    return 0 if agreed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
