"""A multi-turn environment: a question with a second try.

``TwoTriesEnv`` wraps a single-turn environment. A right first answer earns the inner reward and ends
the episode. A wrong one earns 0, and the episode goes on: the next observation is the user's reply
``feedback`` ("Incorrect, look again."; with ``show_images_again``, the item's images shown again before
it), appended to the conversation, and the second answer
earns ``second_try_reward`` x the inner reward. Rewards are per turn (the trainer places each at the end
of its turn); the episode's accuracy (``info.correct`` of its last step) is "right within two tries",
and ``info.components["first_try_correct"]`` says whether the first answer was.

>>> from aerorl_ops.envs.base import SingleTurnEnv
>>> from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
>>> from aerorl_ops.envs.types import Completion
>>> from aerorl_ops.rows.load_result import LoadResult
>>> from aerorl_ops.rows.task_item import TaskItem
>>> item = TaskItem("q1", "demo", "test", "demo.jsonl", "2+2?", ("4",), ())
>>> env = TwoTriesEnv(SingleTurnEnv("demo", LoadResult([item]), ExactMatchGrader()))
>>> state, _ = env.reset(item)
>>> first = env.step(state, Completion("5"))
>>> first.reward, first.done, first.observation.messages[0]["content"][0]["text"]
(0.0, False, 'Incorrect, look again.')
>>> second = env.step(first.state, Completion("4"))
>>> second.reward, second.done, second.info.correct, second.info.components["first_try_correct"]
(0.5, True, True, 0.0)
"""

from __future__ import annotations

from dataclasses import replace

from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.types import Completion, EpisodeState, Observation, StepInfo, StepResult, observe
from aerorl_ops.envs.wrapped import WrappedEnv
from aerorl_ops.rows.task_item import TaskItem

FEEDBACK = "Incorrect, look again."
SECOND_TRY_REWARD = 0.5
"""A right second answer earns this share of the inner reward."""


class TwoTriesEnv(WrappedEnv):
    """``env``'s questions, each with a second try after a wrong first answer (module docstring)."""

    max_turns = 2

    def __init__(self, env: TaskEnv, feedback: str = FEEDBACK, second_try_reward: float = SECOND_TRY_REWARD,
                 show_images_again: bool = False) -> None:
        if not 0.0 <= second_try_reward <= 1.0:
            raise ValueError(f"second_try_reward must be in [0, 1], got {second_try_reward!r}")
        super().__init__(env, f"{env.name}_two_tries")
        self.feedback = feedback
        self.second_try_reward = second_try_reward
        self.show_images_again = show_images_again

    def __repr__(self) -> str:
        return f"TwoTriesEnv({self.env!r})"

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        if state.turn not in (0, 1):
            raise ValueError(f"environment {self.name!r}: episode on item {state.item.item_id!r} is already done "
                             f"(turn {state.turn}); two-try episodes take at most two steps, call reset again")
        graded = self.env.step(replace(state, turn=0), completion)
        info = graded.info
        if state.turn == 0:
            components = {**info.components, "first_try_correct": float(info.correct)}
            if info.correct:
                return StepResult(graded.reward, True, replace(info, components=components))
            feedback = self._feedback(state.item)
            return StepResult(0.0, False, replace(info, components=components), feedback, replace(state, turn=1))
        components = {**info.components, "first_try_correct": 0.0}
        return StepResult(self.second_try_reward * graded.reward, True, StepInfo(components, info.correct,
                                                                                  info.prediction))


    def _feedback(self, item: TaskItem) -> Observation:
        text = {"type": "text", "text": self.feedback}
        if not self.show_images_again:
            return Observation(images=(), messages=[{"role": "user", "content": [text]}])
        images = observe(item).images
        return Observation(images=images, messages=[
            {"role": "user", "content": [*({"type": "image"} for _ in images), text]}])


def easy_vqa_two_tries_env(split: str = "train", limit: int | None = None, seed: int = 0,
                           second_try_reward: float = SECOND_TRY_REWARD, show_images_again: bool = False
                           ) -> TwoTriesEnv:
    """easy-VQA with a second try (registered as ``easy_vqa_two_tries``; with ``show_images_again``, the
    second try shows the image again)."""
    from aerorl_ops.envs.easy_vqa import easy_vqa_env

    return TwoTriesEnv(easy_vqa_env(split, limit, seed), second_try_reward=second_try_reward,
                       show_images_again=show_images_again)
