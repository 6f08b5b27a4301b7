"""Server-rendered SVG bar charts for the dashboard: no script, no build step, no CDN.

A :class:`~deuz_django.dashboard.Chart` becomes an inline ``<svg>`` — vertical bars over
days or buckets, horizontal bars over tools — whose every bar carries its numbers in a
``<title>`` (the browser's hover tooltip, and what a screen reader announces), plus the same
numbers as table rows. Colours come from the stylesheet (``deuz-s0``…, ``deuz-tone-*``), so
the admin's light and dark themes both apply; colour is never the only signal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ..dashboard import Chart, Series, format_duration

WIDTH = 720
HEIGHT = 240
ROW = 30  # height per category of a horizontal chart
PALETTE = 8  # deuz-s0 … deuz-s7
_DAY = re.compile(r"\d{4}-(\d{2}-\d{2})")


def format_value(value: float | None, unit: str) -> str:
    """A figure as the table and the tooltips print it."""
    if value is None:
        return "—"
    if unit == "usd":
        return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
    if unit == "seconds":
        return format_duration(value)
    return f"{round(value):,}"


def _axis_label(value: float, unit: str) -> str:
    """A compact tick label: ``1.2k``, ``3M``, ``$0.5``, ``4m``."""
    if unit == "seconds":
        return format_duration(value)
    prefix = "$" if unit == "usd" else ""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{prefix}{value / size:g}{suffix}"
    return f"{prefix}{value:g}"


# Tick steps for durations: whole seconds, minutes, hours, days.
_DURATION_STEPS = (
    *(1, 2, 5, 10, 15, 30),
    *(60 * m for m in (1, 2, 5, 10, 15, 30)),
    *(3600 * h for h in (1, 2, 3, 6, 12)),
    *(86400 * d for d in (1, 2, 7, 14, 30)),
)


def _ticks(peak: float, unit: str, most: int = 4) -> list[float]:
    """Round tick values from 0 up to ``peak`` or just above, about ``most`` steps: 1-2-5
    steps (whole ones for counts and tokens), clock-like ones for durations."""
    if peak <= 0:
        return [0.0, 1.0]
    raw = peak / most
    if unit == "seconds":
        step = next((s for s in _DURATION_STEPS if s >= raw), _DURATION_STEPS[-1])
        step = max(step, math.ceil(raw / step) * step)
    else:
        whole = unit in ("count", "tokens")
        if whole:
            raw = max(raw, 1.0)
        magnitude = 10 ** math.floor(math.log10(raw))
        step = next(
            m * magnitude
            for m in (1, 2, 2.5, 5, 10)
            if m * magnitude >= raw and not (whole and (m * magnitude) % 1)
        )
    count = math.ceil(peak / step - 1e-9)
    return [step * i for i in range(count + 1)]


def _short(category: str) -> str:
    """Days print as ``MM-DD`` under the axis (the tooltip has the whole date)."""
    matched = _DAY.fullmatch(category)
    return matched.group(1) if matched else category


def _colour(series: Series, index: int) -> str:
    """The series' colour classes: its place in the palette, and its tone if it has one."""
    return f"deuz-s{index % PALETTE}" + (
        f" deuz-tone-{series.tone}" if series.tone else ""
    )


@dataclass(frozen=True, slots=True)
class _Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


def _plotted(chart: Chart) -> list[tuple[int, Series]]:
    """The series drawn, each with its place in the chart (its colour: a series keeps its
    colour when a neighbour has nothing to draw)."""
    return [(i, s) for i, s in enumerate(chart.series) if s.plotted]


def _bars(
    chart: Chart, plotted: Sequence[tuple[int, Series]], top: float
) -> list[_Bar]:
    """Every bar's box in plot coordinates (0..1 on both axes, value axis from 0)."""
    bars = []
    count = len(chart.categories)
    for c, category in enumerate(chart.categories):
        base = 0.0
        for s, (colour, series) in enumerate(plotted):
            value = series.values[c] or 0
            if not value:
                continue
            title = f"{category} · {series.name}: {format_value(value, series.unit)}"
            if chart.stacked:
                band, width = (c + 0.14) / count, 0.72 / count
            else:
                slot = 0.8 / count / len(plotted)
                band, width = (c + 0.1) / count + s * slot, slot * 0.9
            bars.append(
                _Bar(
                    band, base / top, width, value / top, _colour(series, colour), title
                )
            )
            if chart.stacked:
                base += value
    return bars


def _peak(chart: Chart, plotted: Sequence[tuple[int, Series]]) -> float:
    if chart.stacked:
        return max(
            (
                sum(s.values[c] or 0 for _, s in plotted)
                for c in range(len(chart.categories))
            ),
            default=0,
        )
    return max((v or 0 for _, s in plotted for v in s.values), default=0)


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where the plot sits in the picture: its margins and the picture's height."""

    left: int
    right: int
    upper: int
    lower: int
    height: int

    @property
    def plot_w(self) -> int:
        return WIDTH - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.upper - self.lower


def _frame(chart: Chart) -> _Frame:
    """Room for the category labels left of a horizontal chart, a row per category; a
    vertical chart has a fixed height."""
    if chart.horizontal:
        label_width = min(180, 12 + 7 * max(len(c) for c in chart.categories))
        upper, lower = 8, 24
        height = upper + lower + ROW * len(chart.categories)
        return _Frame(label_width, 16, upper, lower, height)
    return _Frame(56, 12, 10, 26, HEIGHT)


def _grid(chart: Chart, frame: _Frame, ticks: Sequence[float], unit: str) -> list[str]:
    """A grid line and a value label at every tick."""
    top = ticks[-1]
    parts: list[str] = []
    for tick in ticks:
        if chart.horizontal:
            x = frame.left + frame.plot_w * tick / top
            parts.append(
                f'<line class="deuz-grid" x1="{x:.1f}" y1="{frame.upper}" x2="{x:.1f}" '
                f'y2="{frame.upper + frame.plot_h}"/><text class="deuz-axis" x="{x:.1f}" '
                f'y="{frame.height - 6}" text-anchor="middle">'
                f"{escape(_axis_label(tick, unit))}</text>"
            )
        else:
            y = frame.upper + frame.plot_h * (1 - tick / top)
            parts.append(
                f'<line class="deuz-grid" x1="{frame.left}" y1="{y:.1f}" '
                f'x2="{WIDTH - frame.right}" y2="{y:.1f}"/><text class="deuz-axis" '
                f'x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(_axis_label(tick, unit))}</text>"
            )
    return parts


def _category_labels(chart: Chart, frame: _Frame) -> list[str]:
    """The categories along their axis: every one beside horizontal bars (cut short, the
    whole name in a tooltip), at most about ten under vertical ones."""
    parts: list[str] = []
    every = max(1, math.ceil(len(chart.categories) / 10))
    for c, category in enumerate(chart.categories):
        middle = (c + 0.5) / len(chart.categories)
        if chart.horizontal:
            y = frame.upper + frame.plot_h * middle + 4
            label = category if len(category) <= 24 else category[:23] + "…"
            parts.append(
                f'<text class="deuz-axis" x="{frame.left - 6}" y="{y:.1f}" text-anchor="end">'
                f"<title>{escape(category)}</title>{escape(label)}</text>"
            )
        elif c % every == 0:
            parts.append(
                f'<text class="deuz-axis" x="{frame.left + frame.plot_w * middle:.1f}" '
                f'y="{frame.height - 8}" text-anchor="middle">{escape(_short(category))}</text>'
            )
    return parts


def _rects(chart: Chart, frame: _Frame, bars: Sequence[_Bar]) -> list[str]:
    """The bars in the picture's coordinates, each with its numbers as a tooltip; a
    horizontal chart turns the plot's axes."""
    parts: list[str] = []
    for bar in bars:
        if chart.horizontal:
            x, y = frame.left + frame.plot_w * bar.y, frame.upper + frame.plot_h * bar.x
            w, h = frame.plot_w * bar.height, frame.plot_h * bar.width
        else:
            w, h = frame.plot_w * bar.width, frame.plot_h * bar.height
            x, y = (
                frame.left + frame.plot_w * bar.x,
                frame.upper + frame.plot_h * (1 - bar.y) - h,
            )
        parts.append(
            f'<rect class="deuz-bar {bar.css}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" '
            f'height="{max(h, 0.5):.1f}"><title>{escape(bar.title)}</title></rect>'
        )
    return parts


def svg(chart: Chart) -> SafeString:
    """The chart as inline SVG (empty string for a chart with nothing to draw)."""
    plotted = _plotted(chart)
    if chart.is_empty or not plotted:
        return SafeString("")
    unit = plotted[0][1].unit
    ticks = _ticks(_peak(chart, plotted), unit)
    frame = _frame(chart)
    title_id = f"deuz-chart-{chart.slug}-title"
    parts = [
        f'<svg class="deuz-chart-svg" viewBox="0 0 {WIDTH} {frame.height}" role="img" '
        f'aria-labelledby="{title_id}" preserveAspectRatio="xMinYMin meet">',
        f'<title id="{title_id}">{escape(chart.title)}: {escape(chart.summary)}</title>',
        *_grid(chart, frame, ticks, unit),
        *_category_labels(chart, frame),
        *_rects(chart, frame, _bars(chart, plotted, ticks[-1])),
        "</svg>",
    ]
    return mark_safe("".join(parts))  # every piece of data above went through escape()


def legend(chart: Chart) -> list[tuple[str, str]]:
    """(css class, series name) of each plotted series, for the legend under the title."""
    return [(_colour(s, i), s.name) for i, s in _plotted(chart)]


def table(chart: Chart) -> tuple[list[str], list[list[str]]]:
    """The chart's numbers: a header and one row per category (with a total when stacked)."""
    total = chart.stacked and len(chart.series) > 1
    header = [chart.category_label, *(s.name for s in chart.series)]
    if total:
        header.append("total")
    rows = []
    for c, category in enumerate(chart.categories):
        row = [category, *(format_value(s.values[c], s.unit) for s in chart.series)]
        if total:
            row.append(
                format_value(
                    sum(s.values[c] or 0 for s in chart.series), chart.series[0].unit
                )
            )
        rows.append(row)
    return header, rows
