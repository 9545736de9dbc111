"""``simulate --report``: a lost node gets a line on the figure and a row in a table."""

from __future__ import annotations

from pathlib import Path

from tests.unit.cli.conftest import Run
from tests.unit.cli.test_node_events import TWO_NODES


def test_the_page_lists_each_lost_node_with_its_moved_workers(run: Run, tmp_path: Path) -> None:
    page_path = tmp_path / "report.html"
    result = run(TWO_NODES, "--report", str(page_path))
    assert result.exit_code == 0, result.output
    page = page_path.read_text()
    assert "<h2>Lost nodes</h2>" in page
    # The sixth event (index 5, no times given) lost b: w3 found room on a, w4 waits.
    assert ("<tr><td>5 events</td><td>b</td><td class=wrap>w3</td>"
            "<td class=wrap>w4</td></tr>") in page
    # And a labelled line on the over-time figure.
    over_time = page.split('id="figure-over-time"')[1].split("</svg>")[0]
    assert "lost b" in over_time
