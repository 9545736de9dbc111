"""Events on workers (events.k8s.io/v1): what an operator sees in ``kubectl describe``.

Rules: an Event is best effort. Failing to record one is logged and never
fails a reconcile, because the status already carries the same news.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable

from controller import kube, naming
from controller.objects import Obj, format_micro_time

log = logging.getLogger("openrl.controller.events")

NOTE_MAX = 1024


class Recorder:
    def __init__(self, api: kube.Kube, instance: str,
                 now: Callable[[], dt.datetime]) -> None:
        self.api = api
        self.instance = instance[:128]
        self.now = now

    def record(self, worker: Obj, event_type: str, reason: str, action: str, note: str) -> None:
        meta = worker.get("metadata") or {}
        when = self.now()
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'worker')[:200]}.{uuid.uuid4().hex[:16]}",
                "namespace": meta.get("namespace") or self.api.namespace,
            },
            "eventTime": format_micro_time(when),
            "type": event_type,
            "reason": reason[:128],
            "action": action[:128],
            "note": note[:NOTE_MAX],
            "reportingController": naming.CONTROLLER_NAME,
            "reportingInstance": self.instance,
            "regarding": {
                "apiVersion": naming.API_VERSION,
                "kind": naming.KIND,
                "name": meta.get("name"),
                "namespace": meta.get("namespace") or self.api.namespace,
                "uid": meta.get("uid"),
            },
        }
        try:
            self.api.create(kube.EVENTS, body)
        except kube.KubeError as exc:
            log.warning("could not record event", extra={"fields": {
                "worker": meta.get("name"), "reason": reason, "error": str(exc)}})
