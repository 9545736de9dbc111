"""The closing lines of a run: its wall time, and each tier's.

A tier's *span* is from the start of its first test to the end of its last
(setup and teardown included): with lanes (pytest-xdist) the tiers overlap,
so the spans add up to more than the wall time. A tier's *lane time* is the
sum of its tests' own times: what the tier would take in one lane. Both are
read off the reports pytest keeps anyway (each carries its start and stop),
once, at the end.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

# A test's tier is its first marker found in this order; none of them: fast.
TIERS = ("e2e", "tools", "install")
FAST = "fast"


@dataclass(slots=True)
class Tier:
    tests: set[str] = field(default_factory=set)
    seconds: float = 0.0  # lane time: the sum of setup, call and teardown
    start: float = float("inf")
    stop: float = 0.0

    def add(self, report: Any) -> None:
        self.tests.add(report.nodeid)
        self.seconds += report.duration
        if report.start:  # a report made by hand (a plugin's) may have none
            self.start = min(self.start, report.start)
            self.stop = max(self.stop, report.stop)


def tier_of(keywords: Iterable[str]) -> str:
    present = set(keywords)
    return next((tier for tier in TIERS if tier in present), FAST)


def tally(reports: Iterable[Any]) -> dict[str, Tier]:
    tiers: dict[str, Tier] = {}
    for report in reports:
        if getattr(report, "when", None) not in ("setup", "call", "teardown"):
            continue
        tiers.setdefault(tier_of(report.keywords), Tier()).add(report)
    return tiers


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{seconds:.1f} s"


def lines(tiers: dict[str, Tier], wall: float) -> list[str]:
    out = [f"wall: {minutes(wall)} from the session's start"]
    for name in (FAST, *TIERS):
        tier = tiers.get(name)
        if tier is None or not tier.tests:
            continue
        span = minutes(tier.stop - tier.start) if tier.stop else "-"
        out.append(f"{name:>7}: {len(tier.tests):>5} tests, span {span}, "
                   f"lane time {minutes(tier.seconds)}")
    return out


_started = time.time()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.time()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return  # a lane's own reporter: the controller prints for the run
    reports = [r for group in terminalreporter.stats.values() for r in group]
    terminalreporter.write_sep("=", "times")
    for line in lines(tally(reports), time.time() - _started):
        terminalreporter.write_line(line)
