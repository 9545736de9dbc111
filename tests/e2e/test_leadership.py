"""Leadership hand-over on the local control plane: two replicas, one Lease.

The leader places workers; then another holder takes the lease over behind
its back (as a replica would once the leader's renewals stopped reaching the
API server). The old leader must stop before deciding anything more; the
standby, once it gains the lease, lists everything afresh and places the
next workers next to the first ones -- never on a seat already taken.
"""
# The fixtures come from controller_fixtures (tests/e2e/conftest.py belongs to
# the control plane); importing them makes every test parameter a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from controller_fixtures import Env, GpuNode, crd, gpu_nodes, orw  # noqa: F401
from kubernetes.client.rest import ApiException

from controller.k8s import kube
from controller.k8s.objects import format_micro_time
from controller.loop import Controller
from controller.main import run
from controller.metrics import Metrics
from controller.settings import Settings

LEASE = "e2e-handover"


class Replica:
    def __init__(self, env: Env, identity: str) -> None:
        self.identity = identity
        settings = Settings(
            namespace=env.namespace, leader_elect=True, http_address="", identity=identity,
            lease_name=LEASE, lease_duration=4.0, renew_deadline=3.0, retry_period=0.5,
            retry_interval="3s", reclaim_interval="2s", reclaim_grace="10s",
            device_class=env.cluster.driver)
        self.metrics = Metrics()
        self.api = kube.Kube(kube.load_api_client(env.cluster.kubeconfig), env.namespace,
                             hook=self.metrics.api_request)
        self.stop = threading.Event()
        self.leading = threading.Event()
        self.controllers: list[Controller] = []
        self.code: list[int] = []

        def started(controller: Controller) -> None:
            self.controllers.append(controller)
            self.leading.set()

        def main() -> None:
            self.code.append(run(settings, stop=self.stop, api=self.api,
                                 metrics=self.metrics, started=started))

        self.thread = threading.Thread(target=main, name=f"replica-{identity}", daemon=True)
        self.thread.start()

    def writes(self) -> int:
        return sum(n for (verb, res), n in self.api.calls.items()
                   if verb in ("create", "patch", "delete") and res not in ("leases", "events"))


def take_lease(env: Env, holder: str) -> None:
    """Someone else holds the lease now, freshly renewed.

    The leader renews every half second, so a read-then-replace can meet a
    renewal in between (409 Conflict): read again and retry, as any writer of
    a Lease must.
    """
    for _ in range(20):
        lease: dict[str, Any] = env.custom.get_namespaced_custom_object(
            "coordination.k8s.io", "v1", env.namespace, "leases", LEASE)
        now = format_micro_time(dt.datetime.now(dt.UTC))
        lease["spec"].update(holderIdentity=holder, renewTime=now, acquireTime=now,
                             leaseDurationSeconds=4)
        try:
            env.custom.replace_namespaced_custom_object(
                "coordination.k8s.io", "v1", env.namespace, "leases", LEASE, lease)
            return
        except ApiException as e:
            if e.status != 409:
                raise
    raise AssertionError(f"lease {LEASE}: every replace met a newer renewal")


def test_the_lease_passes_and_the_new_leader_lists_before_deciding(
        orw: Env, gpu_nodes: list[GpuNode]) -> None:
    first = Replica(orw, "replica-a")
    assert first.leading.wait(30), "the first replica never led"
    second = Replica(orw, "replica-b")
    try:
        seats = sum(n.devices for n in gpu_nodes)  # one worker per claim, one device each
        early = [f"early-{i}" for i in range(min(3, seats - 1))]
        for name in early:
            orw.create_worker(name, "10Gi")
        for name in early:
            orw.wait_phase(name, "Running", timeout=120)
        assert not second.leading.is_set()

        take_lease(orw, "someone-else")
        orw.cluster.wait_for(lambda: first.code == [1], timeout=30,
                             what="the old leader to step down (exit status 1)")
        writes_when_stopped = first.writes()
        # Its lease is gone to someone else; nobody decides until that lease lapses.
        orw.create_worker("late", "10Gi")
        assert second.leading.wait(30), "the standby never took the lease over"
        status = orw.wait_phase("late", "Running", timeout=120)
        assert first.writes() == writes_when_stopped  # the old leader wrote nothing more

        claims = [orw.status(name)["claimName"] for name in [*early, "late"]]
        assert len(set(claims)) == len(claims), "a seat was promised twice"
        assert status["claimName"] not in claims[:-1]
        # The new leader's cache came from its own list: it saw the early workers' seats.
        cache = second.controllers[0].cache
        assert set(early) <= set(cache.view.bookings)
    finally:
        for replica in (first, second):
            replica.stop.set()
        orw.start()  # a plain controller lets the workers go at teardown
        for replica in (first, second):
            replica.thread.join(15)

