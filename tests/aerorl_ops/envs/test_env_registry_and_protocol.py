from __future__ import annotations

import pytest

from aerorl_ops.envs.base import SingleTurnEnv, TaskEnv, items_at
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.registry import (
    ENVIRONMENTS,
    EnvSettingsError,
    UnknownEnvironmentError,
    env_settings,
    make_env,
    register_env,
)
from aerorl_ops.envs.types import Completion, EpisodeState
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.text.exact_match import answers_match, last_boxed, normalize_answer, predicted_answer


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownEnvironmentError) as caught:
        make_env("easyvqa", split="test")

    assert str(caught.value) == ("unknown environment 'easyvqa'; known environments: "
                                 "arc, chartqa, docvqa, easy_vqa, easy_vqa_combinations, easy_vqa_pairs, "
                                 "easy_vqa_two_tries, gymnasium, jsonl, mixture, parquet")


def test_unknown_and_missing_settings_are_named():
    with pytest.raises(EnvSettingsError) as unknown:
        make_env("easy_vqa", split="test", limt=5)
    with pytest.raises(EnvSettingsError) as missing:
        make_env("jsonl", limit=5)

    assert str(unknown.value) == ("environment 'easy_vqa' has no setting 'limt'; its settings are: "
                                  "split, limit, seed, instruction, data_dir")
    assert str(missing.value) == ("environment 'jsonl' needs the setting 'path'; its settings are: "
                                  "path, split, limit, seed, name, instruction, type_field, image_roots, fps, "
                                  "max_frames, allow_no_image")
    assert env_settings("parquet") == ("path", "split", "limit", "seed", "name", "type_column", "image_roots")


def _tiny_env(name: str = "tiny") -> SingleTurnEnv:
    item = TaskItem("t-0", name, "test", "mem", "Which?", ("B",), (), ())
    return SingleTurnEnv(name, LoadResult([item]), ExactMatchGrader())


def test_register_adds_a_factory_once():
    register_env("placeholder", _tiny_env)
    try:
        env = make_env("placeholder", name="custom")
        assert isinstance(env, TaskEnv) and env.name == "custom"
        with pytest.raises(ValueError, match="'placeholder' is already registered"):
            register_env("placeholder", _tiny_env)
    finally:
        del ENVIRONMENTS["placeholder"]


def test_single_turn_episode_ends_after_one_step_and_checks_its_state():
    env = _tiny_env()
    (item,) = env.items

    state, _ = env.reset(item)
    result = env.step(state, Completion("b", (3,)))

    assert state == EpisodeState(item, turn=0)
    assert (result.reward, result.done, result.observation, result.state) == (1.0, True, None, None)
    with pytest.raises(ValueError, match="episode on item 't-0' is already done"):
        env.step(EpisodeState(item, turn=1), Completion("b"))
    assert repr(env) == "SingleTurnEnv('tiny', items=1, rejected=0)"


def test_items_at_takes_each_index_once_and_names_the_environment_when_out_of_range():
    env = _tiny_env()
    (item,) = env.items

    assert items_at(env, [0, 0]) == [item, item] and env.question_type(0) is None
    with pytest.raises(IndexError, match="environment 'tiny': index 1 is out of range; it holds 1 items"):
        items_at(env, [0, 1])


def test_observation_messages_are_fresh_copies(tiny_files):
    item = TaskItem("t-0", "d", "test", "mem", "Q?", ("a",), (tiny_files.png(),),
                    ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Q?"}]},))
    env = SingleTurnEnv("d", LoadResult([item]), ExactMatchGrader())

    _, first = env.reset(env.items[0])
    first.messages[0]["content"].append({"type": "text", "text": "edited"})
    _, second = env.reset(env.items[0])

    assert len(second.messages[0]["content"]) == 2


def test_answer_extraction_and_normalisation():
    assert last_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}} c") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{open") is None
    assert predicted_answer('{"answer": "Circle"}') == "Circle"
    assert predicted_answer('prefix {"answer": "red"} suffix') == "red"
    assert normalize_answer("\n 'Light   Gray'?! ") == "light gray"
    assert answers_match("1e1", ["10"]) and answers_match("-0", ["0"])
    assert not answers_match("1.5", ["15"])
    assert not answers_match("inf", ["1e999"])  # infinities are no numbers here, and the texts differ
