"""The one-image swap check on easy-VQA pairs: the right image replaced by one of another shape and colour,
chosen to change the statement's truth where it can; counted on stub policies whose answers are known."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
from PIL import Image

import aerorl_ops.eval_runner.one_image_swap as one_image_swap
from aerorl_ops.envs.easy_vqa_pairs import PairsData, load_easy_vqa_pairs, swapped_items, swapped_pair
from aerorl_ops.envs.item_envs import items_env
from aerorl_ops.envs.pair_statements import TEMPLATES, Statement, reply_truth
from aerorl_ops.eval_runner.one_image_swap import one_image_swap_check, policy_replies

PIXELS = {"red": (200, 0, 0), "blue": (0, 0, 200)}
KINDS = [("circle", "red"), ("circle", "blue"), ("triangle", "red"), ("triangle", "blue")] * 2
"""Images 0..7 of the tiny split: each a solid square of its colour (its shape is only in the questions)."""


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("easy_vqa")
    (root / "test" / "images").mkdir(parents=True)
    questions = []
    for image_id, (shape, colour) in enumerate(KINDS):
        questions += [["what shape is present?", shape, image_id], ["what color is the shape?", colour, image_id]]
        Image.new("RGB", (4, 4), PIXELS[colour]).save(root / "test" / "images" / f"{image_id}.png")
    (root / "test" / "questions.json").write_text(json.dumps(questions))
    return root


@pytest.fixture(scope="module")
def colour_pairs(tiny_split) -> PairsData:
    """8 colour statements: each of the 4 colour templates twice, once true and once false."""
    return load_easy_vqa_pairs("test", 8, 0, ("colour",), tiny_split)


def colour_reader(observations) -> list[str]:
    """Answers colour statements by reading each image's colour from its pixels."""
    names = {pixel: name for name, pixel in PIXELS.items()}
    replies = []
    for observation in observations:
        text = observation.messages[0]["content"][-1]["text"]
        left, right = (names[image.getpixel((0, 0))] for image in observation.images)
        holds = {Statement(t, colour=c).text: {"same_colour": left == right, "different_colours": left != right,
                                               "left_colour": left == c, "right_colour": right == c}[t.key]
                 for t in TEMPLATES if t.question_type == "colour" for c in PIXELS}
        replies.append("true" if holds[text.split("Statement: ")[1].split(" Answer")[0]] else "false")
    return replies


def test_docstring_example():
    result = doctest.testmod(one_image_swap)
    assert result.attempted > 0 and result.failed == 0


def test_the_new_right_image_differs_in_shape_and_colour_and_flips_the_truth_where_it_can(colour_pairs):
    attributes = colour_pairs.pool.attributes
    for pair in colour_pairs.pairs:
        swapped = swapped_pair(colour_pairs.pool, pair, seed=0)
        old, new = attributes[pair.right], attributes[swapped.right]
        assert (swapped.left, swapped.statement) == (pair.left, pair.statement)
        assert new.shape != old.shape and new.colour != old.colour
        assert swapped.label == pair.statement.holds(attributes[pair.left], new)
        assert (swapped.label != pair.label) == (pair.statement.template.key != "left_colour")
        assert swapped == swapped_pair(colour_pairs.pool, pair, seed=0)  # the same every time


def test_a_policy_that_reads_the_colours_changes_exactly_the_answers_whose_truth_changed(colour_pairs):
    cases = swapped_items(colour_pairs, colour_pairs.data.items)
    check = one_image_swap_check(colour_reader, cases, reply_truth)
    # 2 of the 8 statements are about the left image alone: the swap leaves their truth, and the answer, as it was
    assert (check.questions, check.labels_changed, check.answers_changed) == (8, 6, 6)
    assert (check.changed_where_label_changed, check.correct_before, check.correct_after) == (6, 8, 8)
    assert (check.changed, check.changed_when_label_changed, check.changed_when_label_kept) == (0.75, 1.0, 0.0)


def test_a_policy_that_ignores_the_images_changes_nothing(colour_pairs):
    cases = swapped_items(colour_pairs, colour_pairs.data.items)
    check = one_image_swap_check(lambda observations: ["Yes"] * len(observations), cases, reply_truth)
    # 4 of the 8 are true before the swap; the 6 whose truth changes are 3 true and 3 false, so 4 after it too
    assert (check.answers_changed, check.labels_changed, check.correct_before, check.correct_after) == (0, 6, 4, 4)


def test_yes_and_true_are_one_answer_when_read_as_truth(colour_pairs):
    cases = swapped_items(colour_pairs, colour_pairs.data.items)
    replies = iter(["yes"] * 8 + ["true"] * 8)
    check = one_image_swap_check(lambda observations: [next(replies) for _ in observations], cases, reply_truth)
    assert check.answers_changed == 0
    replies = iter(["yes"] * 8 + ["true"] * 8)
    by_text = one_image_swap_check(lambda observations: [next(replies) for _ in observations], cases)
    assert by_text.answers_changed == 8  # compared as graded text, "yes" and "true" differ


def test_a_loaded_model_answers_both_images_of_each_pair(colour_pairs, yes_vlm):
    """The yes-sayer (``tests/conftest.py``) through ``policy_replies``: every item shows two images, every
    answer is "yes", so none changes."""
    env = items_env("easy_vqa_pairs", {}, colour_pairs.data)
    cases = swapped_items(colour_pairs, colour_pairs.data.items)
    check = one_image_swap_check(policy_replies(yes_vlm, env, 4), cases, reply_truth)
    assert (check.questions, check.answers_changed, check.correct_before, check.correct_after) == (8, 0, 4, 4)
