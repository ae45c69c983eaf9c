"""A benchmark run against the previous run of the same model x batch size x dataset, row by row.

Both runs answered the same questions (rows matched by ``sample_id``; rows only one run has are left
out and counted). Per dataset:

- an exact McNemar test on ``correct``: of the rows whose correctness changed, ``lost`` (right
  before, wrong now) against ``gained``; under "no change" each is Binomial(lost + gained, 1/2),
  and the two-sided p-value is ``min(1, 2 * P[X <= min(lost, gained)])``;
- the mean difference of the row's score (the dataset's metric: relaxed accuracy, else ANLS, else
  the verifier; each a function of the answer text, so equal answers score equally) with a paired
  percentile bootstrap interval (rows resampled with replacement, ``BOOTSTRAP_RESAMPLES`` times, a
  fixed seed);
- the number of rows whose greedy text changed.

A drop is significant when McNemar's p-value is below ``ALPHA`` and more rows were lost than gained.
Two runs of the same code answer alike: zero changed rows, p = 1, a mean difference of 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np

from aerorl_ops.storage.views import ROW_CORRECT, ROW_SCORE

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_LEVEL = 0.95
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class RowOutcome:
    """One benchmark row as a run answered it."""

    correct: bool
    score: float
    response: str


@dataclass(frozen=True)
class ChangedRow:
    """A row whose correctness or text changed between the previous run and this one."""

    sample_id: str
    before: RowOutcome
    after: RowOutcome

    @property
    def change(self) -> str:
        """``lost`` (right before, wrong now), ``gained``, or ``text`` (same correctness, other words)."""
        if self.before.correct != self.after.correct:
            return "lost" if self.before.correct else "gained"
        return "text"


@dataclass(frozen=True)
class RowComparison:
    """This run against the previous one on the rows both answered."""

    rows: int  # rows both runs answered
    unmatched: int  # rows only one of the runs answered
    lost: int
    gained: int
    p_value: float  # exact McNemar, two-sided
    mean_score_difference: float  # this run minus the previous one
    interval: tuple[float, float]  # paired bootstrap interval of the mean difference
    changed: tuple[ChangedRow, ...]  # every row whose correctness or text changed, in sample-id order

    @property
    def changed_text(self) -> int:
        return sum(row.before.response != row.after.response for row in self.changed)

    def significant_drop(self, alpha: float = ALPHA) -> bool:
        return self.p_value < alpha and self.lost > self.gained


def mcnemar_exact_p(lost: int, gained: int) -> float:
    """Two-sided exact McNemar p-value of ``lost`` vs ``gained`` discordant pairs (1.0 when there are none).

    >>> mcnemar_exact_p(0, 0), mcnemar_exact_p(3, 0), round(mcnemar_exact_p(6, 0), 6)
    (1.0, 0.25, 0.03125)
    """
    if lost < 0 or gained < 0:
        raise ValueError(f"discordant counts must be >= 0, got lost={lost}, gained={gained}")
    n = lost + gained
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(lost, gained) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_bootstrap_interval(differences: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                              level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of paired ``differences`` ((0, 0) for none).

    >>> paired_bootstrap_interval([0.0, 0.0, 0.0])
    (0.0, 0.0)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = np.asarray(differences, dtype=np.float64)
    if values.size == 0:
        return 0.0, 0.0
    picks = np.random.default_rng(seed).integers(0, values.size, size=(resamples, values.size))
    means = values[picks].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def compare_rows(previous: Mapping[str, RowOutcome], current: Mapping[str, RowOutcome]) -> RowComparison:
    """``current`` against ``previous`` on the sample ids both hold (module docstring)."""
    shared = sorted(previous.keys() & current.keys())
    unmatched = len(previous.keys() ^ current.keys())
    changed = tuple(ChangedRow(sample, previous[sample], current[sample]) for sample in shared
                    if previous[sample].correct != current[sample].correct
                    or previous[sample].response != current[sample].response)
    lost = sum(row.change == "lost" for row in changed)
    gained = sum(row.change == "gained" for row in changed)
    differences = [current[sample].score - previous[sample].score for sample in shared]
    mean = float(np.mean(differences)) if differences else 0.0
    return RowComparison(len(shared), unmatched, lost, gained, mcnemar_exact_p(lost, gained), mean,
                         paired_bootstrap_interval(differences), changed)


ROW_OUTCOMES_SQL = f"""
SELECT s.sample_id, {ROW_CORRECT} AS correct, {ROW_SCORE} AS score, coalesce(g.response, '') AS response
FROM reward_scores s JOIN generations g USING (run_id, model_key, batch_size, sample_id)
WHERE s.run_id = ? AND s.model_key = ? AND s.batch_size = ? AND s.dataset = ?
"""
"""A run's rows of one model x batch size x dataset; the score is the dataset's metric (module docstring)."""


def row_outcomes(conn: duckdb.DuckDBPyConnection, run_id: str, model_key: str, batch_size: int,
                 dataset: str) -> dict[str, RowOutcome]:
    """A run's rows of one model x batch size x dataset, by sample id."""
    rows = conn.execute(ROW_OUTCOMES_SQL, [run_id, model_key, batch_size, dataset]).fetchall()
    return {sample: RowOutcome(bool(correct), float(score), response) for sample, correct, score, response in rows}
