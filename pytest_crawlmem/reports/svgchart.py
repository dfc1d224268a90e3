"""A small inline-SVG timeline: stacked panels sharing one x axis (pure Python, no JS, no network).

Every text that reaches the SVG is escaped here, so callers may pass crawl data as labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from pytest_crawlmem.core.units import format_size

Point = tuple[float, "float | None"]

WIDTH = 1100
LEFT = 80
RIGHT = 180
#: Least vertical distance between two budget labels of a panel (px): closer labels are pushed apart.
LABEL_SPACING = 13
PLOT_HEIGHT = 130
HEADER = 28
GAP = 16
AXIS = 40
#: Most points drawn per series: beyond this, each pixel column keeps its first, lowest, highest and last value.
MAX_POINTS = 1600
#: A budget this many times above the data is named at the top instead of squashing the data flat.
BUDGET_STRETCH = 2.0
BUDGET_COLOR = "#c0392b"


@dataclass(frozen=True)
class Series:
    """One line (or row of dots) of a panel; ``None`` values break the line."""

    key: str
    name: str
    color: str
    points: Sequence[Point]
    dots: bool = False
    line: bool = True
    titles: Sequence[str] = ()


@dataclass(frozen=True)
class Budget:
    """A horizontal limit drawn across a panel at ``value``; its label shows ``shown`` (the budget) when set.

    ``rss_growth`` is drawn at start RSS + budget, and labelled with the budget itself.
    """

    name: str
    value: float
    shown: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Panel:
    """One chart of the stack: series sharing a unit (``bytes`` or ``count``).

    ``zoom``: the y axis may start above 0 when the data's range is small against its level
    (RSS going 120.9 -> 127.3 MiB would look flat on an axis from 0).
    """

    title: str
    unit: str
    series: Sequence[Series]
    budgets: Sequence[Budget] = ()
    zoom: bool = False

    def has_data(self) -> bool:
        """Whether any series has a value (a panel without one is left out of the chart)."""
        return any(y is not None for s in self.series for _, y in s.points)


@dataclass(frozen=True)
class Marker:
    """A vertical line across every panel (a checkpoint, the end of the warm-up)."""

    x: float
    kind: str
    title: str = ""


@dataclass(frozen=True)
class Band:
    """A shaded span across every panel, from ``x0`` to ``x1`` (a period the memory governor held a lever)."""

    x0: float
    x1: float
    kind: str
    title: str = ""


@dataclass(frozen=True)
class XAxis:
    """The shared x axis: its label and how to write its ticks."""

    label: str
    formatter: Callable[[float], str]
    shade_until: float | None = None
    markers: Sequence[Marker] = field(default_factory=tuple)
    bands: Sequence[Band] = field(default_factory=tuple)


def nice_ticks(low: float, high: float, count: int = 5, *, binary: bool = False, whole: bool = False) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten (of KiB, MiB, ... if ``binary``).

    ``whole``: steps of at least 1 (counts: no ticks at 0.2 written as ``0``).
    """
    if not high > low:
        high = low + 1
    if binary and max(abs(low), abs(high)) >= 1024:
        scale = 1024 ** math.floor(math.log(max(abs(low), abs(high)), 1024))
        return [t * scale for t in nice_ticks(low / scale, high / scale, count)]
    raw = (high - low) / count
    if not (math.isfinite(raw) and raw > abs(high) * 1e-9):  # beyond float precision: no round steps
        return [low, high]
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(step, 1.0) if whole else step
    start = math.floor(low / step) * step
    steps = math.ceil((high - start) / step - 1e-9)
    return [round(start + i * step, 10) for i in range(steps + 1)]


def size_tick(value: float) -> str:
    """Label a byte tick for people (``96.0 MiB``)."""
    return "0" if value == 0 else format_size(value).replace(".0 ", " ")


def count_tick(value: float) -> str:
    """Label a count tick (``1,200``)."""
    return f"{value:,.0f}"


def seconds_tick(value: float) -> str:
    """Label a time tick: seconds, then minutes, then hours."""
    if abs(value) < 600:
        return f"{value:g} s"
    if abs(value) < 36000:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def _extremes(bucket: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """A bucket's first, lowest, highest and last points, in order."""
    ys = [y for _, y in bucket]
    picks = {0, len(bucket) - 1, ys.index(min(ys)), ys.index(max(ys))}
    return [bucket[i] for i in sorted(picks)]


def decimate(points: Sequence[tuple[float, float]], buckets: int) -> list[tuple[float, float]]:
    """Thin a line of more than MAX_POINTS to about ``4 * buckets`` points, keeping every bucket's extremes."""
    if len(points) <= MAX_POINTS:
        return list(points)
    x0, x1 = points[0][0], points[-1][0]
    span = (x1 - x0) or 1.0
    kept: list[tuple[float, float]] = []
    bucket: list[tuple[float, float]] = []
    current = 0
    for point in points:
        index = min(int((point[0] - x0) / span * buckets), buckets - 1)
        if index != current and bucket:
            kept.extend(_extremes(bucket))
            bucket = []
        current = index
        bucket.append(point)
    kept.extend(_extremes(bucket))
    return kept


def _segments(points: Sequence[Point]) -> list[list[tuple[float, float]]]:
    """Split a series at its missing values."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, y))
    return [run for run in runs if run]


class _Frame:
    """Maps data to pixels for one panel."""

    def __init__(self, top: float, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
        self.top = top
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        self.width = WIDTH - LEFT - RIGHT

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / ((self.x1 - self.x0) or 1) * self.width

    def py(self, y: float) -> float:
        return self.top + PLOT_HEIGHT - (y - self.y0) / ((self.y1 - self.y0) or 1) * PLOT_HEIGHT


#: A zoomed panel starts above 0 when its data spans less than this share of its highest value.
ZOOM_BELOW = 0.5
#: A zoomed panel still spans at least this share of its highest value, so a flat line's noise stays flat.
MIN_ZOOM_SPAN = 0.1


def _y_range(panel: Panel) -> tuple[float, float, list[Budget]]:
    """The y range of a panel (from 0, or from just below the data when zoomed) and the budgets too far off to draw."""
    values = [y for s in panel.series for _, y in s.points if y is not None]
    top = max(values, default=0.0)
    bottom = min(values, default=0.0)
    span = max(top - bottom, top * 0.02)
    zoomed = panel.zoom and bottom > 0 and top - bottom < top * ZOOM_BELOW
    above = []
    for budget in panel.budgets:
        near = budget.value <= top * BUDGET_STRETCH and (not zoomed or budget.value <= top + 3 * span)
        if top == 0 or near:
            top = max(top, budget.value)
        else:
            above.append(budget)
    low = max(0.0, min(bottom - 0.15 * span, top * (1 - MIN_ZOOM_SPAN))) if zoomed else min(0.0, bottom)
    drawn = [b.value for b in panel.budgets if b not in above]
    low = min([low, *(max(0.0, v - 0.15 * span) for v in drawn)])  # a broken budget below the zoomed data stays in view
    ticks = nice_ticks(low, top if top > low else low + (1 if panel.unit == "count" else 1024), binary=panel.unit == "bytes",
                       whole=panel.unit == "count")
    return ticks[0], ticks[-1], above


def _panel(panel: Panel, top: float, x_range: tuple[float, float], axis: XAxis, first: bool) -> list[str]:
    y0, y1, above = _y_range(panel)
    frame = _Frame(top, x_range, (y0, y1))
    fmt = size_tick if panel.unit == "bytes" else count_tick
    out = [f'<g class="panel" data-panel="{escape(panel.title)}">']
    out.append(f'<text class="panel-title" x="{LEFT}" y="{top - 10:.1f}">{escape(panel.title)}</text>')
    legend_x = LEFT + 8 + 7.5 * len(panel.title) + 16
    for series in panel.series:
        if not any(y is not None for _, y in series.points):
            continue
        mark = (f'<line x1="{legend_x:.1f}" y1="{top - 14:.1f}" x2="{legend_x + 18:.1f}" y2="{top - 14:.1f}"'
                f' stroke="{series.color}" stroke-width="2.5"/>' if series.line else
                f'<circle cx="{legend_x + 9:.1f}" cy="{top - 14:.1f}" r="3.5" fill="{series.color}"/>')
        out.append(mark + f'<text class="legend" x="{legend_x + 24:.1f}" y="{top - 10:.1f}">{escape(series.name)}</text>')
        legend_x += 24 + 7 * len(series.name) + 18
    out.append(f'<rect class="plot" x="{LEFT}" y="{top}" width="{frame.width}" height="{PLOT_HEIGHT}"/>')
    if axis.shade_until is not None and axis.shade_until > frame.x0:
        shade = min(frame.px(axis.shade_until), LEFT + frame.width) - LEFT
        out.append(f'<rect class="warmup" x="{LEFT}" y="{top}" width="{shade:.1f}" height="{PLOT_HEIGHT}"/>')
        if first:
            out.append(f'<text class="warmup-label" x="{LEFT + 6}" y="{top + PLOT_HEIGHT - 6}">warm-up</text>')
    for band in axis.bands:
        x0, x1 = max(band.x0, frame.x0), min(band.x1, frame.x1)
        if x0 <= x1:
            left, right = frame.px(x0), frame.px(x1)
            title = f"<title>{escape(band.title)}</title>" if band.title else ""
            out.append(f'<rect class="band {escape(band.kind)}" x="{left:.1f}" y="{top}"'
                       f' width="{max(right - left, 2.0):.1f}" height="{PLOT_HEIGHT}">{title}</rect>')
    for tick in nice_ticks(y0, y1, binary=panel.unit == "bytes", whole=panel.unit == "count"):
        if y0 <= tick <= y1:
            y = frame.py(tick)
            out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + frame.width}" y2="{y:.1f}"/>')
            out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt(tick))}</text>')
    for marker in axis.markers:
        if frame.x0 <= marker.x <= frame.x1:
            x = frame.px(marker.x)
            title = f"<title>{escape(marker.title)}</title>" if marker.title else ""
            out.append(f'<line class="marker {escape(marker.kind)}" x1="{x:.1f}" y1="{top}" x2="{x:.1f}"'
                       f' y2="{top + PLOT_HEIGHT}">{title}</line>')
    for series in panel.series:
        out.extend(_series(series, frame))
    labels: list[tuple[float, str, str, str]] = []  # (wanted y, css class, text, tooltip)
    for budget in panel.budgets:
        if budget in above:
            continue
        y = frame.py(budget.value)
        label = f"{budget.name} {fmt(budget.value if budget.shown is None else budget.shown)}"
        tip = f"budget {label}" + (f" ({budget.note})" if budget.note else "")
        out.append(f'<line class="budget" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + frame.width}" y2="{y:.1f}"'
                   f' stroke="{BUDGET_COLOR}"><title>{escape(tip)}</title></line>')
        labels.append((y + 4, "budget-label", label, tip))
    for budget in above:
        label = f"\u2191 {budget.name} {fmt(budget.value if budget.shown is None else budget.shown)}"
        labels.append((top + 12, "budget-label", label, f"budget {label[2:]}, above the chart"))
    for y, cls, label, tip in _spread(labels, top + 10, top + PLOT_HEIGHT + 4):
        out.append(f'<text class="{cls}" x="{LEFT + frame.width + 6}" y="{y:.1f}"><title>{escape(tip)}</title>'
                   f"{escape(label)}</text>")
    out.append("</g>")
    return out


def _spread(labels: list[tuple[float, str, str, str]], lowest: float, highest: float) -> list[tuple[float, str, str, str]]:
    """Move labels apart vertically (at least LABEL_SPACING px), keeping their order and the panel's height."""
    placed = sorted(labels, key=lambda label: label[0])
    ys = [min(max(y, lowest), highest) for y, *_ in placed]
    for i in range(1, len(ys)):
        ys[i] = max(ys[i], ys[i - 1] + LABEL_SPACING)
    overflow = ys[-1] - max(highest, lowest + LABEL_SPACING * (len(ys) - 1)) if ys else 0.0
    if overflow > 0:  # pushed past the bottom: shift the stack up, then keep the spacing from the top down
        ys = [y - overflow for y in ys]
        for i in range(1, len(ys)):
            ys[i] = max(ys[i], ys[i - 1] + LABEL_SPACING)
        ys[0] = max(ys[0], lowest)
        for i in range(1, len(ys)):
            ys[i] = max(ys[i], ys[i - 1] + LABEL_SPACING)
    return [(y, *rest) for y, (_, *rest) in zip(ys, placed, strict=True)]  # type: ignore[misc]


def _series(series: Series, frame: _Frame) -> list[str]:
    out = []
    cls = f"series series-{escape(series.key)}"
    if series.line:
        for run in _segments(series.points):
            thin = decimate(run, int(frame.width))
            coords = " ".join(f"{frame.px(x):.1f},{frame.py(y):.1f}" for x, y in thin)
            out.append(f'<polyline class="{cls}" points="{coords}" fill="none" stroke="{series.color}"/>')
    if series.dots or len(series.points) == 1:
        for index, (x, y) in enumerate(series.points):
            if y is None:
                continue
            title = series.titles[index] if index < len(series.titles) else ""
            tip = f"<title>{escape(title)}</title>" if title else ""
            out.append(f'<circle class="{cls} dot" cx="{frame.px(x):.1f}" cy="{frame.py(y):.1f}" r="3.5"'
                       f' fill="{series.color}">{tip}</circle>')
    return out


def render_timeline(panels: Sequence[Panel], axis: XAxis, *, caption: str) -> str:
    """Return an ``<svg>`` with one panel per entry of ``panels``, stacked over the shared x axis."""
    panels = [p for p in panels if p.has_data() or p.budgets]  # an empty panel says nothing: leave it out
    xs = [x for p in panels for s in p.series for x, y in s.points if y is not None]  # markers past the data don't stretch it
    low, high = min(min(xs, default=0.0), 0.0), max(xs, default=1.0)
    x_range = (low, high if high > low else low + 1)
    ticks = [t for t in nice_ticks(*x_range) if x_range[0] <= t <= x_range[1] + 1e-9]
    height = len(panels) * (HEADER + PLOT_HEIGHT + GAP) + AXIS
    out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}"'
           f' role="img" aria-label="{escape(caption)}"><title>{escape(caption)}</title>']
    top = float(HEADER)
    for index, panel in enumerate(panels):
        out.extend(_panel(panel, top, x_range, axis, first=index == 0))
        top += PLOT_HEIGHT + HEADER + GAP
    base = top - HEADER - GAP  # the bottom of the last panel
    frame = _Frame(base - PLOT_HEIGHT, x_range, (0, 1))
    for tick in ticks:
        x = frame.px(tick)
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{base:.1f}" x2="{x:.1f}" y2="{base + 5:.1f}"/>')
        label = escape(axis.formatter(tick))
        out.append(f'<text class="tick" x="{x:.1f}" y="{base + 18:.1f}" text-anchor="middle">{label}</text>')
    out.append(f'<text class="axis-label" x="{LEFT + frame.width / 2:.1f}" y="{base + 34:.1f}"'
               f' text-anchor="middle">{escape(axis.label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
