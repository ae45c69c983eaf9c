"""An environment whose replies a judge model grades too (``[datasets.<name>] judge``).

``JudgedEnv`` wraps any environment: ``reset`` / ``step`` are the wrapped one's (so its reward and
its ``correct`` test are unchanged), and ``judge`` grades a batch of replies at once through a
``JudgeScorer``. ``eval_runner.episodes.grade`` adds ``weight`` times each judge score to the step
reward and reports the ``judge`` and ``judge_failed`` components. ``tally`` adds up the judge's
failures, timeouts, cache hits and generate calls over the run (failures are never silently zero).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.registry import ENVIRONMENTS
from aerorl_ops.envs.wrapped import WrappedEnv
from aerorl_ops.models.loading import load_vlm
from aerorl_ops.models.sources import BASE_BUILDERS, TORCH_DTYPES, EmbeddedBuilder, model_source
from aerorl_ops.rewards.judge import GradeCache, JudgedScores, JudgeModel, JudgeScorer, JudgeTriple, MemoryGradeCache
from aerorl_ops.rows.task_item import TaskItem, prompt_text
from aerorl_ops.scoring.judge_model import TransformersJudge


@dataclass
class JudgeTally:
    """The judge's counts over every batch it graded."""

    graded: int = 0
    failures: int = 0
    timeouts: int = 0
    cached: int = 0
    calls: int = 0

    def add(self, judged: JudgedScores) -> None:
        self.graded += len(judged.scores)
        self.failures += judged.failures
        self.timeouts += judged.timeouts
        self.cached += judged.cached
        self.calls += judged.calls


class JudgedEnv(WrappedEnv):
    """``env``, with ``scorer`` grading its replies and ``weight`` saying how much that grade counts."""

    def __init__(self, env: TaskEnv, scorer: JudgeScorer, weight: float) -> None:
        super().__init__(env)
        self.scorer = scorer
        self.weight = weight
        self.tally = JudgeTally()

    def __repr__(self) -> str:
        return f"JudgedEnv({self.env!r}, judge={self.scorer.judge.key!r}, weight={self.weight})"

    def judge(self, items: Sequence[TaskItem], texts: Sequence[str]) -> JudgedScores:
        """The judge's scores of reply ``texts`` to ``items`` (one batch API call)."""
        triples = [JudgeTriple(prompt_text(item), tuple(item.answers), text)
                   for item, text in zip(items, texts, strict=True)]
        judged = self.scorer.scores(triples)
        self.tally.add(judged)
        return judged


def dataset_judge(dataset: DatasetSettings, rewards_judge: JudgeSettings | None) -> JudgeSettings | None:
    """The judge of ``dataset``: its ``judge`` model with ``[rewards.judge]``'s other settings (the defaults
    without that table) and its ``judge_weight`` when set; None when it names no judge.

    >>> dataset_judge(DatasetSettings("d", "easy_vqa", "train", 8, judge="big", judge_weight=0.25), None).weight
    0.25
    """
    if not dataset.judge:
        return None
    judge = replace(rewards_judge, model=dataset.judge) if rewards_judge else JudgeSettings(model=dataset.judge)
    return judge if dataset.judge_weight is None else replace(judge, weight=dataset.judge_weight)


def judged_env(env: TaskEnv, dataset: DatasetSettings, rewards_judge: JudgeSettings | None,
               load_judge: Callable[[str], JudgeModel], cache: GradeCache | None = None) -> TaskEnv:
    """``env`` graded by ``dataset``'s judge too (``load_judge`` makes it from its model key), or ``env``
    itself when the dataset names none."""
    settings = dataset_judge(dataset, rewards_judge)
    if settings is None:
        return env
    scorer = JudgeScorer(load_judge(settings.model), settings, cache or MemoryGradeCache())
    return JudgedEnv(env, scorer, settings.weight)


def named_judged_env(env: TaskEnv, name: str, bench: BenchmarkConfig, load_judge: Callable[[str], JudgeModel],
                     cache: GradeCache | None = None) -> TaskEnv:
    """``env`` (what ``envs.configured.named_env`` made of ``name``) judged as its ``[datasets.<name>]``
    table says; ``env`` itself for a registry kind (a kind wins, as in ``named_env``) or a dataset
    without a judge."""
    if name in ENVIRONMENTS:
        return env
    dataset = next((dataset for dataset in bench.datasets if dataset.name == name), None)
    if dataset is None:
        return env
    return judged_env(env, dataset, bench.rewards.judge, load_judge, cache)


def judge_loader(bench: BenchmarkConfig, models_dir: Path, device: torch.device,
                 local_files_only: bool = True,
                 builders: Mapping[str, EmbeddedBuilder] = BASE_BUILDERS) -> Callable[[str], JudgeModel]:
    """Loads a ``[models]`` key of ``bench`` as a transformers judge on ``device``, in its configured dtype
    (an embedded model built by its entry in ``builders``)."""
    def load(key: str) -> JudgeModel:
        entry = bench.model(key)
        loaded = load_vlm(model_source(entry, Path(models_dir), local_files_only, builders), device,
                          TORCH_DTYPES[entry.dtype])
        return TransformersJudge(loaded, key)
    return load
