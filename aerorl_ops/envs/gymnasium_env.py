"""Any Gymnasium environment with discrete actions as a multi-turn task environment (``kind = "gymnasium"``).

Each item is one episode: the environment ``env_id`` reset with the episode's seed. Every turn shows
the environment's rendered frame (``render_mode = "rgb_array"``) and the text of ``observation_template``
(placeholders ``{turn}``, ``{max_turns}``, ``{mission}``: the environment's ``mission`` when it has one,
else its id, and ``{actions}``: the action words); the model's reply is parsed into an action
(``envs.gym_actions``: a list of action words, the k-th being action k, or a regular expression and a
word -> action table), the environment steps, and its reward is the turn's reward. The episode ends when
the environment terminates or truncates, or after ``max_turns`` replies. Its ``correct`` (at the last
step) is success: the episode's summed reward above ``success_threshold`` (MiniGrid pays a positive
reward only on reaching the goal).

A reply that names no action earns 0 for its turn and the environment does not step; the episode goes
on (the turn counts towards ``max_turns``), the next observation the same frame after the line "That
is not an action." Each step's ``info.components`` hold ``parse_failures`` (the episode's so far),
``env_return`` (its summed reward) and ``env_steps`` (the actions taken). Parse failures never raise.

Episodes are replayed: a state holds the actions taken, and each ``step`` resets the environment with
the episode's seed and takes them again before the new one (MiniGrid: well under a millisecond a
step). So a state can be stepped twice, a batch rebuilt from completion ids replays an episode
(``rl.step.multi_turn.replayed_turns``), and nothing lives between calls but one environment object,
which makes an instance unsafe to step from two threads at once. An environment whose episodes are not
a function of their reset seed and actions cannot be used.

Episode seeds: ``limit`` episodes (``DEFAULT_EPISODES`` when None), drawn with ``seed`` from
``[0, 2**30)`` for split ``train`` and from ``[2**30, 2**31)`` for any other split, so held-out
episodes never repeat training ones. Item ids are ``<env_id>@<episode seed>``. For a MiniGrid
environment whose action words name its turns and ``forward``, an item's answer is the first action of
a shortest path to the goal (``envs.minigrid_planner``); ``planned_actions`` gives the whole path.

``gymnasium`` (and the package registering ``env_id``: ``minigrid`` for ``MiniGrid-*`` / ``BabyAI-*``
ids) are the ``envs`` extra's; an id that is not registered is refused in one line naming it and the
extra. ``module:EnvId`` imports ``module`` first (Gymnasium's own form).
"""

from __future__ import annotations

import importlib
import inspect
import io
import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from aerorl_ops.envs.base import HeldItems
from aerorl_ops.envs.gym_actions import ActionParser
from aerorl_ops.envs.minigrid_planner import FORWARD, LEFT, RIGHT, is_minigrid, shortest_path
from aerorl_ops.envs.types import Completion, EpisodeState, Observation, StepInfo, StepResult, observe
from aerorl_ops.error_line import error_line
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem

KIND = "gymnasium"
EXTRA = "envs"
INSTALL = f"pip install -e '.[{EXTRA}]'"
REGISTERING_PACKAGES = {"MiniGrid-": "minigrid", "BabyAI-": "minigrid"}
"""Id prefixes whose environments a package registers when imported (the ``envs`` extra installs it)."""
DEFAULT_TEMPLATE = "{mission}. Turn {turn} of {max_turns}: reply with one action ({actions})."
PLACEHOLDERS = ("turn", "max_turns", "mission", "actions")
NOT_AN_ACTION = "That is not an action."
DEFAULT_MAX_TURNS = 8
DEFAULT_EPISODES = 64
SEED_SPAN = 2**30
"""Training episodes draw their seeds from [0, SEED_SPAN), every other split from [SEED_SPAN, 2 * SEED_SPAN)."""


class GymnasiumIdError(ValueError):
    """Gymnasium, or the environment id asked for, is not installed here."""


def make_gym(env_id: str, env_kwargs: Mapping[str, Any]):
    """``gymnasium.make(env_id, render_mode="rgb_array", **env_kwargs)``; a missing ``gymnasium``, or an id no
    installed package registers, is a one-line :class:`GymnasiumIdError` naming it and the extra."""
    try:
        import gymnasium
    except ImportError:
        raise GymnasiumIdError(f"kind {KIND!r} (env_id {env_id!r}) needs gymnasium, which is not installed: "
                               f"{INSTALL}") from None
    for prefix, package in REGISTERING_PACKAGES.items():
        if env_id.startswith(prefix):
            try:
                importlib.import_module(package)
            except ImportError:
                raise GymnasiumIdError(f"gymnasium env {env_id!r} is registered by {package!r}, which is not "
                                       f"installed: {INSTALL}") from None
    try:
        return gymnasium.make(env_id, render_mode="rgb_array", **dict(env_kwargs))
    except (gymnasium.error.Error, ModuleNotFoundError) as error:
        module_form = "" if ":" in env_id else f", or write it as 'module:{env_id}'"
        raise GymnasiumIdError(f"gymnasium env {env_id!r} is not registered here ({error_line(error)}): install the "
                               f"package that registers it ({INSTALL} for MiniGrid){module_form}") from None


def episode_seeds(split: str, seed: int, count: int) -> list[int]:
    """``count`` distinct episode seeds drawn with ``seed``, from the split's range (module docstring).

    >>> episode_seeds("train", 0, 3) == episode_seeds("train", 0, 3), min(episode_seeds("test", 0, 50)) >= 2**30
    (True, True)
    """
    offset = 0 if split == "train" else SEED_SPAN
    return [offset + value for value in random.Random(seed).sample(range(SEED_SPAN), count)]


def item_id(env_id: str, episode_seed: int) -> str:
    return f"{env_id}@{episode_seed}"


def item_seed(item: TaskItem) -> int:
    """The episode seed in ``item``'s id (``<env_id>@<seed>``); a ``ValueError`` naming an id without one."""
    head, _, seed = item.item_id.rpartition("@")
    if not head or not seed.isdigit():
        raise ValueError(f"item {item.item_id!r} is not a gymnasium episode (ids are '<env_id>@<episode seed>')")
    return int(seed)


@dataclass(frozen=True)
class GymEpisodeState(EpisodeState):
    """An episode's state: the action of each reply so far (None: the reply named none)."""

    actions: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class GymTask:
    """What every episode of a ``gymnasium`` environment shares (module docstring)."""

    env_id: str
    parser: ActionParser
    max_turns: int = DEFAULT_MAX_TURNS
    template: str = DEFAULT_TEMPLATE
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    success_threshold: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.max_turns, bool) or not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ValueError(f"max_turns must be a whole number of at least 1, got {self.max_turns!r}")
        if not isinstance(self.env_kwargs, Mapping):
            raise ValueError(f"env_kwargs must be a table of gymnasium.make keywords, got {self.env_kwargs!r}")
        for _, name, _, _ in string.Formatter().parse(self.template):
            if name is not None and name not in PLACEHOLDERS:
                raise ValueError(f"observation_template {self.template!r} has the placeholder {{{name}}}; its "
                                 f"placeholders: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")

    def text(self, turn: int, mission: str) -> str:
        """The observation text of ``turn`` (1-based)."""
        return self.template.format(turn=turn, max_turns=self.max_turns, mission=mission,
                                    actions=", ".join(self.parser.words))


def gym_task(env_id: str, actions: Sequence[str] | None, action_regex: str | None,
             action_map: Mapping[str, int] | None, max_turns: int, observation_template: str,
             env_kwargs: Mapping[str, Any] | None, success_threshold: float) -> GymTask:
    """The settings as a :class:`GymTask`; a ``ValueError`` naming the setting that does not fit."""
    if not isinstance(env_id, str) or not env_id.strip():
        raise ValueError(f"env_id must name a gymnasium environment, got {env_id!r}")
    if actions is not None and (action_regex is not None or action_map is not None):
        raise ValueError("give either actions (a list of action words) or action_regex with action_map, not both")
    if actions is not None:
        parser = ActionParser.of_words(actions)
    elif action_regex is not None and action_map is not None:
        parser = ActionParser.of_regex(action_regex, action_map)
    else:
        raise ValueError(f"gymnasium env {env_id!r} needs its action words: actions = [...] (the k-th word is "
                         "action k), or action_regex with action_map (word -> action number)")
    return GymTask(env_id, parser, max_turns, observation_template, dict(env_kwargs or {}), success_threshold)


def png(frame) -> bytes:
    """An RGB frame (an [H, W, 3] uint8 array) as PNG bytes."""
    buffer = io.BytesIO()
    Image.fromarray(frame).convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


class GymnasiumEnv(HeldItems):
    """Episodes of ``task.env_id``, one per item (module docstring)."""

    def __init__(self, name: str, data: LoadResult, task: GymTask) -> None:
        self.name = name
        self.task = task
        self.items: tuple[TaskItem, ...] = tuple(data.items)
        self.rejected: list[RejectedRow] = list(data.rejected)
        self.max_turns = task.max_turns
        self._gym = make_gym(task.env_id, task.env_kwargs)
        space = self._gym.action_space
        if not hasattr(space, "n"):
            raise ValueError(f"gymnasium env {task.env_id!r} has the action space {space}; kind {KIND!r} takes "
                             "discrete actions only")
        task.parser.check_actions(int(space.n), task.env_id)

    def __repr__(self) -> str:
        return (f"GymnasiumEnv({self.name!r}, {self.task.env_id!r}, items={len(self.items)}, "
                f"rejected={len(self.rejected)})")

    def close(self) -> None:
        self._gym.close()

    def episode_item(self, episode_seed: int, split: str) -> TaskItem:
        """The item of the episode reset with ``episode_seed``: its first frame and text, and its planned first
        action as the answer when there is a plan."""
        self._gym.reset(seed=episode_seed)
        text = self.task.text(1, self._mission())
        plan = self._plan()
        return TaskItem(item_id(self.task.env_id, episode_seed), self.name, split, f"{KIND}:{self.task.env_id}", text,
                        plan[:1], (png(self._gym.render()),),
                        ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]},))

    def planned_actions(self, item: TaskItem) -> tuple[str, ...] | None:
        """The action words of a shortest path to the goal from ``item``'s start (MiniGrid only); None when the
        environment has no planner, its words do not name the moves, or no path exists."""
        self._gym.reset(seed=item_seed(item))
        return self._plan() or None

    def _plan(self) -> tuple[str, ...]:
        unwrapped = self._gym.unwrapped
        moves = {LEFT, RIGHT, FORWARD}
        if not is_minigrid(unwrapped) or not moves <= set(self.task.parser.actions.values()):
            return ()
        path = shortest_path(unwrapped)
        return tuple(self.task.parser.word(action) for action in path) if path else ()

    def _mission(self) -> str:
        return str(getattr(self._gym.unwrapped, "mission", "") or self.task.env_id)

    def reset(self, item: TaskItem) -> tuple[GymEpisodeState, Observation]:
        return GymEpisodeState(item), observe(item)

    def step(self, state: EpisodeState, completion: Completion) -> StepResult:
        """The reply's action taken (module docstring); the turn's reward, and the next frame unless done."""
        taken = getattr(state, "actions", ())
        if state.turn >= self.max_turns or len(taken) != state.turn:
            raise ValueError(f"environment {self.name!r}: episode on item {state.item.item_id!r} is at turn "
                             f"{state.turn} of at most {self.max_turns} with {len(taken)} actions: reset it")
        action = self.task.parser.parse(completion.text)
        history = (*taken, action)
        rewards, ended = self._replay(state.item, history)
        reward = rewards[-1] if action is not None else 0.0
        total = sum(rewards)
        done = ended or len(history) >= self.max_turns
        failures = sum(a is None for a in history)
        info = StepInfo({"parse_failures": float(failures), "env_return": float(total),
                         "env_steps": float(len(rewards))},
                        bool(done and total > self.task.success_threshold),
                        self.task.parser.word(action) if action is not None else "")
        if done:
            return StepResult(float(reward), True, info)
        return StepResult(float(reward), False, info, self._observation(len(history) + 1, action is None),
                          GymEpisodeState(state.item, len(history), history))

    def _replay(self, item: TaskItem, history: Sequence[int | None]) -> tuple[list[float], bool]:
        """The environment reset with ``item``'s seed and stepped through ``history``'s actions: each step's
        reward, and whether the episode ended at the last one."""
        self._gym.reset(seed=item_seed(item))
        applied = [action for action in history if action is not None]
        rewards, ended = [], False
        for k, action in enumerate(applied):
            if ended:
                raise ValueError(f"gymnasium env {self.task.env_id!r}, item {item.item_id!r}: the episode ended after "
                                 f"{k} actions when replayed, before its last one; its episodes are not a function "
                                 "of their seed and actions")
            _, reward, terminated, truncated, _ = self._gym.step(action)
            rewards.append(float(reward))
            ended = bool(terminated or truncated)
        return rewards, ended

    def _observation(self, turn: int, failed: bool) -> Observation:
        text = self.task.text(turn, self._mission())
        if failed:
            text = f"{NOT_AN_ACTION} {text}"
        frame = Image.fromarray(self._gym.render()).convert("RGB")
        return Observation(images=(frame,), messages=[
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}])


def gymnasium_env(env_id: str, split: str = "train", limit: int | None = None, seed: int = 0, name: str = "",
                  actions: Sequence[str] | None = None, action_regex: str | None = None,
                  action_map: Mapping[str, int] | None = None, max_turns: int = DEFAULT_MAX_TURNS,
                  observation_template: str = DEFAULT_TEMPLATE, env_kwargs: Mapping[str, Any] | None = None,
                  success_threshold: float = 0.0) -> GymnasiumEnv:
    """``limit`` episodes of ``env_id`` (registered as ``gymnasium``; module docstring)."""
    task = gym_task(env_id, actions, action_regex, action_map, max_turns, observation_template, env_kwargs,
                    success_threshold)
    env = GymnasiumEnv(name or env_id, LoadResult(), task)
    count = DEFAULT_EPISODES if limit is None else limit
    env.items = tuple(env.episode_item(episode_seed, split) for episode_seed in episode_seeds(split, seed, count))
    return env


def items_gymnasium_env(settings: Mapping[str, Any], data: LoadResult) -> GymnasiumEnv:
    """The ``gymnasium`` environment of ``settings`` (``gymnasium_env``'s keywords; those left out take its
    defaults) over items read before (``envs.item_envs``)."""
    defaults = {key: p.default for key, p in inspect.signature(gymnasium_env).parameters.items()}
    value = {key: settings.get(key, default) for key, default in defaults.items()}
    task = gym_task(value["env_id"], value["actions"], value["action_regex"], value["action_map"],
                    value["max_turns"], value["observation_template"], value["env_kwargs"],
                    value["success_threshold"])
    return GymnasiumEnv(value["name"] or value["env_id"], data, task)
