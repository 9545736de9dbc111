"""``simulate --report``: a lost node gets a row in a table and a mark at its time on every
figure drawn over time; a scenario that loses no node gets neither."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.cli.conftest import Run
from tests.unit.cli.test_node_events import TWO_NODES

# w2 and w3 take turns on b's claim until b goes at 10m (w2 then shares the group's node
# with w4); the node group gives the page its figure of nodes over time.
TURNS_AND_GROUP = """
dra: instant
strategy: binpack
turns: {}
nodes:
  - {name: a, devices: 1, deviceMemory: 80Gi}
  - {name: b, devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2}
nodeGroups:
  - name: spare
    template: {devices: 1, deviceMemory: 80Gi, maxWorkersPerClaim: 2}
    min: 0
    max: 1
    bootTime: 2m
    idleTime: 5m
events:
  - arrive: {name: w1, role: sampler, memory: 30Gi}
  - arrive: {name: w2, role: sampler, memory: 30Gi}
  - arrive: {name: w3, role: sampler, memory: 30Gi}
  - arrive: {name: w4, role: sampler, memory: 30Gi}
  - {at: 10m, loseNode: b}
  - {at: 20m, leave: w1}
"""


def _page(run: Run, tmp_path: Path, scenario: str) -> str:
    page_path = tmp_path / "report.html"
    result = run(scenario, "--report", str(page_path))
    assert result.exit_code == 0, result.output
    return page_path.read_text()


def _svg(page: str, name: str) -> str:
    return page.split(f'id="figure-{name}"')[1].split("</svg>")[0]


def _texts(svg: str) -> list[tuple[float, float, str]]:
    """Each text of a figure: (x, y, what it says)."""
    found = []
    for attributes, text in re.findall(r"<text([^>]*)>([^<]*)</text>", svg):
        x = float(re.search(r' x="([-\d.]+)"', attributes).group(1))  # type: ignore[union-attr]
        y = float(re.search(r' y="([-\d.]+)"', attributes).group(1))  # type: ignore[union-attr]
        found.append((x, y, text))
    return found


def test_the_page_lists_each_lost_node_with_its_moved_workers(run: Run, tmp_path: Path) -> None:
    page = _page(run, tmp_path, TWO_NODES)
    assert "<h2>Lost nodes</h2>" in page
    # The sixth event (index 5, no times given) lost b: w3 found room on a, w4 waits.
    assert ("<tr><td>5 events</td><td>b</td><td class=wrap>w3</td>"
            "<td class=wrap>w4</td></tr>") in page
    # And a labelled line on the over-time figure.
    assert "lost b" in _svg(page, "over-time")


def test_the_over_time_mark_stands_at_the_moment_the_node_was_lost(
        run: Run, tmp_path: Path) -> None:
    texts = _texts(_svg(_page(run, tmp_path, TWO_NODES), "over-time"))
    (label_x,) = [x for x, _, text in texts if text == "lost b"]
    # The time axis counts events 0 to 9; its tick labels are the lowest numbers drawn.
    bottom = max(y for _, y, text in texts if text.isdigit())
    ticks = {int(text): x for x, y, text in texts if text.isdigit() and y == bottom}
    assert abs(label_x - (ticks[4] + ticks[6]) / 2) < 0.2, (label_x, ticks)


def test_every_figure_over_time_marks_the_loss_and_ends_the_lost_nodes_claim(
        run: Run, tmp_path: Path) -> None:
    page = _page(run, tmp_path, TURNS_AND_GROUP)
    for figure in ("over-time", "nodes", "residency"):
        assert "lost b" in _svg(page, figure), figure
    # b's claim has a row on the residency figure, closed at the loss.
    assert "claim-w2 (b)" in _svg(page, "residency")
    assert "A claim whose node was lost ends at a black bar." in page
    assert page.count("A dotted red line marks each lost node") == 3


def test_a_scenario_that_loses_no_node_gets_no_mark(run: Run, tmp_path: Path) -> None:
    for scenario in (TWO_NODES, TURNS_AND_GROUP):
        kept = "\n".join(line for line in scenario.splitlines()
                         if "loseNode" not in line and "expect:" not in line)
        page = _page(run, tmp_path, kept)
        assert "Lost nodes" not in page
        assert "lost " not in page and "lost node" not in page
        assert "#b22222" not in page
