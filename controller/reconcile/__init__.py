"""The reconcile: one worker, read from the store, one decision, its writes planned.

Module map:

* ``reconciler``: one reconcile: the stages walked under the cache's lock, their
  conclusion turned into one plan of writes.
* ``stages``: the reconcile's order as one table of stages and the refiners after
  them; the rules every step keeps.
* ``vocabulary``: the words every stage shares: ``Context``, ``Case``,
  ``Conclusion``, ``Outcome``, ``Write``.
* ``tracking``: the worker itself and the pod named for it: finalizer, deletion,
  finished, an invalid spec, what its own pod means.
* ``seating``: the steps for a worker with no pod yet: the claim it holds, its
  template, and the seat decision.
* ``moves``: when a placed worker is placed again (node lost or not ready, pod
  wedged), and how often.
* ``rebalancing``: moves for efficiency: the timed pass that decides one (the
  ``REBALANCE`` key), and what explain says of a worker's move.
* ``moving``: a move under way, step by step: the drain asked of the node's
  time-slicer, the old pod, the old seat, the new pod.
* ``admission``: team quotas through Kueue: a queue-labelled worker placed only
  while Kueue admits it; an eviction's pod, seat and quota handed back in order.
* ``workloads``: the Kueue Workload written for a worker, and what its status says.
* ``standing``: autoscaling: a waiting worker's standing, unpinned claim and pod.
* ``status``: the status an outcome means, and when a write and an Event are due.
* ``render``: the worker pod: template, overlay and placement's stamps.
* ``parking``: what a worker pod on a node that may share claims asks of its
  node's memory (what it may park), and the reason a namespace's memory bounds
  refusing it gives.
* ``privileges``, ``pod_security``: what a template may hand its worker, and the
  Pod Security Standards held control by control.
* ``writes``: each reconcile's writes as one plan, plans on a bounded pool, and
  what a failed write means.
* ``housekeeping``: waking pending workers, sweeping orphaned claims.
"""
