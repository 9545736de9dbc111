"""``openrl-place controller``: flags, then leader election, then the loop.

Rules: every flag has an environment fallback; bad settings exit with status 2
and a message naming the flag, never a traceback. The process exits 0 on
SIGTERM/SIGINT (handing back the lease) and 1 when it loses the lease, so
the Deployment restarts it as a candidate.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

import click

from controller.k8s import kube
from controller.k8s.logs import configure, kv
from controller.leader import LeaderElector
from controller.loop import Controller
from controller.metrics import Health, Metrics, serve
from controller.reconcile.privileges import ALLOWABLE, LEVELS
from controller.settings import (
    STRATEGIES,
    Settings,
    SettingsError,
    default_namespace,
    parse_http_address,
)

log = logging.getLogger("openrl.controller")


def run(settings: Settings, *, stop: threading.Event | None = None,
        api: kube.Kube | None = None, metrics: Metrics | None = None,
        started: Any = None) -> int:
    """Run until ``stop`` is set (0) or leadership is lost (1); 2 at once when ``--kueue``
    is on and the API server does not serve Kueue's Workloads.

    ``started``, if given, is called with the Controller once it is built
    (tests and hack/burst.py use it to watch the loop).
    """
    stop = stop or threading.Event()
    metrics = metrics or Metrics()
    health = Health()
    if api is None:
        api = kube.Kube(kube.load_api_client(settings.kubeconfig), settings.namespace,
                        hook=metrics.api_request)
    if settings.kueue and not api.serves(kube.WORKLOADS):
        # Its watch would fail forever, and no worker would be placed: say so and stop.
        log.error("--kueue, but the API server does not serve Kueue's Workloads "
                  "(workloads.kueue.x-k8s.io/v1beta2): install Kueue, or run without --kueue")
        return 2
    server = None
    address = parse_http_address(settings.http_address)
    if address is not None:
        server = serve(address, metrics, health)
        log.info("serving /healthz /readyz /metrics",
                 extra=kv(address=f"{address[0]}:{server.server_address[1]}"))
    working = threading.Event()  # set to stop the loop (shutdown or lost lease)
    lost = threading.Event()

    def relay_stop() -> None:
        stop.wait()
        working.set()

    threading.Thread(target=relay_stop, name="stop", daemon=True).start()
    elector = None
    try:
        if settings.leader_elect:
            elector = LeaderElector(
                api, name=settings.lease_name, namespace=settings.lease_namespace,
                identity=settings.identity, lease_duration=settings.lease_duration,
                renew_deadline=settings.renew_deadline, retry_period=settings.retry_period)
            health.set_ready(True, "standby: waiting for the lease")
            if not elector.acquire(stop, waiting=health.beat):
                return 0
            metrics.leader.set(1)

            def step_down() -> None:
                lost.set()
                working.set()

            elector.keep(working, step_down)
        # A new term starts from a fresh cache: the Controller lists everything before
        # its first decision, and stops deciding as soon as the lease is in doubt.
        controller = Controller(api, settings, metrics=metrics, health=health,
                                may_act=elector.valid if elector is not None else lambda: True)
        if started is not None:
            started(controller)
        controller.run(working)
    finally:
        metrics.leader.set(0)
        if elector is not None and not lost.is_set():
            elector.release()
        if server is not None:
            server.shutdown()
    return 1 if lost.is_set() else 0


def _settings(**options: Any) -> Settings:
    values = {k: v for k, v in options.items() if v is not None}
    values.setdefault("namespace", default_namespace())
    try:
        return Settings(**values)
    except (SettingsError, ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from exc


@click.command("controller")
@click.option("--namespace", envvar="OPEN_RL_NAMESPACE",
              help="Namespace of workers, pods, claims and templates "
                   "[default: this pod's namespace, else openrl].")
@click.option("--device-class", envvar="OPEN_RL_DEVICE_CLASS", default="gpu.example.com",
              show_default=True, help="DeviceClass the claims request.")
@click.option("--device-driver", envvar="OPEN_RL_DEVICE_DRIVER",
              help="DRA driver publishing the devices [default: the device class].")
@click.option("--retry-interval", envvar="OPEN_RL_RETRY_INTERVAL", default="30s",
              show_default=True, help="How often a waiting worker is retried.")
@click.option("--placement-timeout", envvar="OPEN_RL_PLACEMENT_TIMEOUT", default="10m",
              show_default=True,
              help="Fail a worker no node can ever hold (Unsatisfiable), or whose pod never "
                   "schedules (Unschedulable), after this long.")
@click.option("--reclaim-interval", envvar="OPEN_RL_RECLAIM_INTERVAL", default="60s",
              show_default=True, help="How often orphaned claims are swept.")
@click.option("--reclaim-grace", envvar="OPEN_RL_RECLAIM_GRACE", default="2m",
              show_default=True, help="A claim younger than this is never swept.")
@click.option("--wedge-grace", envvar="OPEN_RL_WEDGE_GRACE", default="2m", show_default=True,
              help="A placed worker's pod that stays unschedulable on its node this long (or "
                   "that the kubelet rejects) gives its seat back and is placed again.")
@click.option("--move-limit", envvar="OPEN_RL_MOVE_LIMIT", default=3, show_default=True,
              type=click.IntRange(min=1),
              help="A worker placed again (node lost, pod wedged) more often than this within "
                   "--move-window waits, with reason PlacedTooOften, instead of looping.")
@click.option("--move-window", envvar="OPEN_RL_MOVE_WINDOW", default="30m", show_default=True,
              help="The window --move-limit counts in.")
@click.option("--rebalance-after", envvar="OPEN_RL_REBALANCE_AFTER", default="5m",
              show_default=True,
              help="A movable worker (spec.movable) is moved once the devices it would get "
                   "(spread), or the emptying of its node (binpack), have stayed so this long, "
                   "and no waiting worker could take them; 0: no moves for efficiency.")
@click.option("--drain-timeout", envvar="OPEN_RL_DRAIN_TIMEOUT", default="5m",
              show_default=True,
              help="A worker moving for efficiency ends its turn first: its node's time-slicer "
                   "says when it has parked. Its old pod goes after this long at most.")
@click.option("--assume-timeout", envvar="OPEN_RL_ASSUME_TIMEOUT", default="30s",
              show_default=True,
              help="A decision's claim or pod that no answer confirms (and no write in flight "
                   "will) is forgotten after this, giving its seat back.")
@click.option("--http-address", envvar="OPEN_RL_HTTP_ADDRESS", default=":8080",
              show_default=True, help="Serves /healthz, /readyz and /metrics; empty: off.")
@click.option("--leader-elect/--no-leader-elect", envvar="OPEN_RL_LEADER_ELECT", default=True,
              show_default=True, help="Lease-based leader election (one active replica).")
@click.option("--lease-name", envvar="OPEN_RL_LEASE_NAME", default="open-rl-scheduler",
              show_default=True)
@click.option("--lease-namespace", envvar="OPEN_RL_LEASE_NAMESPACE",
              help="[default: the namespace]")
@click.option("--service-account", envvar="OPEN_RL_SERVICE_ACCOUNT",
              default="open-rl-scheduler", show_default=True,
              help="The scheduler's own ServiceAccount: no template may run a worker as it.")
@click.option("--template-service-accounts", envvar="OPEN_RL_TEMPLATE_SERVICE_ACCOUNTS",
              help="ServiceAccounts (comma-separated) a pod template may name besides "
                   "default [default: none].")
@click.option("--template-allow", envvar="OPEN_RL_TEMPLATE_ALLOW",
              help="Pod Security controls templates may break, as TEMPLATE=FIELD[,FIELD] "
                   "entries separated by ';' (TEMPLATE * = every one; FIELD: "
                   f"{', '.join(sorted(ALLOWABLE))}) [default: none].")
@click.option("--template-pod-security", envvar="OPEN_RL_TEMPLATE_POD_SECURITY",
              default="baseline", show_default=True, type=click.Choice(list(LEVELS)),
              help="The Pod Security level the scheduler holds every template to, "
                   "whatever the namespace's labels say.")
@click.option("--strategy", envvar="OPEN_RL_STRATEGY", default="spread", show_default=True,
              type=click.Choice(list(STRATEGIES)),
              help="spread: a new worker takes free devices while any node has them, and "
                   "shares a claim only under contention; binpack: it joins a claim that can "
                   "seat it first, and a new claim (so a new node, in an autoscaled pool) is "
                   "cut only when none can.")
@click.option("--autoscaling/--no-autoscaling", envvar="OPEN_RL_AUTOSCALING", default=False,
              show_default=True,
              help="A worker that must wait keeps a standing, unpinned claim and pod that "
                   "kube-scheduler and a node autoscaler can act on.")
@click.option("--autoscale-pools", envvar="OPEN_RL_AUTOSCALE_POOLS", default="",
              help="With --autoscaling: the node pools the autoscaler can add, as "
                   "COUNTxMEMORY[:ROLE[+ROLE]] entries (e.g. '8x80Gi:trainer, 4x40Gi'); a worker "
                   "none of them (nor any node) fits is NoCapacity. Unset: workers wait for a "
                   "node to be added.")
@click.option("--kueue/--no-kueue", envvar="OPEN_RL_KUEUE", default=False, show_default=True,
              help="Team quotas through Kueue: a worker labelled kueue.x-k8s.io/queue-name "
                   "gets a Workload in that queue and is placed only once Kueue admits it "
                   "(needs Kueue's CRDs, and OpenRLWorker among its external frameworks).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="[default: $KUBECONFIG, else in-cluster]")
@click.option("--log-format", envvar="OPEN_RL_LOG_FORMAT", default="json", show_default=True,
              type=click.Choice(["json", "text"]))
@click.option("--log-level", envvar="OPEN_RL_LOG_LEVEL", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def command(log_level: str, **options: Any) -> None:
    """Run the GPU claim scheduler: OpenRLWorkers to ResourceClaims and worker pods."""
    settings = _settings(**options)
    configure(settings.log_format, getattr(logging, log_level.upper()))
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("shutting down", extra=kv(signal=signal.Signals(signum).name))
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        code = run(settings, stop=stop)
    except Exception as exc:  # e.g. no kubeconfig at all: say so, exit non-zero
        log.error("controller cannot start", extra=kv(error=str(exc)))
        sys.exit(1)
    sys.exit(code)
