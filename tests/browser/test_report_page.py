"""The report pages as a person sees them: opened in a real headless Chromium.

Each page is loaded from disk with the network cut off by the page's own
policy, then (1) its DOM after loading must hold the figures, (2) the
browser's console must have said nothing (a blocked fetch, a broken SVG or a
script error all show there), and (3) a screenshot must show the figures'
colours, so they were really drawn and not just present in the markup.

Chromium is Debian's (``make browser`` installs it where apt-get can); where
none is found the tests skip and say so. Screenshots land in
``$OPENRL_SCREENSHOTS`` when that is set, to be looked at.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli.compare import run_variants, variants_of
from cli.figures import COLOURS, SWITCHING, WORKERS
from cli.replay import replay
from cli.report import Variant, comparison_page, write_page, write_report
from cli.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DAY = ROOT / "examples" / "day.yaml"
SHARING = ROOT / "examples" / "sharing.yaml"
# The flags a root user needs in a container, and the ones that keep Chromium
# from reaching for the network on its own.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-headless-shell",
                      "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    pytest.skip("no Chromium on this machine (make browser installs Debian's chromium): "
                "the report pages were not opened in a browser")


def browse(page: Path, tmp_path: Path, *action: str) -> tuple[str, list[str]]:
    """Run Chromium once on ``page``; return stdout and every console message it logged."""
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *action, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


def screenshot(page: Path, tmp_path: Path, height: int) -> Path:
    keep = os.environ.get("OPENRL_SCREENSHOTS")
    out = Path(keep) if keep else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{page.stem}.png"
    _, console = browse(page, tmp_path, f"--screenshot={png}", f"--window-size=1200,{height}")
    assert console == [], console
    assert png.exists() and png.stat().st_size > 10_000
    return png


def coloured_pixels(png: Path, colour: str) -> int:
    """Pixels within a few levels of ``colour`` (the fills are drawn slightly transparent)."""
    from PIL import Image  # installed with matplotlib

    target = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    image = Image.open(png).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height) or []
    return sum(count for count, pixel in colours
               if all(abs(a - b) <= 40 for a, b in zip(pixel, target, strict=True)))


def opened_report(example: Path, tmp_path: Path) -> tuple[Path, str]:
    """An example's report, written and loaded: the page and its DOM (a quiet console)."""
    scenario = load_scenario(example.read_text())
    page = tmp_path / f"{example.stem}.html"
    write_report(page, f"examples/{example.name}", scenario, replay(scenario))
    dom, console = browse(page, tmp_path, "--dump-dom")
    assert console == [], f"the page wrote to the browser's console: {console}"
    return page, dom


def assert_drawn(dom: str, *figures: str) -> None:
    """Each figure is in the page as an SVG of a readable size."""
    for figure in figures:
        match = re.search(
            rf'<figure id="figure-{figure}"[^>]*>\s*<svg[^>]*viewBox="0 0 (\S+) (\S+)"', dom)
        assert match, f"figure-{figure} is missing from the rendered page"
        assert float(match.group(1)) > 300 and float(match.group(2)) > 100


def test_the_scenario_report_renders_with_its_figures(tmp_path: Path) -> None:
    page, dom = opened_report(DAY, tmp_path)
    assert_drawn(dom, "over-time", "waits")
    assert "Shared claims" in dom and "Expectations" in dom and "14 held, 0 failed" in dom
    png = screenshot(page, tmp_path, height=2400)
    for role in ("trainer", "sampler"):
        assert coloured_pixels(png, COLOURS[role]) > 20_000, f"no {role} area in {png}"


def test_the_comparison_report_renders_side_by_side(tmp_path: Path) -> None:
    scenario = load_scenario(DAY.read_text())
    variants = variants_of(scenario, "maxWorkersPerClaim", ["1", "2", "4"], "*")
    results = run_variants(variants, keep_timelines=True)
    page = tmp_path / "compare.html"
    write_page(page, comparison_page("examples/day.yaml", "maxWorkersPerClaim", [
        Variant(r.label, r.timeline, r.summary) for r in results if r.timeline is not None]))
    dom, console = browse(page, tmp_path, "--dump-dom")
    assert console == [], f"the page wrote to the browser's console: {console}"
    assert 'id="figure-side-by-side"' in dom and dom.count("<svg") == 1
    assert all(f"maxWorkersPerClaim={n}" in dom for n in (1, 2, 4))
    png = screenshot(page, tmp_path, height=1100)
    assert coloured_pixels(png, COLOURS["sampler"]) > 20_000


def test_the_turns_show_as_residency_and_switch_overhead(tmp_path: Path) -> None:
    page, dom = opened_report(SHARING, tmp_path)
    assert_drawn(dom, "residency", "switch-overhead")
    assert "<h2>Turns</h2>" in dom and "Longest waits for a turn" in dom
    # The four shared claims are each drawn, busiest first, with their workers named.
    residency = dom[dom.index('id="figure-residency"'):dom.index('id="figure-switch-overhead"')]
    assert all(f"claim-{name} (" in residency for name in ("qwen-1", "qwen-2", "llama-1",
                                                          "llama-2"))
    assert "eval-1" in residency and "switching" in residency
    png = screenshot(page, tmp_path, height=3200)
    # Workers' turns in their own colours, and the overhead's grey bars.
    assert sum(coloured_pixels(png, colour) > 2_000 for colour in WORKERS[:4]) == 4
    assert coloured_pixels(png, SWITCHING) > 20_000
