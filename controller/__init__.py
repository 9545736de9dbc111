"""openrl-place's controller: OpenRLWorkers to ResourceClaims and worker pods.

The package is in folders by job, each with its own map; the entry points
sit at the top. Read them in this order: the door to the cluster, what is
read of it, what is remembered, then the decision for one worker; the loop
around them last. tests/unit/controller/test_module_map.py holds every map
to its folder's files.

Module map:

* ``k8s``: the Kubernetes door -- every API call, the names stamped on
  objects, views over them, Events and logs; what the node agent and the live
  commands import too.
* ``fleet``: the fleet's reading -- the cluster as placement's plain data, once
  or kept current change by change, under one set of rules.
* ``store``: what the controller remembers (the watched objects as records,
  decisions assumed until the server answers) and the work queue.
* ``reconcile``: one worker's reconcile, its stages as one ordered table, and
  the writes it plans.
* ``settings``: the controller's settings, validated once at start.
* ``loop``: watches feed the store and the queue, one decision at a time,
  writes in parallel.
* ``leader``: one active replica, on a Lease.
* ``metrics``: /metrics, /healthz, /readyz; ``memory``: what the start-up list
  left free given back.
* ``main``: the ``openrl-place controller`` command (``__main__``: the same as
  ``python -m controller``).
* ``inspect_fleet``: read-only looks at a live cluster, for ``snapshot`` and
  ``explain``.
"""
