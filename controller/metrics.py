"""What operators scrape and probe: /metrics, /healthz, /readyz.

Rules:

* Metrics live in a registry of their own (never the process-global one), so
  several controllers in one process (tests) never collide.
* Labels are bounded sets only: a role, a reason kind, a resource, an error
  kind -- never a worker's name or anything a caller chose.
* The waits: from a worker's creation to its first seat, and from that seat
  to Running, observed once each when the status saying so is written; the
  workers waiting now, by reason kind, and the age of each role's oldest,
  counted from the cache at each scrape (never per reconcile).
* /healthz fails when the loop has not turned for a while (a wedged loop is
  the one thing a restart fixes); /readyz is ready once the watches have
  listed everything (or, on a standby replica, once it is waiting for the
  lease).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.k8s.naming import ReasonKind
from placement import Role

PREFIX = "openrl_place"

log = logging.getLogger("openrl.controller.metrics")

# The Pending workers: how many of each reason kind, and each role's oldest creation
# time (seconds since the epoch).
Census = tuple[Mapping[str, int], Mapping[str, float]]

ROLES = tuple(role.value for role in Role)
# The kinds a Pending worker's reason can have; "New" is a worker not answered yet,
# "Other" a reason this scheduler never writes (so the label set stays bounded).
NEW, OTHER = "New", "Other"
WAIT_KINDS = (NEW, ReasonKind.NO_CAPACITY.value, ReasonKind.WAITING_FOR_CAPACITY.value,
              ReasonKind.WAITING_FOR_PREDECESSOR.value, ReasonKind.TEMPLATE_NOT_FOUND.value,
              ReasonKind.QUEUED.value, ReasonKind.EVICTED.value, OTHER)
# Seconds to minutes (a free GPU) up to hours (contention); then image pulls and starts.
SEAT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400)
RUNNING_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200)


class Metrics:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        r = self.registry = CollectorRegistry()
        self.reconciles = Counter(f"{PREFIX}_reconciles_total",
                                  "Reconciles by result (ok, requeue, error).",
                                  ["result"], registry=r)
        self.decisions = Counter(f"{PREFIX}_decisions_total",
                                 "Placement decisions by outcome (new_claim, join_claim, "
                                 "no_capacity, waiting_for_capacity).",
                                 ["outcome"], registry=r)
        self.latency = Histogram(f"{PREFIX}_reconcile_duration_seconds",
                                 "Time one reconcile takes, API calls included.",
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                                 registry=r)
        self.pending = Gauge(f"{PREFIX}_pending_workers",
                             "Workers waiting for a seat (phase Pending).", registry=r)
        self.claims = Gauge(f"{PREFIX}_claims", "Managed ResourceClaims, not terminating.",
                            registry=r)
        self.seats_used = Gauge(f"{PREFIX}_seats_used", "Workers holding a seat on a claim.",
                                registry=r)
        self.seats_total = Gauge(f"{PREFIX}_seats_total",
                                 "Seats the enabled nodes offer (devices x max workers per "
                                 "claim).", registry=r)
        self.api_requests = Counter(f"{PREFIX}_api_requests_total",
                                    "Kubernetes API requests by verb, resource and HTTP code "
                                    "(0 = no answer).", ["verb", "resource", "code"], registry=r)
        self.api_latency = Histogram(f"{PREFIX}_api_request_duration_seconds",
                                     "Kubernetes API request latency (until the response "
                                     "headers) by verb and resource.", ["verb", "resource"],
                                     buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                              1, 2.5),
                                     registry=r)
        self.queue_depth = Gauge(f"{PREFIX}_queue_depth", "Keys waiting in the work queue.",
                                 registry=r)
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica holds the lease.",
                            registry=r)
        self.node_warnings = Gauge(f"{PREFIX}_node_label_warnings",
                                   "Enabled nodes whose openrl.io labels were unusable.",
                                   registry=r)
        self.wait_for_seat = Histogram(f"{PREFIX}_wait_for_seat_seconds",
                                       "From a worker's creation to its first seat, by role.",
                                       ["role"], buckets=SEAT_BUCKETS, registry=r)
        self.seat_to_running = Histogram(f"{PREFIX}_seat_to_running_seconds",
                                         "From a worker's seat to its pod running, by role.",
                                         ["role"], buckets=RUNNING_BUCKETS, registry=r)
        for role in ROLES:  # every role's series exists from the start, so rates read 0
            self.wait_for_seat.labels(role=role)
            self.seat_to_running.labels(role=role)
        self.moves = Counter(f"{PREFIX}_moves_total",
                             "Workers placed again, by why (NodeLost, NodeNotReady, PodWedged, "
                             "DeviceConflict), or moved for efficiency (OwnDevices, "
                             "EmptiesNode).", ["reason"],
                             registry=r)
        self.stranded = Gauge(f"{PREFIX}_devices_stranded",
                              "Free devices while movable workers take turns on shared "
                              "claims (read by each pass of the move rule).", registry=r)
        self.write_failures = Counter(f"{PREFIX}_write_failures_total",
                                      "Planned writes that failed, by resource and error kind "
                                      "(each is retried).", ["resource", "error"], registry=r)
        self._waiting = _Waiting(clock)
        r.register(self._waiting)

    def api_request(self, verb: str, resource: str, code: int, seconds: float = 0.0) -> None:
        self.api_requests.labels(verb=verb, resource=resource, code=str(code)).inc()
        if verb != "watch":
            self.api_latency.labels(verb=verb, resource=resource).observe(seconds)


    def waited(self, role: str, seat: float | None, start: float | None) -> None:
        """The waits one status write ended (see ``status.waits_ended``)."""
        if seat is not None:
            self.seated(role, seat)
        if start is not None:
            self.started(role, start)

    def seated(self, role: str, seconds: float) -> None:
        """A worker got its first seat ``seconds`` after its creation."""
        if role in ROLES:
            self.wait_for_seat.labels(role=role).observe(max(0.0, seconds))

    def started(self, role: str, seconds: float) -> None:
        """A seated worker's pod runs, ``seconds`` after the seat."""
        if role in ROLES:
            self.seat_to_running.labels(role=role).observe(max(0.0, seconds))

    def census_from(self, source: Callable[[], Census]) -> None:
        """Where each scrape reads the Pending workers from (the controller's cache)."""
        self._waiting.source = source

    def write_failed(self, resource: str, error: str) -> None:
        self.write_failures.labels(resource=resource, error=error or "Unknown").inc()


class _Waiting(Collector):
    """The workers waiting now, counted as of each scrape: by reason kind, and how long
    each role's oldest has waited (0: none)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.source: Callable[[], Census] | None = None
        self._clock = clock

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (GaugeMetricFamily(f"{PREFIX}_waiting_workers",
                                  "Pending workers by the kind of their reason (New: not "
                                  "answered yet).", labels=["reason"]),
                GaugeMetricFamily(f"{PREFIX}_longest_wait_seconds",
                                  "How long the oldest Pending worker of each role has waited "
                                  "so far (0: none; workers Queued on their team's Kueue quota "
                                  "not counted).", labels=["role"]))

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        by_kind: Mapping[str, int] = {}
        oldest: Mapping[str, float] = {}
        if self.source is not None:
            try:
                by_kind, oldest = self.source()
            except Exception:  # a scrape must never fail for it: report nobody waiting
                log.exception("counting the waiting workers failed")
        waiting, longest = self._families()
        counts = dict.fromkeys(WAIT_KINDS, 0)
        for kind, count in by_kind.items():
            counts[kind if kind in counts else OTHER] += count
        for kind, count in counts.items():
            waiting.add_metric([kind], count)
        now = self._clock()
        for role in ROLES:
            longest.add_metric([role], max(0.0, now - oldest[role]) if role in oldest else 0.0)
        yield waiting
        yield longest


class Health:
    """Liveness and readiness, fed by the loop and the watches."""

    def __init__(self, stall_after: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stall_after = stall_after
        self._beat = clock()
        self._ready = False
        self._why = "starting"
        self._lock = threading.Lock()

    def beat(self) -> None:
        with self._lock:
            self._beat = self._clock()

    def set_ready(self, ready: bool, why: str = "") -> None:
        with self._lock:
            self._ready, self._why = ready, why

    def alive(self) -> tuple[bool, str]:
        with self._lock:
            idle = self._clock() - self._beat
        if idle > self._stall_after:
            return False, f"loop has not turned for {idle:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        with self._lock:
            return self._ready, self._why or ("ok" if self._ready else "not ready")


def serve(address: tuple[str, int], metrics: Metrics, health: Health) -> ThreadingHTTPServer:
    """Start the HTTP server on a daemon thread; returns it (``.server_address``, ``.shutdown``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/livez"):
                ok, why = health.alive()
                self._send(200 if ok else 503, why.encode())
            elif path == "/readyz":
                ok, why = health.ready()
                self._send(200 if ok else 503, why.encode())
            else:
                self._send(404, b"not found")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds would drown the controller's own logs

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
