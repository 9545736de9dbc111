"""Every scenario the tool cannot run exits 2 with one message naming file, place and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from tests.unit.cli.conftest import Run, devbox

ARRIVE_X = "arrive: {name: x, role: trainer, memory: 10Gi}"


def assert_bad(result_text: str, exit_code: int, where: str, fragment: str) -> None:
    assert exit_code == 2, result_text
    lines = result_text.strip().splitlines()
    assert len(lines) == 1, f"expected one message, got: {result_text}"
    assert "Traceback" not in result_text
    assert lines[0].split(": ", 1)[0].endswith("scenario.yaml"), lines[0]
    assert f"scenario.yaml: {where}: " in lines[0] if where else True, lines[0]
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        # the document itself
        ("", "", "the scenario is empty"),
        ("- 1\n- 2\n", "", "must be a mapping"),
        ("nodes: [\n", "line 2, column 1", "not valid YAML"),
        ("dra: instant\ndra: deferred\n", "line 2, column 1", 'duplicate key "dra"'),
        ('{"dra": "instant", "dra": "deferred"}', "", 'duplicate key "dra"'),
        ("nodez: []\n", "nodez", 'unknown key; did you mean "nodes"?'),
        ("dra: later\n", "dra", '"later" is not one of instant, deferred'),
        ("nodes: box\n", "nodes", "must be a list"),
        ("events: {leave: x}\n", "events", "must be a list"),
        # nodes
        ("nodes: [box]\n", "nodes[0]", "must be a mapping"),
        ("nodes: [{devices: 1, deviceMemory: 1Gi}]\n", "nodes[0].name", "is required"),
        ("nodes: [{name: a, deviceMemory: 1Gi}]\n", "nodes[0].devices", "is required"),
        ("nodes: [{name: a, devices: 0, deviceMemory: 1Gi}]\n", "nodes[0].devices",
         "must be at least 1, got 0"),
        ("nodes: [{name: a, devices: two, deviceMemory: 1Gi}]\n", "nodes[0].devices",
         "must be a whole number"),
        ("nodes: [{name: a, devices: 1.5, deviceMemory: 1Gi}]\n", "nodes[0].devices",
         "must be a whole number"),
        ("nodes: [{name: a, devices: 1}]\n", "nodes[0].deviceMemory", "is required"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 10Gb}]\n", "nodes[0].deviceMemory",
         '"10Gb" is not a Kubernetes quantity'),
        ("nodes: [{name: a, devices: 1, deviceMemory: 0}]\n", "nodes[0].deviceMemory", "zero"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, hostMemory: -1Gi}]\n",
         "nodes[0].hostMemory", "negative"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, roles: [judge]}]\n",
         "nodes[0].roles", '"judge" is not a role (trainer, sampler)'),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, roles: trainer}]\n",
         "nodes[0].roles", "must be a list of roles"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, maxWorkersPerClaim: 0}]\n",
         "nodes[0].maxWorkersPerClaim", "must be at least 1"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, hostmemory: 9Gi}]\n",
         "nodes[0].hostmemory", 'unknown key; did you mean "hostMemory"?'),
        ("nodes: [{name: 7, devices: 1, deviceMemory: 1Gi}]\n", "nodes[0].name",
         "must be a name (a string), got 7; quote it"),
        ("nodes:\n  - {name: a, devices: 1, deviceMemory: 1Gi}\n"
         "  - {name: a, devices: 2, deviceMemory: 1Gi}\n",
         "nodes[1].name", 'duplicate node "a" (first at nodes[0])'),
        # events, as written
        (devbox("7"), "events[0]", "must be a mapping with exactly one of the keys"),
        (devbox("{leave: x, allocate: x}"), "events[0]", "exactly one of the keys"),
        (devbox("arive: {name: x}"), "events[0].arive", 'unknown event; did you mean "arrive"?'),
        ("events:\n  - arrive:\n    name: x\n", "events[0]", "indented under it"),
        (devbox("arrive: {name: x, role: trainer}"), "events[0].arrive.memory", "is required"),
        (devbox("arrive: {name: x, role: judge, memory: 1Gi}"), "events[0].arrive.role",
         '"judge" is not one of trainer, sampler'),
        (devbox("arrive: {name: x, role: trainer, memory: 10Gb}"), "events[0].arrive.memory",
         '"10Gb" is not a Kubernetes quantity'),
        (devbox("arrive: {name: x, role: trainer, memory: -5Gi}"), "events[0].arrive.memory",
         '"-5Gi" is negative'),
        (devbox("arrive: {name: x, role: trainer, memory: 0}"), "events[0].arrive.memory",
         "zero"),
        (devbox("arrive: {name: x, role: trainer, memory: 1Gi, gpus: 2}"),
         "events[0].arrive.gpus", "unknown key"),
        (devbox("arrive: {name: '', role: trainer, memory: 1Gi}"), "events[0].arrive.name",
         "must not be empty"),
        (devbox("leave: no"), "events[0].leave", "got false (a boolean); quote it"),
        (devbox("leave: {name: x}"), "events[0].leave", "must be a name"),
        (devbox("expect: {phase: Placed}"), "events[0].expect.worker", "is required"),
        (devbox(ARRIVE_X, "expect: {worker: x, phase: placed}"), "events[1].expect.phase",
         '"placed" is not one of Placed, Placing, Pending'),
        (devbox(ARRIVE_X, "expect: {worker: x, alone: maybe}"), "events[1].expect.alone",
         "must be true or false"),
        (devbox(ARRIVE_X, "expect: {worker: x, devices: 0}"), "events[1].expect.devices",
         "must be at least 1"),
        (devbox(ARRIVE_X, "expect: {worker: x, sharesWith: x}"), "events[1].expect.sharesWith",
         "names the worker itself"),
        (devbox(ARRIVE_X, "expect: {worker: x, reason: 5}"), "events[1].expect.reason",
         "must be non-empty text, got 5"),
        ("nodes: [{name: a, devices: 1, deviceMemory: 1Gi, product: ''}]\n",
         "nodes[0].product", "must be non-empty text"),
        (devbox(ARRIVE_X, "expect: {worker: x, claim: claim-x}"), "events[1].expect.claim",
         "unknown key"),
        (devbox("addNode: {name: n, devices: 0, deviceMemory: 1Gi}"),
         "events[0].addNode.devices", "must be at least 1"),
        # events the replay cannot carry out
        (devbox(ARRIVE_X, ARRIVE_X), "events[1].arrive.name",
         'worker "x" is already here (it arrived at events[0])'),
        (devbox("leave: ghost"), "events[0].leave",
         'worker "ghost" is not here (no such worker has arrived)'),
        (devbox(ARRIVE_X, "leave: x", "leave: x"), "events[2].leave",
         'worker "x" is not here (it left at events[1])'),
        (devbox("allocate: ghost"), "events[0].allocate", 'worker "ghost" is not here'),
        (devbox("arrive: {name: x, role: trainer, memory: 1Ti}", "allocate: x", dra="deferred"),
         "events[1].allocate", 'worker "x" is pending: it has no claim to allocate'),
        (devbox(ARRIVE_X, "allocate: x"), "events[1].allocate",
         'claim "claim-x" of worker "x" is already allocated (with dra: instant'),
        (devbox(ARRIVE_X, "allocate: x", "allocate: x", dra="deferred"), "events[2].allocate",
         "is already allocated"),
        (devbox("addNode: {name: box, devices: 1, deviceMemory: 1Gi}"),
         "events[0].addNode.name", 'duplicate node "box"'),
        (devbox("expect: {worker: ghost}"), "events[0].expect.worker",
         'worker "ghost" is not here'),
        (devbox(ARRIVE_X, "leave: x", "expect: {worker: x}"), "events[2].expect.worker",
         "it left at events[1]"),
        (devbox(ARRIVE_X, "expect: {worker: x, sharesWith: ghost}"),
         "events[1].expect.sharesWith", 'worker "ghost" is not here'),
        (devbox(ARRIVE_X, "expect: {worker: x, node: nowhere}"), "events[1].expect.node",
         'no node named "nowhere"'),
    ],
)
def test_bad_scenario_exits_2_naming_the_field(run: Run, text: str, where: str,
                                                fragment: str) -> None:
    result = run(text)
    assert result.stdout == ""
    assert_bad(result.stderr, result.exit_code, where, fragment)


@pytest.mark.parametrize("output", ["table", "json"])
def test_nothing_is_printed_to_stdout_for_a_bad_scenario(run: Run, output: str) -> None:
    # The error can come from the last event: no half-rendered output before it.
    result = run(devbox(ARRIVE_X, "leave: ghost"), "--output", output)
    assert result.exit_code == 2
    assert result.stdout == ""


def test_unreadable_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    missing = tmp_path / "missing.yaml"
    assert result.stderr.strip() == f"{missing}: cannot read: No such file or directory"


def test_a_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", str(tmp_path)])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{path}: not UTF-8 text (byte 0 cannot be decoded)"


def test_unknown_output_format_is_a_usage_error(run: Run) -> None:
    result = run(devbox(), "--output", "xml")
    assert result.exit_code == 2
    assert "xml" in result.stderr


@pytest.mark.parametrize("name", ["scenario.json", "scenario.yaml", "scenario"])
def test_a_byte_order_mark_is_accepted(tmp_path: Path, name: str) -> None:
    scenario = ('{"nodes": [{"name": "a", "devices": 1, "deviceMemory": "24Gi"}], '
                '"events": [{"arrive": {"name": "w", "role": "trainer", "memory": "10Gi"}}]}')
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + scenario.encode())
    result = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"])
    assert result.exit_code == 0, result.stderr
    yaml_path = tmp_path / "plain.yaml"
    yaml_path.write_bytes(b"\xef\xbb\xbfnodes: [{name: a, devices: 1, deviceMemory: 24Gi}]\n"
                          b"events: [{arrive: {name: w, role: trainer, memory: 10Gi}}]\n")
    assert CliRunner().invoke(main, ["simulate", str(yaml_path)]).exit_code == 0


def test_an_error_after_a_byte_order_mark_counts_columns_as_shown(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(b'\xef\xbb\xbf{"nodes": [}')
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{path}: line 1, column 12: not valid JSON: Expecting value"
