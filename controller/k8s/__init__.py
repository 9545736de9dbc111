"""The Kubernetes door: every API call, and the names and views shared with what talks to it.

The controller, the node agent (``timeslicer.agent``) and the live commands
(``cli``) all reach the cluster through here, and nothing in here knows about
placement or the reconcile.

Module map:

* ``kube``: every Kubernetes API call, wrapped in our own error types.
* ``naming``: every name, label, annotation and status word stamped on objects.
* ``objects``: read-only views over API objects kept as plain dicts.
* ``events``: Events on workers, what ``kubectl describe`` shows.
* ``logs``: one structured log line per event.
"""
