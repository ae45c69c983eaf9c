"""The judge's grade in a partition's score table: its ``judge`` column, and its weight in the total.

``with_judge`` takes the rule-based scores of a generations table (``scoring.partition_scores``)
and a ``JudgeScorer``; the judge grades each generation's (prompt, reference answers, response),
its score fills the ``judge`` column, ``total_reward`` becomes the rule total plus ``weight`` times
that score (6 places, as the stack rounds), and ``passed`` is recomputed from it. Without a judge the
score table is left as it is (its ``judge`` column NULL).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.rewards.judge import JudgedScores, JudgeScorer, JudgeTriple

JUDGE_COLUMN = "judge"


def generation_triples(generations: pa.Table) -> list[JudgeTriple]:
    """Each generation's (prompt, accepted answers, response), in row order."""
    return [JudgeTriple(prompt or "", tuple(reference or ()), response or "")
            for prompt, reference, response in zip(generations.column("prompt").to_pylist(),
                                                    generations.column("reference").to_pylist(),
                                                    generations.column("response").to_pylist(), strict=True)]


def judged_totals(totals: list[float], judge_scores: tuple[float, ...], weight: float) -> list[float]:
    """Each rule total plus ``weight`` times its judge score, rounded to 6 places.

    >>> judged_totals([0.8, -0.21], (1.0, 0.0), 0.5)
    [1.3, -0.21]
    """
    return [round(total + weight * score, 6) for total, score in zip(totals, judge_scores, strict=True)]


def with_judge(scores: pa.Table, generations: pa.Table, settings: JudgeSettings, pass_threshold: float,
               scorer: JudgeScorer) -> tuple[pa.Table, JudgedScores]:
    """``scores`` (one row per generation, same order) with the judge column and the judged totals."""
    judged = scorer.scores(generation_triples(generations))
    totals = pa.array(judged_totals(scores.column("total_reward").to_pylist(), judged.scores, settings.weight),
                      pa.float64())
    table = scores
    for name, column in ((JUDGE_COLUMN, pa.array(judged.scores, pa.float64())), ("total_reward", totals),
                         ("passed", pc.greater_equal(totals, pass_threshold))):
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table, judged
