"""What the agent exports on /metrics (and its /healthz, /readyz).

Rules:

* One registry per agent, never the process-global one (tests run several).
* Labels are bounded: a role, an eviction reason -- and the owner for
  resident seconds, whose set is the owners of the workers on one node.
* Durations are the agent's view: restore is grant -> the worker's
  ``resident``, park is ``yield`` -> its ``parked``; a turn wait runs from the
  moment a member waits to its grant.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["PREFIX", "AgentMetrics"]

PREFIX = "openrl_timeslicer"
# A switch copies gigabytes: a fraction of a second to tens of seconds.
SWITCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
# A wait spans turns of other members: up to several quanta.
WAIT_BUCKETS = (0.01, 0.1, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600)


class AgentMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.wait = Histogram(f"{PREFIX}_turn_wait_seconds",
                              "From a member starting to wait to its grant.", ["role"],
                              buckets=WAIT_BUCKETS, registry=r)
        self.restore = Histogram(f"{PREFIX}_restore_seconds",
                                 "From a grant to the worker saying it is resident.",
                                 buckets=SWITCH_BUCKETS, registry=r)
        self.park = Histogram(f"{PREFIX}_park_seconds",
                              "From a yield to the worker saying it parked.",
                              buckets=SWITCH_BUCKETS, registry=r)
        self.switches = Counter(f"{PREFIX}_switches_total", "Turns granted.", registry=r)
        self.overruns = Counter(f"{PREFIX}_overruns_total",
                                "Holders that did not park within their grace.", registry=r)
        self.evictions = Counter(f"{PREFIX}_evictions_total", "Worker pods evicted, by reason.",
                                 ["reason"], registry=r)
        self.resident = Counter(f"{PREFIX}_resident_seconds_total",
                                "Seconds members of an owner were resident (counted when a "
                                "residency ends).", ["owner"], registry=r)
        self.nvml = Gauge(f"{PREFIX}_nvml_check", "1 while the device-memory check runs.",
                          registry=r)
        self.members = Gauge(f"{PREFIX}_members", "Worker pods the agent serves.", registry=r)
