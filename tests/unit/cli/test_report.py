"""``simulate --report``: one self-contained page, and matplotlib only when it is asked for."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import astuple
from pathlib import Path

import pytest

from bench.generate import generate
from cli.replay import replay
from cli.report import write_report
from cli.scenario import load_scenario
from tests.unit.cli.conftest import Run, devbox

ROOT = Path(__file__).resolve().parents[3]
STORY = [
    "{at: 0, arrive: {name: a, role: trainer, memory: 20Gi, owner: qwen}}",
    "{at: 5m, arrive: {name: b, role: sampler, memory: 20Gi, owner: qwen}}",
    "{at: 10m, arrive: {name: c, role: sampler, memory: 16Gi, owner: llama}}",  # shares
    "{at: 15m, arrive: {name: fft, role: trainer, memory: 90Gi, owner: mixtral}}",  # never
    "{at: 1h, leave: a}",
    "expect: {worker: c, phase: Placed}",
    "expect: {worker: fft, phase: Placed}",  # fails: a verdict the page must show
]


def test_the_page_holds_the_figures_tables_and_verdicts(run: Run, tmp_path: Path) -> None:
    page_path = tmp_path / "report.html"
    result = run(devbox(*STORY), "--report", str(page_path))
    assert result.exit_code == 1  # one expectation failed, as in plain simulate
    assert result.stdout == ""  # the page is the output; the note goes to stderr
    assert f"report: {page_path}" in result.stderr
    page = page_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<svg") == 2
    assert 'id="figure-over-time"' in page and 'id="figure-waits"' in page
    for text in ("devices in use", "seats taken", "pending workers"):
        assert text in page
    # Waits by role and by owner; the workers that never got a seat are counted.
    assert "<td>mixtral</td>" in page and "<td>qwen</td>" in page
    assert "45m" in page  # fft waited from 15m to the last event at 1h
    # The one shared claim, its workers, and one switch: (20 + 16)Gi over 25GB/s.
    assert "claim-a" in page and "a (20Gi), c (16Gi)" in page
    assert f"{36 * 2**30 / 25e9:.3g}s" in page
    assert "1 held, 1 failed" in page and "FAILED: events[6] expect fft" in page
    # Nothing is fetched: no reference leaves the page.
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page)


def test_an_svg_path_gets_the_over_time_figure_alone(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "day.svg"
    assert run(devbox(*STORY[:5]), "--report", str(path)).exit_code == 0
    text = path.read_text()
    assert text.startswith("<svg") and text.rstrip().endswith("</svg>")
    assert "pending workers" in text


def test_json_still_goes_to_stdout_next_to_a_report(run: Run, tmp_path: Path) -> None:
    result = run(devbox(*STORY[:5]), "-o", "json", "--report", str(tmp_path / "r.html"))
    assert result.exit_code == 0
    assert json.loads(result.stdout)["steps"][4]["at"] == 3600


def test_an_unwritable_report_is_a_clear_error(run: Run, tmp_path: Path) -> None:
    result = run(devbox(*STORY[:2]), "--report", str(tmp_path / "missing" / "r.html"))
    assert result.exit_code == 2
    assert "cannot write the report" in result.stderr
    assert "Traceback" not in result.output


def test_without_matplotlib_the_report_says_how_to_get_it(
        run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("cli.report", "cli.figures", "matplotlib"):
        monkeypatch.setitem(sys.modules, module, None)  # an import of it now fails
    result = run(devbox(*STORY[:2]), "--report", str(tmp_path / "r.html"))
    assert result.exit_code == 2
    assert "pip install 'openrl-place[report]'" in result.stderr


def test_plain_simulate_never_imports_matplotlib(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(devbox(*STORY[:5]))
    code = (
        "import sys\n"
        "import cli.main\n"
        "assert 'matplotlib' not in sys.modules, 'importing cli.main imported matplotlib'\n"
        "for output in ('table', 'json'):\n"
        "    try:\n"
        f"        cli.main.main(['simulate', '-o', output, {str(scenario)!r}])\n"
        "    except SystemExit as done:\n"  # click ends with one: it must say success
        "        assert done.code in (0, None), f'simulate -o {output} exited {done.code}'\n"
        "assert 'matplotlib' not in sys.modules, 'simulate imported matplotlib'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_page_stays_small_however_long_the_scenario(tmp_path: Path) -> None:
    # 20,000 events on 200 nodes with times: every event a minute apart.
    document = generate(200, 20_000, seed=3)
    for minute, event in enumerate(document["events"]):
        event["at"] = minute * 60
    scenario = load_scenario(json.dumps(document))
    report = replay(scenario)
    size = write_report(tmp_path / "r.html", "long", scenario, report)
    assert size < 5 * 2**20
    page = (tmp_path / "r.html").read_text()
    assert "more owners not listed" not in page  # 40 owners: all listed
    assert "more shared claims not listed" in page


def test_the_lead_counts_pod_slots_where_a_scenario_sets_them(run: Run, tmp_path: Path) -> None:
    page_path = tmp_path / "report.html"
    text = ("nodes:\n"
            "  - {name: a, devices: 2, deviceMemory: 24Gi, pods: 3}\n"
            "  - {name: b, devices: 2, deviceMemory: 24Gi}\n"
            "events:\n  - arrive: {name: w, role: trainer, memory: 10Gi}\n")
    assert run(text, "--report", str(page_path)).exit_code == 0
    assert "2 nodes, 4 devices, 3 pod slots for workers on 1 of them, " in page_path.read_text()


def test_the_drawn_claims_replayed_alone_match_every_claim_replayed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the drawn claims are played again for their intervals: each claim's turns are
    its own, so the page must read what replaying every claim would have given."""
    from cli import report as page
    from cli.turns import play_turns

    monkeypatch.setattr(page, "DRAWN", 2)  # fewer than the example's four shared claims
    scenario = load_scenario((ROOT / "examples" / "sharing.yaml").read_text(encoding="utf-8"))
    replayed = replay(scenario)
    assert replayed.turns is not None and len(replayed.turns.claims) > page.DRAWN
    busiest = frozenset(c.claim for c in replayed.turns.claims[:page.DRAWN])
    everything = play_turns(replayed.log, keep=busiest)
    drawn = page._drawn_turns(replayed)
    # A cycle one claim found may serve another claim, but on the player's exact clock it
    # adds what playing it would: which claims were played changes nothing, to the bit.
    assert astuple(drawn) == astuple(everything)
    assert [c.intervals is not None for c in drawn.claims] == [True, True, False, False]


def test_the_page_of_the_sharing_example_weighs_under_three_times_its_json(
        tmp_path: Path) -> None:
    # Four figures, the tables capped: the page carries pictures of the data, not the data.
    example = str(ROOT / "examples" / "sharing.yaml")
    page_path = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "simulate",
                           "-o", "json", "--report", str(page_path), example],
                          capture_output=True, check=True, cwd=ROOT)
    page, document = page_path.stat().st_size, len(done.stdout)
    assert page < 3 * document, (page, document)
    assert page < 5 * 10**6

