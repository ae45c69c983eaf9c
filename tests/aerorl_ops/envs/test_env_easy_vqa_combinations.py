"""easy-VQA split by (shape, colour) pair (``envs.easy_vqa_combinations``): the held-out pairs leave every shape and
colour in training, the split is a function of its seed, and each question sits on the side its image's pair says."""

from __future__ import annotations

import doctest

import pytest

from aerorl_ops.envs import easy_vqa_combinations
from aerorl_ops.envs.easy_vqa import package_data_dir, read_questions
from aerorl_ops.envs.easy_vqa_annotations import COLOURS, SHAPES, annotate
from aerorl_ops.envs.easy_vqa_combinations import (
    ALL_PAIRS,
    MAX_HELD_OUT,
    combination_questions,
    draw_held_out_pairs,
    easy_vqa_combinations_env,
)
from aerorl_ops.envs.registry import make_env

SEED0 = frozenset({("circle", "blue"), ("rectangle", "black"), ("rectangle", "blue"), ("rectangle", "green"),
                   ("rectangle", "red"), ("rectangle", "yellow"), ("triangle", "black"), ("triangle", "yellow")})
"""``draw_held_out_pairs(8, 0)``, as docs/configuration.md writes it out."""


def test_the_module_examples_hold():
    assert doctest.testmod(easy_vqa_combinations, raise_on_error=True).attempted == 1


@pytest.mark.parametrize("count", [1, 8, MAX_HELD_OUT])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_shape_and_colour_keeps_a_training_pair(count, seed):
    held = draw_held_out_pairs(count, seed)
    kept = [pair for pair in ALL_PAIRS if pair not in held]
    assert len(held) == count and held <= set(ALL_PAIRS)
    assert {shape for shape, _ in kept} == set(SHAPES) and {colour for _, colour in kept} == set(COLOURS)
    assert draw_held_out_pairs(count, seed) == held  # a function of count and seed alone


def test_the_documented_split_of_seed_0():
    assert MAX_HELD_OUT == 16 and draw_held_out_pairs(8, 0) == SEED0


@pytest.mark.parametrize("count", [0, 17, True, 2.0])
def test_a_count_that_cannot_keep_every_shape_and_colour_is_refused(count):
    with pytest.raises(ValueError, match=r"held_out_pairs must be a whole number in 1\.\.16"):
        draw_held_out_pairs(count, 0)


def test_train_and_held_out_questions_split_the_known_images_by_pair():
    questions = read_questions(package_data_dir(), "test")
    known = annotate(questions).known
    train = combination_questions("test", "train", SEED0)
    held = combination_questions("test", "held_out", SEED0)
    pair = {q.position: (known[q.image_id].shape, known[q.image_id].colour) for q in train + held}
    assert all(pair[q.position] not in SEED0 for q in train) and all(pair[q.position] in SEED0 for q in held)
    assert len(train) + len(held) == sum(q.image_id in known for q in questions)  # unknown images in neither
    with pytest.raises(ValueError, match="combinations must be one of train, held_out, got 'all'"):
        combination_questions("test", "all", SEED0)


def test_the_environment_draws_its_sample_from_its_side_and_takes_its_tables_name():
    env = make_env("easy_vqa_combinations", split="test", limit=30, seed=2, name="unseen", combinations="held_out")
    held = {q.position for q in combination_questions("test", "held_out", SEED0)}
    assert env.name == "unseen" and len(env) == 30
    assert {int(item.item_id.rsplit("-", 1)[1]) for item in env.items} <= held
    again = easy_vqa_combinations_env("test", 30, 2, name="unseen", combinations="held_out")
    assert [item.item_id for item in again.items] == [item.item_id for item in env.items]
    assert {item.question_type for item in env.items} <= {"yes_no", "colour", "shape"}
