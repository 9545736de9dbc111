"""The one promise, proved over interleavings of the wire: never two workers resident at once.

A model of one shared claim with three workers, played step by step in an
order hypothesis draws. What is modelled is the channel; what decides is the
product's own code: the agent's policy (``placement.turns.TurnGroup``), its
words on the channel (``timeslicer.agent.replies``) and the worker's client
(``timeslicer.client._Session``), every message going through
``timeslicer.protocol``'s encoding. Each connection is two ordered streams
(a Unix socket's). Any step may come at any point:

* a line delivered to the agent, or to a worker (messages delayed and
  crossed: each stream goes at its own pace);
* a line duplicated in its stream, at once or late (the copy held back and
  sent after whatever came since);
* a worker acting on what its client says (restore on a grant, park on a
  yield), saying parked while it holds nothing (the sidecar's park of a
  server found awake), wanting or not;
* a connection dropped (what the worker wrote is still read by the agent,
  then the end; what the agent wrote and the worker had not read is gone),
  and a worker reconnecting (saying hello again);
* the agent restarted (every connection gone, every member unreported, its
  turn numbers starting again, from its predecessor's last or from nothing);
* time passing (the policy's timers), a sample of the device (where NVML
  attributes every process), an evicted worker's pod deleted.

A worker *holds* from the moment its client is told the turn is its (a grant
read) until it calls ``parked`` (or its process is killed), the worker's own
view. After every step at most one worker holds.

``TURN_INTERLEAVINGS`` sets how many interleavings hypothesis generates
(300 by default; the proof was run once with 10,000). The test prints its count and
fails if the run played too few interleavings, granted no turn or never had a worker
holding: a model that stopped moving would otherwise pass.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement.turns import Action, Evict, TurnGroup, TurnPhase, TurnSettings
from timeslicer import protocol
from timeslicer.agent import replies
from timeslicer.client import _Session

EXAMPLES = int(os.environ.get("TURN_INTERLEAVINGS", "300"))
POLICY = TurnSettings(quantum=1.0, min_resident=0.25, yield_grace=8.0)
OWNERS = ["alice", "bob", "alice"]
PLAYED = {"interleavings": 0, "steps": 0, "grants": 0, "most_holding": 0}


@dataclass(eq=False)
class Conn:
    to_agent: deque[bytes] = field(default_factory=deque)
    to_worker: deque[bytes] = field(default_factory=deque)
    worker_open: bool = True     # the worker still reads and writes it
    agent_open: bool = True      # the agent has not seen its end (or closed it)
    hello: bool = False          # the agent heard its hello
    late: list[tuple[deque[bytes], bytes]] = field(default_factory=list)  # copies held back


@dataclass(eq=False)
class Worker:
    index: int
    session: _Session = field(default_factory=lambda: _Session(False))
    incarnation: int = 0
    memory: bool = False         # restored, by its own account
    conn: Conn | None = None

    @property
    def id(self) -> str:
        return f"w{self.index}#{self.incarnation}"

    @property
    def holds(self) -> bool:
        return self.session.holding or self.memory

    def say(self, op: str) -> None:
        line = self.session.say(op)
        if self.conn is not None and self.conn.worker_open:
            self.conn.to_agent.append(line)


class Model:
    def __init__(self, nvml: bool) -> None:
        self.now = 0.0
        self.nvml = nvml
        self.workers = [Worker(i) for i in range(len(OWNERS))]
        self.group = TurnGroup(POLICY)
        self.current: dict[str, Conn] = {}   # member id -> the connection the agent serves
        self.evicted: set[int] = set()       # worker indexes whose pods are being deleted
        for w in self.workers:
            self.group.join(w.id, OWNERS[w.index], 0.0)

    # -- the agent's side, as the agent's core does it

    def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            member = action.member
            w = next((w for w in self.workers if w.id == member), None)
            if w is None:
                continue
            if isinstance(action, Evict):
                self.evicted.add(w.index)
                continue
            message = replies.message_for(action)
            PLAYED["grants"] += message is not None and message.op == "grant"
            conn = self.current.get(member)
            if message is not None and conn is not None and conn.agent_open:
                conn.to_worker.append(protocol.encode(message))

    def agent_reads(self, w: Worker, conn: Conn) -> None:
        line = conn.to_agent.popleft()
        message = protocol.decode(line, protocol.FROM_WORKER)
        if isinstance(message, protocol.Hello) == conn.hello:
            conn.to_worker.append(protocol.encode(protocol.Error(message="out of order")))
            return
        actions = replies.call(self.group, w.id, message, self.now)
        said: list[protocol.Message] = []
        if isinstance(message, protocol.Hello):
            conn.hello = True
            said = replies.welcome(self.group, w.id, message, self.now, group_name="g",
                                   member_name=w.id)
        elif isinstance(message, protocol.Resident):
            said = replies.catch_up(self.group, w.id, message.turn, self.now)
        conn.to_worker.extend(protocol.encode(m) for m in said)
        self._apply(actions)

    def agent_sees_end(self, w: Worker, conn: Conn) -> None:
        conn.agent_open = False
        if self.current.get(w.id) is conn:
            del self.current[w.id]
            self._apply(self.group.disconnected(w.id, self.now))

    def accept(self, w: Worker, conn: Conn) -> None:
        old = self.current.get(w.id)
        if old is not None:
            old.agent_open = False
            old.to_agent.clear()
        self.current[w.id] = conn

    def restart_agent(self, first_turn: int) -> None:
        for w in self.workers:
            if w.conn is not None:
                w.conn.worker_open = w.conn.agent_open = False
                w.conn = None
        self.current.clear()
        self.group = TurnGroup(POLICY, recovering=True, first_turn=first_turn)
        for w in self.workers:
            self._apply(self.group.join(w.id, OWNERS[w.index], self.now))

    def device_sample(self) -> None:
        """A whole sample: who holds memory (a restore begun counts), and every other."""
        for w in self.workers:
            if w.holds:
                self._apply(self.group.holds_device(w.id, self.now))
            elif self.group.view(w.id, self.now).phase is TurnPhase.SILENT:
                self._apply(self.group.device_free(w.id, self.now))

    def delete_pod(self, w: Worker) -> None:
        """The evicted pod goes: its process first, then the agent hears it is gone."""
        self.evicted.discard(w.index)
        if w.conn is not None:
            w.conn.worker_open = False
            w.conn = None
        old = w.id
        self.current.pop(old, None)
        w.session, w.memory, w.incarnation = _Session(False), False, w.incarnation + 1
        self._apply(self.group.gone(old, self.now))
        self._apply(self.group.join(w.id, OWNERS[w.index], self.now, fresh=True))

    # -- the worker's side

    def worker_reads(self, w: Worker) -> None:
        assert w.conn is not None
        w.session.received(w.conn.to_worker.popleft())
        w.session.problems.clear()

    def worker_acts(self, w: Worker) -> None:
        """What a well-behaved worker does with what its client says."""
        if w.session.holding and not w.memory:
            w.memory = True
            w.say("resident")
        elif w.session.yielding is not None:
            w.memory = False
            w.say("parked")

    def drop(self, w: Worker) -> None:
        assert w.conn is not None
        w.conn.worker_open = False
        w.conn.to_worker.clear()
        w.conn = None

    def connect(self, w: Worker) -> None:
        w.conn = Conn()
        w.conn.to_agent.extend(_lines(w.session.hello()))

    def step(self, kind: str, i: int, pick: int) -> None:
        # The busy steps go to a worker with something to do (the i-th of them), so that
        # few steps are idle; the rest to worker i.
        busy = {"agent reads": lambda w: (c := self.current.get(w.id)) is not None
                and bool(c.to_agent),
                "worker reads": lambda w: w.conn is not None and bool(w.conn.to_worker),
                "worker acts": lambda w: (w.session.holding and not w.memory)
                or w.session.yielding is not None}.get(kind)
        ready = [w for w in self.workers if busy(w)] if busy is not None else []
        w = ready[i % len(ready)] if ready else self.workers[i]
        served = self.current.get(w.id)  # the agent reads only the connection it serves
        if kind == "agent reads" and served is not None and served.to_agent:
            self.agent_reads(w, served)
        elif kind == "agent sees an end":
            if served is not None and not served.worker_open and not served.to_agent:
                self.agent_sees_end(w, served)
        elif kind == "accept" and w.conn is not None and served is not w.conn \
                and w.conn.agent_open:
            self.accept(w, w.conn)
        elif kind == "worker reads" and w.conn is not None and w.conn.to_worker:
            self.worker_reads(w)
        elif kind == "worker acts":
            self.worker_acts(w)
        elif kind == "stray parked" and not w.holds:
            w.say("parked")
        elif kind == "want":
            w.say("want" if pick % 3 else "idle")
        elif kind == "duplicate":  # at once, or held back to come late ("late copy")
            conn = w.conn if w.conn is not None and w.conn.to_worker and pick % 2 else served
            stream = None if conn is None else conn.to_worker if conn is w.conn else conn.to_agent
            if conn is not None and stream:
                if pick < 2:
                    stream.insert(0, stream[0])
                else:
                    conn.late.append((stream, stream[0]))
        elif kind == "late copy" and self.late_copies(w):
            stream, line = self.late_copies(w).pop(pick % len(self.late_copies(w)))
            stream.append(line)
        elif kind == "drop" and w.conn is not None and pick < 3:
            self.drop(w)
        elif kind == "connect" and w.conn is None:
            self.connect(w)
        elif kind == "time":
            self.now += (0.25, 0.5, 1.0, 2.0)[pick % 4]
            self._apply(self.group.tick(self.now))
        elif kind == "restart agent" and pick == 0 and i < 2:  # now and then: turns go round
            self.restart_agent(0 if i else self.group.last_turn)
        elif kind == "device" and self.nvml:
            self.device_sample()
        elif kind == "delete pod" and i in self.evicted:
            self.delete_pod(w)

    def late_copies(self, w: Worker) -> list[tuple[deque[bytes], bytes]]:
        conn = w.conn if w.conn is not None else self.current.get(w.id)
        return [] if conn is None else conn.late

    def holding(self) -> list[int]:
        return [w.index for w in self.workers if w.holds]


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.split(b"\n") if line]


KINDS = ["agent reads"] * 8 + ["worker reads"] * 8 + ["worker acts"] * 6 + ["accept"] * 3 + [
    "connect"] * 3 + ["time"] * 3 + ["delete pod"] * 2 + [
    "agent sees an end", "stray parked", "want", "duplicate", "late copy", "late copy", "drop",
    "restart agent", "device"]
steps = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, len(OWNERS) - 1),
                           st.integers(0, 5)), min_size=30, max_size=150)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.booleans(), steps)
def play(nvml: bool, plan: list[tuple[str, int, int]]) -> None:
    """One interleaving: after every step, at most one worker holds."""
    model = Model(nvml)
    for w in model.workers:  # every worker starts connected and wanting
        model.connect(w)
        model.accept(w, w.conn)  # type: ignore[arg-type]
        w.say("want")
    for n, (kind, i, pick) in enumerate(plan):
        model.step(kind, i, pick)
        holding = model.holding()
        PLAYED["most_holding"] = max(PLAYED["most_holding"], len(holding))
        assert len(holding) <= 1, f"workers {holding} hold at once after step {n}: {kind} {i}"
    PLAYED["interleavings"] += 1
    PLAYED["steps"] += len(plan)


def test_no_two_workers_ever_hold_whatever_the_wire_does() -> None:
    PLAYED.update(dict.fromkeys(PLAYED, 0))
    play()
    print(f"\n{PLAYED['interleavings']} interleavings ({PLAYED['steps']} steps, "
          f"{PLAYED['grants']} grants), most workers holding at once: "
          f"{PLAYED['most_holding']}")
    # The proof is only as good as what it played: many interleavings, turns granted, and
    # a worker holding at some point (never holding would pass the check above vacuously).
    assert PLAYED["interleavings"] >= EXAMPLES // 2, PLAYED
    assert PLAYED["grants"] > 0, PLAYED
    assert PLAYED["most_holding"] == 1, PLAYED
