"""A drain (a move at a turn's boundary): the holder finishes its turn, parks, is marked
drained in one write and never granted again while the others go on taking turns; a
member holding nothing is drained at once, a silent one once evicted for silence; the same
with ``--local``'s files; and the admission policy lets the agent write that mark only on a
pod asked to drain."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cel
import pytest
import yaml

from controller.k8s import kube
from placement.turns import TurnPhase, TurnSettings
from tests.unit.controller.fake_kube import FakeKube
from tests.unit.timeslicer.agent.test_kube import pod
from tests.unit.timeslicer.agent.test_local import FAST, members, with_agent
from tests.unit.timeslicer.agent.test_members import _watch
from tests.unit.timeslicer.agent.workers import FakeWorker, no_overlap
from timeslicer.agent import Agent
from timeslicer.agent import local as local_mode
from timeslicer.agent.kube import ANNOTATION, NodeEffects, NodePods, socket_path

ROOT = Path(__file__).resolve().parents[4]
DRAIN, DRAINED = "openrl.io/drain", "openrl.io/drained"
# The holder's turn is long enough to be caught holding, short enough for a quick test.
TURNS = TurnSettings(quantum=0.3, min_resident=0.0, yield_grace=0.5)


@pytest.fixture
def kubelet_root() -> Iterator[Path]:
    """A short root: a worker connects by the socket's full path, at most 107 bytes."""
    root = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))
    yield root
    shutil.rmtree(root)


class Node:
    """Three worker pods of three owners on one claim, on the fake API, their writes
    carried out at once and every patch's annotations kept."""

    def __init__(self, root: Path, settings: TurnSettings = TURNS) -> None:
        self.api = FakeKube(namespace="team")
        self.pods = {n: pod(f"orw-{n}", f"u-{n}", "claim", n) for n in ("a", "b", "c")}
        for body in self.pods.values():
            self.api.put(kube.PODS, body)
            socket_path(root, body["metadata"]["uid"]).parent.mkdir(parents=True)
        self.patches: list[tuple[str, dict[str, str]]] = []
        patch = self.api.patch

        def kept(res: kube.Resource, name: str, body: Any, **kw: Any) -> Any:
            self.patches.append((name, dict(body["metadata"]["annotations"])))
            return patch(res, name, body, **kw)

        self.api.patch = kept  # type: ignore[method-assign]
        self.agent = Agent(settings, effects=NodeEffects(self.api, "n1", lambda f: f()))
        self.watch = NodePods(self.agent, root)
        self.log: list[tuple[str, str]] = []
        self.workers = {n: FakeWorker(socket_path(root, f"u-{n}"), self.log, n)
                        for n in self.pods}

    def ask_to_drain(self, name: str) -> None:
        """What the scheduler's annotation looks like to the agent: a watch event."""
        self.pods[name]["metadata"].setdefault("annotations", {})[DRAIN] = "move"
        self.watch.event("MODIFIED", self.pods[name])

    def drained(self, name: str) -> str | None:
        return (self.api.obj(kube.PODS, f"orw-{name}")["metadata"].get("annotations")
                or {}).get(DRAINED)

    def writes_of_the_mark(self, name: str) -> list[dict[str, str]]:
        return [a for n, a in self.patches if n == f"orw-{name}" and DRAINED in a]


def running(body: dict[str, Any]) -> dict[str, Any]:
    """The pod with its container running: there before the agent, it may hold memory."""
    for status in body["status"]["containerStatuses"]:
        status["state"] = {"running": {}}
    return body


async def _until(check: Any, limit: float = 10.0) -> None:
    async def wait() -> None:
        while not check():
            await asyncio.sleep(0.01)
    await asyncio.wait_for(wait(), limit)


def test_a_holder_asked_to_drain_finishes_its_turn_parks_and_is_never_granted_again(
        kubelet_root: Path) -> None:
    async def story() -> None:
        node = Node(kubelet_root)
        node.watch.relist(list(node.pods.values()))
        for worker in node.workers.values():
            worker.start()
        group = node.agent.groups["team/claim"]
        await _until(lambda: len(node.log) >= 3 and group.holder is not None
                     and node.agent.members[group.holder.partition("#")[0]].phase
                     is TurnPhase.RESIDENT)
        holder = node.agent.members[group.holder.partition("#")[0]].name[4:]
        node.ask_to_drain(holder)
        assert node.drained(holder) is None  # it holds its turn: nobody cuts it short
        await _until(lambda: node.drained(holder) is not None)
        # Its last word on the device was parking, before the mark was written.
        assert [e for e in node.log if e[1] == holder][-1] == ("parked", holder)
        mark = node.drained(holder)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", mark or "")
        turn = json.loads(node.api.obj(kube.PODS, f"orw-{holder}")["metadata"]["annotations"][
            ANNOTATION])
        assert turn["phase"] == "Retired"
        # One write says it: the turn annotation and the mark together.
        [written] = node.writes_of_the_mark(holder)
        assert json.loads(written[ANNOTATION])["phase"] == "Retired"
        seen = len(node.log)
        others = [n for n in node.pods if n != holder]
        await _until(lambda: sum(1 for what, n in node.log[seen:] if what == "resident") >= 4)
        assert {n for what, n in node.log[seen:] if what == "resident"} == set(others)
        node.ask_to_drain(holder)  # asked again (the watch sees its own patch): nothing new
        assert len(node.writes_of_the_mark(holder)) == 1 and node.drained(holder) == mark
        for worker in node.workers.values():
            worker.stop()
        node.agent.close()
        assert no_overlap(node.log)

    asyncio.run(story())


def test_a_parked_member_is_drained_at_once_in_one_write(kubelet_root: Path) -> None:
    async def story() -> None:
        node = Node(kubelet_root, TurnSettings(quantum=30, min_resident=0, yield_grace=30))
        node.watch.relist([])  # started with no pods: the ones that come are new
        for body in node.pods.values():
            node.watch.event("ADDED", body)
        node.workers["a"].start()
        node.workers["b"].start()
        await _until(lambda: len(node.log) == 1)
        waiting = "b" if node.log == [("resident", "a")] else "a"
        await _until(lambda: node.agent.members[f"u-{waiting}"].phase is TurnPhase.WAITING)
        before = len(node.patches)
        node.ask_to_drain(waiting)  # waiting for a turn: it holds nothing
        node.ask_to_drain("c")  # never connected
        for name in (waiting, "c"):
            assert node.drained(name) is not None
            assert node.agent.members[f"u-{name}"].phase is TurnPhase.RETIRED
        assert len(node.patches) == before + 2  # one write each
        node.agent.close()

    asyncio.run(story())


def test_a_pod_marked_already_keeps_its_mark_through_a_restarted_agent(
        kubelet_root: Path) -> None:
    async def story() -> None:
        node = Node(kubelet_root)
        node.pods["c"]["metadata"]["annotations"] = {DRAIN: "move", DRAINED: "earlier"}
        node.watch.relist([running(node.pods["c"])])  # c recovers: unreported, retiring
        assert node.agent.members["u-c"].phase is TurnPhase.UNREPORTED
        node.workers["c"].start(want=True)  # says it holds nothing, and wants
        await _until(lambda: node.agent.members["u-c"].phase is TurnPhase.RETIRED)
        assert node.writes_of_the_mark("c")[-1][DRAINED] == "earlier"
        node.agent.close()

    asyncio.run(story())


def test_a_silent_member_asked_to_drain_is_drained_once_evicted_for_silence(
        tmp_path: Path) -> None:
    paths = members(tmp_path, "claim-a", {"quiet": "alice", "talker": "bob"})
    (tmp_path / "claim-a/quiet/drain").write_text("move\n")  # asked before the agent started
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        FakeWorker(paths["talker"], log, "talker").start()
        await _until(lambda: (tmp_path / "claim-a/quiet/drained").exists())
        assert (tmp_path / "claim-a/quiet/evicted").read_text() == "Silent\n"
        await _until(lambda: ("resident", "talker") in log)  # the group never waited on it

    asyncio.run(with_agent(tmp_path, TurnSettings(quantum=1, min_resident=0,
                                                  yield_grace=0.1), body))


def test_local_a_drain_file_drains_the_member_and_the_agent_answers_with_drained(
        tmp_path: Path) -> None:
    paths = members(tmp_path, "g", {"a1": "alice", "b1": "bob", "c1": "carol"})
    log: list[tuple[str, str]] = []

    async def body(agent: Agent) -> None:
        for name, path in paths.items():
            FakeWorker(path, log, name).start()
        await _until(lambda: len([e for e in log if e[0] == "resident"]) >= 3)
        (tmp_path / "g/b1/drain").write_text("")  # whoever asks: any text, even none
        await _until(lambda: (tmp_path / "g/b1/drained").exists())
        assert agent.effects.phases["g/b1"] is TurnPhase.RETIRED  # type: ignore[attr-defined]
        assert not list((tmp_path / "g/b1").glob(".*"))  # written whole, nothing left over
        seen = len(log)
        await _until(lambda: sum(1 for e in log[seen:] if e[0] == "resident") >= 4)
        assert {n for what, n in log[seen:] if what == "resident"} == {"a1", "c1"}

    asyncio.run(with_agent(tmp_path, FAST, body))
    assert no_overlap(log)


def test_local_drains_are_looked_for_a_slice_of_members_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_mode, "DRAIN_SLICE", 2)
    members(tmp_path, "g", {f"m{i}": "o" for i in range(5)})
    agent, watcher = _watch(tmp_path)
    asked: list[str] = []
    agent.drain = asked.append  # type: ignore[attr-defined]
    (tmp_path / "g/m4/drain").write_text("")
    for _ in range(3):
        if not asked:
            watcher.update()
    assert asked == ["g/m4"]


# -- the one write the agent needs, and no other -----------------------------------------

_OPTIONAL = re.compile(r"(\w+(?:\.\w+)*)\.\?(\w+)\.orValue\(([^()]*)\)")


def _plain(expression: str) -> str:
    """``x.?f.orValue(d)`` as ``has(x.f) ? x.f : d``: the evaluator here has no optionals."""
    return _OPTIONAL.sub(r"(has(\1.\2) ? \1.\2 : \3)", expression)


def _admits_patch(old: dict[str, str], new: dict[str, str]) -> bool:
    [policy] = [d for d in yaml.safe_load_all(
        (ROOT / "manifests/timeslicer/admission.yaml").read_text())
        if d["kind"] == "ValidatingAdmissionPolicy"]
    spec = policy["spec"]
    context: dict[str, Any] = {
        "request": {"operation": "UPDATE"},
        "oldObject": {"metadata": {"annotations": old}, "spec": {"nodeName": "n1"}},
        "object": {"metadata": {"annotations": new}, "spec": {"nodeName": "n1"}}}
    context["variables"] = {v["name"]: cel.evaluate(_plain(v["expression"]), context)
                            for v in spec["variables"] if v["name"] != "tokenNode"}
    [annotations] = [v for v in spec["validations"] if "annotation" in v.get("message", "")]
    return bool(cel.evaluate(_plain(annotations["expression"]), context))


@pytest.mark.parametrize(("old", "new", "admitted"), [
    ({}, {ANNOTATION: "{}"}, True),
    ({DRAIN: "move"}, {DRAIN: "move", ANNOTATION: "{}", DRAINED: "t"}, True),
    ({}, {ANNOTATION: "{}", DRAINED: "t"}, False),            # not asked
    ({DRAIN: ""}, {DRAIN: "", DRAINED: "t"}, False),          # asked with nothing
    ({}, {DRAIN: "move"}, False),                             # asking is the scheduler's
    ({DRAIN: "move", DRAINED: "t"}, {DRAIN: "move"}, False),  # a mark is never taken back
    ({DRAIN: "move"}, {}, False),                             # nor an ask
], ids=["turn", "mark-when-asked", "mark-unasked", "mark-empty-ask", "ask", "unmark", "unask"])
def test_the_agent_may_mark_drained_only_a_pod_asked_to_drain(
        old: dict[str, str], new: dict[str, str], admitted: bool) -> None:
    assert _admits_patch(old, new) is admitted


def test_an_eviction_for_silence_of_a_draining_pod_marks_it_too(kubelet_root: Path) -> None:
    async def story() -> None:
        node = Node(kubelet_root, TurnSettings(quantum=1, min_resident=0, yield_grace=0.05))
        node.pods["a"]["metadata"]["annotations"] = {DRAIN: "move"}
        node.watch.relist([running(node.pods["a"])])  # there before the agent: recovering
        member = node.agent.members["u-a"]
        await _until(lambda: member.phase is TurnPhase.EVICTING)
        assert node.drained("a") is not None
        assert member.drained and node.api.calls[("delete", "pods")] == 1
        assert [n for n, a in node.patches if DRAINED in a] == ["orw-a"]  # one write
        node.agent.close()

    asyncio.run(story())


def test_a_mark_whose_write_fails_is_written_again(
        kubelet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("timeslicer.agent.kube.time.sleep", lambda _: None)

    async def story() -> None:
        node = Node(kubelet_root)
        node.watch.relist([])
        node.watch.event("ADDED", node.pods["a"])
        patch, refused = node.api.patch, []

        def flaky(res: kube.Resource, name: str, body: Any, **kw: Any) -> Any:
            if not refused:
                refused.append(body)
                raise kube.KubeError(503, "ServiceUnavailable", "try again")
            return patch(res, name, body, **kw)

        node.api.patch = flaky  # type: ignore[method-assign]
        node.ask_to_drain("a")
        assert refused and DRAINED in refused[0]["metadata"]["annotations"]
        assert node.drained("a") is not None
        node.agent.close()

    asyncio.run(story())


def test_local_an_agent_killed_mid_drain_is_asked_again_by_the_file_and_finishes_it(
        tmp_path: Path) -> None:
    paths = members(tmp_path, "g", {"a1": "alice", "b1": "bob"})
    log: list[tuple[str, str]] = []
    held: dict[str, int] = {}

    async def first(agent: Agent) -> None:
        holder = FakeWorker(paths["a1"], log, "a1")
        holder.start()
        FakeWorker(paths["b1"], log, "b1").start(want=False)  # reports, wants nothing yet
        await _until(lambda: ("resident", "a1") in log)
        (tmp_path / "g/a1/drain").write_text("move\n")
        await _until(lambda: agent.members["g/a1"].draining)
        held["a1"] = holder.turn  # the agent goes now, mid-drain: a1 still holds its turn

    asyncio.run(with_agent(tmp_path, TurnSettings(quantum=30, min_resident=0), first))
    assert not (tmp_path / "g/a1/drained").exists()

    async def second(agent: Agent) -> None:
        back = FakeWorker(paths["a1"], log, "a1")
        back.turn = held["a1"]
        back.start(resident=True)  # says it still holds its turn: it keeps it, then parks
        FakeWorker(paths["b1"], log, "b1").start()
        await _until(lambda: (tmp_path / "g/a1/drained").exists())
        assert log[:2] == [("resident", "a1"), ("parked", "a1")]  # its one turn, finished
        await _until(lambda: ("resident", "b1") in log)

    asyncio.run(with_agent(tmp_path, TurnSettings(quantum=0.3, min_resident=0,
                                                  yield_grace=1), second))
    assert no_overlap(log) and log.count(("resident", "a1")) == 1
