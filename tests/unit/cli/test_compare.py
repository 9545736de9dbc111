"""``openrl-place compare``: one scenario under several node policies, one row each."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.compare import run_variants, variants_of
from cli.main import main
from cli.scenario import load_scenario

# Two L4 boxes and an H100 node; eight 10Gi LoRA trainers an hour apart, the
# first four leave in the afternoon.
DAY = """
nodes:
  - {name: l4-a, devices: 2, deviceMemory: 24Gi, hostMemory: 94Gi}
  - {name: l4-b, devices: 2, deviceMemory: 24Gi, hostMemory: 94Gi}
  - {name: h100, devices: 1, deviceMemory: 80Gi, hostMemory: 180Gi, roles: [sampler]}
events:
""" + "".join(
    f"  - {{at: {hour}h, arrive: {{name: w{hour}, role: trainer, memory: 10Gi, "
    f"owner: o{hour % 2}}}}}\n" for hour in range(8)
) + "".join(f"  - {{at: {12 + hour}h, leave: w{hour}}}\n" for hour in range(4))


def compare(tmp_path: Path, *options: str, text: str = DAY) -> Result:
    path = tmp_path / "day.yaml"
    path.write_text(textwrap.dedent(text))
    return CliRunner().invoke(main, ["compare", str(path), *options])


def rows(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    variants: list[dict[str, Any]] = json.loads(result.stdout)["variants"]
    return variants


def test_one_row_per_value_of_the_key(tmp_path: Path) -> None:
    one, two, four = rows(compare(tmp_path, "--set", "maxWorkersPerClaim=1,2,4", "-o", "json"))
    # One worker per claim: four L4 devices seat four trainers (the H100 takes only
    # samplers); the others wait until the afternoon's departures.
    assert (one["variant"], one["placed"], one["pending"]) == ("maxWorkersPerClaim=1", 8, 0)
    assert one["waits"]["max"] == 8 * 3600  # w4 arrived at 4h, seated when w0 left at 12h
    assert two["waits"]["max"] == 0 and four["waits"]["max"] == 0
    assert (one["seatsUsed"], two["seatsUsed"]) == (4, 8)
    # Over 15 hours, 5 devices: idle device-hours shrink as the L4s fill up.
    assert one["deviceHoursIdle"] > 0 and json.loads(compare(
        tmp_path, "--set", "devices=1", "-o", "json").stdout)["clock"] == "seconds"


def test_the_table_names_the_key_and_the_nodes(tmp_path: Path) -> None:
    result = compare(tmp_path, "--set", "hostMemory=0,94Gi", "--nodes", "l4-*")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith('day.yaml: hostMemory on nodes matching "l4-*"')
    assert "device-hours idle" in lines[2]
    assert lines[3].split()[0] == "hostMemory=0" and lines[4].split()[0] == "hostMemory=94Gi"


def test_the_pattern_selects_nodes_added_later_too(tmp_path: Path) -> None:
    text = DAY.replace("events:\n", "events:\n  - addNode: {name: l4-c, devices: 1, "
                       "deviceMemory: 24Gi}\n")
    scenario = load_scenario(textwrap.dedent(text))
    ((_, variant),) = variants_of(scenario, "devices", ["3"], "l4-*")
    assert [node.devices for node in variant.nodes] == [3, 3, 1]
    assert variant.events[0].node.devices == 3  # type: ignore[union-attr]


def test_processes_give_the_same_rows_as_one(tmp_path: Path) -> None:
    scenario = load_scenario(textwrap.dedent(DAY))
    variants = variants_of(scenario, "maxWorkersPerClaim", ["1", "2", "3"], "*")
    alone = run_variants(variants, keep_timelines=False, processes=1)
    pooled = run_variants(variants, keep_timelines=True, processes=2)
    assert [v.summary for v in alone] == [v.summary for v in pooled]
    assert all(v.timeline is not None and not v.timeline.waits for v in pooled)


def test_a_deferred_scenario_replays_under_any_policy(tmp_path: Path) -> None:
    # With one device, b waits instead of getting a claim of its own, so the
    # scenario's "allocate: b" has nothing to allocate: a no-op, not an error.
    text = """
        dra: deferred
        nodes: [{name: box, devices: 2, deviceMemory: 24Gi}]
        events:
          - arrive: {name: a, role: trainer, memory: 10Gi}
          - allocate: a
          - arrive: {name: b, role: trainer, memory: 10Gi}
          - allocate: b
    """
    one, two = rows(compare(tmp_path, "--set", "devices=1,2", "-o", "json", text=text))
    assert (one["placed"], one["pending"], two["placed"], two["pending"]) == (1, 1, 2, 0)


@pytest.mark.parametrize(("options", "message"), [
    (["--set", "colour=1,2"], 'unknown key "colour"'),
    (["--set", "devices="], "give the values to try"),
    (["--set", "devices=1,,2"], "give the values to try"),
    (["--set", "devices=0"], "--set devices=0: '0' must be at least 1"),
    (["--set", "devices=two"], "--set devices=two: 'two' is not a whole number"),
    (["--set", "maxWorkersPerClaim=1,x"],
     "--set maxWorkersPerClaim=1,x: 'x' is not a whole number"),
    (["--set", "hostMemory=10Gb"], "--set hostMemory=10Gb: '10Gb' is not a size such as 94Gi"),
    (["--set", "devices=1", "--report", "x.png"], "x.png: the name must end in .html or .htm"),
    (["--set", "devices=2", "--nodes", "gpu-*"], '--nodes "gpu-*" matches no node'),
    (["--set", "devices=1", "--set", "devices=2"], "--set: each key once"),
])
def test_bad_options_are_clear_errors(tmp_path: Path, options: list[str], message: str) -> None:
    result = compare(tmp_path, *options)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_the_report_draws_the_variants_side_by_side(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    result = compare(tmp_path, "--set", "maxWorkersPerClaim=1,4", "--report", str(page))
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert text.count("<svg") == 1 and 'id="figure-side-by-side"' in text
    assert "maxWorkersPerClaim=1" in text and "maxWorkersPerClaim=4" in text
    assert "device-hours idle" in text


def test_pod_slots_are_a_key_to_vary(tmp_path: Path) -> None:
    one, eight = rows(compare(tmp_path, "--set", "pods=1,8", "--nodes", "l4-*", "-o", "json"))
    # One pod slot per L4 box: two trainers at a time, not four.
    assert (one["variant"], one["seatsUsed"], eight["seatsUsed"]) == ("pods=1", 2, 4)
    refused = compare(tmp_path, "--set", "pods=-1")
    assert refused.exit_code == 2 and "--set pods=-1: '-1' must be at least 0" in refused.stderr


def test_a_second_set_crosses_its_values_with_the_first(tmp_path: Path) -> None:
    found = rows(compare(tmp_path, "--set", "quantum=30s,10m", "--set", "devices=1,2",
                         "--nodes", "l4-*", "-o", "json"))
    assert [row["variant"] for row in found] == [
        "quantum=30s, devices=1", "quantum=30s, devices=2", "quantum=10m, devices=1",
        "quantum=10m, devices=2"]
    assert found[1]["values"] == {"quantum": "30s", "devices": "2"}
    # The node key still follows --nodes (the turn setting is the scenario's): each
    # quantum places what that key alone does.
    alone = [row["placed"] for row in rows(compare(tmp_path, "--set", "devices=1,2",
                                                   "--nodes", "l4-*", "-o", "json"))]
    assert [row["placed"] for row in found] == alone * 2 and alone[0] < alone[1]
    assert all(row["turns"] is not None for row in found)
