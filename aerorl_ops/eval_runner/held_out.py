"""Held-out evaluation of a policy on a task environment: greedy answers, accuracy per type.

- ``evaluate_policy``: greedy replies (special tokens suppressed, at most ``max_new_tokens``) to
  the environment's items at ``indices``, graded by ``env.step``: the mean reward and its
  components, and accuracy (the environment's ``correct``) overall and per question type;
- ``prior_evaluation``: the no-image prior (most common train answer per question text, fitted
  on the training environment's items) scored on the same held-out items;
- both with accuracy per source dataset (``EvalResult.by_source``) when the environment is a mixture
  (``envs.mixture``: each item's ``dataset`` is its part's name); empty for any other environment;
- ``image_swap_check``: how often the answers to questions of one type change when each such
  question is shown the image of the next one (a model that reads the image changes most);
- ``EvalResult.episodes``: on a multi-turn environment, whole episodes played greedily (success rate, mean
  return and mean turns with standard errors; ``rl.step.episode_evaluation`` plays them);
- ``EvalResult.distribution``: which held-out distribution was evaluated (a ``[datasets]`` name that the
  training dataset's ``held_out`` names), None for the run's own held-out sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aerorl_ops.envs.base import TaskEnv, items_at
from aerorl_ops.envs.mixture import mixture_sources
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_metrics.accuracy import Accuracy, AccuracyReport, accuracy_by, accuracy_report
from aerorl_ops.eval_metrics.episodes import EpisodeReport
from aerorl_ops.eval_runner.episodes import Replies, generate_replies, grade, micro_batches, observe_all
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.task_item import TaskItem

EVAL_BATCH_SIZE = 125
PRIOR_PHASE = "no_image_prior"


@dataclass(frozen=True)
class EvalResult:
    step: int
    phase: str  # "base", "warmup", "rl", "final", "control" or "no_image_prior"
    reward_mean: float | None
    component_means: dict[str, float]
    report: AccuracyReport
    wall_s: float = 0.0  # training seconds before this evaluation (evaluations excluded)
    by_source: Mapping[str, Accuracy] = field(default_factory=dict)  # a mixture's, by part (source_accuracy)
    episodes: EpisodeReport | None = None  # a multi-turn environment's whole episodes (accuracy: their success)
    distribution: str | None = None  # a held-out distribution's dataset name; None: the run's held-out sample

    @property
    def accuracy(self) -> float:
        return self.report.overall.accuracy

    @property
    def n(self) -> int:
        return self.report.overall.n


@dataclass(frozen=True)
class SwapCheck:
    question_type: str
    questions: int
    changed: float  # share of answers that changed when the image was swapped


def greedy_replies(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int,
                   observations: Sequence[Observation] | None = None) -> Replies:
    """Greedy replies to the items at ``indices`` (or to ``observations`` of them), in batches."""
    observations = list(observations) if observations is not None else observe_all(env, items_at(env, indices))
    token_ids, texts, truncated = [], [], []
    count = -(-len(indices) // EVAL_BATCH_SIZE)
    for part in micro_batches(list(range(len(indices))), count):
        replies = generate_replies(loaded, encode_observations(loaded, [observations[i] for i in part]),
                                   max_new_tokens, None)
        token_ids += replies.token_ids
        texts += replies.texts
        truncated += replies.truncated
    return Replies(token_ids, texts, truncated)


def evaluate_policy(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int, step: int,
                    phase: str, wall_s: float = 0.0) -> EvalResult:
    """Greedy accuracy and reward of the policy on the held-out items ``indices``."""
    replies = greedy_replies(loaded, env, indices, max_new_tokens)
    items = items_at(env, indices)
    graded = grade(env, items, replies, eos_token_ids(loaded))
    correct = [bool(c) for c in graded.correct.tolist()]
    report = accuracy_report((item.question_type, c) for item, c in zip(items, correct, strict=True))
    return EvalResult(step, phase, float(graded.rewards.mean()),
                      {name: float(values.mean()) for name, values in graded.components.items()}, report, wall_s,
                      source_accuracy(env, items, correct))


def source_accuracy(env: TaskEnv, items: Sequence[TaskItem], correct: Sequence[bool]) -> dict[str, Accuracy]:
    """Accuracy on ``items`` per source dataset (each item's ``dataset``), every part of ``env`` listed in
    order, when ``env`` is a mixture (``envs.mixture.mixture_sources``); empty for any other environment."""
    sources = mixture_sources(env)
    return accuracy_by(sources, zip((item.dataset for item in items), correct, strict=True)) if sources else {}


def prior_evaluation(train_env: TaskEnv, eval_env: TaskEnv, indices: Sequence[int]) -> EvalResult:
    """The no-image prior fitted on ``train_env``'s items, scored on ``eval_env``'s ``indices``."""
    prior = QuestionPrior.fit((item.question, item.answers[0]) for item in train_env.items)
    items = [eval_env.items[i] for i in indices]
    by_source = source_accuracy(eval_env, items, [prior.is_correct(item.question, item.answers) for item in items])
    return EvalResult(0, PRIOR_PHASE, None, {}, prior.accuracy(items), by_source=by_source)


def image_swap_check(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], question_type: str,
                     max_new_tokens: int) -> SwapCheck:
    """Answer each ``question_type`` question with its own images (and video), then with the next such
    question's."""
    chosen = [i for i in indices if env.question_type(i) == question_type]
    if len(chosen) < 2:
        return SwapCheck(question_type, len(chosen), 0.0)
    own = observe_all(env, items_at(env, chosen))
    swapped = [Observation(own[(k + 1) % len(own)].images, own[k].messages, own[(k + 1) % len(own)].video,
                           own[(k + 1) % len(own)].video_fps) for k in range(len(own))]
    before = greedy_replies(loaded, env, chosen, max_new_tokens, own).texts
    after = greedy_replies(loaded, env, chosen, max_new_tokens, swapped).texts
    changed = sum(a != b for a, b in zip(before, after, strict=True)) / len(chosen)
    return SwapCheck(question_type, len(chosen), changed)
