"""The judge reward's settings (the ``[rewards.judge]`` table): a configured model grades each reply.

The judge is a ``[models.<key>]`` entry asked, with ``template``, to grade a (question, reference
answers, response) triple; its reply is parsed by ``aerorl_ops.rewards.judge_parse`` and the grade
enters the total with ``weight``. A grade that cannot be had (an unparsable reply, a batch past
``timeout_s``) scores ``failure_score`` and is counted. A dataset may name its own judge model for
training (``[datasets.<name>] judge``, ``judge_weight``); every other judge setting is this table's.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aerorl_ops.config.fields import fail, number, parse_section, positive_int, positive_number, setting, text

PLACEHOLDERS = ("question", "reference", "response")
REQUIRED_PLACEHOLDERS = ("response",)

DEFAULT_JUDGE_TEMPLATE = (
    "You grade answers to questions about images.\n"
    "Question: {question}\n"
    "Accepted answers: {reference}\n"
    "Answer to grade: {response}\n"
    "Does the answer mean the same as one of the accepted answers? Reply with one whole number from 0 "
    "(wrong) to 10 (right) and nothing else.\n"
    "Grade:"
)


def judge_template(where: str, setting_name: str, value: object) -> str:
    """A ``str.format`` template naming only ``{question}``, ``{reference}`` and ``{response}`` (the
    last required); literal braces are written ``{{`` and ``}}``."""
    template = text(where, setting_name, value)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise fail(where, setting_name, f"is not a valid template ({error}); write literal braces as {{{{ }}}}") \
            from error
    unknown = sorted({name for name in fields if name not in PLACEHOLDERS})
    if unknown:
        raise fail(where, setting_name, f"names placeholders {unknown}; known: "
                   f"{', '.join('{' + name + '}' for name in PLACEHOLDERS)}")
    missing = [name for name in REQUIRED_PLACEHOLDERS if name not in fields]
    if missing:
        raise fail(where, setting_name, f"lacks {', '.join('{' + name + '}' for name in missing)}: "
                   "the judge must see the response it grades")
    return template


@dataclass(frozen=True)
class JudgeSettings:
    """One judge: which model, how it is asked, how its grade counts."""

    model: str = setting(help="the [models] key of the judge model (required)", check=text)
    template: str = setting(DEFAULT_JUDGE_TEMPLATE, help="the prompt: {question}, {reference}, {response}",
                            check=judge_template)
    weight: float = setting(0.5, help="weight of the judge's grade (in [0, 1]) in the total reward", check=number)
    max_new_tokens: int = setting(8, help="the judge's reply is at most this many tokens (greedy)",
                                  check=positive_int)
    batch_size: int = setting(8, help="triples per judge generate call", check=positive_int)
    failure_score: float = setting(0.0, help="the grade of an unparsable reply or a timed-out triple (counted)",
                                   check=number)
    timeout_s: float = setting(600.0, help="wall seconds one scoring call may spend; triples unfinished by then "
                               "time out", check=positive_number)


def parse_judge(where: str, section: str, table: object) -> JudgeSettings:
    """A ``[rewards.judge]`` table, every value checked; ``model`` is required."""
    if isinstance(table, Mapping) and "model" not in table:
        raise fail(where, f"{section}.model", "is required: the [models] key of the judge model")
    return parse_section(JudgeSettings, where, section, table)


def check_judge_model(where: str, setting_name: str, key: str, model_keys: Iterable[str]) -> None:
    """``ConfigError`` naming ``setting_name`` when ``key`` is not one of ``model_keys``."""
    keys = tuple(model_keys)
    if key not in keys:
        raise fail(where, setting_name, f"names model {key!r}, which is not a [models] key; configured: "
                   f"{', '.join(keys)}")


def check_judges(where: str, rewards_judge: JudgeSettings | None, dataset_judges: Mapping[str, str],
                 model_keys: Iterable[str]) -> None:
    """Every judge the file names is a ``[models]`` key: ``[rewards.judge] model`` and each
    ``[datasets.<name>] judge`` (``dataset_judges``: dataset name -> model key, empty = none)."""
    keys = tuple(model_keys)
    if rewards_judge is not None:
        check_judge_model(where, "rewards.judge.model", rewards_judge.model, keys)
    for name, key in dataset_judges.items():
        if key:
            check_judge_model(where, f"datasets.{name}.judge", key, keys)
