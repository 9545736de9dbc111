"""The sizing table (docs/performance.md) and what ships agree: the row it names as the
default is what the Deployment in manifests/base and the chart's values request and limit."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def sizing_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    section = text.split("## Sizing the scheduler", 1)[1].split("\n#", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]
    return [row for row in rows[1:] if not set(row[0]) <= {"-", " "}]


def default_resources() -> dict[str, dict[str, str]]:
    (row,) = [r for r in sizing_rows() if "default" in r[0]]
    memory = [m.strip() for m in row[2].split("/")]
    cpu = [c.strip() for c in row[3].split("/")]
    return {"requests": {"cpu": cpu[0], "memory": memory[0]},
            "limits": {"cpu": cpu[1], "memory": memory[1]}}


def test_the_table_has_every_size_the_benchmark_measures() -> None:
    sizes = [int(re.sub(r"\D", "", row[0].split("(")[0])) for row in sizing_rows()]
    assert sizes == sorted(sizes) and {10_000, 50_000, 100_000} <= set(sizes)


def test_the_deployment_holds_the_default_row() -> None:
    docs = yaml.safe_load_all((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    (deployment,) = [d for d in docs if d and d.get("kind") == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {k: {r: str(v) for r, v in container["resources"][k].items()}
            for k in ("requests", "limits")} == default_resources()


def test_the_chart_holds_the_default_row() -> None:
    values = yaml.safe_load((ROOT / "charts" / "openrl-place" / "values.yaml").read_text())
    assert {k: {r: str(v) for r, v in values["resources"][k].items()}
            for k in ("requests", "limits")} == default_resources()
