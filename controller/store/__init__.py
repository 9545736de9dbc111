"""The store: what the controller remembers of the cluster, and the queue the changes feed.

Module map:

* ``strip``: the fields kept of each object, the definition of what the cache holds.
* ``records``: the compact records the cache keeps, list pages decoded straight into them.
* ``cache``: the watched objects as records, with decisions assumed until the
  server answers.
* ``watches``: list-then-watch per resource; which change wakes which worker.
* ``work``: the vocabulary between the queue, the loop and a reconcile (keys,
  their order, a reconcile's result).
* ``queue``: the work queue the watches feed and the loop drains.
"""
