"""Held-out evaluation that plays whole episodes: ``held_out_evaluation`` scores a single-turn environment's
first (only) reply as ``eval_runner.held_out.evaluate_policy`` does, and a multi-turn one's every turn.

On a multi-turn environment (``envs.base.max_turns`` > 1) each held-out item is one episode, played greedily
to its end (``multi_turn.sample_episodes``: the environment's own ``done``, or its ``max_turns``), in batches
of ``EVAL_BATCH_SIZE`` episodes. The evaluation's accuracy is the share of episodes that succeeded (the
environment's ``correct`` at the last step), its reward the mean return (the sum of the turns' rewards), its
components the means of the last step's components (a Gymnasium episode's ``parse_failures``,
``env_return``, ``env_steps``), and ``EvalResult.episodes`` holds success rate, mean return and mean turns
with their standard errors (``eval_metrics.episodes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from aerorl_ops.envs.base import TaskEnv, items_at, max_turns
from aerorl_ops.eval_metrics.accuracy import accuracy_report
from aerorl_ops.eval_metrics.episodes import episode_report
from aerorl_ops.eval_runner.held_out import EVAL_BATCH_SIZE, EvalResult, evaluate_policy, source_accuracy
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.step.multi_turn import sample_episodes


def evaluate_episodes(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int, step: int,
                      phase: str, wall_s: float = 0.0, distribution: str | None = None) -> EvalResult:
    """Whole greedy episodes of the items at ``indices`` (module docstring); ``max_new_tokens`` per reply."""
    items = items_at(env, indices)
    successes: list[bool] = []
    returns: list[float] = []
    turns: list[int] = []
    components: dict[str, float] = {}
    for start in range(0, len(items), EVAL_BATCH_SIZE):
        played = sample_episodes(loaded, env, items[start:start + EVAL_BATCH_SIZE], max_new_tokens, None)
        successes += [bool(c) for c in played.graded.correct.tolist()]
        returns += played.graded.rewards.tolist()
        turns += played.turns
        for name, values in played.graded.components.items():
            components[name] = components.get(name, 0.0) + float(values.sum())
    report = accuracy_report((item.question_type, success) for item, success in zip(items, successes, strict=True))
    episodes = episode_report(successes, returns, turns)
    means = {name: total / len(items) for name, total in components.items()}
    return EvalResult(step, phase, episodes.mean_return, means, report, wall_s,
                      source_accuracy(env, items, successes), episodes, distribution)


def held_out_evaluation(loaded: LoadedVLM, env: TaskEnv, indices: Sequence[int], max_new_tokens: int, step: int,
                        phase: str, wall_s: float = 0.0, distribution: str | None = None) -> EvalResult:
    """Greedy accuracy of the policy on the items at ``indices``: whole episodes on a multi-turn environment
    (:func:`evaluate_episodes`), the one reply of each item on a single-turn one (``evaluate_policy``)."""
    if max_turns(env) > 1:
        return evaluate_episodes(loaded, env, indices, max_new_tokens, step, phase, wall_s, distribution)
    return replace(evaluate_policy(loaded, env, indices, max_new_tokens, step, phase, wall_s),
                   distribution=distribution)
