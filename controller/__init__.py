"""openrl-place's controller: OpenRLWorkers to ResourceClaims and worker pods.

Module map (reading order): ``naming`` (names, labels), ``objects`` (views
over API dicts), ``render`` (the pod), ``claims`` (the claim), ``fleet_reader``
(the cluster as placement data), ``status`` (phases and conditions),
``reconcile`` (one worker, one decision), ``work`` and ``housekeeping`` (queue keys,
wake-all, the sweep), ``queue``, ``watches``, ``loop``,
``leader``, ``metrics``, ``logs``, ``kube`` (every API call), ``settings`` and
``main`` (the ``openrl-place controller`` command).
"""
