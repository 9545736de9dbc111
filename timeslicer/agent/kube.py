"""The agent's Kubernetes side, all of it: its node's worker pods in, evictions out.

Rules:

* Every API call goes through ``controller.k8s.kube`` (its errors, its timeouts);
  the blocking calls run off the event loop: the watch on a thread of its
  own, writes on an executor. Nothing here decides a turn.
* Pods are read with ``spec.nodeName=<node>`` and ``accel-timeslicer=true``.
  A pod's group is the exact claim its spec names (labels are sanitized), its
  owner the exact owner in its environment (else the label).
* The first listing ends the agent's start (``Agent.synced``): a pod seen
  after it is new, and so is one with no container running yet.
* A pod deleted, or ended (Succeeded, Failed), is gone. A container whose
  restart count grew or whose container ID changed restarted: the old
  incarnation is gone and a new one joins. A pod only marked for deletion is
  not gone: its containers may still hold the device.
* An eviction deletes the pod with its UID as precondition (a recreated pod of
  the same name is never hit) and records an Event on the OpenRLWorker its
  owner reference names.
* The ``timeslice.io/turn`` annotation is patched on each phase change, at
  most one patch in flight per pod, the latest state winning.
* A pod annotated ``openrl.io/drain`` (non-empty, when first seen or later) is
  drained (``Agent.drain``); once it is, ``openrl.io/drained`` (the time) goes
  in the same patch as its turn annotation, and stays in every later one
  with the same value -- a pod read already marked keeps its mark. A patch
  carrying the mark that fails is tried again (``DRAINED_TRIES``), where a
  turn state alone waits for the next.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.k8s import kube, naming
from controller.k8s.events import Recorder
from controller.k8s.objects import format_time, pod_claim, pod_claims
from placement.turns import EvictReason, TurnPhase
from timeslicer.agent.channels import Member
from timeslicer.agent.core import Agent

__all__ = [
    "ANNOTATION",
    "EVICT_NOTES",
    "NodeEffects",
    "NodePods",
    "follow",
    "pod_member",
    "socket_path",
]

log = logging.getLogger("openrl.timeslicer.kube")

ANNOTATION = naming.ANNOTATION_TURN
OWNER_ENV = "OPEN_RL_TIME_SLICE_OWNER"
VOLUME = "openrl-turn"
DRAINED_TRIES = 10  # patches carrying the drained mark tried, 0.5 s apart, before giving up
EVICT_NOTES = {
    EvictReason.TURN_OVERRUN: "did not park within its grace after being asked to yield; "
                              "its pod is deleted and recreated on the same claim",
    EvictReason.RESIDENT_WITHOUT_TURN: "held device memory without the turn; its pod is "
                                       "deleted and recreated on the same claim",
    EvictReason.SILENT: "did not report to the restarted agent nor park within its grace, "
                        "and the device did not show it free; its pod is deleted and "
                        "recreated on the same claim",
}
Obj = dict[str, Any]
Submit = Callable[[Callable[[], None]], None]


def socket_path(kubelet_root: Path, uid: str) -> Path:
    return kubelet_root / "pods" / uid / "volumes" / "kubernetes.io~empty-dir" / VOLUME / \
        "turn.sock"


def _owner(pod: Obj) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == OWNER_ENV and env.get("value"):
                return str(env["value"])
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(naming.LABEL_TS_OWNER) or "")


def _worker(pod: Obj) -> str:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == naming.KIND:
            return str(ref.get("name") or "")
    return ""


def _containers(pod: Obj) -> dict[str, tuple[int, str]]:
    return {str(s.get("name")): (int(s.get("restartCount") or 0), str(s.get("containerID") or ""))
            for s in (pod.get("status") or {}).get("containerStatuses") or []}


def pod_member(pod: Obj, kubelet_root: Path) -> Member | None:
    """The member a worker pod is, or None if it names no claim."""
    meta = pod.get("metadata") or {}
    claim = pod_claim(pod) or min(pod_claims(pod), default="")
    if not claim or not meta.get("uid"):
        return None
    namespace = str(meta.get("namespace") or "")
    labels = meta.get("labels") or {}
    member = Member(key=str(meta["uid"]), group=f"{namespace}/{claim}",
                    name=str(meta.get("name") or ""), owner=_owner(pod) or str(meta["uid"]),
                    role=str(labels.get(naming.LABEL_ROLE) or ""),
                    socket=socket_path(kubelet_root, str(meta["uid"])))
    member.extra.update(namespace=namespace, worker=_worker(pod), containers=_containers(pod))
    marked = _annotation(pod, naming.ANNOTATION_DRAINED)
    if marked:
        member.extra["drained_at"] = marked  # marked by an earlier agent: the mark stays
    return member


def _annotation(pod: Obj, key: str) -> str:
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(key) or "")


def _running(pod: Obj) -> bool:
    return any((s.get("state") or {}).get("running") is not None
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _restarted(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> bool:
    for name, (count, cid) in after.items():
        was = before.get(name)
        if was is not None and (count > was[0] or (was[1] and cid and cid != was[1])):
            return True
    return False


class NodePods:
    """Pod events (on the loop's thread) -> the agent's members."""

    def __init__(self, agent: Agent, kubelet_root: Path,
                 on_synced: Callable[[], None] | None = None) -> None:
        self.agent = agent
        self.kubelet_root = kubelet_root
        self.on_synced = on_synced
        self.synced = False

    def relist(self, pods: list[Obj]) -> None:
        seen = set()
        for pod in pods:
            seen.add(str((pod.get("metadata") or {}).get("uid") or ""))
            self.event("MODIFIED", pod)
        for key in [k for k in self.agent.members if k not in seen]:
            self.agent.remove(key)
        self.agent.synced()
        self.synced = True
        if self.on_synced is not None:
            self.on_synced()

    def event(self, kind: str, pod: Obj) -> None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        phase = str((pod.get("status") or {}).get("phase") or "")
        if kind == "DELETED" or phase in ("Succeeded", "Failed"):
            self.agent.remove(uid)
            return
        if kind not in ("ADDED", "MODIFIED"):
            return
        known = self.agent.members.get(uid)
        if known is None:
            member = pod_member(pod, self.kubelet_root)
            if member is not None:
                # No container running: no process of it can hold device memory.
                self.agent.add(member, fresh=True if not _running(pod) else None)
        else:
            containers = _containers(pod)
            if _restarted(known.extra.get("containers") or {}, containers):
                log.info("container restarted in %s: it rejoins", known.name)
                self.agent.restarted(uid)
            known.extra["containers"] = containers
        if _annotation(pod, naming.ANNOTATION_DRAIN):
            self.agent.drain(uid)


def follow(api: kube.Kube, node: str, loop: asyncio.AbstractEventLoop, pods: NodePods,
           stop: threading.Event) -> None:
    """List then watch the node's worker pods, forever (on a thread of its own)."""
    labels, fields = f"{naming.LABEL_TIMESLICER}=true", f"spec.nodeName={node}"
    version = ""
    while not stop.is_set():
        try:
            if not version:
                items, version = api.list_with_version(kube.NODE_PODS, label_selector=labels,
                                                       field_selector=fields)
                loop.call_soon_threadsafe(pods.relist, items)
            for kind, obj in api.watch(kube.NODE_PODS, version, label_selector=labels,
                                         field_selector=fields):
                if kind == "BOOKMARK":
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    continue
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                loop.call_soon_threadsafe(pods.event, kind, obj)
        except kube.Gone:
            version = ""
        except kube.KubeError as exc:
            log.warning("pod watch failed, retrying: %s", exc)
            stop.wait(2.0)


class NodeEffects:
    """Evictions, Events and the turn annotation, written off the loop."""

    def __init__(self, api: kube.Kube, node: str, submit: Submit,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.api = api
        self.node = node
        self.submit = submit
        self.now = now
        self.recorder = Recorder(api, f"timeslicer/{node}", now)
        self._lock = threading.Lock()
        # uid -> (namespace, name, its annotations as the next patch writes them)
        self._pending: dict[str, tuple[str, str, dict[str, str]]] = {}
        self._in_flight: set[str] = set()

    def evict(self, member: Member, reason: EvictReason) -> None:
        namespace = str(member.extra.get("namespace") or "")
        self.submit(lambda: self._evict(member.name, member.key, namespace,
                                        str(member.extra.get("worker") or ""), reason))

    def _evict(self, name: str, uid: str, namespace: str, worker: str,
               reason: EvictReason) -> None:
        try:
            self.api.delete(kube.PODS, name, namespace=namespace, uid=uid)
        except (kube.NotFound, kube.Conflict):
            return  # already gone, or a newer pod of that name: not ours to delete
        except kube.KubeError as exc:
            log.error("could not evict %s: %s", name, exc)
            return
        if not worker:
            return
        try:
            obj = self.api.get(kube.WORKERS, worker, namespace=namespace)
        except kube.KubeError as exc:
            log.warning("no Event for %s: %s", worker, exc)
            return
        self.recorder.record(obj, "Warning", reason.value, "Evict",
                             f"pod {name} on node {self.node} {EVICT_NOTES[reason]}")

    def publish(self, member: Member, phase: TurnPhase, holder: str | None, turns: int) -> None:
        now = format_time(self.now())
        state = {"phase": phase.value, "since": now, "holder": holder, "turns": turns,
                 "node": self.node}
        annotations = {ANNOTATION: json.dumps(state, separators=(",", ":"))}
        if member.drained:
            annotations[naming.ANNOTATION_DRAINED] = member.extra.setdefault("drained_at", now)
        with self._lock:
            self._pending[member.key] = (str(member.extra.get("namespace") or ""),
                                         member.name, annotations)
            if member.key in self._in_flight:
                return
            self._in_flight.add(member.key)
        self.submit(lambda: self._flush(member.key))

    def _flush(self, uid: str) -> None:
        failed = 0
        while True:
            with self._lock:
                pending = self._pending.pop(uid, None)
                if pending is None:
                    self._in_flight.discard(uid)
                    return
            namespace, name, annotations = pending
            body = {"metadata": {"annotations": annotations}}
            try:
                self.api.patch(kube.PODS, name, body, namespace=namespace)
            except kube.NotFound:
                pass
            except kube.KubeError as exc:
                log.warning("could not annotate %s: %s", name, exc)
                failed += 1
                # A turn state is overtaken by the next; a drained mark may have no next (a
                # Retired member changes no more) and a move waits on it: tried again.
                if naming.ANNOTATION_DRAINED in annotations and failed < DRAINED_TRIES:
                    with self._lock:
                        self._pending.setdefault(uid, pending)
                time.sleep(0.5)
