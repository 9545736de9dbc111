"""What the agent exports on /metrics (and its /healthz, /readyz).

Rules:

* One registry per agent, never the process-global one (tests run several).
* Labels are bounded: a role, an eviction reason -- and the owner for
  resident seconds, whose set is the owners of the workers on one node.
* Optional: without ``prometheus_client`` (the plain install, which runs
  ``--local``) every metric is a stand-in that records nothing and there is
  no registry to serve.
* Durations are the agent's view: restore is grant -> the worker's
  ``resident``, park is ``yield`` -> its ``parked``; a turn wait runs from the
  moment a member waits to its grant.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PREFIX", "AgentMetrics"]

PREFIX = "openrl_timeslicer"
# A switch copies gigabytes: a fraction of a second to tens of seconds.
SWITCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
# A wait spans turns of other members: up to several quanta.
WAIT_BUCKETS = (0.01, 0.1, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600)


class _Nothing:
    """A metric that records nothing: where prometheus_client is not installed."""

    def labels(self, *_: str) -> _Nothing:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def set(self, value: float) -> None:
        pass


class AgentMetrics:
    """The agent's metrics; ``registry`` is None where they are stand-ins."""

    registry: Any
    wait: Any
    restore: Any
    park: Any
    switches: Any
    overruns: Any
    evictions: Any
    resident: Any
    nvml: Any
    members: Any
    bad_messages: Any

    def __init__(self, enabled: bool = True) -> None:
        try:
            import prometheus_client as prom
        except ModuleNotFoundError:
            enabled = False
        self.registry = None
        if not enabled:
            self.wait = self.restore = self.park = self.switches = self.overruns = \
                self.evictions = self.resident = self.nvml = self.members = \
                self.bad_messages = _Nothing()
            return
        self.registry = r = prom.CollectorRegistry()
        self.wait = prom.Histogram(f"{PREFIX}_turn_wait_seconds",
                                        "From a member starting to wait to its grant.",
                                        ["role"], buckets=WAIT_BUCKETS, registry=r)
        self.restore = prom.Histogram(f"{PREFIX}_restore_seconds",
                                           "From a grant to the worker saying it is resident.",
                                           buckets=SWITCH_BUCKETS, registry=r)
        self.park = prom.Histogram(f"{PREFIX}_park_seconds",
                                        "From a yield to the worker saying it parked.",
                                        buckets=SWITCH_BUCKETS, registry=r)
        self.switches = prom.Counter(f"{PREFIX}_switches_total", "Turns granted.",
                                          registry=r)
        self.overruns = prom.Counter(f"{PREFIX}_overruns_total",
                                          "Holders that did not park within their grace.",
                                          registry=r)
        self.evictions = prom.Counter(f"{PREFIX}_evictions_total",
                                           "Worker pods evicted, by reason.", ["reason"],
                                           registry=r)
        self.resident = prom.Counter(f"{PREFIX}_resident_seconds_total",
                                          "Seconds members of an owner were resident (counted "
                                          "when a residency ends).", ["owner"], registry=r)
        self.nvml = prom.Gauge(f"{PREFIX}_nvml_check",
                                    "1 while the device-memory check runs.", registry=r)
        self.members = prom.Gauge(f"{PREFIX}_members", "Worker pods the agent serves.",
                                       registry=r)
        self.bad_messages = prom.Counter(
            f"{PREFIX}_bad_messages_total", "Lines refused with an error, and members dropped "
            "for leaving replies unread, by kind (unreadable, order, too_long, backlog).",
            ["kind"], registry=r)
