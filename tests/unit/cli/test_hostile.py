"""Hostile and absurd scenario files: each answered with exit 2 and one short line, or run.

Every class here once ended in a traceback, a hang, a flood of memory or a
forged line of output. The answer is always one of two: a successful run, or
exit 2 with a single line naming the file and the place (the event index and
the field, or the line and column) and at most a short excerpt of the value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from tests.unit.cli.conftest import Run, devbox

LONGEST_LINE = 300  # no message about a bad value needs more than this


def simulate(path: Path, *options: str) -> Result:
    return CliRunner().invoke(main, ["simulate", str(path), *options])


def refused(result: Result, *fragments: str) -> str:
    """The one line of a refusal, checked for its shape and for ``fragments``."""
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[:2000]
    line = lines[0]
    assert "Traceback" not in line
    # The file's name leads the line, as long as the temporary directory makes it.
    message = line.split(": ", 1)[-1]
    assert len(message) <= LONGEST_LINE, line[:2000]
    assert line.isprintable(), line
    for fragment in fragments:
        assert fragment in line, line
    return line


def written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


NODE = {"name": "a", "devices": 1, "deviceMemory": "1Gi"}


def scenario(*events: dict[str, object], node: dict[str, object] | None = None) -> str:
    return json.dumps({"nodes": [node or NODE], "events": list(events)})


# ------------------------------------------------------------ the document


def test_json_nested_fifty_thousand_deep(tmp_path: Path) -> None:
    path = written(tmp_path, "deep.json", '{"events": ' + "[" * 50_000 + "]" * 50_000 + "}")
    refused(simulate(path), "deep.json: ", "not valid JSON: nested too deeply")


def test_yaml_nested_fifty_thousand_deep(tmp_path: Path) -> None:
    path = written(tmp_path, "deep.yaml", "events: " + "[" * 50_000 + "]" * 50_000 + "\n")
    refused(simulate(path), "deep.yaml: line 1, column ", "nesting depth")


def test_json_syntax_errors_are_json_s_own_with_line_and_column(tmp_path: Path) -> None:
    path = written(tmp_path, "broken.json", '{"nodes": [\n  {"name": "a",}\n]}')
    refused(simulate(path), "broken.json: line 2, column 16: not valid JSON: "
            "Expecting property name enclosed in double quotes")


def test_json_looking_text_that_is_neither_says_both(tmp_path: Path) -> None:
    path = written(tmp_path, "broken", '{"nodes": [}')
    refused(simulate(path), "line 1, column 12: not valid JSON: ", "(nor valid YAML: ")


def test_yaml_file_gets_yaml_s_message(tmp_path: Path) -> None:
    path = written(tmp_path, "broken.yaml", "nodes: [\n")
    refused(simulate(path), "broken.yaml: line 2, column 1: not valid YAML")


def test_json_nan_is_not_json(tmp_path: Path) -> None:
    path = written(tmp_path, "nan.json", '{"nodes": [{"name": "a", "devices": NaN}]}')
    refused(simulate(path), "nan.json: not valid JSON: NaN is not a JSON value")


def test_json_duplicate_key_is_named_in_double_quotes(tmp_path: Path) -> None:
    path = written(tmp_path, "dup.json", '{"dra": "instant", "dra": "deferred"}')
    refused(simulate(path), 'dup.json: duplicate key "dra"')


# --------------------------------------------------------------- numbers


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_five_thousand_digit_integer(tmp_path: Path, suffix: str) -> None:
    node = json.dumps({"name": "a", "devices": 1, "deviceMemory": "1Gi"})
    text = '{"nodes": [' + node.replace('"devices": 1', '"devices": ' + "7" * 5000) + "]}"
    line = refused(simulate(written(tmp_path, "big" + suffix, text)),
                   "nodes[0].devices: is out of range, got a 5,000-digit number")
    assert "set_int_max_str_digits" not in line


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_five_thousand_digit_size(tmp_path: Path, suffix: str) -> None:
    text = scenario(node={"name": "a", "devices": 1, "deviceMemory": 1})
    text = text.replace('"deviceMemory": 1', '"deviceMemory": ' + "9" * 5000)
    refused(simulate(written(tmp_path, "big" + suffix, text)),
            "nodes[0].deviceMemory: is out of range, got a 5,000-digit number")


def test_five_thousand_digit_quantity_text(tmp_path: Path) -> None:
    text = scenario({"arrive": {"name": "w", "role": "trainer", "memory": "1" * 5000 + "Gi"}})
    line = refused(simulate(written(tmp_path, "big.json", text)),
                   "events[0].arrive.memory: ", "(5,002 characters) is too long to be a quantity")
    assert "set_int_max_str_digits" not in line


@pytest.mark.parametrize("output", ["table", "json"])
def test_absurd_but_valid_size_is_formatted_exactly_in_both_modes(tmp_path: Path,
                                                                  output: str) -> None:
    huge = "9" * 330
    text = scenario({"arrive": {"name": "w", "role": "trainer", "memory": huge}},
                    node={"name": "a", "devices": 1, "deviceMemory": huge})
    result = simulate(written(tmp_path, "absurd.json", text), "--output", output)
    assert result.exit_code == 0, result.output
    # 10**330 - 1 bytes is 931322574615478515625 followed by 300 zeros GiB, to two decimals.
    figure = "931322574615478515625" + "0" * 300 + "Gi"
    assert figure in result.stdout


def test_base_60_is_text_not_a_number(run: Run) -> None:
    # YAML 1.1 would read 12:30 as 750.
    refused(run("nodes: [{name: a, devices: 12:30, deviceMemory: 1Gi}]\n"),
            'nodes[0].devices: must be a whole number, got "12:30"')
    result = run("nodes: [{name: 12:30, devices: 1, deviceMemory: 1Gi}]\n"
                 "events: [{arrive: {name: 1:30, role: trainer, memory: 1Gi}}, "
                 "{expect: {worker: '1:30', node: '12:30'}}]\n")
    assert result.exit_code == 0, result.output


def test_infinity_is_not_a_count(run: Run) -> None:
    refused(run("nodes: [{name: a, devices: .inf, deviceMemory: 1Gi}]\n"),
            "nodes[0].devices: must be a whole number, got a number that is not finite")


def test_a_billion_and_one_devices_is_out_of_range(run: Run) -> None:
    refused(run("nodes: [{name: a, devices: 1000000001, deviceMemory: 1Gi}]\n"),
            "nodes[0].devices: is out of range, got 1000000001 (at most 1,000,000,000)")


# ----------------------------------------------------------- no Python reprs


@pytest.mark.parametrize(("value", "where", "expected"), [
    ("true", "nodes[0].deviceMemory", "got true (a boolean)"),
    ("2024-01-01", "nodes[0].deviceMemory", "got a date (2024-01-01)"),
    ("!!set {trainer}", "nodes[0].deviceMemory", "got a set"),
    ("!!binary aGVsbG8=", "nodes[0].deviceMemory", "got binary data"),
    ("[1, 2]", "nodes[0].deviceMemory", "got a list"),
    ("1.5", "nodes[0].deviceMemory", "got 1.5"),
])
def test_values_are_described_not_repr_d(run: Run, value: str, where: str,
                                         expected: str) -> None:
    line = refused(run(f"nodes: [{{name: a, devices: 1, deviceMemory: {value}}}]\n"),
                   f"{where}: ", expected)
    for python in ("True", "datetime", "{'", "b'", "set("):
        assert python not in line


def test_a_set_of_roles_is_described(run: Run) -> None:
    refused(run(devbox("arrive: {name: a, role: !!set {trainer}, memory: 1Gi}")),
            "events[0].arrive.role: a set is not one of trainer, sampler")


def test_a_date_as_a_name_says_to_quote_it(run: Run) -> None:
    refused(run("nodes: [{name: 2024-01-01, devices: 1, deviceMemory: 1Gi}]\n"),
            "nodes[0].name: must be a name (a string), got a date (2024-01-01); quote it")


# ----------------------------------------------------------- bounded echo


def test_alias_bomb_in_a_quantity_is_not_expanded(run: Run) -> None:
    # Nine levels of nine aliases: 387 million strings if anything expanded it.
    levels = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = "{" + ", ".join(levels) + "}"
    refused(run(f"nodes: [{{name: a, devices: 1, deviceMemory: {bomb}}}]\n"),
            "nodes[0].deviceMemory: must be a Kubernetes quantity", "got a mapping")
    refused(run(f"nodes: [{{name: a, devices: 1, deviceMemory: 1Gi, roles: [{bomb}]}}]\n"),
            "nodes[0].roles: a mapping is not a role")


def test_a_long_name_is_cut_in_the_message(run: Run) -> None:
    name = "x" * 100_000
    refused(run(devbox(f"leave: {name}")),
            'events[0].leave: worker "xxxx', '..." (100,000 characters) is not here')


def test_a_long_unknown_key_is_cut_in_the_path(tmp_path: Path) -> None:
    text = scenario(node={**NODE, "k" * 5000: 1})
    refused(simulate(written(tmp_path, "s.json", text)),
            'nodes[0].<"kkk', "(5,000 characters)>: unknown key")


def test_a_long_quantity_is_cut_in_the_message(run: Run) -> None:
    memory = "1" * 300 + "Gb"
    refused(run(devbox(f"arrive: {{name: a, role: trainer, memory: '{memory}'}}")),
            'events[0].arrive.memory: "1111', '..." (302 characters) is not a Kubernetes quantity')


# ------------------------------------------------------------ merge keys


def test_yaml_merge_key_overrides_instead_of_duplicating(run: Run) -> None:
    result = run("""
        nodes:
          - &node {name: a, devices: 1, deviceMemory: 24Gi}
          - {<<: *node, name: b, deviceMemory: 80Gi}
        events:
          - arrive: &lora {name: x, role: trainer, memory: 10Gi}
          - arrive: {<<: *lora, name: y, memory: 40Gi}
          - expect: {worker: x, node: a}
          - expect: {worker: y, node: b}
        """)
    assert result.exit_code == 0, result.output


def test_yaml_merge_of_several_mappings_first_wins(run: Run) -> None:
    result = run("""
        nodes:
          - {name: a, devices: 1, deviceMemory: 24Gi}
        events:
          - arrive: &one {name: x, role: trainer, memory: 10Gi}
          - leave: x
          - arrive: &two {name: y, role: sampler, memory: 40Gi}
          - leave: y
          - arrive: {<<: [*one, *two], name: z}
          - expect: {worker: z, phase: Placed}
        """)
    assert result.exit_code == 0, result.output


def test_yaml_keys_written_twice_beside_a_merge_are_still_duplicates(run: Run) -> None:
    refused(run("""
        nodes:
          - &node {name: a, devices: 1, deviceMemory: 24Gi}
          - {<<: *node, name: b, name: c}
        """), "line 4, column ", 'duplicate key "name"')


def test_yaml_merge_of_a_scalar_is_refused(run: Run) -> None:
    refused(run("nodes: [{<<: 5, name: a, devices: 1, deviceMemory: 1Gi}]\n"),
            "a merge key (<<) takes a mapping or a list of mappings")


def test_chained_merges_stay_small(run: Run) -> None:
    # Thirty levels each merging the one before eight times: 8**30 pairs if copied.
    chain = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}"]
    chain += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 8)}]}}" for i in range(1, 30)]
    refused(run(f"nodes: [{{name: a, devices: 1, deviceMemory: {{{', '.join(chain)}}}}}]\n"),
            "nodes[0].deviceMemory: must be a Kubernetes quantity", "got a mapping")


# ------------------------------------------------------- Unicode and text


@pytest.mark.parametrize("output", ["table", "json"])
def test_lone_surrogate_is_refused_in_both_modes(tmp_path: Path, output: str) -> None:
    text = scenario({"arrive": {"name": "w\\ud800", "role": "trainer", "memory": "1Gi"}})
    text = text.replace("\\\\ud800", "\\ud800")  # the JSON escape itself, not a backslash
    refused(simulate(written(tmp_path, "s.json", text), "--output", output),
            'events[0].arrive.name: "w\\ud800" is not valid Unicode text')


def test_newlines_and_escapes_in_names_are_escaped_in_the_table(run: Run) -> None:
    forged = "w\\n3  arrive  forged"
    result = run(f"""
        nodes:
          - {{name: "box\\e[2J", devices: 2, deviceMemory: 24Gi, product: "\\e[31mred"}}
        events:
          - arrive: {{name: "{forged}", role: trainer, memory: 10Gi}}
          - expect: {{worker: "{forged}", phase: Pending}}
        """)
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if "forged" in line]
    # The event row, the claim row and the failure: no row starts with the forged text.
    assert all(not line.lstrip().startswith("3  arrive") for line in rows), rows
    assert "w\\n3  arrive  forged" in result.stdout
    assert "box\\x1b[2J" in result.stdout and "\\x1b[31mred" in result.stdout


def test_json_output_keeps_names_exact(run: Run) -> None:
    result = run(devbox('arrive: {name: "a\\tb", role: trainer, memory: 10Gi}'),
                 "--output", "json")
    assert result.exit_code == 0
    assert "a\tb" in json.loads(result.stdout)["workers"]


def test_a_file_name_with_a_newline_is_escaped(tmp_path: Path) -> None:
    path = written(tmp_path, "two\nlines.yaml", "nodes: 5\n")
    refused(simulate(path), "two\\nlines.yaml: nodes: must be a list")


# ------------------------------------------------------------------ size


def test_an_endless_device_is_refused_at_the_size_limit() -> None:
    refused(CliRunner().invoke(main, ["simulate", "/dev/zero", "--max-size", "1Ki"]),
            "/dev/zero: larger than 1Ki, the most simulate reads; raise it with --max-size")


def test_a_large_file_is_refused_and_the_flag_raises_the_limit(tmp_path: Path) -> None:
    path = written(tmp_path, "s.json", scenario() + " " * 2000)
    refused(simulate(path, "--max-size", "2Ki"), "larger than 2Ki")
    assert simulate(path, "--max-size", "3Ki").exit_code == 0


def test_stdin_is_bounded_too() -> None:
    result = CliRunner().invoke(main, ["simulate", "-", "--max-size", "10"],
                                input="x" * 11)
    refused(result, "<stdin>: larger than 10")


def test_a_bad_size_limit_is_a_usage_error(tmp_path: Path) -> None:
    result = simulate(written(tmp_path, "s.json", scenario()), "--max-size", "lots")
    assert result.exit_code == 2
    assert "--max-size" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ time


def test_a_huge_time_is_out_of_range(run: Run) -> None:
    refused(run(devbox("{at: " + "9" * 400 + ", arrive: {name: w, role: trainer, memory: 1Gi}}")),
            "events[0].at: is out of range, got a 400-digit number")


def test_a_clock_time_is_not_read_as_base_60(run: Run) -> None:
    refused(run(devbox("{at: 12:30, arrive: {name: w, role: trainer, memory: 1Gi}}")),
            'events[0].at: "12:30" is not a duration')


def test_a_json_document_of_megabytes_is_written_whole(tmp_path: Path) -> None:
    # Written a megabyte at a time: the pieces must join into the one document.
    arrivals = [{"arrive": {"name": f"w{i:05d}", "role": "trainer", "memory": "1Gi"}}
                for i in range(6000)]
    path = written(tmp_path, "big.json", scenario(*arrivals))
    result = simulate(path, "--output", "json")
    assert result.exit_code == 0
    assert len(result.stdout) > 2 << 20 and result.stdout.endswith("}\n")
    assert len(json.loads(result.stdout)["steps"]) == 6000
