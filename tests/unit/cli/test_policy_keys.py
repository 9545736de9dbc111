"""The placement policy in scenarios: `strategy`, `ownerAffinity`, an arrival's `exclusive`,
read strictly, played by `simulate` and varied by `compare --set`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from cli.replay import replay
from cli.scenario import ScenarioError, load_scenario
from placement import Policy, Strategy

# Two one-device nodes seating four each; job-a's trainer, job-b's sampler, a worker
# that runs alone and job-b's second sampler.
FLEET = """
nodes:
  - {name: gpu-a, devices: 1, deviceMemory: 80Gi, hostMemory: 180Gi, maxWorkersPerClaim: 4}
  - {name: gpu-b, devices: 1, deviceMemory: 80Gi, hostMemory: 180Gi, maxWorkersPerClaim: 4}
events:
  - arrive: {name: t1, role: trainer, memory: 30Gi, owner: job-a}
  - arrive: {name: s1, role: sampler, memory: 10Gi, owner: job-b}
  - arrive: {name: solo, role: trainer, memory: 10Gi, exclusive: true}
  - arrive: {name: s2, role: sampler, memory: 10Gi, owner: job-b}
"""


def claims(text: str) -> dict[str, str | None]:
    report = replay(load_scenario(textwrap.dedent(text)))
    return {state.name: state.claim for state in report.workers}


def test_the_default_policy_is_spread_with_owner_affinity() -> None:
    assert load_scenario(FLEET).policy == Policy(Strategy.SPREAD, owner_affinity=True)
    assert claims(FLEET) == {"t1": "claim-t1", "s1": "claim-s1", "solo": None,
                             "s2": "claim-s1"}


def test_binpack_joins_first_and_an_exclusive_arrival_still_cuts_its_own_claim() -> None:
    assert claims("strategy: binpack\n" + FLEET) == {
        "t1": "claim-t1", "s1": "claim-t1", "solo": "claim-solo", "s2": "claim-t1"}


def test_owner_affinity_is_a_switch_spelt_true_false_or_on_off() -> None:
    text = "strategy: binpack\nownerAffinity: false\n" + FLEET
    assert load_scenario(text).policy == Policy(Strategy.BINPACK, owner_affinity=False)
    assert claims(text)["s2"] == "claim-t1"  # the only claim open to it
    assert load_scenario("ownerAffinity: 'off'\n" + FLEET).policy.owner_affinity is False


@pytest.mark.parametrize(("prefix", "where", "message"), [
    ("strategy: pack\n", "strategy", '"pack" is not one of spread, binpack'),
    ("ownerAffinity: 1\n", "ownerAffinity", "must be true or false"),
    ("", "events[2].arrive.exclusive", "must be true or false"),
])
def test_bad_policy_keys_are_named(prefix: str, where: str, message: str) -> None:
    text = prefix + FLEET
    if not prefix:
        text = text.replace("exclusive: true", "exclusive: 'yes'")
    with pytest.raises(ScenarioError) as error:
        load_scenario(text)
    assert error.value.where == where
    assert message in str(error.value)


def compare(tmp_path: Path, *options: str) -> Result:
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    return CliRunner().invoke(main, ["compare", str(path), *options])


def test_compare_varies_the_strategy_and_owner_affinity(tmp_path: Path) -> None:
    result = compare(tmp_path, "--set", "strategy=spread,binpack", "--set",
                     "ownerAffinity=on,off", "-o", "json")
    assert result.exit_code == 0, result.output
    variants = json.loads(result.stdout)["variants"]
    assert [v["variant"] for v in variants] == [
        "strategy=spread, ownerAffinity=on", "strategy=spread, ownerAffinity=off",
        "strategy=binpack, ownerAffinity=on", "strategy=binpack, ownerAffinity=off"]
    # Spread leaves the worker that runs alone no device; binpack packs the rest on one.
    assert [v["pending"] for v in variants] == [1, 1, 0, 0]


@pytest.mark.parametrize(("options", "message"), [
    (["--set", "strategy=pack"], '--set strategy: "pack" is not one of spread, binpack'),
    (["--set", "ownerAffinity=yes"], '--set ownerAffinity: "yes" is not one of on, off'),
    (["--set", "strategy=binpack", "--nodes", "gpu-a"], "--nodes does not apply"),
])
def test_bad_policy_values_are_clear_errors(tmp_path: Path, options: list[str],
                                            message: str) -> None:
    result = compare(tmp_path, *options)
    assert result.exit_code == 2
    assert message in result.output


def test_explain_says_where_a_worker_would_be_seated_and_why() -> None:
    from cli.explain import _explanation_lines
    from placement import Fleet, GiB, Node, Request, Role
    from placement.remedy import diagnose

    fleet = Fleet([Node("gpu-a", 1, 80 * GiB, max_workers_per_claim=4),
                   Node("gpu-b", 1, 80 * GiB, max_workers_per_claim=4)])
    fleet.cut("claim-a-train", "gpu-a", 1, Request("a-train", Role.TRAINER, 10 * GiB, "alpha"))
    fleet.cut("claim-b-train", "gpu-b", 1, Request("b-train", Role.TRAINER, 10 * GiB, "beta"))
    diagnosis = diagnose(Request("b-sample", Role.SAMPLER, 10 * GiB, "beta"), fleet)
    document = {"worker": "b-sample", "role": "sampler", "memory": "10Gi", "owner": "beta",
                "phase": "Pending", "claim": None, "reason": None, "devicesLeftOut": []}
    assert _explanation_lines(document, diagnosis)[1] == (
        "placement now: it would be seated at its next retry: joins claim-b-train: "
        "same owner, other role")
