"""Task environments: dataset rows as episodes, replies as rewards plus a ``correct`` flag.

``make_env(name, **settings)`` builds one of ``ENVIRONMENTS`` (``easy_vqa``, ``docvqa``,
``chartqa``, ``jsonl``, ``parquet``); ``reset(index)`` gives an episode's state and
observation, ``step(state, completion)`` its reward, ``done`` and :class:`StepInfo`.
"""

from aerorl_ops.envs.base import Grader, SingleTurnEnv, TaskEnv
from aerorl_ops.envs.easy_vqa import easy_vqa_prior, easy_vqa_prior_accuracy
from aerorl_ops.envs.exact_match import ExactMatchGrader, answers_match, normalize_answer, predicted_answer
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.registry import (
    ENVIRONMENTS,
    EnvSettingsError,
    UnknownEnvironmentError,
    check_settings,
    env_settings,
    make_env,
    register_env,
)
from aerorl_ops.envs.reward_stack_grader import RewardStackGrader
from aerorl_ops.envs.types import (
    Completion,
    EnvCounts,
    EpisodeState,
    Observation,
    StepInfo,
    StepResult,
    TaskData,
    TaskItem,
)

__all__ = [
    "ENVIRONMENTS",
    "Completion",
    "EnvCounts",
    "EnvSettingsError",
    "EpisodeState",
    "ExactMatchGrader",
    "Grader",
    "Observation",
    "QuestionPrior",
    "RewardStackGrader",
    "SingleTurnEnv",
    "StepInfo",
    "StepResult",
    "TaskData",
    "TaskEnv",
    "TaskItem",
    "UnknownEnvironmentError",
    "answers_match",
    "check_settings",
    "easy_vqa_prior",
    "easy_vqa_prior_accuracy",
    "env_settings",
    "make_env",
    "normalize_answer",
    "predicted_answer",
    "register_env",
]
