"""``kind = "gymnasium"`` (``envs.gymnasium_env``) on MiniGrid-Empty-5x5-v0: action parsing, a planned episode
reaching the goal, each frame the PNG of the environment's render, parse failures and ``max_turns``, the
one-line refusal of an id that is not installed, the episode seeds, and a dataset table through a cached
rows table."""

from __future__ import annotations

import doctest
import io
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from aerorl_ops.config.datasets import parse_datasets
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs import gym_actions, gymnasium_env, minigrid_planner
from aerorl_ops.envs.cached import cached_env, env_table, items_sha256
from aerorl_ops.envs.configured import dataset_env
from aerorl_ops.envs.gym_actions import ActionParser
from aerorl_ops.envs.gymnasium_env import NOT_AN_ACTION, GymnasiumIdError, episode_seeds, item_seed
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion

gym = pytest.importorskip("gymnasium")
pytest.importorskip("minigrid")

EMPTY = "MiniGrid-Empty-5x5-v0"
MOVES = ["left", "right", "forward"]
PLAN = ("forward", "forward", "right", "forward", "forward")  # from (1, 1) facing right to the goal at (3, 3)


def grid(**settings):
    return make_env("gymnasium", **{"env_id": EMPTY, "actions": MOVES, "limit": 2, "split": "test", **settings})


def frame(observation) -> np.ndarray:
    (image,) = observation.images
    return np.asarray(image)


def rendered(env_id: str, seed: int, actions=(), **kwargs) -> np.ndarray:
    env = gym.make(env_id, render_mode="rgb_array", **kwargs)
    env.reset(seed=seed)
    for action in actions:
        env.step(action)
    return env.render()


@pytest.mark.parametrize("module", [gym_actions, gymnasium_env, minigrid_planner])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_action_words_are_matched_whole_in_any_case_the_earliest_first():
    parser = ActionParser.of_words(MOVES)
    assert [parser.parse(reply) for reply in ("left", " RIGHT\n", "Forward.", "go forward then left",
                                              "leftover", "forwards", "", "turn around")] == [
        0, 1, 2, 2, None, None, None, None]
    assert parser.words == tuple(MOVES) and parser.word(2) == "forward"
    assert ActionParser.of_words(["pick up", "pick"]).parse("pick up the key") == 0  # the longest word wins


def test_a_regex_and_a_table_map_the_first_match():
    parser = ActionParser.of_regex(r"action:\s*([a-z]+)", {"Turn": 1, "go": 2, "move": 2})
    assert [parser.parse(reply) for reply in ("action: go", "ACTION: go", "action: turn", "action: jump", "go")] == [
        2, None, 1, None, None]  # the regex is case-sensitive as written; the table is not
    assert ActionParser.of_regex(r"\d", {"3": 0}).parse("a3") == 0  # no group: the whole match
    assert parser.words == ("turn", "go", "move")


@pytest.mark.parametrize(("settings", "message"), [
    ({"actions": ["left", "Left"]}, "actions lists a word twice (words are matched in any case): ['left', 'Left']"),
    ({"actions": "left"}, "actions must be a non-empty list of action words, got 'left'"),
    ({"actions": None}, f"gymnasium env {EMPTY!r} needs its action words: actions = [...] (the k-th word is action "
                        "k), or action_regex with action_map (word -> action number)"),
    ({"action_regex": "(", "action_map": {"a": 0}, "actions": None}, "action_regex '(' is not a regular expression"),
    ({"action_regex": "a", "action_map": {"a": 0}}, "give either actions (a list of action words) or action_regex "
                                                   "with action_map, not both"),
    ({"action_regex": "(a)", "action_map": {"a": 7}, "actions": None},
     f"gymnasium env {EMPTY!r} has 7 discrete actions (0..6); the action words name [7]"),
    ({"observation_template": "{turn} {score}"},
     "observation_template '{turn} {score}' has the placeholder {score}; its placeholders: {turn}, {max_turns}, "
     "{mission}, {actions}"),
    ({"max_turns": 0}, "max_turns must be a whole number of at least 1, got 0"),
])
def test_settings_that_do_not_fit_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        grid(**settings)


def test_the_planners_actions_reach_the_goal_the_reward_and_success_are_the_environments():
    env = grid()
    item = env.items[0]
    assert env.planned_actions(item) == PLAN and item.answers == ("forward",)
    state, observation = env.reset(item)
    assert observation.messages[0]["content"][1]["text"] == (
        "get to the green goal square. Turn 1 of 8: reply with one action (left, right, forward).")
    results = []
    for word in PLAN:
        result = env.step(state, Completion(word))
        results.append(result)
        state = result.state
    assert [(r.reward, r.done, r.info.correct) for r in results[:-1]] == [(0.0, False, False)] * 4
    last = results[-1]
    assert last.done and last.info.correct and last.reward == pytest.approx(1 - 0.9 * 5 / 100, abs=1e-12)
    assert last.info.components == {"parse_failures": 0.0, "env_return": pytest.approx(0.955, abs=1e-12),
                                    "env_steps": 5.0}
    assert last.info.prediction == "forward" and last.observation is None


def test_each_frame_is_the_png_of_the_environments_render():
    env = grid(env_kwargs={"tile_size": 8})
    item = env.items[1]
    assert item.images[0][:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(item.images[0])) as image:
        assert image.format == "PNG" and image.size == (40, 40)  # 5 tiles of 8 pixels
        first = np.asarray(image.convert("RGB"))
    assert np.array_equal(first, rendered(EMPTY, item_seed(item), tile_size=8))
    state, observation = env.reset(item)
    assert np.array_equal(frame(observation), first)
    after = env.step(state, Completion("right"))  # turned to face down: the frame changes
    assert np.array_equal(frame(after.observation), rendered(EMPTY, item_seed(item), [1], tile_size=8))
    assert not np.array_equal(frame(after.observation), first)
    assert after.observation.messages == [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": (
        "get to the green goal square. Turn 2 of 8: reply with one action (left, right, forward).")}]}]


def test_an_unknown_action_earns_nothing_is_counted_and_the_episode_goes_on_unmoved():
    env = grid()
    state, first = env.reset(env.items[0])
    failed = env.step(state, Completion("jump!"))
    assert (failed.reward, failed.done, failed.info.correct, failed.info.prediction) == (0.0, False, False, "")
    assert failed.info.components == {"parse_failures": 1.0, "env_return": 0.0, "env_steps": 0.0}
    assert np.array_equal(frame(failed.observation), frame(first))  # the environment did not step
    assert failed.observation.messages[0]["content"][1]["text"].startswith(f"{NOT_AN_ACTION} get to the green")
    state = failed.state
    for word in PLAN:
        result = env.step(state, Completion(word))
        state = result.state
    assert result.done and result.info.correct and result.info.components["parse_failures"] == 1.0
    assert result.reward == pytest.approx(0.955, abs=1e-12)  # the failed turn took no environment step


def test_max_turns_ends_the_episode_without_success_and_a_further_step_is_refused():
    env = grid(max_turns=2)
    state, _ = env.reset(env.items[0])
    first = env.step(state, Completion("forward"))
    second = env.step(first.state, Completion("forward"))
    assert (first.done, second.done, second.info.correct, second.reward) == (False, True, False, 0.0)
    assert second.info.components == {"parse_failures": 0.0, "env_return": 0.0, "env_steps": 2.0}
    with pytest.raises(ValueError, match="is at turn 2 of at most 2 with 2 actions: reset it"):
        env.step(type(first.state)(state.item, 2, (2, 2)), Completion("left"))


def test_a_state_can_be_stepped_twice_the_episode_is_replayed():
    env = grid()
    state, _ = env.reset(env.items[0])
    moved = env.step(state, Completion("forward")).state
    one = env.step(moved, Completion("right"))
    other = env.step(moved, Completion("left"))
    again = env.step(moved, Completion("right"))
    assert np.array_equal(frame(one.observation), frame(again.observation))
    assert not np.array_equal(frame(one.observation), frame(other.observation))


def test_an_id_that_is_not_installed_is_refused_in_one_line_naming_it_and_the_extra(monkeypatch):
    for env_id, names in [("MiniGrid-Nope-v0", "gymnasium env 'MiniGrid-Nope-v0' is not registered here"),
                          ("Nowhere-v3", "gymnasium env 'Nowhere-v3' is not registered here")]:
        with pytest.raises(GymnasiumIdError) as raised:
            grid(env_id=env_id)
        assert "\n" not in str(raised.value) and str(raised.value).startswith(names)
        assert "pip install -e '.[envs]'" in str(raised.value)
    monkeypatch.setitem(sys.modules, "minigrid", None)
    with pytest.raises(GymnasiumIdError, match=re.escape(
            f"gymnasium env {EMPTY!r} is registered by 'minigrid', which is not installed: pip install -e '.[envs]'")):
        grid()
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(GymnasiumIdError, match=re.escape(
            f"kind 'gymnasium' (env_id {EMPTY!r}) needs gymnasium, which is not installed: pip install -e '.[envs]'")):
        grid()


def test_episode_seeds_are_fixed_per_seed_and_held_out_ones_never_train():
    assert episode_seeds("train", 3, 5) == episode_seeds("train", 3, 5) != episode_seeds("train", 4, 5)
    train, test = set(episode_seeds("train", 0, 500)), set(episode_seeds("test", 0, 500))
    assert len(train) == len(test) == 500 and max(train) < 2**30 <= min(test) and max(test) < 2**31
    env = grid(limit=3, seed=5)
    assert [item.item_id for item in env.items] == [f"{EMPTY}@{s}" for s in episode_seeds("test", 5, 3)]
    assert len(make_env("gymnasium", env_id=EMPTY, actions=MOVES)) == gymnasium_env.DEFAULT_EPISODES


def table(text: str, root: Path):
    return parse_datasets("bench.toml", tomllib.loads(text)["datasets"], root, re.compile(r"^[a-z0-9_-]{1,64}$"))


def test_a_dataset_table_with_tables_for_settings_builds_and_caches_the_environment(tmp_path):
    (dataset,) = table(f"""
[datasets.grid]
kind = "gymnasium"
split = "train"
limit = 3
env_id = "{EMPTY}"
action_regex = "(?i)(left|right|ahead)"
action_map = {{ left = 0, right = 1, ahead = 2 }}
max_turns = 6
env_kwargs = {{ tile_size = 8 }}
observation_template = "Turn {{turn}}/{{max_turns}}: {{actions}}?"
""", tmp_path)
    assert hash(dataset) == hash(dataset) and dict(dataset.settings["env_kwargs"]) == {"tile_size": 8}
    env = dataset_env(dataset)
    assert (env.name, env.max_turns, len(env)) == ("grid", 6, 3)
    assert env.items[0].question == "Turn 1/6: left, right, ahead?"
    assert env.planned_actions(env.items[0]) is not None
    path = tmp_path / "rows.parquet"
    pq.write_table(env_table(dataset), path)
    cached, came = cached_env(dataset, pq.read_table(path), lambda: pytest.fail("the cached rows were not used"))
    assert came.cached and items_sha256(cached.items) == items_sha256(env.items)
    for built in (env, cached):
        state, _ = built.reset(built.items[0])
        assert built.step(state, Completion("AHEAD")).info.components["env_steps"] == 1.0


def test_a_table_naming_an_id_that_is_not_installed_is_one_config_error_naming_the_dataset(tmp_path):
    (dataset,) = table('[datasets.grid]\nkind = "gymnasium"\nenv_id = "MiniGrid-Nope-v0"\nactions = ["a"]\n',
                       tmp_path)
    with pytest.raises(ConfigError) as raised:
        dataset_env(dataset)
    assert str(raised.value).startswith("dataset 'grid' (kind gymnasium, split 'test'): gymnasium env "
                                        "'MiniGrid-Nope-v0' is not registered here")
    assert "\n" not in str(raised.value)
