"""The JSON document's shape, the table's content, and the replay's naming and DRA rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import Result

from tests.unit.cli.conftest import Run, devbox

LORA = "arrive: {{name: {}, role: trainer, memory: 10Gi, owner: qwen}}"


def document(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_json_document_has_exactly_the_spec_shape(run: Run) -> None:
    doc = document(run(devbox(
        LORA.format("a"), LORA.format("b"), LORA.format("c"),
        "arrive: {name: fft, role: sampler, memory: 60Gi}",
        "leave: b",
        "expect: {worker: c, sharesWith: a}",
    ), "--output", "json"))
    assert list(doc) == ["workers", "claims", "steps", "expectations"]
    assert list(doc["workers"]) == ["a", "c", "fft"]  # b left; arrival order
    assert doc["workers"]["a"] == {
        "phase": "Placed", "claim": "claim-a", "node": "box", "devices": 1,
        "memoryPerDevice": "10Gi", "owner": "qwen", "reason": None,
        "arrivedAt": 0, "placedAt": 0, "waited": 0,
    }
    fft = doc["workers"]["fft"]
    assert fft["phase"] == "Pending"
    assert fft["claim"] is None and fft["node"] is None and fft["devices"] is None
    assert fft["memoryPerDevice"] is None
    assert fft["owner"] == "fft"  # no owner: an owner of one
    assert fft["reason"].startswith("NoCapacity: ")
    # No times in the scenario: the clock counts events, and fft waits to the last one.
    assert (fft["arrivedAt"], fft["placedAt"], fft["waited"]) == (3, None, 2)
    assert doc["claims"] == {
        "claim-a": {"node": "box", "allocated": True, "devices": 1, "workers": ["a", "c"]},
    }
    assert doc["expectations"] == {"passed": 1, "failed": 0, "failures": []}
    assert [step["event"] for step in doc["steps"]] == [
        "arrive", "arrive", "arrive", "arrive", "leave", "expect"]


def test_json_steps_say_who_went_where(run: Run) -> None:
    doc = document(run(devbox(
        LORA.format("a"), LORA.format("b"), LORA.format("c"),
        "arrive: {name: fft, role: sampler, memory: 60Gi}",
        "leave: a", "leave: c",
        "addNode: {name: big, devices: 1, deviceMemory: 80Gi}",
        "expect: {worker: fft, node: big}",
    ), "-o", "json"))
    a, b, c, fft, leave_a, leave_c, add, expect = doc["steps"]
    assert a == {"event": "arrive", "at": 0, "worker": "a", "reason": None, "placed": [
        {"worker": "a", "claim": "claim-a", "node": "box", "devices": 1, "newClaim": True,
         "allocated": True, "retried": False, "workers": 1}]}
    assert c["placed"] == [
        {"worker": "c", "claim": "claim-a", "node": "box", "devices": 1, "newClaim": False,
         "allocated": True, "retried": False, "workers": 2}]
    assert fft["placed"] == [] and fft["reason"].startswith("NoCapacity")
    assert leave_a == {"event": "leave", "at": 4, "worker": "a", "claim": "claim-a",
                       "released": False, "placed": []}
    assert leave_c["released"] is True
    assert add["event"] == "addNode" and add["node"] == "big"
    assert add["placed"] == [
        {"worker": "fft", "claim": "claim-fft", "node": "big", "devices": 1, "newClaim": True,
         "allocated": True, "retried": True, "workers": 1}]
    assert expect == {"event": "expect", "at": 7, "worker": "fft", "expected": {"node": "big"},
                      "passed": True, "failure": None}
    assert b["placed"][0]["claim"] == "claim-b"


def test_retried_workers_are_listed_oldest_first_with_their_seat_counts(run: Run) -> None:
    # One 24Gi device, up to 3 per claim; host memory lets at most two share.
    text = """
        nodes:
          - {name: box, devices: 1, deviceMemory: 24Gi, maxWorkersPerClaim: 3}
        events:
          - arrive: {name: a, role: trainer, memory: 10Gi}
          - arrive: {name: b, role: trainer, memory: 10Gi}
          - arrive: {name: c, role: trainer, memory: 10Gi}
          - arrive: {name: d, role: trainer, memory: 10Gi}
          - arrive: {name: e, role: trainer, memory: 10Gi}
          - leave: a
          - leave: b
    """
    steps = document(run(text, "-o", "json"))["steps"]
    assert steps[3]["placed"] == [] and "full at 3 workers" in steps[3]["reason"]
    assert [(p["worker"], p["workers"], p["retried"]) for p in steps[5]["placed"]] == [
        ("d", 3, True)]
    assert [(p["worker"], p["workers"]) for p in steps[6]["placed"]] == [("e", 3)]


def test_claims_are_named_after_their_first_worker_with_suffixes(run: Run) -> None:
    text = """
        nodes:
          - {name: box, devices: 3, deviceMemory: 24Gi, maxWorkersPerClaim: 2}
        events:
          - arrive: {name: a, role: trainer, memory: 10Gi}
          - arrive: {name: b, role: trainer, memory: 10Gi}
          - arrive: {name: x, role: trainer, memory: 10Gi}
          - arrive: {name: c, role: trainer, memory: 10Gi}   # no free device: shares claim-a
          - leave: a                                          # claim-a stays with c
          - leave: x                                          # claim-x is released
          - arrive: {name: a, role: trainer, memory: 10Gi}   # a again: claim-a is taken
          - leave: b
          - arrive: {name: a-2, role: trainer, memory: 10Gi} # claim-a-2 is taken too
    """
    doc = document(run(text, "-o", "json"))
    assert sorted(doc["claims"]) == ["claim-a", "claim-a-2", "claim-a-2-2"]
    assert doc["claims"]["claim-a"]["workers"] == ["c"]
    assert doc["workers"]["a"]["claim"] == "claim-a-2"
    assert doc["workers"]["a-2"]["claim"] == "claim-a-2-2"


def test_deferred_dra_places_then_allocates(run: Run) -> None:
    doc = document(run(devbox(
        LORA.format("a"),
        "expect: {worker: a, phase: Placing, devices: 1}",
        LORA.format("b"),
        LORA.format("c"),   # both devices reserved by unallocated claims: never joined
        "expect: {worker: c, phase: Pending, reason: not yet allocated}",
        "allocate: b",      # now c can join b's claim
        "expect: {worker: c, phase: Placed, sharesWith: b, node: box}",
        dra="deferred",
    ), "-o", "json"))
    assert doc["expectations"]["failed"] == 0, doc["expectations"]
    assert doc["workers"]["a"] == {
        "phase": "Placing", "claim": "claim-a", "node": None, "devices": 1,
        "memoryPerDevice": "10Gi", "owner": "qwen", "reason": None,
        "arrivedAt": 0, "placedAt": 0, "waited": 0,
    }
    # c arrived at event 3 and got its seat when b's claim was allocated, event 5.
    assert (doc["workers"]["c"]["placedAt"], doc["workers"]["c"]["waited"]) == (5, 2)
    # An unallocated claim reports the node it was sized against.
    assert doc["claims"]["claim-a"] == {"node": "box", "allocated": False, "devices": 1,
                                        "workers": ["a"]}
    allocate = doc["steps"][5]
    assert allocate["event"] == "allocate"
    assert allocate["claim"] == "claim-b" and allocate["node"] == "box"
    assert [p["worker"] for p in allocate["placed"]] == ["c"]
    assert doc["steps"][0]["placed"][0]["allocated"] is False


def test_json_scenario_and_memory_in_bytes(run: Run) -> None:
    text = json.dumps({
        "nodes": [{"name": "box", "devices": 1, "deviceMemory": 25769803776}],
        "events": [{"arrive": {"name": "a", "role": "sampler", "memory": "1.5Gi"}},
                   {"expect": {"worker": "a", "phase": "Placed"}}],
    })
    doc = document(run(text, "-o", "json", name="scenario.json"))
    assert doc["workers"]["a"]["memoryPerDevice"] == "1.5Gi"
    assert doc["expectations"]["passed"] == 1


def test_table_tells_the_story(run: Run) -> None:
    result = run(devbox(
        LORA.format("a"), LORA.format("b"), LORA.format("c"),
        "arrive: {name: fft, role: sampler, memory: 60Gi}",
        "leave: a",
        "expect: {worker: c, alone: true}",
    ))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "scenario.yaml: 1 node, 6 events, dra: instant" in out
    assert "new claim claim-a on box (1 device)" in out
    assert "shares claim-a on box (1 device, 2/4 workers)" in out
    assert "waits  NoCapacity: needs 60Gi" in out
    assert "leaves claim-a; the claim stays with its other workers" in out
    assert "ok    alone true" in out
    # summary: nodes, claims, totals
    node_line = next(line for line in out.splitlines() if line.startswith("  box "))
    # b and c each alone on a claim, counted all the same: the node may share.
    assert node_line.split() == ["box", "-", "any", "2", "x", "24Gi", "0", "2", "2/8",
                                 "20Gi", "/", "94Gi"]
    assert any(line.split()[:5] == ["claim-b", "box", "yes", "1", "b"]
               for line in out.splitlines())
    assert "workers  3: 2 placed, 0 placing, 1 pending" in out
    assert "fleet    1 node, 2/2 devices in use, 2 claims, 2/8 seats taken" in out
    assert "\x1b[" not in out  # no colour codes when not a terminal


def test_table_shows_retried_workers_under_the_event(run: Run) -> None:
    result = run(devbox(
        "arrive: {name: fft, role: trainer, memory: 60Gi}",
        "addNode: {name: big, devices: 1, deviceMemory: 80Gi, roles: [trainer]}",
    ))
    lines = result.stdout.splitlines()
    index = next(i for i, line in enumerate(lines) if " addNode " in line)
    assert "joins the fleet: 1 x 80Gi, trainer, host memory unchecked" in lines[index]
    assert "+ fft" in lines[index + 1]
    assert "was pending: new claim claim-fft on big (1 device)" in lines[index + 1]


def test_stdin(run: Run) -> None:
    from click.testing import CliRunner

    from cli.main import main

    result = CliRunner().invoke(main, ["simulate", "-", "-o", "json"],
                                input=devbox(LORA.format("a")))
    assert result.exit_code == 0
    assert json.loads(result.stdout)["workers"]["a"]["phase"] == "Placed"


def test_the_controller_is_a_subcommand_loaded_only_when_asked() -> None:
    import subprocess
    import sys

    from click.testing import CliRunner

    from cli.main import main

    assert "controller" in main.list_commands(None)  # type: ignore[arg-type]
    # simulate must not pay for importing the Kubernetes client.
    probe = "import sys, cli.main; print('kubernetes' in sys.modules, 'yaml' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "False"]
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "simulate" in result.stdout



@pytest.mark.parametrize(("entry", "argv", "says"), [
    ("cli.main", ["openrl-place", "controller", "--leader-elect"], "openrl-place controller"),
    ("cli.main", ["openrl-place", "snapshot"], "openrl-place snapshot"),
    ("cli.kubectl", ["kubectl-openrl", "explain", "w"], "kubectl openrl explain"),
])
def test_without_the_controller_extra_the_command_says_what_to_install(
        entry: str, argv: list[str], says: str) -> None:
    import subprocess
    import sys

    # A module set to None in sys.modules cannot be imported: as if never installed.
    probe = (f"import sys; sys.modules['kubernetes'] = None; sys.argv = {argv!r}; "
             f"from {entry} import main; main()")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert f"{says} needs the controller extra" in done.stderr
    assert "pip install 'openrl-place[controller]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_zero_host_memory_means_nothing_can_be_parked(run: Run) -> None:
    # On a node that may share every worker counts, a lone one too: none fits in nothing.
    text = """
        nodes:
          - {name: box, devices: 1, deviceMemory: 24Gi, hostMemory: 0, maxWorkersPerClaim: 2}
        events:
          - arrive: {name: a, role: trainer, memory: 10Gi}
          - expect: {worker: a, phase: Pending, reason: host memory}
    """
    result = run(text)
    assert result.exit_code == 0, result.output


def test_empty_values_mean_absent(run: Run) -> None:
    text = """
        nodes:
          - {name: box, devices: 1, deviceMemory: 24Gi, hostMemory: , roles: , product: }
        events:
          - arrive: {name: a, role: sampler, memory: 10Gi, owner: }
          - expect: {worker: a, phase: Placed}
    """
    doc = document(run(text, "-o", "json"))
    assert doc["workers"]["a"]["owner"] == "a"


def test_a_pending_worker_says_what_single_change_would_seat_it(run: Run) -> None:
    doc = document(run(devbox(
        *(LORA.format(f"l{i}") for i in range(9)),
        "arrive: {name: fft, role: trainer, memory: 60Gi}",
    ), "--output", "json"))
    workers = doc["workers"]
    assert "wouldSeat" not in workers["l0"]  # placed workers carry none
    # Two L4s, four seats each: the ninth LoRA waits for a seat or a device.
    assert workers["l8"]["reason"].startswith("WaitingForCapacity")
    assert workers["l8"]["wouldSeat"] == {
        "kind": "maxWorkersPerClaim", "node": "box", "amount": 5,
        "text": "max-workers-per-claim 5 on box"}
    # The 60Gi worker never fits one node: nothing within this hardware seats it.
    assert workers["fft"]["reason"].startswith("NoCapacity")
    assert workers["fft"]["wouldSeat"] is None


def test_a_node_at_its_pod_limit_is_shown_and_counted(run: Run) -> None:
    arrivals = "".join(f"  - arrive: {{name: w{i}, role: trainer, memory: 5Gi}}\n"
                       for i in range(5))
    text = (
        "nodes:\n"
        "  - {name: gpu-0, devices: 8, deviceMemory: 80Gi, maxWorkersPerClaim: 16, pods: 3}\n"
        "  - {name: gpu-1, devices: 1, deviceMemory: 80Gi, roles: [sampler]}\n"
        "events:\n" + arrivals
        + '  - expect: {worker: w4, phase: Pending, reason: "gpu-0 is at its pod limit (3 pods)"}\n'
    )
    result = run(text)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.strip().startswith("node "))
    assert header.split() == ["node", "product", "roles", "devices", "free", "claims", "seats",
                              "pods", "parked", "/", "host"]
    row = next(line for line in lines if line.strip().startswith("gpu-0 "))
    assert row.split()[8:10] == ["3/3", "3/3"]  # seats bounded by the pod slots, all taken
    other = next(line for line in lines if line.strip().startswith("gpu-1 "))
    assert other.split()[9] == "-"  # unchecked
    assert "3/3 seats taken" in result.stdout

    doc = document(run(text, "-o", "json"))
    assert doc["workers"]["w4"]["wouldSeat"] == {
        "kind": "podsFreed", "node": "gpu-0", "amount": 1,
        "text": "1 pod freed on gpu-0 (workers leaving, or other pods gone)"}


def test_a_pod_limit_must_be_a_whole_number_of_at_least_zero(run: Run) -> None:
    result = run("""
        nodes:
          - {name: box, devices: 1, deviceMemory: 24Gi, pods: -1}
        events: []
    """)
    assert result.exit_code == 2
    assert "nodes[0].pods: must be at least 0, got -1" in result.stderr
