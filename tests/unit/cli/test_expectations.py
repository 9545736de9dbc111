"""Expectations: exit 1 when one fails, and the message says what was expected and seen."""

from __future__ import annotations

import json

import pytest

from tests.unit.cli.conftest import Run, devbox

LORA = "arrive: {{name: {}, role: trainer, memory: 10Gi}}"
FFT = "arrive: {name: fft, role: trainer, memory: 60Gi}"


def test_all_held_exits_0(run: Run) -> None:
    result = run(devbox(LORA.format("a"), "expect: {worker: a, phase: Placed, node: box, "
                        "alone: true, devices: 1}"))
    assert result.exit_code == 0, result.output
    assert "all 1 held" in result.stdout


def test_a_worker_alone_needs_no_checks(run: Run) -> None:
    result = run(devbox(LORA.format("a"), "expect: {worker: a}"))
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([FFT, "expect: {worker: fft, phase: Placed}"],
         "events[1] expect fft: phase: expected Placed, saw Pending (NoCapacity: needs 60Gi"),
        ([LORA.format("a"), "expect: {worker: a, phase: Pending}"],
         "phase: expected Pending, saw Placed on claim-a on box (1 device)"),
        (["addNode: {name: other, devices: 1, deviceMemory: 8Gi}", LORA.format("a"),
          "expect: {worker: a, node: other}"],
         "node: expected other, saw Placed on claim-a on box (1 device)"),
        ([LORA.format("a"), LORA.format("b"), "expect: {worker: b, sharesWith: a}"],
         "sharesWith: expected the claim of a (Placed on claim-a on box (1 device)), "
         "saw Placed on claim-b on box (1 device)"),
        ([FFT, LORA.format("a"), "expect: {worker: fft, sharesWith: a}"],
         "saw Pending (NoCapacity"),
        ([LORA.format("a"), LORA.format("b"), LORA.format("c"), "expect: {worker: c, alone: true}"],
         "alone: expected alone on its claim, saw claim-a shared with a"),
        ([LORA.format("a"), "expect: {worker: a, alone: false}"],
         "alone: expected to share its claim, saw it alone on claim-a"),
        ([FFT, "expect: {worker: fft, alone: true}"],
         "alone: expected alone on a claim, saw Pending"),
        ([LORA.format("a"), "expect: {worker: a, reason: NoCapacity}"],
         'reason: expected a pending reason containing "NoCapacity", saw Placed on claim-a'),
        ([FFT, "expect: {worker: fft, reason: WaitingForCapacity}"],
         'reason: expected a pending reason containing "WaitingForCapacity", saw Pending '
         "(NoCapacity"),
        ([LORA.format("a"), "expect: {worker: a, devices: 2}"],
         "devices: expected 2, saw Placed on claim-a on box (1 device)"),
    ],
)
def test_a_failure_says_what_was_expected_and_seen(run: Run, events: list[str],
                                                   expected: str) -> None:
    result = run(devbox(*events), "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["expectations"]["failed"] == 1
    (failure,) = document["expectations"]["failures"]
    assert expected in failure, failure
    assert failure.startswith(f"events[{len(events) - 1}] expect ")


def test_the_node_failure_for_a_placing_worker_explains_why_there_is_no_node(run: Run) -> None:
    result = run(devbox(LORA.format("a"), "expect: {worker: a, node: box}", dra="deferred"),
                 "-o", "json")
    assert result.exit_code == 1
    (failure,) = json.loads(result.stdout)["expectations"]["failures"]
    assert ("node: expected box, saw Placing on claim-a (1 device sized against box; "
            "no node until it is allocated)") in failure


def test_several_problems_in_one_expectation_are_all_reported(run: Run) -> None:
    result = run(devbox(FFT, "expect: {worker: fft, phase: Placed, devices: 1}"), "-o", "json")
    (failure,) = json.loads(result.stdout)["expectations"]["failures"]
    assert "phase: expected Placed" in failure
    assert "; devices: expected 1" in failure


def test_failures_are_counted_and_the_run_goes_on(run: Run) -> None:
    result = run(devbox(LORA.format("a"), "expect: {worker: a, phase: Pending}",
                        "expect: {worker: a, phase: Placed}", "expect: {worker: a, devices: 3}",
                        LORA.format("b"), "expect: {worker: b, alone: true}"), "-o", "json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)["expectations"]
    assert summary["passed"] == 2
    assert summary["failed"] == 2
    assert [f.split(" ", 1)[0] for f in summary["failures"]] == ["events[1]", "events[3]"]


def test_table_lists_failures_at_the_end(run: Run) -> None:
    result = run(devbox(FFT, "expect: {worker: fft, phase: Placed}"))
    assert result.exit_code == 1
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("FAIL events[1] expect fft: phase: expected Placed")
    assert any("1 of 1 FAILED" in line for line in lines)
