"""Time in scenarios: ``at`` on events, and how long each worker waited."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli.clock import format_duration, parse_duration
from tests.unit.cli.conftest import Run, devbox

LORA = "{{at: {at}, arrive: {{name: {name}, role: trainer, memory: 10Gi, owner: qwen}}}}"


def lora(name: str, at: str) -> str:
    return LORA.format(name=name, at=at)


@pytest.mark.parametrize(("text", "seconds"), [
    (90, 90.0), (1.5, 1.5), ("90s", 90.0), ("12m", 720.0), ("1h30m", 5400.0),
    ("2d", 172800.0), ("1d2h3m4s", 93784.0), ("0.5h", 1800.0), ("3600", 3600.0), (0, 0.0),
])
def test_durations_read_as_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "1m1h", "1h1h", "-5", -1, True, "abc", [1],
                                  float("nan")])
def test_anything_else_is_refused(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_durations_print_for_people() -> None:
    assert [format_duration(s) for s in (0, 1.5, 45, 720, 5400, 93784)] == [
        "0s", "1.5s", "45s", "12m", "1h30m", "1d2h"]


def document(run: Run, *events: str) -> dict[str, Any]:
    result = run(devbox(*events), "-o", "json")
    assert result.exit_code in (0, 1), result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_a_worker_waits_from_its_arrival_to_its_seat_in_seconds(run: Run) -> None:
    # Two 24Gi devices, four 10Gi workers per claim; a 20Gi sampler can share a
    # device but no free one is left, and host memory (94Gi) is the limit.
    doc = document(
        run,
        lora("a", "0s"), lora("b", "10s"),
        "{at: 1m, arrive: {name: big, role: sampler, memory: 90Gi}}",  # never fits: 2 x 24Gi
        "{at: 2m, arrive: {name: c, role: trainer, memory: 20Gi}}",
        "arrive: {name: d, role: trainer, memory: 20Gi}",  # same time as c: no at
        "arrive: {name: e, role: trainer, memory: 24Gi}",
        "{at: 1h, leave: a}",
    )
    workers = doc["workers"]
    assert (workers["b"]["arrivedAt"], workers["b"]["placedAt"], workers["b"]["waited"]) == (
        10, 10, 0)
    assert workers["big"]["placedAt"] is None
    assert workers["big"]["waited"] == 3600 - 60  # still waiting at the last event
    assert [step["at"] for step in doc["steps"]] == [0, 10, 60, 120, 120, 120, 3600]


def test_a_retried_worker_is_placed_when_the_departure_happens(run: Run) -> None:
    doc = document(
        run,
        # a takes both devices; c fits a's claim but 2 x 48Gi cannot park in 94Gi.
        "{at: 0, arrive: {name: a, role: trainer, memory: 48Gi}}",
        "{at: 30s, arrive: {name: c, role: trainer, memory: 48Gi}}",
        "{at: 1m, expect: {worker: c, phase: Pending}}",
        "{at: 15m, leave: a}",
        "expect: {worker: c, phase: Placed}",
    )
    c = doc["workers"]["c"]
    assert (c["arrivedAt"], c["placedAt"], c["waited"]) == (30, 900, 870)
    assert doc["expectations"]["failed"] == 0


def test_times_never_go_back(run: Run) -> None:
    result = run(devbox(lora("a", "10m"), "leave: a", lora("b", "5m")))
    assert result.exit_code == 2
    assert "events[2].at: 5m is earlier than the previous event's time (10m, events[1])" in (
        result.output)


@pytest.mark.parametrize(("at", "message"), [
    ("soon", 'events[0].at: "soon" is not a duration'),
    ("-3", "events[0].at: must be a time since the start"),
    ("1m1h", "events[0].at: \"1m1h\" repeats or reorders its units"),
])
def test_a_bad_time_names_the_event(run: Run, at: str, message: str) -> None:
    result = run(devbox(lora("a", at)))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_scenarios_without_times_mean_what_they_meant(run: Run) -> None:
    events = [lora("a", "0"), lora("b", "0"), lora("c", "0"), "leave: a",
              "expect: {worker: c, sharesWith: b}"]
    untimed = document(run, *(e.replace("{at: 0, arrive:", "{arrive:") for e in events))
    timed = document(run, *events)
    for doc in (untimed, timed):
        for worker in doc["workers"].values():
            del worker["arrivedAt"], worker["placedAt"], worker["waited"]
        for step in doc["steps"]:
            del step["at"]
    assert untimed == timed


def test_host_to_device_bandwidth_is_a_node_key(run: Run) -> None:
    text = """
        nodes:
          - {name: box, devices: 1, deviceMemory: 24Gi, hostToDeviceBandwidth: 25GB/s}
          - {name: fast, devices: 1, deviceMemory: 24Gi, hostToDeviceBandwidth: 64Gi/s}
        events: []
    """
    assert run(text).exit_code == 0
    bad = run(text.replace("25GB/s", "fast"))
    assert bad.exit_code == 2
    assert 'nodes[0].hostToDeviceBandwidth: "fast" is not a bandwidth' in bad.output


def test_the_table_says_when_each_event_happened(run: Run) -> None:
    result = run(devbox(lora("a", "0"), lora("b", "1h30m"), "leave: a"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2].split()[:4] == ["#", "at", "event", "worker"]
    assert lines[4].split()[:3] == ["1", "1h30m", "arrive"]
    assert lines[5].split()[:3] == ["2", "1h30m", "leave"]
