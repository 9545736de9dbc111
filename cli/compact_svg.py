"""matplotlib's SVG made small enough to embed many of in one page, looking the same.

matplotlib writes every bar as its own element, each coordinate to six
decimals over a line of its own, and a dozen font names on every label. The
report embeds several figures, so that was most of its weight. Rules:

* Coordinates are rounded to a tenth of a point (a figure is 720 points
  wide, so a tenth is finer than a pixel at any zoom a page is read at); the
  numbers in text stay as written. A path's steps are written relative to
  the one before where that is shorter.
* A run of sibling paths that differ in nothing but their outline becomes one
  path of several outlines: the same fill, the same clip, so the same
  picture (matplotlib draws every rectangle the same way round, so outlines
  that touch add up rather than cut holes).
* In an outline, a line along an axis is written as such (``H``, ``V``); a
  filled outline with no area (a bar narrower than the rounding) goes.
* Group ids nothing refers to, groups with no attributes left, whitespace
  between elements, the metadata block and no-op rotations go; a style
  written three times or more becomes a class, its name prefixed by the
  figure's (classes are the page's, not the figure's).
"""

from __future__ import annotations

import re
import zlib

__all__ = ["compact_svg"]

_GEOMETRY = frozenset({"d", "x", "y", "x1", "y1", "x2", "y2", "width", "height", "transform",
                       "points"})
_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_PATH = re.compile(r'<path d="([^"]*)"((?: (?!d=)[\w:-]+="[^"]*")*)\s*/>')
_FONTS = re.compile(r"font-family: [^;\"]*")
_NO_ROTATION = re.compile(r' transform="rotate\(-?0 [^)]*\)"')


def compact_svg(svg: str, name: str) -> str:
    """``svg`` compacted; ``name``: the figure's, unique in the page."""
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = _NO_ROTATION.sub("", svg)
    svg = _FONTS.sub("font-family: sans-serif", svg)
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r'(<g) id="[^"]*"', r"\1", svg)
    svg = _merge_paths(_unwrap_groups(_unclip(svg)))
    svg = _ATTRIBUTE.sub(_round_attribute, svg)
    svg = re.sub(r'<path d=""[^>]*/>', "", svg).replace("<defs></defs>", "")
    svg = svg.replace('<style type="text/css">', "<style>").replace(' version="1.1"', "", 1)
    return _classes(svg, name)


def _number(value: float) -> str:
    return _tenths(round(value * 10))


def _tenths(value: int) -> str:
    """A count of tenths as SVG writes a number shortest: 12 -> 1.2, -3 -> -.3, 40 -> 4."""
    sign, value = ("-", -value) if value < 0 else ("", value)
    whole, tenth = divmod(value, 10)
    if not tenth:
        return f"{sign}{whole}"
    return f"{sign}{whole or ''}.{tenth}"


def _round_attribute(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if name not in _GEOMETRY:
        return match.group(0)
    if name == "d":
        return f'd="{_outline(value)}"'
    return f'{name}="{_NUMBER.sub(lambda n: _number(float(n.group(0))), value)}"'


def _outline(d: str) -> str:
    """``d`` rounded, each step written absolute or relative, whichever is shorter, lines
    along an axis as such; closed outlines with no area dropped. A path with curves
    (anything but moves, lines and closes) is only rounded."""
    if re.search(r"[A-KN-Ya-km-y]", d):
        return _NUMBER.sub(lambda n: _number(float(n.group(0))), " ".join(d.split()))
    out: list[str] = []
    x = y = 0
    for subpath in re.findall(r"M[^M]*", d):
        points = [round(float(n) * 10) for n in _NUMBER.findall(subpath)]
        xs, ys = points[::2], points[1::2]
        closed = subpath.rstrip().endswith(("z", "Z"))
        if not xs or (closed and (len(set(xs)) < 2 or len(set(ys)) < 2)):
            continue  # nothing to fill
        start = f"M{_pair(xs[0], ys[0])}"
        out.append(_shorter(start, f"m{_pair(xs[0] - x, ys[0] - y)}") if out else start)
        x, y = xs[0], ys[0]
        run: tuple[str, bool, int, int] | None = None  # the last step along an axis: from
        for nx, ny in zip(xs[1:], ys[1:], strict=True):
            if (ny == y) != (nx == x):
                axis = "H" if ny == y else "V"
                forward = nx > x if axis == "H" else ny > y
                if run is not None and run[:2] == (axis, forward):
                    out.pop()  # the same way along the same axis: one step
                    x, y = run[2], run[3]
                else:
                    run = (axis, forward, x, y)
                if axis == "H":
                    out.append(_shorter(f"H{_tenths(nx)}", f"h{_tenths(nx - x)}"))
                else:
                    out.append(_shorter(f"V{_tenths(ny)}", f"v{_tenths(ny - y)}"))
            elif nx != x or ny != y:
                run = None
                out.append(_shorter(f"L{_pair(nx, ny)}", f"l{_pair(nx - x, ny - y)}"))
            x, y = nx, ny
        if closed:
            out.append("z")
            x, y = xs[0], ys[0]
    return "".join(out)


def _pair(x: int, y: int) -> str:
    second = _tenths(y)
    return f"{_tenths(x)}{'' if second.startswith('-') else ' '}{second}"


def _shorter(absolute: str, relative: str) -> str:
    return relative if len(relative) < len(absolute) else absolute


def _unclip(svg: str) -> str:
    """No clip on a path of straight lines that lies inside its clip rectangle (a grid line
    inside its axes): the clip cuts nothing off."""
    boxes = {}
    for name, x, y, width, height in re.findall(
            r'<clipPath id="([^"]+)"><rect x="([^"]+)" y="([^"]+)" width="([^"]+)" '
            r'height="([^"]+)"/></clipPath>', svg):
        left, top = float(x), float(y)
        boxes[name] = (left, top, left + float(width), top + float(height))

    def inside(match: re.Match[str]) -> str:
        d, name = match.group(1), match.group(2)
        box = boxes.get(name)
        if box is None or re.search(r"[A-KN-Ya-y]", d):
            return match.group(0)
        numbers = [float(n) for n in _NUMBER.findall(d)]
        xs, ys = numbers[::2], numbers[1::2]
        slack = 0.01
        if xs and min(xs) >= box[0] - slack and max(xs) <= box[2] + slack and \
                min(ys) >= box[1] - slack and max(ys) <= box[3] + slack:
            return f'<path d="{d}"'
        return match.group(0)

    svg = re.sub(r'<path d="([^"]*)" clip-path="url\(#([^)]+)\)"', inside, svg)
    return re.sub(r'<clipPath id="([^"]+)">.*?</clipPath>',
                  lambda m: m.group(0) if f"url(#{m.group(1)})" in svg else "", svg)


def _unwrap_groups(svg: str) -> str:
    """``<g>`` with no attributes dropped, with its matching ``</g>``."""
    out: list[str] = []
    bare: list[bool] = []
    position = 0
    for match in re.finditer(r"<g\b[^>]*>|</g>", svg):
        out.append(svg[position:match.start()])
        tag = match.group(0)
        if tag == "</g>":
            if not bare.pop():
                out.append(tag)
        else:
            bare.append(tag == "<g>")
            if tag != "<g>":
                out.append(tag)
        position = match.end()
    out.append(svg[position:])
    return "".join(out)


def _classes(svg: str, name: str) -> str:
    counts: dict[str, int] = {}
    for style in re.findall(r' style="([^"]*)"', svg):
        counts[style] = counts.get(style, 0) + 1
    # The style's own checksum in the name: the same figure twice in a page agrees.
    prefix = "".join(word[0] for word in name.split("-"))
    names = {style: f"{prefix}{zlib.crc32(style.encode()):08x}"
             for style, count in counts.items() if count >= 3}
    if not names:
        return svg
    svg = re.sub(r' style="([^"]*)"',
                 lambda m: f' class="{names[m.group(1)]}"' if m.group(1) in names
                 else m.group(0), svg)
    rules = "".join(f".{cls}{{{style}}}" for style, cls in names.items())
    return svg.replace("</style>", rules + "</style>", 1) if "</style>" in svg else \
        svg.replace(">", f"><style>{rules}</style>", 1)


def _merge_paths(svg: str) -> str:
    """Runs of adjacent ``<path d=.../>`` with the same other attributes, as one path."""
    pieces: list[str] = []
    run_rest: str | None = None
    run: list[str] = []
    position = 0

    def flush() -> None:
        nonlocal run_rest
        if run_rest is not None:
            pieces.append(f'<path d="{" ".join(run)}"{run_rest}/>')
        run.clear()
        run_rest = None

    for match in _PATH.finditer(svg):
        between = svg[position:match.start()]
        rest = match.group(2)
        if between or rest != run_rest or " id=" in rest:
            flush()
            pieces.append(between)
        run.append(match.group(1))
        run_rest = rest
        position = match.end()
    flush()
    pieces.append(svg[position:])
    return "".join(pieces)
