"""What operators scrape and probe: /metrics, /healthz, /readyz.

Rules:

* Metrics live in a registry of their own (never the process-global one), so
  several controllers in one process (tests) never collide.
* /healthz fails when the loop has not turned for a while (a wedged loop is
  the one thing a restart fixes); /readyz is ready once the watches have
  listed everything (or, on a standby replica, once it is waiting for the
  lease).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

PREFIX = "openrl_place"


class Metrics:
    def __init__(self) -> None:
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

    def api_request(self, verb: str, resource: str, code: int, seconds: float = 0.0) -> None:
        self.api_requests.labels(verb=verb, resource=resource, code=str(code)).inc()
        if verb != "watch":
            self.api_latency.labels(verb=verb, resource=resource).observe(seconds)


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
