"""Why one worker waits, node by node, and the smallest change that would seat it.

Rules:

* Read-only and pure: the caller's fleet is never changed (one lent to
  ``smallest_changes`` is changed by each trial and put back). Every "would this
  seat it?" is answered by the decision itself (``find_seat``) on a private
  copy of the fleet with one thing changed, never by restating the rules: a
  remedy offered here is one ``decide`` would act on.
* One change at a time. The kinds, from least to most intrusive: a claim
  the worker could join gets allocated (only time passes); a higher
  max-workers-per-claim on one node (a label; never above the 256 consumers
  DRA lists for a claim); more host memory on one node; pod slots freed on
  one node at its pod limit (workers leaving, or other pods gone); more free
  devices on one node (departures, or more hardware); a higher pod limit on
  one node (the kubelet's setting); one node labelled for the worker's role
  (which opens it to a whole class of workers). Within a kind the smallest
  amount wins, then the node name; the best of every kind that works is
  offered too, smallest first. A change is tried only on a node that could
  hold the worker at all after it (a device group wide enough for it, or a
  claim whose devices its share fits): no other could seat it. A worker no
  single change can seat gets none: with a ``NoCapacity`` reason that means
  no node of this fleet's hardware could ever hold it.
* Each enabled node gets one verdict line for the worker: whether it accepts
  the role, its device geometry and free devices, its pod slots when they
  are checked, whether its host memory can park a new claim's worker where
  it may share claims (there every worker counts, a lone one too, so a new
  claim waits on host memory as a join does), and what each of its claims
  says to a join (full, too small, not yet allocated, exclusive, host
  memory, pod limit).
* More host memory is offered on a node that may share claims for a new
  claim as for a join: the least that lets it park the worker on top of
  everyone there.
* A mixed node is read group by group, as placement reads it: a new claim
  takes all its devices from one group, so the worker needs
  ``devices_needed`` of that group's size and fits the group only when that
  many exist there; a claim's devices are its own group's size. The verdict
  names the devices it needs in each group that could hold it, tightest
  first (fewest devices, then the smallest size); more free devices are
  offered in one group at a time, the fewest first, then the smallest size.
  A node's geometry reads largest group first: ``4 x 80Gi + 4 x 48Gi``.
* An exclusive worker joins no claim, so the changes that open a seat on a
  claim (allocation, seats, host memory) are never offered to it; and no
  change opens a claim an exclusive worker is on. Nor to a worker naming its
  device count (N): it too joins no claim, needs N devices of one group each
  holding ``ceil(memory / N)`` (``devices_for``), and a node fits it only
  with a group of N such devices.
* A worker that would be seated now gets the seat and why it was chosen
  (``seat_text``: ``joins claim-x: same owner, other role``) under the policy given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from placement.decide import JoinClaim, NewClaim, Reason, explain, find_seat, seat_text
from placement.fleet import Fleet
from placement.model import (
    MAX_CLAIM_CONSUMERS,
    Claim,
    DeviceGroup,
    Node,
    Request,
    devices_for,
    per_device_share,
)
from placement.policy import DEFAULT_POLICY, Policy, new_claim_room, parked_after_join
from placement.quantity import format_gib

__all__ = [
    "Change",
    "ClaimVerdict",
    "Diagnosis",
    "NodeVerdict",
    "changes",
    "diagnose",
    "geometry",
    "smallest_change",
    "smallest_changes",
]


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    claim: str
    workers: int
    devices: int
    # open | full | too small | not yet allocated | exclusive | own devices | host memory
    # | pod limit
    verdict: str
    detail: str


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    roles: tuple[str, ...]  # empty: both
    accepts: bool
    devices: int
    device_memory: int
    free_devices: int
    needed: int  # devices the worker needs on this node
    host_memory: int | None
    parked: int
    max_workers_per_claim: int
    claims: tuple[ClaimVerdict, ...]
    summary: str  # one line
    pods: int | None = None  # pod slots for workers; None: unchecked
    workers: int = 0  # workers booked on its claims, each running a pod there
    # A mixed node's (devices, device memory) per group, smallest first, and each
    # group's free devices; () on a node of one size.
    device_groups: tuple[DeviceGroup, ...] = ()
    free_by_group: tuple[int, ...] = ()
    # Some group of it could hold the worker were all its devices free (on a node of
    # one size: ``needed <= devices``).
    could_hold: bool = True


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the fleet that would seat the worker."""

    # allocation | maxWorkersPerClaim | hostMemory | podsFreed | freeDevices | podLimit | role
    kind: str
    node: str
    # claims allocated, seats per claim, bytes, pods, devices, a pod limit, or 1 (a label)
    amount: int
    text: str
    claim: str = ""  # the claim an allocation is about

    def to_dict(self) -> dict[str, object]:
        document: dict[str, object] = {"kind": self.kind, "node": self.node,
                                       "amount": self.amount, "text": self.text}
        if self.claim:
            document["claim"] = self.claim
        return document


@dataclass(frozen=True, slots=True)
class Diagnosis:
    reason: Reason | None  # None: the worker would be seated as the fleet stands
    nodes: tuple[NodeVerdict, ...]
    change: Change | None  # the smallest change that would seat it; None: no single one
    alternatives: tuple[Change, ...] = ()  # the best of each kind that would, smallest first
    seat: NewClaim | JoinClaim | None = None  # where it would be seated now, if anywhere
    seat_text: str = ""  # and why: "joins claim-x: same owner, other role"


def diagnose(request: Request, fleet: Fleet, policy: Policy = DEFAULT_POLICY) -> Diagnosis:
    """Every enabled node's verdict for ``request``, its reason, and the smallest remedy."""
    claims_on: dict[str, list[Claim]] = {}
    for claim in fleet.claims:
        claims_on.setdefault(claim.node, []).append(claim)
    verdicts = tuple(_node_verdict(request, fleet, node, claims_on.get(node.name, []))
                     for node in fleet.nodes)
    seat = find_seat(request, fleet, policy)
    if seat is not None:
        return Diagnosis(None, verdicts, None, seat=seat,
                         seat_text=seat_text(request, fleet, seat, policy))
    options = changes(request, fleet)
    return Diagnosis(explain(request, fleet), verdicts, options[0] if options else None,
                     options)


def smallest_change(request: Request, fleet: Fleet) -> Change | None:
    """The least intrusive single change after which ``find_seat`` seats ``request``.

    None when the worker is already seated as the fleet stands, or when no
    one change to this fleet would seat it.
    """
    options = changes(request, fleet, first_only=True)
    return options[0] if options else None


def smallest_changes(requests: Iterable[Request], fleet: Fleet, *,
                     lend: bool = False) -> tuple[Change | None, ...]:
    """``smallest_change`` of each request in turn, the same answers for less work.

    One trial fleet serves them all, and the fleet's nodes and claims are read
    once. ``lend``: the fleet is the caller's own, to run the trials on
    itself rather than on a copy; each trial puts it back as it was (the same
    nodes, claims and bookings), so no answer can tell.
    """
    trial = fleet if lend else fleet.copy()
    nodes, claims = fleet.nodes, fleet.claims
    answers = []
    for request in requests:
        options = (() if find_seat(request, fleet) is not None
                   else _changes(request, fleet, trial, nodes, claims, first_only=True))
        answers.append(options[0] if options else None)
    return tuple(answers)


def changes(request: Request, fleet: Fleet, *, first_only: bool = False) -> tuple[Change, ...]:
    """The least intrusive change of each kind that would seat ``request``, smallest first."""
    if find_seat(request, fleet) is not None:
        return ()
    trial = fleet.copy()  # private: trials change it and put it back
    return _changes(request, fleet, trial, fleet.nodes, fleet.claims, first_only=first_only)


def _changes(request: Request, fleet: Fleet, trial: Fleet, nodes: tuple[Node, ...],
             claims: tuple[Claim, ...], *, first_only: bool) -> tuple[Change, ...]:
    """``changes`` for a worker ``find_seat`` does not seat, with its trial fleet
    (``fleet`` itself or a copy) and the fleet's nodes and claims given."""
    found: dict[str, Change] = {}
    for change, node in _candidates(request, fleet, nodes, claims):
        if change.kind not in found and _seats_with(trial, request, change, node):
            found[change.kind] = change
            if first_only:
                break
    return tuple(found.values())


# ------------------------------------------------------------------ verdicts


def _node_verdict(request: Request, fleet: Fleet, node: Node, claims: list[Claim]) -> NodeVerdict:
    free_by_group = fleet.free_by_group(node.name)
    free = sum(free_by_group)
    # (devices needed, size, free) of each group that could hold it, tightest first.
    options = _group_needs(request, node, free_by_group)
    could_hold = bool(options)
    needed = options[0][0] if options else (request.devices or min(
        devices_for(request.memory, size, None) or 1 for _count, size in node.groups))
    seated_now = [option for option in options if option[0] <= option[2]]
    if seated_now:  # the group a new claim would take now
        needed = seated_now[0][0]
    parked = fleet.parked_load(node.name)
    host_left = new_claim_room(node, parked)
    accepts = node.accepts(request.role)
    workers = fleet.workers_on_node(node.name)
    pod_limit = not fleet.has_pod_slot(node.name)
    claim_verdicts = tuple(_claim_verdict(request, node, claim, parked, pod_limit)
                           for claim in claims)
    alone = not request.joins
    shape = geometry(node)
    roles = tuple(sorted(str(role) for role in node.roles))
    mixed = bool(node.device_groups)
    free_text = (" + ".join(str(n) for n in reversed(free_by_group)) if mixed else str(free))
    needs = (" or ".join(f"{n} of {format_gib(size)}" for n, size, _free in options)
             if mixed else str(needed))
    if not accepts:
        summary = f"{shape}; refuses {request.role} workers (takes {', '.join(roles)} only)"
    elif not could_hold:
        summary = f"{shape}; can never hold it: needs {_never_text(request, node)}"
    elif pod_limit:
        summary = (f"{shape}, {free_text} free; needs {needs}; at its pod limit "
                   f"({_pods(node.pods or 0)}, {workers} of them workers)")
    else:
        summary = f"{shape}, {free_text} free; needs {needs}"
        if seated_now and request.memory > host_left:
            summary += (f": the devices are free, but host memory can park "
                        f"{format_gib(max(0, int(host_left)))} more of "
                        f"{format_gib(node.host_memory or 0)}, not {format_gib(request.memory)}"
                        " (it may share claims: every worker on it counts)")
        elif seated_now:
            summary += ": a new claim fits"
        elif alone:
            why = "runs alone (exclusive)" if request.exclusive else "joins no claim (devices)"
            summary += f"; {why}: waits for free devices"
        elif claim_verdicts:
            summary += "; claims: " + _tally(claim_verdicts)
        else:
            summary += "; no claims to join"
    return NodeVerdict(
        node=node.name, roles=roles, accepts=accepts, devices=node.devices,
        device_memory=node.device_memory, free_devices=free, needed=needed,
        host_memory=node.host_memory, parked=parked,
        max_workers_per_claim=node.max_workers_per_claim, claims=claim_verdicts,
        summary=summary, pods=node.pods, workers=workers, device_groups=node.device_groups,
        free_by_group=free_by_group if mixed else (), could_hold=could_hold)


def geometry(node: Node) -> str:
    """A node's devices as people read them: ``8 x 80Gi``; a mixed node's groups largest
    first, ``4 x 80Gi + 4 x 48Gi``."""
    return " + ".join(f"{count} x {format_gib(size)}" for count, size in reversed(node.groups))


def _group_needs(request: Request, node: Node,
                 free_by_group: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """(devices needed, device size, free) in each group of ``node`` that could hold
    ``request`` were all its devices free, as the new-claim step ranks them: fewest
    devices needed first, then the smallest size."""
    memory, exact = request.memory, request.devices
    return sorted((needed, size, free)
                  for (count, size), free in zip(node.groups, free_by_group, strict=True)
                  if (needed := devices_for(memory, size, exact)) is not None
                  and needed <= count)


def _never_text(request: Request, node: Node) -> str:
    memory, exact = request.memory, request.devices
    if exact is not None:
        return (f"{exact} devices of at least {format_gib(per_device_share(memory, exact))} "
                f"on one node (devices: {exact})")
    if not node.device_groups:
        needed = devices_for(memory, node.device_memory, None)
        return f"{needed} devices of {format_gib(node.device_memory)} on one node"
    largest_first = [f"{devices_for(memory, size, None)} devices of {format_gib(size)}"
                     for _count, size in reversed(node.groups)]
    return f"{' or '.join(largest_first)}, all of one size, on one node"


def _claim_verdict(request: Request, node: Node, claim: Claim, parked: int,
                   pod_limit: bool) -> ClaimVerdict:
    workers = len(claim.bookings)
    share = per_device_share(request.memory, claim.devices)

    def verdict(kind: str, detail: str) -> ClaimVerdict:
        return ClaimVerdict(claim.name, workers, claim.devices, kind, detail)

    if not claim.allocated:
        return verdict("not yet allocated", "never joined before DRA allocates it")
    if request.exclusive:
        return verdict("exclusive", "this worker runs alone: it joins no claim")
    if request.devices is not None:
        return verdict("own devices", f"it names devices: {request.devices}: it joins no "
                       "claim")
    if claim.exclusive:
        return verdict("exclusive", "an exclusive worker is on it: no one joins it")
    size = node.group_memory(claim.device_memory)  # its devices' size: its group's
    if share > size:
        return verdict("too small", f"{format_gib(share)} per device would not fit "
                       f"{claim.devices} x {format_gib(size)}")
    if workers >= node.seats_per_claim:
        return verdict("full", f"{workers}/{node.seats_per_claim} workers")
    if pod_limit:
        return verdict("pod limit", f"its node runs no more worker pods ({_pods(node.pods or 0)})")
    if node.host_memory is not None:
        needs = _parked_after_join(node, parked, claim, request)
        if needs > node.host_memory:
            return verdict("host memory", f"parking needs {format_gib(needs)} of "
                           f"{format_gib(node.host_memory)} host memory")
    return verdict("open", f"{workers}/{node.seats_per_claim} workers")


def _parked_after_join(node: Node, parked: int, claim: Claim, request: Request) -> int:
    """The node's parked load (``parked`` now) once ``request`` joins ``claim``."""
    return parked_after_join(node.max_workers_per_claim > 1, parked, len(claim.bookings),
                             sum(booking.parked_memory for booking in claim.bookings),
                             request.memory)


def _tally(verdicts: tuple[ClaimVerdict, ...]) -> str:
    counts: dict[str, int] = {}
    for item in verdicts:
        counts[item.verdict] = counts.get(item.verdict, 0) + 1
    order = ("open", "full", "too small", "exclusive", "own devices", "host memory",
             "pod limit", "not yet allocated")
    return ", ".join(f"{counts[kind]} {kind}" for kind in order if kind in counts)


# ------------------------------------------------------------------ remedies


def _candidates(request: Request, fleet: Fleet, nodes: tuple[Node, ...],
                every_claim: tuple[Claim, ...]) -> Iterator[tuple[Change, Node]]:
    """Single changes, least intrusive first; each with the node as it would be after it
    (``nodes`` and ``every_claim``: the fleet's, by name)."""
    role, memory = request.role, request.memory
    # Kinds 1-3 open a seat on a claim: none for a worker that runs alone, none on a
    # claim an exclusive worker is on.
    claims = () if not request.joins else tuple(c for c in every_claim if not c.exclusive)
    # 1. A claim the worker could join once DRA allocates it.
    pending = sorted((c.node, c.name) for c in claims if not c.allocated)
    for node_name, claim_name in pending:
        node = fleet.node(node_name)
        if node is not None:
            yield (Change("allocation", node_name, 1,
                          f"claim {claim_name} allocated on {node_name}", claim_name), node)
    # 2 and 3. A seat on a full claim; host room on a claim blocked by host memory.
    seats: list[tuple[int, str, Node]] = []
    room: list[tuple[int, str, Node]] = []
    for claim in claims:
        node = fleet.node(claim.node)
        if (node is None or not claim.allocated or not node.accepts(role)
                or per_device_share(memory, claim.devices)
                > node.group_memory(claim.device_memory)):
            continue
        after = _parked_after_join(node, fleet.parked_load(node.name), claim, request)
        if len(claim.bookings) >= node.seats_per_claim:
            limit = len(claim.bookings) + 1
            if limit <= MAX_CLAIM_CONSUMERS:  # past it no label adds a seat
                seats.append((limit, node.name, replace(node, max_workers_per_claim=limit)))
        elif node.host_memory is not None and after > node.host_memory:
            more = after - node.host_memory
            room.append((more, node.name, replace(node, host_memory=node.host_memory + more)))
    # ... and host room for a new claim on a node that may share, its devices free.
    for node in nodes:
        if node.accepts(role) and node.host_memory is not None:
            short = memory - new_claim_room(node, fleet.parked_load(node.name))
            if short > 0 and any(need <= free for need, _size, free in _group_needs(
                    request, node, fleet.free_by_group(node.name))):
                room.append((int(short), node.name,
                             replace(node, host_memory=node.host_memory + int(short))))
    for limit, name, node in sorted(set(seats), key=lambda s: s[:2]):
        yield Change("maxWorkersPerClaim", name, limit,
                     f"max-workers-per-claim {limit} on {name}"), node
    for more, name, node in sorted(set(room), key=lambda r: r[:2]):
        yield Change("hostMemory", name, more,
                     f"{format_gib(more)} more host memory on {name}"), node
    # 4. Pod slots freed on one node at its pod limit that could hold the worker at all.
    crowded: list[tuple[int, str, int, Node]] = []  # (slots short, name, pods now, the node after)
    for node in nodes:
        pods = node.pods
        if (pods is not None and node.accepts(role)
                and _group_needs(request, node, fleet.free_by_group(node.name))
                and not fleet.has_pod_slot(node.name)):
            short = fleet.workers_on_node(node.name) + 1 - pods
            crowded.append((short, node.name, pods, replace(node, pods=pods + short)))
    crowded.sort(key=lambda c: c[:2])
    for short, name, _pods_now, changed in crowded:
        yield (Change("podsFreed", name, short,
                      f"{_pods(short)} freed on {name} (workers leaving, or other pods gone)"),
               changed)
    # 5. More free devices in one group of one node that could hold the worker at all.
    yield from _more_devices(request, fleet, nodes)
    # 6. A higher pod limit on one of those nodes.
    for short, name, pods_now, changed in crowded:
        yield (Change("podLimit", name, pods_now + short,
                      f"a pod limit of {pods_now + short} for workers on {name} "
                      f"(now {_pods(pods_now)})"), changed)
    # 7. A node that refuses the role, labelled for it.
    yield from _relabelled(request, nodes, every_claim)


def _relabelled(request: Request, nodes: tuple[Node, ...],
                every_claim: tuple[Claim, ...]) -> Iterator[tuple[Change, Node]]:
    """Nodes that refuse the role, labelled for it: only one that could hold the worker at
    all, since a label changes neither its devices nor its claims. A worker no node holds
    would otherwise try every node of another role (the whole fleet replaced node by
    node, for nothing)."""
    role = request.role
    claims_on: dict[str, list[Claim]] | None = None
    for node in nodes:
        if not node.accepts(role):
            if not _fits_devices(request, node):
                if not request.joins:  # a claim it fits is no seat for it
                    continue
                if claims_on is None:
                    claims_on = {}
                    for claim in every_claim:
                        claims_on.setdefault(claim.node, []).append(claim)
                if not _fits_a_claim(request.memory, node, claims_on.get(node.name, ())):
                    continue
            yield (Change("role", node.name, 1,
                          f"{node.name} labelled for {role} workers"),
                   replace(node, roles=node.roles | {role}))


def _fits_devices(request: Request, node: Node) -> bool:
    """Some device group of ``node`` is wide enough for a new claim of the worker, were all
    its devices free (the new-claim step needs that many free in one group)."""
    return bool(_group_needs(request, node, tuple(0 for _ in node.groups)))


def _fits_a_claim(memory: int, node: Node, claims: Iterable[Claim]) -> bool:
    """The worker's share fits the devices of one of ``claims`` on ``node`` (a join needs
    that, whatever else it needs)."""
    return any(per_device_share(memory, claim.devices) <= node.group_memory(claim.device_memory)
               for claim in claims)


def _more_devices(request: Request, fleet: Fleet,
                  nodes: tuple[Node, ...]) -> Iterator[tuple[Change, Node]]:
    """More free devices in one group of a node, the fewest first, then the smallest size."""
    wider = []
    for node in nodes:
        if node.accepts(request.role):
            for needed, size, free in _group_needs(request, node,
                                                   fleet.free_by_group(node.name)):
                if free < needed:
                    wider.append((needed - free, size, node.name, node))
    for more, device_memory, name, node in sorted(wider, key=lambda w: w[:3]):
        yield (Change("freeDevices", name, more,
                      f"{more} more free {format_gib(device_memory)} device{_s(more)} on {name}"
                      f" ({_kind_of(node)})"), _grown(node, device_memory, more))


def _seats_with(trial: Fleet, request: Request, change: Change, node: Node) -> bool:
    """Would ``find_seat`` seat the worker after ``change``? ``trial`` ends as it began."""
    if change.kind == "allocation":
        copy = trial.copy()  # no way back from an allocation: a copy
        copy.allocate(change.claim)
        return find_seat(request, copy) is not None
    before = trial.node(node.name)
    assert before is not None
    trial.replace_node(node)
    try:
        return find_seat(request, trial) is not None
    finally:
        trial.replace_node(before)


def _grown(node: Node, device_memory: int, more: int) -> Node:
    """``node`` with ``more`` devices in its group of ``device_memory``."""
    groups = tuple((count + more if size == device_memory else count, size)
                   for count, size in node.device_groups)
    return replace(node, devices=node.devices + more, device_groups=groups)


def _kind_of(node: Node) -> str:
    if not node.roles:
        return "a node for both roles"
    return f"a {' and '.join(sorted(str(r) for r in node.roles))} node"


def _pods(count: int) -> str:
    return f"{count} pod{_s(count)}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
