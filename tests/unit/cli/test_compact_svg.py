"""The report's figures compacted: still SVG, the same outlines and text, far fewer bytes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from cli.compact_svg import compact_svg

SVG = """<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="720pt" height="100pt"
 viewBox="0 0 720 100" xmlns="http://www.w3.org/2000/svg" version="1.1">
 <metadata><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/></metadata>
 <defs><style type="text/css">*{stroke-linejoin: round}</style></defs>
 <g id="figure_1">
  <g id="bars">
   <path d="M 10.04 20.01
L 10.04 60.02
L 15.96 60.02
L 15.96 20.01
z
" clip-path="url(#box)" style="fill: #1f77b4"/>
   <path d="M 20.0 20.01
L 20.0 60.02
L 20.02 60.02
L 20.02 20.01
z
" clip-path="url(#box)" style="fill: #1f77b4"/>
   <path d="M 30.0 20.0
L 30.0 60.0
L 36.0 60.0
L 36.0 20.0
z
" clip-path="url(#box)" style="fill: #1f77b4"/>
  </g>
  <g id="text_1"><text style="font-size: 9px; font-family: 'DejaVu Sans', sans-serif" x="27.453443"
   y="72.29" transform="rotate(-0 27.453443 72.29)">0.125</text></g>
 </g>
 <defs><clipPath id="box"><rect x="5" y="5" width="700" height="90"/></clipPath></defs>
</svg>"""


def test_bars_become_one_rounded_outline_and_the_text_stays_as_written() -> None:
    out = compact_svg(SVG, "bars")
    ET.fromstring(out)  # still well-formed, so a standalone .svg file too
    (d,) = re.findall(r'<path d="([^"]*)"', out)
    # The bar narrower than a tenth of a point goes; the others: rounded, relative, no clip.
    assert d == "M10 20V60h6V20zm20 0V60h6V20z"
    assert ">0.125</text>" in out and 'x="27.5"' in out
    assert "metadata" not in out and "rotate" not in out and "clipPath" not in out
    assert "DejaVu" not in out
    assert len(out) < len(SVG) / 2


def test_a_style_used_three_times_is_a_class_named_after_the_figure() -> None:
    text = SVG[SVG.index('<g id="text_1">'):SVG.index("</text></g>") + len("</text></g>")]
    red = SVG.replace('L 36.0 20.0\nz\n" clip-path="url(#box)" style="fill: #1f77b4"',
                      'L 36.0 20.0\nz\n" clip-path="url(#box)" style="fill: #ff0000"')
    out = compact_svg(red.replace(text, text * 3), "over-time")
    ET.fromstring(out)
    (name,) = set(re.findall(r'class="([^"]+)"', out))
    assert name.startswith("ot") and out.count(f'class="{name}"') == 3
    assert f".{name}{{font-size: 9px" in out
    # Two bars differ in fill: kept apart, in the order drawn.
    assert out.index("#1f77b4") < out.index("#ff0000")


def test_a_path_reaching_outside_its_clip_keeps_it() -> None:
    out = compact_svg(SVG.replace("L 15.96 60.02", "L 715.96 60.02"), "bars")
    assert 'clip-path="url(#box)"' in out and "<clipPath" in out
