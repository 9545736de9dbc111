"""The checker of the time-slicer's real-node proof: what the fake workers
(turn_worker.py) logged, read back through the API server, and the rules it
must obey. It owes nothing to the agent: it never asks the agent who holds a
turn, only reads what each worker says it did, by the node's monotonic clock.

* An interval runs from a ``start`` to the next ``end`` or ``died`` of the
  same worker; one never closed runs to the end of time.
* No two intervals of one claim overlap.
* An owner's share is its workers' resident time inside a window over all
  resident time inside it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

FOREVER = float("inf")


@dataclass(frozen=True, slots=True)
class Interval:
    worker: str
    start: float
    end: float  # FOREVER while open


@dataclass
class Logs:
    """Every line each worker's containers wrote, kept as they are written.

    One thread per worker follows its pod's log and, whenever the stream ends
    (the container exited, the pod was deleted, the connection dropped),
    follows it again: a container that restarted, or a pod recreated under
    the same name, is read on. A line read twice is kept once (each carries
    its own time and process).
    """

    core: client.CoreV1Api
    namespace: str
    container: str = "worker"
    lines: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _threads: dict[str, threading.Thread] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, worker: str, pod: str) -> None:
        if worker in self._threads:
            return
        with self._lock:
            self.lines.setdefault(worker, {})
        thread = threading.Thread(target=self._follow, args=(worker, pod), daemon=True,
                                  name=f"logs-{worker}")
        self._threads[worker] = thread
        thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _keep(self, worker: str, raw: bytes) -> None:
        text = raw.decode(errors="replace").strip()
        if not text.startswith("{"):
            return
        try:
            line = json.loads(text)
        except ValueError:
            return
        with self._lock:
            self.lines[worker].setdefault(text, line)

    def _read(self, worker: str, pod: str, **kwargs: Any) -> None:
        resp = self.core.read_namespaced_pod_log(
            pod, self.namespace, container=self.container, _preload_content=False,
            _request_timeout=(5, 30), **kwargs)
        try:
            pending = b""
            for chunk in resp.stream(4096):
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for raw in whole:
                    self._keep(worker, raw)
                if self._stop.is_set():
                    return
            if pending:
                self._keep(worker, pending)
        finally:
            resp.release_conn()

    def _follow(self, worker: str, pod: str) -> None:
        # Anything the server or the connection says (no container yet, the pod gone,
        # a dropped stream) means only: read again.
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self._read(worker, pod, previous=True)  # the tail of a restarted container
            with contextlib.suppress(Exception):
                self._read(worker, pod, follow=True)
            time.sleep(0.1)

    def events(self, worker: str) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self.lines.get(worker, {}).values(), key=lambda line: line["t"])

    def workers(self) -> list[str]:
        with self._lock:
            return sorted(self.lines)


def intervals(events: Iterable[dict[str, Any]], worker: str) -> list[Interval]:
    out: list[Interval] = []
    opened: float | None = None
    for line in sorted(events, key=lambda e: e["t"]):
        if line["ev"] == "start":
            if opened is not None:
                # A second start with the first never closed: the first may still
                # hold memory for all this checker knows.
                out.append(Interval(worker, opened, FOREVER))
            opened = line["t"]
        elif line["ev"] in ("end", "died") and opened is not None:
            out.append(Interval(worker, opened, line["t"]))
            opened = None
    if opened is not None:
        out.append(Interval(worker, opened, FOREVER))
    return out


def all_intervals(logs: Logs) -> list[Interval]:
    return sorted((i for w in logs.workers() for i in intervals(logs.events(w), w)),
                  key=lambda i: i.start)


def overlaps(spans: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs that overlap, each interval checked against the one reaching furthest."""
    out: list[tuple[Interval, Interval]] = []
    furthest: Interval | None = None
    for span in sorted(spans, key=lambda i: i.start):
        if furthest is not None and span.start < furthest.end:
            out.append((furthest, span))
        if furthest is None or span.end > furthest.end:
            furthest = span
    return out


def shares(spans: list[Interval], owner_of: dict[str, str], since: float,
           until: float) -> dict[str, float]:
    held: dict[str, float] = {}
    for span in spans:
        length = min(span.end, until) - max(span.start, since)
        if length > 0:
            owner = owner_of[span.worker]
            held[owner] = held.get(owner, 0.0) + length
    total = sum(held.values())
    return {owner: t / total for owner, t in held.items()} if total else {}


def count(logs: Logs, event: str) -> int:
    return sum(1 for w in logs.workers() for e in logs.events(w) if e["ev"] == event)
