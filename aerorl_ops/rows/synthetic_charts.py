"""Deterministic ChartQA-like rows: rendered bar and line charts with one question each.

Every value is printed above its bar or point, so each answer is either drawn on the image
(a value, a percentage, a category) or computed from drawn values (a difference).
Question kinds: the value for one label, the label with the highest or lowest value, and
the difference between two labels' values. Values are distinct, so the extreme is unique.
``evidence_entities`` holds the labels and value texts the answer uses.

Values are integers in display units (tenths for one-decimal topics) to keep arithmetic
exact. Row ``i`` depends only on ``(split, seed, i)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from aerorl_ops.rows.chart_drawing import BarChart, ChartPicture, LineChart
from aerorl_ops.rows.synthetic_sample import SyntheticSample
from aerorl_ops.rows.task_item import TaskItem

DATASET = "chartqa"
GENERATOR = "charts"
COLOURS = ((31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (230, 115, 0))


class CountFormat:
    def shown(self, value: int) -> str:
        return str(value)

    def aliases(self, value: int) -> tuple[str, ...]:
        return (self.shown(value),)


class PercentFormat:
    """``23%``; the bare number ``23`` is accepted too."""

    def shown(self, value: int) -> str:
        return f"{value}%"

    def aliases(self, value: int) -> tuple[str, ...]:
        return (self.shown(value), str(value))


class TenthsFormat:
    """Values stored in tenths, shown with one decimal (``34`` -> ``3.4``); ``4.0`` also accepts ``4``."""

    def shown(self, value: int) -> str:
        return f"{value // 10}.{value % 10}"

    def aliases(self, value: int) -> tuple[str, ...]:
        return (self.shown(value), str(value // 10)) if value % 10 == 0 else (self.shown(value),)


ValueFormat = CountFormat | PercentFormat | TenthsFormat


@dataclass(frozen=True)
class ChartTopic:
    title: str
    chart: BarChart | LineChart
    category: str  # "region", "year": fills "Which <category> has the highest value?"
    labels: tuple[str, ...]  # pool to draw categories from; () means consecutive years
    value_format: ValueFormat
    low: int
    high: int
    value_question: str  # "{label}" is replaced by the label


TOPICS = (
    ChartTopic(
        "Units sold by region", BarChart(), "region", ("North", "South", "East", "West", "Central"),
        CountFormat(), 10, 95, "How many units were sold in {label}?",
    ),
    ChartTopic(
        "Households owning a pet (%)", BarChart(), "country", ("Canada", "France", "Japan", "Brazil", "Kenya", "India"),
        PercentFormat(), 5, 80, "What percentage of households in {label} own a pet?",
    ),
    ChartTopic(
        "Revenue by product (million USD)", BarChart(), "product",
        ("Alpha", "Beta", "Gamma", "Delta", "Sigma", "Omega"),
        TenthsFormat(), 10, 250, "What is the revenue of {label} in million USD?",
    ),
    ChartTopic(
        "Museum visitors per year (thousands)", LineChart(), "year", (),
        CountFormat(), 20, 99, "How many thousand visitors were there in {label}?",
    ),
    ChartTopic(
        "Unemployment rate (%)", LineChart(), "year", (),
        PercentFormat(), 3, 15, "What percentage was the unemployment rate in {label}?",
    ),
    ChartTopic(
        "Average ticket price (USD)", LineChart(), "year", (),
        TenthsFormat(), 50, 300, "What was the average ticket price in {label}?",
    ),
)


@dataclass(frozen=True)
class ChartData:
    topic: ChartTopic
    labels: tuple[str, ...]
    values: tuple[int, ...]

    def shown(self, index: int) -> str:
        return self.topic.value_format.shown(self.values[index])


@dataclass(frozen=True)
class ChartQuestion:
    question: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...]


class ValueQuestion:
    def ask(self, chart: ChartData, rng: random.Random) -> ChartQuestion:
        index = rng.randrange(len(chart.labels))
        label = chart.labels[index]
        return ChartQuestion(
            chart.topic.value_question.format(label=label),
            chart.topic.value_format.aliases(chart.values[index]),
            (label, chart.shown(index)),
        )


class ExtremeQuestion:
    def ask(self, chart: ChartData, rng: random.Random) -> ChartQuestion:
        word, pick = rng.choice((("highest", max), ("lowest", min)))
        index = chart.values.index(pick(chart.values))
        return ChartQuestion(
            f"Which {chart.topic.category} has the {word} value?",
            (chart.labels[index],),
            (chart.labels[index], chart.shown(index)),
        )


class DifferenceQuestion:
    def ask(self, chart: ChartData, rng: random.Random) -> ChartQuestion:
        first, second = sorted(rng.sample(range(len(chart.labels)), 2))
        difference = abs(chart.values[first] - chart.values[second])
        a, b = chart.labels[first], chart.labels[second]
        return ChartQuestion(
            f"What is the difference between {a} and {b}?",
            chart.topic.value_format.aliases(difference),
            (a, chart.shown(first), b, chart.shown(second)),
        )


QUESTIONS = (ValueQuestion(), ExtremeQuestion(), DifferenceQuestion())


def _random_chart(rng: random.Random) -> ChartData:
    topic = rng.choice(TOPICS)
    if topic.labels:
        labels = tuple(rng.sample(topic.labels, rng.randint(4, min(6, len(topic.labels)))))
    else:
        start = rng.randint(2012, 2018)
        labels = tuple(str(year) for year in range(start, start + rng.randint(5, 7)))
    values = tuple(rng.sample(range(topic.low, topic.high + 1), len(labels)))
    return ChartData(topic, labels, values)


def synthetic_chartqa_sample(seed: int, index: int, split: str = "validation") -> SyntheticSample:
    """Row ``index`` of the chart set for ``(seed, split)``, with its drawn strings."""
    rng = random.Random(f"{GENERATOR}:{split}:{seed}:{index}")
    chart = _random_chart(rng)
    asked = rng.choice(QUESTIONS).ask(chart, rng)
    shown = tuple(chart.shown(position) for position in range(len(chart.labels)))
    picture = ChartPicture(chart.topic.title, chart.labels, chart.values, shown, rng.choice(COLOURS))
    rendered = chart.topic.chart.render(picture)
    item = TaskItem(
        item_id=f"synthetic_{DATASET}-{split}-s{seed}-{index:05d}",
        dataset=DATASET,
        split=split,
        question=asked.question,
        answers=asked.answers,
        images=(rendered.png,),
        source=f"synthetic:{GENERATOR}@seed={seed}",
        evidence_entities=asked.evidence,
    )
    return SyntheticSample(item=item, drawn_text=rendered.drawn_text)


def synthetic_chartqa_rows(count: int, seed: int, split: str = "validation") -> list[TaskItem]:
    """``count`` deterministic chart rows; same ``(count, seed, split)`` gives identical bytes.

    >>> rows = synthetic_chartqa_rows(1, seed=0)
    >>> rows[0].dataset, rows[0].source
    ('chartqa', 'synthetic:charts@seed=0')
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return [synthetic_chartqa_sample(seed, index, split).item for index in range(count)]

