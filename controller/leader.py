"""One active replica: leader election on a coordination.k8s.io/v1 Lease.

Rules:

* A replica may take the lease when nobody holds it, or when the holder's
  record (holder, renewTime) has not changed for a whole lease duration *as
  measured on this replica's own clock*: clocks of different machines are
  never compared.
* Every write carries the lease's resourceVersion, so two candidates racing
  for an expired lease cannot both win.
* The leader renews every retry period; if it cannot renew within the renew
  deadline it steps down (the caller stops reconciling at once), because
  another replica may take over as soon as the lease duration passes.
* ``valid`` is what the loop and every write ask first: leading, and the last
  renewal less than the renew deadline ago on this replica's monotonic clock.
  The deadline is shorter than the lease, so a replica stops deciding and
  writing before any other can take the lease over -- whether or not its
  renewal thread has noticed yet.
* On a clean shutdown the leader hands the lease back (empty holder), so a
  successor need not wait for it to expire.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable

from controller.k8s import kube
from controller.k8s.logs import kv
from controller.k8s.objects import Obj, format_micro_time

log = logging.getLogger("openrl.controller.leader")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(self, api: kube.Kube, *, name: str, namespace: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], dt.datetime] = utcnow) -> None:
        self.api, self.name, self.namespace, self.identity = api, name, namespace, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock, self.now = clock, now
        self.leading = False
        self._renewed_at = -float("inf")  # monotonic time of the last successful write
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0

    def valid(self) -> bool:
        """May this replica still act as leader (decide, write)?"""
        return self.leading and self.clock() - self._renewed_at < self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        # Measured from before the request: the lease runs from when it was written,
        # and a slow answer must not stretch it.
        started = self.clock()
        now = format_micro_time(self.now())
        try:
            lease = self.api.get(kube.LEASES, self.name, namespace=self.namespace)
        except kube.NotFound:
            return self._create(now)
        except kube.KubeError as exc:
            log.warning("cannot read lease", extra=kv(lease=self.name, error=str(exc)))
            return False
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and self.clock() - self._observed_at < duration:
            self.leading = False
            return False
        new_spec = dict(spec)
        new_spec.update(holderIdentity=self.identity,
                        leaseDurationSeconds=int(self.lease_duration), renewTime=now)
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body: Obj = {**lease, "spec": new_spec}
        try:
            updated = self.api.replace(kube.LEASES, self.name, body, namespace=self.namespace)
        except kube.KubeError as exc:
            if not isinstance(exc, kube.Conflict):
                log.warning("cannot update lease", extra=kv(lease=self.name, error=str(exc)))
            return False
        spec = updated.get("spec") or {}
        self._observed = (self.identity, str(spec.get("renewTime") or ""))
        self._observed_at = self._renewed_at = started
        if not self.leading:
            log.info("became leader", extra=kv(lease=self.name, identity=self.identity))
        self.leading = True
        return True

    def _create(self, now: str) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity,
                     "leaseDurationSeconds": int(self.lease_duration),
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
        }
        started = self.clock()
        try:
            self.api.create(kube.LEASES, body, namespace=self.namespace)
        except kube.KubeError as exc:
            if not isinstance(exc, kube.AlreadyExists):
                log.warning("cannot create lease", extra=kv(lease=self.name, error=str(exc)))
            return False
        log.info("became leader", extra=kv(lease=self.name, identity=self.identity))
        self.leading = True
        self._observed, self._observed_at = (self.identity, now), started
        self._renewed_at = started
        return True

    def acquire(self, stop: threading.Event,
                waiting: Callable[[], None] | None = None) -> bool:
        """Block until this replica leads (True) or ``stop`` is set (False).

        ``waiting`` is called on every try: a standby's liveness is this loop
        turning (it may wait for the lease for as long as the leader lives).
        """
        log.info("waiting for the lease", extra=kv(lease=self.name, identity=self.identity))
        while not stop.is_set():
            if waiting is not None:
                waiting()
            if self.try_acquire_or_renew():
                return True
            stop.wait(self.retry_period * (1 + random.random() * 0.2))
        return False

    def keep(self, stop: threading.Event, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew on a daemon thread; call ``on_lost`` once if leadership cannot be kept."""

        def renew() -> None:
            last = self.clock()
            while not stop.wait(self.retry_period):
                if self.try_acquire_or_renew():
                    last = self.clock()
                elif not self.leading or self.clock() - last > self.renew_deadline:
                    self.leading = False
                    log.error("lost the lease; stepping down", extra=kv(lease=self.name))
                    on_lost()
                    return

        thread = threading.Thread(target=renew, name="lease", daemon=True)
        thread.start()
        return thread

    def release(self) -> None:
        if not self.leading:
            return
        try:
            lease = self.api.get(kube.LEASES, self.name, namespace=self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": format_micro_time(self.now())}
            self.api.replace(kube.LEASES, self.name, {**lease, "spec": spec},
                             namespace=self.namespace)
            log.info("released the lease", extra=kv(lease=self.name))
        except kube.KubeError as exc:
            log.warning("could not release the lease", extra=kv(lease=self.name,
                                                                 error=str(exc)))
        finally:
            self.leading = False
