"""The agent's Kubernetes side on the in-memory fake API: pods to members, evictions out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from controller.k8s import kube
from placement.turns import EvictReason, TurnPhase, TurnSettings
from tests.unit.controller.fake_kube import FakeKube
from timeslicer.agent import Agent
from timeslicer.agent.kube import ANNOTATION, NodeEffects, NodePods, socket_path


def pod(name: str, uid: str, claim: str, owner: str, restarts: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "uid": uid,
                         "labels": {"accel-timeslicer": "true", "openrl.io/role": "sampler",
                                    "timeslice.io/owner": "sanitized"},
                         "ownerReferences": [{"kind": "OpenRLWorker", "name": name[4:],
                                              "uid": "w-" + uid, "controller": True}]},
            "spec": {"nodeName": "n1",
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                     "containers": [{"name": "worker", "env": [
                         {"name": "OPEN_RL_TIME_SLICE_OWNER", "value": owner}]}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "worker", "restartCount": restarts, "containerID": f"c://{restarts}"}]}}


def test_watch_events_become_members_grouped_by_the_exact_claim(tmp_path: Path) -> None:
    async def story() -> None:
        agent = Agent(TurnSettings())
        pods = NodePods(agent, tmp_path)
        pods.relist([pod("orw-a", "u1", "Claim.One", "Team/A"),
                     pod("orw-b", "u2", "Claim.One", "Team/B")])
        assert set(agent.groups) == {"team/Claim.One"}
        assert agent.members["u1"].owner == "Team/A"
        assert agent.members["u1"].socket == socket_path(tmp_path, "u1")
        pods.event("ADDED", pod("orw-c", "u3", "other", "Team/A"))
        assert set(agent.groups) == {"team/Claim.One", "team/other"}
        # A container restart: the old incarnation is gone, a new one joins.
        pods.event("MODIFIED", pod("orw-a", "u1", "Claim.One", "Team/A", restarts=1))
        assert agent.members["u1"].incarnation == 1
        assert "u1#1" in agent.groups["team/Claim.One"]
        assert "u1#0" not in agent.groups["team/Claim.One"]
        pods.event("DELETED", pod("orw-c", "u3", "other", "Team/A"))
        assert "u3" not in agent.members and "team/other" not in agent.groups
        pods.relist([pod("orw-a", "u1", "Claim.One", "Team/A", restarts=1)])
        assert set(agent.members) == {"u1"}
        agent.close()

    asyncio.run(story())


def test_an_eviction_deletes_with_the_uid_precondition_and_records_an_event(
        tmp_path: Path) -> None:
    # The agent's own namespace is not the workers': the pod, its worker and the Event
    # are all in the worker's.
    api = FakeKube(namespace="openrl-timeslicer")
    body = pod("orw-a", "u1", "c", "o")
    api.put(kube.PODS, body, "team")
    api.put(kube.WORKERS, {"metadata": {"name": "a", "uid": "w-u1"}}, "team")
    key = api.key(kube.PODS, "orw-a", "team")

    async def story() -> None:
        effects = NodeEffects(api, "n1", lambda f: f())
        agent = Agent(TurnSettings(), effects=effects)
        NodePods(agent, tmp_path).relist([body])
        member = agent.members["u1"]
        # A newer pod of the same name is never hit: the UID must match.
        api.objects[key]["metadata"]["uid"] = "newer"
        effects.evict(member, EvictReason.TURN_OVERRUN)
        assert api.objects[key] is not None
        assert "deletionTimestamp" not in api.objects[key]["metadata"]
        assert api.all(kube.EVENTS) == []
        api.objects[key]["metadata"]["uid"] = "u1"
        effects.evict(member, EvictReason.TURN_OVERRUN)
        assert "deletionTimestamp" in api.objects[key]["metadata"]
        [event] = api.all(kube.EVENTS)
        assert event["reason"] == "TurnOverrun" and event["type"] == "Warning"
        assert event["regarding"]["name"] == "a" and "n1" in event["note"]
        assert event["metadata"]["namespace"] == "team"
        agent.close()

    asyncio.run(story())


def test_the_turn_annotation_is_coalesced_latest_state_winning(tmp_path: Path) -> None:
    api = FakeKube(namespace="team")
    body = pod("orw-a", "u1", "c", "o")
    api.put(kube.PODS, body)
    queued: list[Any] = []

    async def story() -> None:
        effects = NodeEffects(api, "n1", queued.append)
        agent = Agent(TurnSettings(), effects=effects)
        NodePods(agent, tmp_path).relist([body])
        member = agent.members["u1"]
        effects.publish(member, TurnPhase.WAITING, None, 0)
        effects.publish(member, TurnPhase.GRANTED, "orw-a", 1)
        effects.publish(member, TurnPhase.RESIDENT, "orw-a", 1)
        assert len(queued) == 1  # at most one patch in flight per pod
        queued.pop()()
        assert api.calls[("patch", "pods")] == 1
        state = json.loads(api.obj(kube.PODS, "orw-a")["metadata"]["annotations"][ANNOTATION])
        assert state["phase"] == "Resident" and state["holder"] == "orw-a"
        assert state["node"] == "n1" and state["turns"] == 1
        agent.close()

    asyncio.run(story())
