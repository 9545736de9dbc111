"""The fleet's reading: the cluster as placement's plain data.

Two readings share one set of rules: the plain reader builds a fleet from
lists of objects at once (the reference, and the live commands' reading); the
incremental cache keeps the same fleet current change by change, so no
decision rebuilds it. Tests hold the two equal.

Module map:

* ``rules``: the reading rules both readings share (who holds which seat, which
  devices count, what placement is told, when a node gives way).
* ``warning``: what the readings warn about, as values (kind, node, claim), each
  kind with its one sentence.
* ``requests``: a pod's memory request as kube-scheduler counts it, and a
  node's parking budget (allocatable less its other pods' requests).
* ``reader``: the plain reading.
* ``cache``: the incremental reading; ``nodes``: its nodes, re-read and filed
  again as their slices, the DeviceClass, claims not ours and other pods change.
* ``selectors``, ``cel_reads``: a DeviceClass's CEL selectors evaluated per
  device shape, and what an expression can read of a device.
* ``health``: whether a node can keep its workers (lost, not ready, healthy).
* ``claims``: the ResourceClaim the controller cuts, and its allocation read back.
* ``pools``: the autoscaled pools the operator declares, and the device shapes a
  standing claim lists.
"""
