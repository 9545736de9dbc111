"""openrl-place's controller: OpenRLWorkers to ResourceClaims and worker pods.

Module map, in reading order (tests/unit/controller/test_module_map.py holds it
to the package's files):

* ``naming``: the names, labels and other identifiers stamped on objects.
* ``objects``: read-only views over the API objects, kept as plain dicts.
* ``settings``: the controller's settings, validated once at start.
* ``work``: the vocabulary between the loop and the reconciles (queue keys,
  their order, results).
* ``reconcile``: one worker read from the cache, one decision, its writes
  planned; ``steps``: its steps, each returning what it concluded;
  ``seating``: the steps for a worker with no pod yet, the seat decision
  among them; ``moves``: when a placed worker is placed again (node lost or
  not ready, pod wedged, finished); ``nodes``: whether a node can keep its
  workers.
* ``status``: the worker's phases, the Placed condition, reasons, and when to
  write them.
* ``claims``: the ResourceClaim the controller cuts, and how it reads them back.
* ``render``: the worker pod, template and overlay, then placement's stamps.
* ``privileges``, ``pod_security``: what a template may hand its worker, and
  the Pod Security Standards held control by control.
* ``writes``: each reconcile's writes as one plan, plans on a bounded pool.
* ``standing``: autoscaling, a worker that must wait keeping a standing claim
  and pod for an autoscaler to act on; ``pools``: the pools an autoscaler can
  add, and the device sizes a standing claim lists.
* ``events``: Events on workers, what ``kubectl describe`` shows.
* ``fleet_rules``: the rules of reading the fleet (who holds which seat, what
  placement is told); ``fleet_reader``: the cluster as placement's data;
  ``fleet_cache``: that fleet kept current from changes; ``fleet_nodes``: its
  nodes, re-read as slices, the DeviceClass and nodes change.
* ``selectors``, ``cel_reads``: a DeviceClass's CEL selectors evaluated against
  devices, and what an expression can read of one.
* ``cache``: the memory of the cluster (objects from list-then-watch, and
  assumptions); ``strip``: what it keeps of each object; ``records``: how it
  keeps it, compact, and list pages decoded straight into that.
* ``watches``: changes turned into queue keys; ``queue``: the work queue;
  ``housekeeping``: waking pending workers, sweeping orphaned claims.
* ``loop``: watches feed the cache and the queue, one decision at a time,
  writes in parallel.
* ``leader``: one active replica, on a Lease.
* ``kube``: every Kubernetes API call, in our own error types.
* ``metrics``: /metrics, /healthz, /readyz; ``logs``: one structured line per
  event; ``memory``: what the start-up list left free given back.
* ``main``: the ``openrl-place controller`` command (``__main__``: the same as
  ``python -m controller``).
* ``inspect_fleet``: read-only looks at a live cluster, for ``snapshot`` and
  ``explain``.
"""
