"""The alerts, recording rules and dashboard in manifests/monitoring, against what the
scheduler exports.

promtool (built from its Go module, tests/tools.py: those tests are marked
``tools``) checks the rule file and runs its unit tests; every alert must have a
case where it fires and one where it stays quiet. Every query in the rules and
the dashboard must name metrics the scheduler's registry really holds (read from
``controller.metrics.Metrics``, not a list kept here) or the time-slicer agent's
(``timeslicer.agent.metrics``), and docs/operating.md's tables must name each of
them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from controller.metrics import Metrics
from tests.tools import ROOT, run

MONITORING = ROOT / "manifests" / "monitoring"
RULES = MONITORING / "rules.yaml"
RULE_TESTS = MONITORING / "rules_test.yaml"
DASHBOARD = MONITORING / "dashboard.json"
DOC = ROOT / "docs" / "operating.md"

METRIC = re.compile(r"\b(openrl_(?:place|timeslicer)[_:][A-Za-z0-9_:]+)")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "gauge": ("",), "info": ("_info",)}


def agent_families() -> dict[str, str]:
    """Each metric family the time-slicer agent exports: name -> type."""
    from timeslicer.agent.metrics import AgentMetrics
    return {family.name: family.type for family in AgentMetrics().registry.collect()}


def families() -> dict[str, str]:
    """Each metric family the scheduler or the time-slicer agent exports: name -> type."""
    return {family.name: family.type
            for family in Metrics().registry.collect()} | agent_families()


def series_names() -> set[str]:
    """Every series name a scrape of the scheduler can show (counters end in _total)."""
    return {name + suffix for name, kind in families().items() for suffix in SUFFIXES[kind]}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(where, expr) for every panel target and every templating query."""
    doc = json.loads(DASHBOARD.read_text())

    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
            yield from walk(panel.get("panels", []))

    yield from walk(doc["panels"])
    for variable in doc["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            yield f"variable {variable['name']}", text


# ----------------------------------------------------------------- promtool


@pytest.mark.tools
def test_promtool_checks_the_rules() -> None:
    proc = run("promtool", "check", "rules", str(RULES))
    assert "SUCCESS" in proc.stdout + proc.stderr


@pytest.mark.tools
def test_promtool_unit_tests_pass() -> None:
    proc = run("promtool", "test", "rules", str(RULE_TESTS))
    assert "SUCCESS" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.tools
def test_promtool_would_catch_a_wrong_expectation(tmp_path: Any) -> None:
    """The unit tests can fail: the same file with one alert's expected value changed."""
    text = RULE_TESTS.read_text().replace("95% of openrl-place seats", "94% of openrl-place seats")
    assert text != RULE_TESTS.read_text()
    (tmp_path / "rules.yaml").write_text(RULES.read_text())
    (tmp_path / "rules_test.yaml").write_text(text)
    proc = run("promtool", "test", "rules", str(tmp_path / "rules_test.yaml"), check=False)
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert alerts - fires == set(), f"alerts never seen firing: {sorted(alerts - fires)}"
    assert alerts - quiet == set(), f"alerts never seen quiet: {sorted(alerts - quiet)}"
    assert fires | quiet <= alerts, f"tests of unknown alerts: {sorted((fires | quiet) - alerts)}"


# ----------------------------------------------------------------- the names


def test_the_rules_name_only_exported_or_recorded_metrics() -> None:
    exported = series_names()
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    for rule in rules():
        names = set(METRIC.findall(rule["expr"]))
        assert names, f"{rule.get('alert') or rule.get('record')} names no openrl metric"
        unknown = names - exported - recorded
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {sorted(unknown)} " \
                            f"is neither exported by the scheduler nor recorded here"


def test_every_dashboard_query_names_an_exported_metric() -> None:
    exported = series_names()
    queries = list(dashboard_queries())
    assert len(queries) >= 10
    for where, expr in queries:
        names = set(METRIC.findall(expr))
        assert names, f"{where}: {expr!r} names no openrl metric"
        # The dashboard works without the recording rules: raw series only.
        assert not names - exported, f"{where}: {sorted(names - exported)} is not exported"


def test_the_dashboard_shows_what_an_operator_asks_first() -> None:
    shown = {name for _, expr in dashboard_queries() for name in METRIC.findall(expr)}
    for name in ("openrl_place_leader", "openrl_place_seats_used", "openrl_place_seats_total",
                 "openrl_place_waiting_workers", "openrl_place_longest_wait_seconds",
                 "openrl_place_wait_for_seat_seconds_bucket",
                 "openrl_place_seat_to_running_seconds_bucket",
                 "openrl_place_decisions_total", "openrl_place_write_failures_total",
                 "openrl_place_reconciles_total"):
        assert name in shown, name


def test_every_metric_is_in_the_one_table() -> None:
    rows = re.findall(r"^\| `(openrl_(?:place|timeslicer)_\w+)` \| (\w+) \|", DOC.read_text(),
                      re.MULTILINE)
    documented = dict(rows)
    want = {name + ("_total" if kind == "counter" else ""): kind
            for name, kind in families().items()}
    assert documented == want, (
        f"docs/operating.md's metric table: missing {sorted(set(want) - set(documented))}, "
        f"not exported {sorted(set(documented) - set(want))}, or a type differs")


@pytest.mark.parametrize("name", ["openrl_place_wait_for_seat_seconds",
                                  "openrl_place_seat_to_running_seconds"])
def test_the_wait_histograms_are_labelled_by_role_only(name: str) -> None:
    metrics = Metrics()
    metrics.seated("trainer", 3.0)
    metrics.started("sampler", 1.0)
    for family in metrics.registry.collect():
        if family.name == name:
            labels = {k for sample in family.samples for k in sample.labels} - {"le"}
            assert labels == {"role"}
            return
    raise AssertionError(f"{name} is not exported")


def test_the_dashboard_shows_the_time_slicer() -> None:
    shown = {name for _, expr in dashboard_queries() for name in METRIC.findall(expr)}
    for name in agent_families():
        if name != "openrl_timeslicer_members":  # a count of sockets, for the agent's own page
            assert any(s.startswith(name) for s in shown), name
