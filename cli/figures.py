"""The report's pictures: matplotlib figures rendered to SVG text.

Imported only when a report is asked for: matplotlib takes longer to import
than ``simulate`` takes to replay a small scenario. No pyplot (no GUI
backend, no global figure registry): each figure is built, rendered and
dropped. The SVG keeps text as text (smaller, and selectable in the page) and
is reproducible: fixed ids, no date stamp.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from cli.compact_svg import compact_svg
from cli.timeline import ROLES, USES, Sampled, Timeline, Wait, downsample

__all__ = ["nodes", "over_time", "residency", "side_by_side", "switch_overhead", "waits"]

COLOURS = {"trainer": "#4c72b0", "sampler": "#dd8452", "both": "#8172b3"}
LABELS = {"trainer": "trainers", "sampler": "samplers", "both": "trainers and samplers"}
CAPACITY = "devices in the fleet"
LOW = "lowest within an interval"
POINTS = 600  # intervals on the time axis: finer than a page is wide
LOST = "#b22222"  # a lost node's mark
LOST_STEPS = 4  # lines of lost nodes' labels at most
LOST_CHAR = 5.0  # points a character of such a label takes, or a little more
LOST_THIN = 20  # moments of loss past which their lines are drawn thinner

matplotlib.rcParams.update({
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    # The grid marks the values already; tick marks beside it were a third of a figure's text.
    "xtick.bottom": False,
    "ytick.left": False,
})


class _Axis:
    """Seconds shown in the unit that suits the scenario's length; events without a clock."""

    def __init__(self, timed: bool, end: float) -> None:
        if not timed:
            self.scale, self.label = 1.0, "event"
        elif end >= 3 * 3600:
            self.scale, self.label = 3600.0, "hours since the start"
        elif end >= 3 * 60:
            self.scale, self.label = 60.0, "minutes since the start"
        else:
            self.scale, self.label = 1.0, "seconds since the start"

    def __call__(self, times: Sequence[float]) -> list[float]:
        return [t / self.scale for t in times]


def over_time(timeline: Timeline, title: str = "",
              lost: Sequence[tuple[float, str]] = ()) -> str:
    """Devices in use, seats taken and pending workers, stacked by role, on one time axis.

    ``lost``: (when, node) for each node lost, marked as :func:`_mark_lost` says."""
    figure = Figure(figsize=(10, 7.2), layout="constrained")
    axes = figure.subplots(3, 1, sharex=True)
    axis = _Axis(timeline.timed, timeline.end)
    _panels(axes, timeline, axis)
    _mark_lost(axes, lost, axis)
    _finish(figure)
    if title:
        axes[0].set_title(title, fontsize=10)
    return _svg(figure, "over-time")


def side_by_side(timelines: Sequence[tuple[str, Timeline]]) -> str:
    """One column of :func:`over_time`'s panels per variant, on shared scales."""
    columns = len(timelines)
    figure = Figure(figsize=(max(6.0, 3.6 * columns), 7.2), layout="constrained")
    grid = figure.subplots(3, columns, sharex=True, sharey="row", squeeze=False)
    end = max(timeline.end for _, timeline in timelines)
    timed = all(timeline.timed for _, timeline in timelines)
    for column, (name, timeline) in enumerate(timelines):
        axes = [grid[row][column] for row in range(3)]
        # A narrower column needs fewer intervals to look just as fine.
        _panels(axes, timeline, _Axis(timed, end), max(150, POINTS // columns))
        axes[0].set_title(name, fontsize=10)
        if column:
            for ax in axes:
                ax.set_ylabel("")
    _finish(figure)
    return _svg(figure, "side-by-side")


def waits(all_waits: Sequence[Wait], timed: bool) -> str:
    """The share of arrivals that waited at most so long, one line per role."""
    figure = Figure(figsize=(10, 2.8), layout="constrained")
    ax = figure.subplots()
    longest = max((wait.waited for wait in all_waits), default=0.0)
    axis = _Axis(timed, longest)
    for role in ROLES:
        values = sorted(wait.waited for wait in all_waits if wait.role == role)
        if not values:
            continue
        # At most POINTS quantiles: the curve's shape, whatever the number of workers.
        step = max(1, len(values) // POINTS)
        picked = [*values[::step], values[-1]]
        shares = [*(min(1.0, (i * step + 1) / len(values)) for i in range(len(picked) - 1)), 1.0]
        ax.step(axis(picked), shares, where="post", color=COLOURS[role],
                label=f"{LABELS[role]} ({len(values):,})")
    # Most waits are short and a few are very long: a log scale shows both (zero included).
    ax.set_xscale("symlog", linthresh=1)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel(("waited, " + axis.label.split(" ")[0]) if timed else "waited, events")
    ax.set_ylabel("share of arrivals")
    ax.set_ylim(0, 1.02)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(loc="lower right")
    return _svg(figure, "waits")


def nodes(lines: Sequence[tuple[str, Sequence[tuple[float, int]]]], timed: bool,
          end: float, lost: Sequence[tuple[float, str]] = ()) -> str:
    """Nodes in the fleet over time, a step line each (a node group's, or a variant's);
    ``lost`` as on :func:`over_time`."""
    figure = Figure(figsize=(10, 2.6), layout="constrained")
    ax = figure.subplots()
    axis = _Axis(timed, end)
    for label, changes in lines:
        times = [at for at, _ in changes]
        counts = [count for _, count in changes]
        ax.step(axis([*times, max(end, times[-1])]), [*counts, counts[-1]], where="post",
                label=label)
    ax.set_xlabel(axis.label)
    ax.set_ylabel("nodes")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper right")
    _mark_lost([ax], lost, axis)
    return _svg(figure, "nodes")


# ------------------------------------------------------------------ internal


def _finish(figure: Figure) -> None:
    """Counts start at zero; one legend above every panel names each thing drawn once."""
    named: dict[str, Artist] = {}
    for ax in figure.axes:
        # Only now: on shared axes, an earlier limit would cut off a later panel's data.
        ax.set_ylim(bottom=0)
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            named.setdefault(label, handle)
    order = [*(LABELS[key] for key in USES), CAPACITY, LOW]
    labels = sorted(named, key=order.index)
    if not labels:
        return
    figure.legend([named[label] for label in labels], labels, loc="outside upper center",
                  ncols=len(labels), fontsize=8)


def _mark_lost(axes: Sequence[Axes], lost: Sequence[tuple[float, str]], axis: _Axis) -> None:
    """Each lost node: a dotted line at its time down every panel, labelled at the top of the
    first ("lost b"). Nodes lost at one moment share a line and a label. A label that would
    cover an earlier one steps down a line, at most ``LOST_STEPS - 1`` times; past that its
    line stays unlabelled (the page's Lost nodes table names every one). A label near the
    right edge ends at its line instead of starting there. Past ``LOST_THIN`` moments the
    lines are drawn thinner, or together they would hide what the panels show."""
    if not lost:
        return
    at: dict[float, list[str]] = {}
    for when, node in lost:
        at.setdefault(axis([when])[0], []).append(node)
    left, right = axes[0].get_xlim()
    width = (right - left) or 1.0
    # A label's width as a share of the axis, from its length: near enough to keep apart.
    figure = axes[0].get_figure(root=True)
    assert figure is not None  # the axes are a figure's
    per_char = LOST_CHAR / (0.9 * 72 * figure.get_figwidth())
    line = 1.2 if len(at) <= LOST_THIN else 0.6
    taken = [-math.inf] * LOST_STEPS  # where each line's last label ends, a share of the axis
    for x, names in sorted(at.items()):
        for ax in axes:
            ax.axvline(x, color=LOST, linestyle=":", linewidth=line)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        text = f"lost {shown}"
        share, size = (x - left) / width, (len(text) + 1) * per_char
        leftwards = share > 0.85
        start = share - size if leftwards else share
        step = next((i for i, end in enumerate(taken) if end < start), None)
        if step is None:
            continue
        taken[step] = start + size
        axes[0].annotate(text, (x, 1), xycoords=("data", "axes fraction"),
                         xytext=(0, -2 - 10 * step), textcoords="offset points", fontsize=8,
                         color=LOST, va="top", ha="right" if leftwards else "left",
                         bbox={"boxstyle": "square,pad=0.15", "facecolor": "white",
                               "edgecolor": "none", "alpha": 0.85})


def _panels(axes: Sequence[Axes], timeline: Timeline, axis: _Axis, points: int = POINTS) -> None:
    devices = downsample(timeline.times, timeline.devices, timeline.capacity, points)
    seats = downsample(timeline.times, timeline.seats, timeline.capacity, points)
    pending = downsample(timeline.times, timeline.pending, timeline.capacity, points)
    _stacked(axes[0], devices, USES, axis)
    axes[0].step(axis(devices.times), devices.capacity, where="post", color="#333333",
                 linestyle="--", linewidth=1, label=CAPACITY)
    axes[0].set_ylabel("devices in use")
    _stacked(axes[1], seats, ROLES, axis)
    axes[1].set_ylabel("seats taken")
    _stacked(axes[2], pending, ROLES, axis)
    axes[2].set_ylabel("pending workers")
    axes[2].set_xlabel(axis.label)
    for ax in axes:
        ax.margins(x=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _stacked(ax: Axes, sampled: Sampled, keys: Sequence[str], axis: _Axis) -> None:
    sampled = _compact(sampled)
    x = axis(sampled.times)
    base = [0] * len(x)
    for key in keys:
        top = [b + v for b, v in zip(base, sampled.stacks[key], strict=True)]
        if any(sampled.stacks[key]):
            ax.fill_between(x, base, top, step="post", color=COLOURS[key], alpha=0.85,
                            linewidth=0, label=LABELS[key])
        base = top
    if sampled.low != base:  # intervals where something came and went: their lowest point
        ax.step(x, sampled.low, where="post", color="#222222", linewidth=0.5, alpha=0.6,
                label=LOW)


def _compact(sampled: Sampled) -> Sampled:
    """Drop each point that repeats the one before: a step drawn from it would be flat anyway.

    Most events leave a given panel unchanged (an expectation, a worker joining
    a claim whose devices already count), and each point kept costs the SVG
    four vertices per stack.
    """
    columns = [*sampled.stacks.values(), sampled.low, sampled.capacity]
    last = len(sampled.times) - 1
    keep = [i for i in range(last + 1)
            if i in (0, last) or any(column[i] != column[i - 1] for column in columns)]
    if len(keep) == len(sampled.times):
        return sampled
    return Sampled([sampled.times[i] for i in keep],
                   {key: [values[i] for i in keep] for key, values in sampled.stacks.items()},
                   [sampled.low[i] for i in keep], [sampled.capacity[i] for i in keep])


def _svg(figure: Figure, name: str) -> str:
    buffer = io.StringIO()
    # A salt per figure keeps element ids apart when several SVGs share one page.
    with matplotlib.rc_context({"svg.hashsalt": f"openrl-place-{name}"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return compact_svg(text[text.index("<svg"):], name)


# -------------------------------------------------------------------- turns

SWITCHING = "#9a9a9a"
# Workers' colours: matplotlib's tab20 without its greys (grey means switching here), the
# strong hues first so that workers a row shows side by side stay far apart.
WORKERS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
           "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")
BARS = 600  # bars per row at most: finer than a row is wide

Interval = tuple[float, float, str]  # (start, end, worker); worker "" while switching


def residency(rows: Sequence[tuple[str, Sequence[Interval]]], end: float, timed: bool,
              lost: Sequence[tuple[float, str]] = (),
              stops: Sequence[float | None] = ()) -> str:
    """One row per claim: each worker's resident intervals in its colour, switching in grey.

    ``lost`` as on :func:`over_time`; ``stops``: for each row, when its claim's node was lost
    (None: never), where a black bar closes the row."""
    figure = Figure(figsize=(10, 0.9 + 0.55 * max(1, len(rows))), layout="constrained")
    ax = figure.subplots()
    axis = _Axis(timed, end)
    colour: dict[str, str] = {}
    for row, (_, intervals) in enumerate(rows):
        for worker, spans in _bars(intervals, end).items():
            if worker:
                colour.setdefault(worker, WORKERS[len(colour) % len(WORKERS)])
            else:  # a switch narrower than a slot would be a hairline: left out, as past BARS
                spans = [(a, b) for a, b in spans if b - a >= end / BARS]
            ax.broken_barh([(start / axis.scale, (stop - start) / axis.scale)
                            for start, stop in spans], (row - 0.38, 0.76),
                           color=colour[worker] if worker else SWITCHING, linewidth=0)
    for row, stop in enumerate(stops):
        if stop is not None:
            # Black, not the mark's red: a worker's colour may be a red much like it.
            ax.plot([stop / axis.scale] * 2, [row - 0.45, row + 0.45], color="#111111",
                    linewidth=2.5, solid_capstyle="butt")
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the busiest on top
    ax.set_xlim(0, end / axis.scale if end > 0 else 1)
    _mark_lost([ax], lost, axis)
    ax.set_xlabel(axis.label)
    ax.grid(axis="y", visible=False)
    # A legend of workers is only readable (and its colours only unique) while they are
    # few; past that the colours still tell turns apart within a row.
    if len(colour) <= len(WORKERS):
        handles = [Patch(color=c, label=w) for w, c in colour.items()]
        handles.append(Patch(color=SWITCHING, label="switching"))
        figure.legend(handles=handles, loc="outside right upper", fontsize=8)
    return _svg(figure, "residency")


def switch_overhead(claims: Sequence[tuple[str, float]]) -> str:
    """The share of each claim's time spent switching, one horizontal bar per claim."""
    figure = Figure(figsize=(10, 0.9 + 0.28 * max(1, len(claims))), layout="constrained")
    ax = figure.subplots()
    ax.barh(range(len(claims)), [100 * share for _, share in claims], color=SWITCHING,
            height=0.7)
    ax.set_yticks(range(len(claims)), [label for label, _ in claims])
    ax.set_ylim(len(claims) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}%"))
    ax.set_xlabel("share of the claim's time spent parking or restoring workers")
    ax.grid(axis="y", visible=False)
    return _svg(figure, "switch-overhead")


def _bars(intervals: Sequence[Interval], end: float) -> dict[str, list[tuple[float, float]]]:
    """Each occupant's spans; past ``BARS`` intervals, ``BARS`` slots each won by the occupant
    holding most of it, so a day of short turns costs the page what an hour does."""
    if len(intervals) <= BARS or end <= 0:
        out: dict[str, list[tuple[float, float]]] = {}
        for start, stop, worker in intervals:
            spans = out.setdefault(worker, [])
            if spans and spans[-1][1] == start:  # a park then a restore: one grey bar
                spans[-1] = (spans[-1][0], stop)
            else:
                spans.append((start, stop))
        return out
    width = end / BARS
    held: list[dict[str, float]] = [{} for _ in range(BARS)]
    for start, stop, worker in intervals:
        first, last = int(start / width), min(BARS - 1, int(stop / width))
        for slot in range(first, last + 1):
            covered = min(stop, (slot + 1) * width) - max(start, slot * width)
            if covered > 0:
                held[slot][worker] = held[slot].get(worker, 0.0) + covered
    out = {}
    previous: str | None = None
    for slot, shares in enumerate(held):
        winner = max(shares, key=lambda w: (shares[w], w)) if shares else None
        if winner is None:
            previous = None
            continue
        spans = out.setdefault(winner, [])
        if winner == previous:
            spans[-1] = (spans[-1][0], (slot + 1) * width)
        else:
            spans.append((slot * width, (slot + 1) * width))
        previous = winner
    return out
