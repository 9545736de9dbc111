"""Replay a scenario through the placement simulation and record what happened.

The replay is a function from a :class:`~cli.scenario.Scenario` to a
:class:`Report`: its one log of steps (``cli.eventlog``: who went where, who
waits and why, which pending workers a capacity change let in, every
expectation's verdict, each node's link), the fleet as it stands at the end,
and the shared claims' turns played off that log. It prints nothing and reads
no files; the renderers turn a report into text, each from the log.

Every decision is the placement library's (``placement.Simulation``), so the
CLI and the controller cannot drift apart. What the replay adds is the
scenario's own rules: an event about a worker that is not there, or an
``allocate`` the simulated DRA cannot carry out, is an error in the scenario
(exit 2), not an outcome.
"""

from __future__ import annotations

import attrs

from cli.eventlog import (
    DEFAULT_BANDWIDTH,
    AddNodeStep,
    AllocateStep,
    ArriveStep,
    AskNodeStep,
    EventLog,
    ExpectStep,
    FinishStep,
    LeaveStep,
    LoseNodeStep,
    MovedWorker,
    MoveStep,
    NodeLink,
    RemoveNodeStep,
    Step,
)
from cli.scenario import (
    AddNode,
    Allocate,
    Arrive,
    Event,
    Expect,
    Finish,
    Leave,
    LoseNode,
    NodeSpec,
    Scenario,
    ScenarioError,
)
from cli.show import excerpt
from cli.turns import Turns, play_turns
from placement import Claim, Node, PlacementError
from placement.simulator.autoscaler import AutoscaledSimulation, Change, NodeAsked, NodeUp
from placement.simulator.mover import MoveSettings
from placement.simulator.simulation import MoveMade, Seating, Simulation, WorkerState
from placement.turns import TurnSettings

__all__ = ["NodeSummary", "Report", "replay"]


@attrs.frozen
class NodeSummary:
    node: Node
    free_devices: int
    claims: int
    seats_used: int
    parked: int  # host memory every worker on this node's shared claims may park at once

    @property
    def seat_limit(self) -> int:
        """Seats its claims offer, never more than the workers its pod slots run."""
        seats = self.claims * self.node.seats_per_claim
        pods = self.node.pods
        return seats if pods is None or pods >= seats else pods


@attrs.frozen
class Report:
    """The replay: its log (``cli.eventlog``), the fleet at the end, the turns played."""

    dra: str
    log: EventLog
    workers: tuple[WorkerState, ...]  # present at the end, in arrival order
    claims: tuple[Claim, ...]  # by name
    nodes: tuple[NodeSummary, ...]  # by name
    turns: Turns | None = None  # the shared claims' turns, played off the log (cli.turns)
    # Device-seconds free while workers shared that could have had them (measured when
    # asked: placement.simulator.mover); None: not measured
    stranded: float | None = None

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.log.steps

    @property
    def times(self) -> tuple[float, ...] | None:
        """Seconds since the start, one per step; None when the scenario gives no times."""
        return self.log.times

    @property
    def clock(self) -> tuple[float, ...] | range:
        """Each step's time: seconds, or without times the step's index (waits count events)."""
        return self.log.clock

    @property
    def expectations(self) -> tuple[ExpectStep, ...]:
        return tuple(step for step in self.steps if isinstance(step, ExpectStep))

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(step.failure for step in self.expectations if step.failure is not None)


def replay(scenario: Scenario, *, idle_allocations: bool = False,
           measure_stranded: bool = False) -> Report:
    """Run every event in order; raise ScenarioError for an event the scenario cannot mean.

    ``idle_allocations``: an ``allocate`` of a worker that is pending or whose
    claim is already allocated does nothing instead (for replaying a scenario
    under a node policy it was not written for, where such a worker may sit
    elsewhere). ``measure_stranded``: count the devices free while workers shared
    (``Report.stranded``; a scenario with times and instant allocation only).
    """
    run = _Run(scenario, measure_stranded and scenario.times is not None
               and not scenario.deferred)
    run.idle_allocations = idle_allocations
    links = tuple(_link(spec, scenario.turns) for spec in scenario.nodes)
    times: tuple[float, ...] | None
    sim = run.sim
    if isinstance(sim, AutoscaledSimulation) or sim.mover is not None:
        steps, times = run.clocked()
        if isinstance(sim, AutoscaledSimulation):
            links += tuple(run.group_link(group, node.name)
                           for group, node in zip(sim.started_groups, sim.started, strict=True))
    else:
        steps = tuple([run.apply(index, event) for index, event in enumerate(scenario.events)])
        times = scenario.times
    log = EventLog(steps, times, links, scenario.turns,
                   tuple(group.name for group in scenario.groups))
    return run.report(log, play_turns(log) if scenario.turns is not None else None)


def _link(spec: NodeSpec, settings: TurnSettings | None, group: str | None = None) -> NodeLink:
    """The node as its switches see it: the log's rule for the bandwidth, in one place."""
    own = spec.turns
    bandwidth = ((own.bandwidth if own is not None else None)
                 or spec.host_to_device_bandwidth or DEFAULT_BANDWIDTH)
    return NodeLink(spec.name, spec.devices, bandwidth,
                    own.settings(settings) if own is not None and settings is not None else None,
                    group)


class _Run:
    """The replay's state: the simulation plus when each worker came and went (for messages)."""

    def __init__(self, scenario: Scenario, measure: bool = False) -> None:
        self.scenario = scenario
        nodes = tuple(spec.to_node() for spec in scenario.nodes)
        moves = (MoveSettings(scenario.rebalance_after, measure=measure)
                 if scenario.rebalance_after > 0 or measure else None)
        self.sim = (Simulation(nodes, deferred_allocation=scenario.deferred,
                               policy=scenario.policy, moves=moves) if not scenario.groups else
                    AutoscaledSimulation(nodes, [g.to_group() for g in scenario.groups],
                                         deferred_allocation=scenario.deferred,
                                         policy=scenario.policy, moves=moves))
        self.arrived_at: dict[str, int] = {}
        self.arrivals: dict[str, ArriveStep] = {}  # what each present worker asked for
        self.left_at: dict[str, int] = {}
        self.idle_allocations = False

    def apply(self, index: int, event: Event) -> Step:
        try:
            if isinstance(event, Arrive):
                return self._arrive(index, event)
            if isinstance(event, _LEAVING):
                return self._leave(index, event)
            where = _where_in_scenario(index, event)
            if isinstance(event, LoseNode):
                return self._lose_node(event.node, where)
            if isinstance(event, Allocate):
                return self._allocate(event.worker, where)
            if isinstance(event, AddNode):
                return self._add_node(event, where)
            return self._expect(index, event, where)
        except PlacementError as error:
            # The scenario was checked before the run, so this is a state the
            # simulation refuses; still the scenario's fault, still no traceback.
            raise ScenarioError(_where_in_scenario(index, event), str(error)) from None

    # -------------------------------------------------------------- autoscaler

    def clocked(self) -> tuple[tuple[Step, ...], tuple[float, ...]]:
        """Every event, with what the autoscaler and the moves did before and after it,
        each at its time."""
        sim, times = self.sim, self.scenario.times
        assert times is not None
        steps: list[Step] = []
        at: list[float] = []

        scaled = isinstance(sim, AutoscaledSimulation)

        def taken() -> None:
            changes = sim.take_changes() if scaled else []  # type: ignore[attr-defined]
            made = sim.take_moves()
            if not made:  # nearly every event: the autoscaler's changes alone, in order
                for change in changes:
                    steps.append(self._scaled(change))
                    at.append(change.at)
                return
            # Both lists are in time order; on a tie the autoscaler's change came first.
            merged = sorted([*((c.at, 0, n, c) for n, c in enumerate(changes)),
                             *((m.at, 1, n, m) for n, m in enumerate(made))],
                            key=lambda entry: entry[:3])
            for when, _, _, change in merged:
                steps.append(self._moved(change) if isinstance(change, MoveMade)
                             else self._scaled(change))
                at.append(when)

        # What an event makes due at once is played by the next advance, at its own time.
        for index, (event, now) in enumerate(zip(self.scenario.events, times, strict=True)):
            sim.advance(now)
            taken()
            steps.append(self.apply(index, event))
            at.append(now)
        if times:
            sim.advance(times[-1])
            taken()
        if sim.mover is not None:
            sim.mover.close(times[-1] if times else 0.0)
        return tuple(steps), tuple(at)

    def _moved(self, made: MoveMade) -> MoveStep:
        return MoveStep(made.worker, made.claim, made.node, made.released,
                        (made.placed, *made.retried), made.reason.value, made.detail,
                        self.arrivals[made.worker].restart)

    def _scaled(self, change: Change) -> Step:
        if isinstance(change, NodeAsked):
            return AskNodeStep(change.group, change.node, change.worker, change.ready)
        if isinstance(change, NodeUp):
            return AddNodeStep(change.node.name, change.placed,
                               self.group_link(change.group, change.node.name), change.group,
                               change.node)
        return RemoveNodeStep(change.node.name, change.group, change.node)

    def group_link(self, group: str, node: str) -> NodeLink:
        spec = next(g for g in self.scenario.groups if g.name == group).template
        return _link(attrs.evolve(spec, name=node), self.scenario.turns, group)

    # ------------------------------------------------------------------ events

    # Arrivals and departures are nearly every event: they spell out where
    # they are in the scenario only when something is wrong.

    def _arrive(self, index: int, event: Arrive) -> ArriveStep:
        if event.name in self.sim:
            raise ScenarioError(f"{_where_in_scenario(index, event)}.name",
                                f"worker {excerpt(event.name)} is already here "
                                f"(it arrived at events[{self.arrived_at[event.name]}])")
        placed = tuple(self.sim.arrive(event.to_request()))
        self.arrived_at[event.name] = index
        self.left_at.pop(event.name, None)
        reason = None
        if not placed:
            state_reason = self.sim.state(event.name).reason
            reason = str(state_reason) if state_reason is not None else None
        step = ArriveStep(event.name, placed, reason, event.role, event.memory,
                          event.owner or event.name, event.demand, event.exclusive,
                          event.devices, event.movable, event.restart)
        self.arrivals[event.name] = step
        return step

    def _leave(self, index: int, event: Leave | Finish) -> LeaveStep:
        worker = event.worker
        if worker not in self.sim:
            self._require_worker(worker, _where_in_scenario(index, event))
        claim = self.sim.fleet.claim_of(worker)
        placed = tuple(self.sim.leave(worker))
        self.left_at[worker] = index
        self.arrivals.pop(worker, None)
        released = claim is not None and not self.sim.fleet.has_claim(claim)
        step = FinishStep if isinstance(event, Finish) else LeaveStep
        return step(worker, claim, released, placed)

    def _lose_node(self, node: str, where: str) -> LoseNodeStep:
        """The node and its claims go; its workers are placed again, oldest first."""
        spec = self.sim.fleet.node(node)
        if spec is None:
            raise ScenarioError(where, f"no node named {excerpt(node)}")
        moves = self.sim.lose_node(node)
        last = {m.claim: m.worker for m in moves}  # the claim goes with its last worker
        moved = tuple(MovedWorker(m.worker, m.claim, last[m.claim] == m.worker,
                                  self.arrivals[m.worker],
                                  str(m.reason) if m.reason is not None else None)
                      for m in moves)
        return LoseNodeStep(node, spec, moved,
                            tuple(m.placed for m in moves if m.placed is not None))

    def _allocate(self, worker: str, where: str) -> AllocateStep:
        self._require_worker(worker, where)
        claim = self.sim.fleet.claim_of(worker)
        if self.idle_allocations and (claim is None or self.sim.fleet.is_allocated(claim)):
            return AllocateStep(worker, claim or "", self.sim.fleet.claim_node(claim)
                                if claim is not None else "", ())
        if claim is None:
            raise ScenarioError(where, f"worker {excerpt(worker)} is pending: it has no claim to "
                                "allocate")
        if self.sim.fleet.is_allocated(claim):
            why = (" (with dra: instant every claim is allocated when it is cut)"
                   if not self.scenario.deferred else "")
            raise ScenarioError(where, f"claim {excerpt(claim)} of worker {excerpt(worker)} "
                                f"is already allocated{why}")
        allocated, placements = self.sim.allocate(worker)
        return AllocateStep(worker, allocated, self.sim.fleet.claim_node(allocated),
                            tuple(placements))

    def _add_node(self, event: AddNode, where: str) -> AddNodeStep:
        name = event.node.name
        if self.sim.fleet.node(name) is not None:
            raise ScenarioError(f"{where}.name", f"duplicate node {excerpt(name)}")
        return AddNodeStep(name, tuple(self.sim.add_node(event.node.to_node())),
                           _link(event.node, self.scenario.turns))

    def _expect(self, index: int, event: Expect, where: str) -> ExpectStep:
        self._require_worker(event.worker, f"{where}.worker")
        if event.shares_with is not None:
            self._require_worker(event.shares_with, f"{where}.sharesWith")
        if event.node is not None and self.sim.fleet.node(event.node) is None and (
                not self._group_node(event.node)):
            raise ScenarioError(f"{where}.node", f"no node named {excerpt(event.node)}")
        problems = _check(event, self.sim)
        failure = (f"events[{index}] expect {event.worker}: " + "; ".join(problems)
                   if problems else None)
        return ExpectStep(event.worker, event.checks(), failure)

    # ----------------------------------------------------------------- helpers

    def _group_node(self, name: str) -> bool:
        """Whether ``name`` is one a node group gives its nodes: such a node may be absent
        now and present under another policy, so an expectation naming it just fails."""
        base, dash, digits = name.rpartition("-")
        return bool(dash) and digits.isdigit() and any(
            group.name == base for group in self.scenario.groups)

    def _require_worker(self, worker: str, where: str) -> None:
        if worker in self.sim:
            return
        if worker in self.left_at:
            history = f"it left at events[{self.left_at[worker]}]"
        else:
            history = "no such worker has arrived"
        raise ScenarioError(where, f"worker {excerpt(worker)} is not here ({history})")

    # ------------------------------------------------------------------ ending

    def report(self, log: EventLog, turns: Turns | None) -> Report:
        fleet = self.sim.fleet
        claims = fleet.claims
        on_node: dict[str, list[Claim]] = {}
        for claim in claims:
            on_node.setdefault(claim.node, []).append(claim)
        nodes = tuple(
            NodeSummary(
                node=node,
                free_devices=fleet.free_devices(node.name),
                claims=len(on_node.get(node.name, ())),
                seats_used=sum(len(c.bookings) for c in on_node.get(node.name, ())),
                parked=fleet.parked_load(node.name),
            )
            for node in fleet.nodes
        )
        workers = tuple(self.sim.state(worker) for worker in self.sim.workers())
        mover = self.sim.mover
        stranded = mover.stranded_seconds if mover is not None and mover.settings.measure else None
        return Report(self.scenario.dra, log, workers, claims, nodes, turns, stranded)


_LEAVING = (Leave, Finish)  # made once: ``Leave | Finish`` in a call makes one per event


def _where_in_scenario(index: int, event: Event) -> str:
    return f"events[{index}].{event.kind}"


def _check(expect: Expect, sim: Simulation) -> list[str]:
    """What in the expectation does not hold, each as 'key: expected ..., saw ...'."""
    state = sim.state(expect.worker)
    problems: list[str] = []
    seen = _where(state, sim)
    if expect.phase is not None and state.phase != expect.phase:
        problems.append(f"phase: expected {expect.phase}, saw {seen}")
    if expect.node is not None and state.node != expect.node:
        problems.append(f"node: expected {expect.node}, saw {seen}")
    if expect.shares_with is not None:
        other = sim.state(expect.shares_with)
        if state.claim is None or state.claim != other.claim:
            problems.append(f"sharesWith: expected the claim of {expect.shares_with} "
                            f"({_where(other, sim)}), saw {seen}")
    if expect.alone is not None:
        mates = _claim_mates(sim, state)
        if state.claim is None:
            problems.append(f"alone: expected {'alone' if expect.alone else 'sharing'} "
                            f"on a claim, saw {seen}")
        elif expect.alone and mates:
            problems.append(f"alone: expected alone on its claim, saw {state.claim} "
                            f"shared with {', '.join(mates)}")
        elif not expect.alone and not mates:
            problems.append(f"alone: expected to share its claim, saw it alone on {state.claim}")
    if expect.reason is not None and (state.reason is None
                                      or expect.reason not in str(state.reason)):
        problems.append(f'reason: expected a pending reason containing "{expect.reason}", '
                        f"saw {seen}")
    if expect.devices is not None and state.devices != expect.devices:
        problems.append(f"devices: expected {expect.devices}, saw {seen}")
    return problems


def _claim_mates(sim: Simulation, state: WorkerState) -> list[str]:
    if state.claim is None:
        return []
    claim = sim.fleet.claim(state.claim)
    assert claim is not None
    return [worker for worker in claim.workers if worker != state.name]


def _where(state: WorkerState, sim: Simulation) -> str:
    """A worker's situation in one phrase, for failure messages."""
    if state.phase is Seating.PENDING or state.claim is None:
        return f"Pending ({state.reason})"
    devices = f"{state.devices} device{'' if state.devices == 1 else 's'}"
    if state.phase is Seating.PLACING:
        sized = sim.fleet.claim_node(state.claim)
        return (f"Placing on {state.claim} ({devices} sized against {sized}; no node until "
                "it is allocated)")
    return f"Placed on {state.claim} on {state.node} ({devices})"
