"""The dashboard's SVG charts: one titled bar per value, stacked or side by side, axes
with round ticks, names escaped, and the same numbers as a table."""

from __future__ import annotations

import re

import pytest

from deuz_django.admin.charts import _ticks, format_value, legend, svg, table
from deuz_django.dashboard import Chart, Series


def chart(*series: Series, **options: object) -> Chart:
    fields: dict[str, object] = {
        "slug": "test",
        "title": "Test chart",
        "summary": "What it shows.",
        "category_label": "Day",
        "categories": ("2026-12-01", "2026-12-02"),
        "series": series,
        **options,
    }
    return Chart(**fields)  # type: ignore[arg-type]


def rects(drawn: str) -> list[tuple[float, float, float, float, str]]:
    return [
        (float(x), float(y), float(w), float(h), title)
        for x, y, w, h, title in re.findall(
            r'<rect class="deuz-bar [^"]*" x="([\d.]+)" y="([\d.]+)" '
            r'width="([\d.]+)" height="([\d.]+)"><title>([^<]*)</title>',
            drawn,
        )
    ]


def test_each_nonzero_value_is_one_bar_titled_with_its_numbers() -> None:
    drawn = svg(chart(Series("completed", (3, 0)), Series("running", (1, 2))))

    titles = [bar[4] for bar in rects(drawn)]
    assert titles == [
        "2026-12-01 · completed: 3",
        "2026-12-01 · running: 1",
        "2026-12-02 · running: 2",
    ]
    assert 'role="img"' in drawn
    assert (
        '<title id="deuz-chart-test-title">Test chart: What it shows.</title>' in drawn
    )


def test_stacked_bars_sit_on_each_other_and_grouped_bars_side_by_side() -> None:
    both = (Series("a", (2, 0)), Series("b", (2, 0)))
    (x1, y1, _, _, _), (x2, y2, _, h2, _) = rects(svg(chart(*both)))
    assert x1 == x2
    assert y2 + h2 == pytest.approx(y1, abs=0.2)  # b on top of a
    (x1, _, w1, _, _), (x2, _, _, _, _) = rects(svg(chart(*both, stacked=False)))
    assert x2 >= x1 + w1


def test_horizontal_bars_have_labels_and_long_ones_are_shortened() -> None:
    name = "a_tool_with_a_really_long_name_indeed"
    drawn = svg(
        chart(
            Series("p50", (30.0,), unit="seconds"),
            categories=(name,),
            horizontal=True,
            stacked=False,
        )
    )
    assert f"<title>{name}</title>a_tool_with_a_really_lo…" in drawn
    assert rects(drawn)[0][4] == f"{name} · p50: 30s"


def test_names_are_escaped_everywhere() -> None:
    evil = '<script>alert("x")</script>'
    drawn = svg(chart(Series(evil, (1, 1)), categories=(evil, "b")))
    assert "<script>" not in drawn
    assert "&lt;script&gt;" in drawn


def test_an_empty_chart_draws_nothing() -> None:
    assert svg(chart(Series("a", (0, 0)))) == ""
    assert svg(chart(Series("n", (4, 5), plotted=False))) == ""


def test_a_series_keeps_its_colour_when_a_neighbour_is_not_drawn() -> None:
    drawn = chart(Series("x", (None, None), plotted=False), Series("y", (1, 2)))
    assert legend(drawn) == [("deuz-s1", "y")]
    assert all(
        "deuz-s1" in css for css in re.findall(r'class="(deuz-bar[^"]*)"', svg(drawn))
    )


@pytest.mark.parametrize(
    ("peak", "unit", "ticks"),
    [
        (12, "count", [0, 5, 10, 15]),
        (2, "count", [0, 1, 2]),
        (85_000, "tokens", [0, 25_000, 50_000, 75_000, 100_000]),
        (0.068, "usd", [0, 0.02, 0.04, 0.06, 0.08]),
        (3000, "seconds", [0, 900, 1800, 2700, 3600]),
        (0, "count", [0, 1]),
    ],
)
def test_ticks_are_round_numbers(peak: float, unit: str, ticks: list[float]) -> None:
    assert _ticks(peak, unit) == pytest.approx(ticks)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1234, "count", "1,234"),
        (1_234_567, "tokens", "1,234,567"),
        (0.00326, "usd", "$0.0033"),
        (12.5, "usd", "$12.50"),
        (45, "seconds", "45s"),
        (725, "seconds", "12m 5s"),
        (2 * 86400 + 4 * 3600, "seconds", "2d 4h"),
        (None, "usd", "—"),
    ],
)
def test_values_print_in_their_unit(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_the_table_has_a_row_per_category_and_a_total_when_stacked() -> None:
    header, rows = table(chart(Series("a", (1, 2)), Series("b", (3, None))))
    assert header == ["Day", "a", "b", "total"]
    assert rows == [["2026-12-01", "1", "3", "4"], ["2026-12-02", "2", "—", "2"]]
