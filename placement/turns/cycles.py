"""Repeats counted, not played: a claim's cycle of turns found once and accounted whole.

``placement.turns.play`` calls ``count_repeats`` after every grant, unless
asked to play every switch. Rules:

* Between two things happening on a claim (a worker joining or leaving, a
  demand edge) the same members take the same turns over and over.
* After every grant the claim's *state* is read: everything that decides
  what comes next, relative to now (who holds the turn and since when, who
  wants one and since when, the pending restores and parks, the policy's
  next deadline, and where the round-robin stands, as the grants so far
  place it), its workers and owners named by their place in joining order,
  with the settings and each worker's seconds over the link. States are
  compared exactly, with no rounding.
* When a state recurs with the same workers, the steps between the two are a
  cycle: it is accounted whole as many times as it fits before the claim's
  next change (ending before its next demand edge), and play resumes from
  there; without demand edges less than one more cycle is left, so no state
  is read again until the next change.
* A cycle is kept by its state for every claim: another claim reaching that
  state (other names, another time) counts the same cycle at once instead of
  playing it to find it (not while it records intervals or has demand
  windows, whose edges are not relative to now).
* The group keeps its own clock, behind the scenario's by the time counted so
  far (the policy reads only differences of times), so the policy still
  decides every turn that is not a repeat.
* Loops are bounded: a state recurring without time passing is an error, and
  a claim whose cycle is longer than the states remembered (``limit``, the
  player's ``CYCLE_STATES``) is played switch by switch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement.turns.books import NS, LiveClaim, Mark, Record, count_wanting, next_edge

__all__ = ["Cycle", "count_repeats"]


@dataclass(frozen=True, slots=True)
class Cycle:
    """What one repeat of a cycle adds, its workers named by their place in joining order."""

    period: float
    switches: int
    switching: float
    records: tuple[Record, ...]  # each worker's figures
    waits: tuple[tuple[int, float], ...]  # each grant's worker and its wait


def count_repeats(live: LiveClaim, now: float, until: float,
                  cycles: dict[tuple[object, ...], Cycle], limit: int) -> float | None:
    """If the claim's state was seen before (or another claim's cycle starts from the
    same state), count the cycle as often as it fits before ``until``; the time
    counted (the group's clock falls that much behind), None while no cycle is known."""
    state = _state(live, now)
    names = tuple(live.workers)
    found = _known_cycle(live, state, names, now, cycles)
    if found is None:
        if len(live.seen) >= limit:
            live.seen.clear()  # a cycle this long is rare: forget, and look afresh
        live.seen[state] = _mark(live, now, names)
        return None
    cycle, recorded = found
    count = max(0, (until - now) // cycle.period)
    edge = next_edge(live) if live.windowed else None
    if edge is not None and edge < math.inf:  # a cycle must end before the edge
        count = min(count, max(0, (edge - now - 1) // cycle.period))
    live.seen.clear()
    if count:
        _repeat(live, cycle, int(count), recorded)
    if live.windowed:  # past the next edge, another cycle may begin: look again
        live.seen[state] = _mark(live, now, names)
    return count * cycle.period


def _known_cycle(live: LiveClaim, state: tuple[object, ...], names: tuple[str, ...], now: float,
                 cycles: dict[tuple[object, ...], Cycle]) -> tuple[Cycle, int] | None:
    """The cycle from this state: the claim's own (found now) or one another claim
    found, with where its recorded intervals start; None if none is known yet."""
    before = live.seen.get(state)
    if before is not None and before.names == names:
        if now - before.now <= 0:
            raise RuntimeError(f"turns on claim {live.claim} repeat without time "
                               f"passing at {(now + live.shift) / NS}s")
        cycle = _cycle(live, before, _mark(live, now, names), now)
        if not live.windowed:  # kept for the claims that may use it (see below)
            cycles[state] = cycle
        return cycle, before.recorded
    # Another claim's cycle: not while intervals are kept (they would need its block
    # renamed) nor with demand windows (their edges are not relative to now). The
    # clock being exact, it adds to the bit what finding it here would have added.
    if live.intervals is not None or live.windowed:
        return None
    shared = cycles.get(state)
    return None if shared is None else (shared, 0)


def _repeat(live: LiveClaim, cycle: Cycle, count: int, recorded: int) -> None:
    """``cycle`` accounted ``count`` more times on the claim."""
    live.switches += count * cycle.switches
    live.switching += count * cycle.switching
    workers = list(live.workers.values())
    for w, (resident, turns, evictions, wanting, served) in zip(workers, cycle.records,
                                                                strict=True):
        w.record.resident += count * resident
        w.record.turns += count * turns
        w.record.evictions += count * evictions
        w.record.wanting += count * wanting
        w.record.served += count * served
        live.useful += count * served
    for place, wait in cycle.waits:
        waits = workers[place].record.waits
        waits[wait] = waits.get(wait, 0) + count
    if live.intervals is not None:
        live.intervals.repeat(recorded, cycle.period, count)
    live.shift += count * cycle.period
    live.log.clear()


def _mark(live: LiveClaim, now: float, names: tuple[str, ...]) -> Mark:
    for w in live.workers.values():  # the time wanted so far counted, so a cycle adds it
        count_wanting(live, w, now)
    return Mark(now, names, live.switches, live.switching, len(live.log),
                len(live.intervals.parts) if live.intervals is not None else 0,
                tuple((w.record.resident, w.record.turns, w.record.evictions,
                       w.record.wanting, w.record.served)
                      for w in live.workers.values()))


def _cycle(live: LiveClaim, before: Mark, mark: Mark, now: float) -> Cycle:
    places = {name: place for place, name in enumerate(live.workers)}
    return Cycle(now - before.now, mark.switches - before.switches,
                 mark.switching - before.switching,
                 tuple(_less(after, start) for start, after
                       in zip(before.records, mark.records, strict=True)),
                 tuple((places[name], wait) for name, wait in live.log[before.logged:mark.logged]))


def _less(after: Record, before: Record) -> Record:
    return (after[0] - before[0], after[1] - before[1], after[2] - before[2],
            after[3] - before[3], after[4] - before[4])


def _state(live: LiveClaim, now: float) -> tuple[object, ...]:
    """Everything that decides what comes next on the claim, relative to now, its workers
    and owners named by their place in joining order, with the settings and each worker's
    time over the link: two claims in one state play the same turns, time-shifted and
    renamed (the policy reads only differences of times and the order of names)."""
    owners = {owner: place for place, owner in enumerate(live.owners)}
    holder = live.group.holder
    at = last = -1
    workers = []
    for place, (name, w) in enumerate(live.workers.items()):
        if name == holder:
            at = place
        if name == live.last_holder:
            last = place
        timer = live.timers.get(name)
        owner = w.record.owner
        since = w.resident_since
        waiting = live.waiting_from.get(name)
        workers.append((owners[owner], w.link, w.wants, w.next_change,
                        w.seq <= live.served.get(owner, -1),
                        None if timer is None else (now - timer[0], timer[1]),
                        None if since is None else now - since,
                        None if waiting is None else now - waiting))
    deadline = live.group.next_deadline()
    return (live.group.settings, tuple(workers), len(owners), at,
            None if live.last_holder is None else last,
            now - live.granted_at if holder is not None else None,
            None if deadline is None else now - deadline,
            sum(1 for place in live.owners.values() if place <= live.served_owner))
