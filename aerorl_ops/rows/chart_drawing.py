"""Bar and line chart renderers for the synthetic ChartQA-like rows.

Both draw on a 448x336 white canvas: a title (18 px), every value printed above its bar or
point (18 px) and every category or year under the axis (16 px). Values are scaled from
zero. Text that would not fit its slot raises instead of overlapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aerorl_ops.rows.drawing import INK, Canvas, RenderedImage, text_width

CHART_SIZE = (448, 336)
TITLE_SIZE = 18
VALUE_SIZE = 18
LABEL_SIZE = 16
PLOT_LEFT, PLOT_RIGHT = 28, 420
PLOT_TOP, PLOT_BASELINE = 72, 278
AXIS_COLOUR = (60, 60, 60)


@dataclass(frozen=True)
class ChartPicture:
    """What to draw: ``values`` set bar heights / point positions, ``shown`` is their printed text."""

    title: str
    labels: tuple[str, ...]
    values: tuple[int, ...]
    shown: tuple[str, ...]
    colour: tuple[int, int, int]


def _chart_frame(title: str, labels: Sequence[str]) -> tuple[Canvas, float]:
    canvas = Canvas(*CHART_SIZE)
    if text_width(title, TITLE_SIZE) > canvas.width - 16:
        raise ValueError(f"chart title {title!r} does not fit {canvas.width}px")
    canvas.text((canvas.width / 2, 12), title, TITLE_SIZE, anchor="ma")
    canvas.draw.line((PLOT_LEFT, PLOT_BASELINE, PLOT_RIGHT, PLOT_BASELINE), fill=AXIS_COLOUR, width=2)
    canvas.draw.line((PLOT_LEFT, PLOT_TOP - 16, PLOT_LEFT, PLOT_BASELINE), fill=AXIS_COLOUR, width=2)
    slot = (PLOT_RIGHT - PLOT_LEFT) / len(labels)
    for index, label in enumerate(labels):
        if text_width(label, LABEL_SIZE) > slot - 4:
            raise ValueError(f"category label {label!r} is wider than its {slot:.0f}px slot")
        canvas.text((PLOT_LEFT + slot * (index + 0.5), PLOT_BASELINE + 8), label, LABEL_SIZE, anchor="ma")
    return canvas, slot


def _heights(values: Sequence[int]) -> list[float]:
    top = max(values)
    return [(PLOT_BASELINE - PLOT_TOP) * value / top for value in values]


def _value_text(canvas: Canvas, x: float, y: float, text: str, slot: float, anchor: str = "md") -> None:
    if text_width(text, VALUE_SIZE) > slot - 2:
        raise ValueError(f"value {text!r} is wider than its {slot:.0f}px slot")
    canvas.text((x, y), text, VALUE_SIZE, fill=INK, anchor=anchor)


class BarChart:
    name = "bar"

    def render(self, chart: ChartPicture) -> RenderedImage:
        canvas, slot = _chart_frame(chart.title, chart.labels)
        for index, (height, text) in enumerate(zip(_heights(chart.values), chart.shown, strict=True)):
            centre, half = PLOT_LEFT + slot * (index + 0.5), slot * 0.3
            bar = (centre - half, PLOT_BASELINE - height, centre + half, PLOT_BASELINE - 1)
            canvas.draw.rectangle(bar, fill=chart.colour)
            _value_text(canvas, centre, PLOT_BASELINE - height - 4, text, slot)
        return canvas.finish()


class LineChart:
    name = "line"

    def render(self, chart: ChartPicture) -> RenderedImage:
        canvas, slot = _chart_frame(chart.title, chart.labels)
        heights = _heights(chart.values)
        points = [(PLOT_LEFT + slot * (index + 0.5), PLOT_BASELINE - height) for index, height in enumerate(heights)]
        canvas.draw.line(points, fill=chart.colour, width=3)
        for index, ((x, y), text) in enumerate(zip(points, chart.shown, strict=True)):
            canvas.draw.ellipse((x - 4, y - 4, x + 4, y + 4), fill=chart.colour)
            if _label_below(points, index):
                _value_text(canvas, x, y + 10, text, slot, anchor="ma")
            else:
                _value_text(canvas, x, y - 8, text, slot)
        return canvas.finish()


def _label_below(points: Sequence[tuple[float, float]], index: int) -> bool:
    """Put a value under its point when the line rises on both sides (a dip), if there is room."""
    y = points[index][1]
    neighbours = [points[i][1] for i in (index - 1, index + 1) if 0 <= i < len(points)]
    is_dip = all(other < y for other in neighbours)  # image y grows downwards
    return is_dip and y + 10 + VALUE_SIZE + 4 < PLOT_BASELINE
