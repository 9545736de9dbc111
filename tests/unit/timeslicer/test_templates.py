"""The example templates with a turn sidecar are templates the controller accepts."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from controller.reconcile.privileges import TemplatePolicy, privilege_refusal, unmarked_refusal
from controller.reconcile.render import parse_template, validate_template, worker_container_index

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = sorted((ROOT / "examples" / "templates").glob("*.yaml"))
COMMANDS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_both_examples_are_there() -> None:
    assert [p.name for p in TEMPLATES] == ["sglang-sampler.yaml", "vllm-sampler.yaml"]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_an_example_is_a_valid_restricted_template_with_its_sidecar(path: Path) -> None:
    config_map = yaml.safe_load(path.read_text())
    assert unmarked_refusal(config_map, path.name) is None
    pod = parse_template(config_map["data"]["pod.yaml"], path.name)
    spec = pod["spec"]
    assert spec["containers"][worker_container_index(spec, path.name)]["name"] == "worker"
    validate_template(pod, path.name)
    assert privilege_refusal(spec, path.name, config_map["metadata"]["name"],
                             TemplatePolicy()) is None
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    sidecar = next(c for c in spec["containers"] if c["name"] == "turn")
    command = sidecar["command"][0]
    assert COMMANDS[command] == f"timeslicer.adapters.{path.stem.split('-')[0]}:main"
    # The scheduler renders the turn volume and its env var: a template leaves them out.
    assert not spec.get("volumes")
    assert all("volumeMounts" not in c for c in spec["containers"])
