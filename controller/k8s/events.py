"""Events on workers (events.k8s.io/v1): what an operator sees in ``kubectl describe``.

Rules:

* An Event is best effort. Failing to record one is logged and never fails a
  reconcile, because the status already carries the same news.
* Events that say the same thing (type, reason, note) about the same worker
  are aggregated, as Kubernetes' own recorders do: the first is created, a
  repeat bumps that Event's ``series`` (count, last seen) with one patch.
  The recorder remembers the last ``REMEMBERED`` such Events.
* Calls may come from several write threads at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable

from controller.k8s import kube, naming
from controller.k8s.objects import Obj, format_micro_time

log = logging.getLogger("openrl.controller.events")

NOTE_MAX = 1024
REMEMBERED = 4096


class Recorder:
    def __init__(self, api: kube.Kube, instance: str,
                 now: Callable[[], dt.datetime]) -> None:
        self.api = api
        self.instance = instance[:128]
        self.now = now
        self._lock = threading.Lock()
        # (worker uid, type, reason, note) -> (Event name, times seen)
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, int]] = OrderedDict()

    def record(self, worker: Obj, event_type: str, reason: str, action: str, note: str) -> None:
        meta = worker.get("metadata") or {}
        when = self.now()
        key = (str(meta.get("uid", "")), event_type, reason[:128], note[:NOTE_MAX])
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen[key] = (seen[0], seen[1] + 1)
                self._seen.move_to_end(key)
        if seen is not None:
            self._repeat(meta, seen[0], seen[1] + 1, when)
            return
        # Cut to leave room for the suffix; a cut may end on a '.' or '-', which a name
        # may not have before the next '.' (a 253-character worker name lost its Events).
        head = str(meta.get("name", "worker"))[:200].rstrip(".-") or "worker"
        name = f"{head}.{uuid.uuid4().hex[:16]}"
        # The worker's namespace, not the API's default: the agent's default is its own.
        namespace = str(meta.get("namespace") or self.api.namespace)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": name,
                "namespace": namespace,
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
            self.api.create(kube.EVENTS, body, namespace=namespace)
        except kube.KubeError as exc:
            log.warning("could not record event", extra={"fields": {
                "worker": meta.get("name"), "reason": reason, "error": str(exc)}})
            return
        with self._lock:
            self._seen[key] = (name, 1)
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)

    def _repeat(self, meta: Obj, name: str, count: int, when: dt.datetime) -> None:
        body = {"series": {"count": count, "lastObservedTime": format_micro_time(when)}}
        try:
            self.api.patch(kube.EVENTS, name, body,
                           namespace=meta.get("namespace") or self.api.namespace)
        except kube.KubeError as exc:
            log.warning("could not record event", extra={"fields": {
                "worker": meta.get("name"), "event": name, "error": str(exc)}})
