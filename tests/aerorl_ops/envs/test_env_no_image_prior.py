from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from aerorl_ops.envs.easy_vqa import easy_vqa_prior, easy_vqa_prior_accuracy, package_data_dir, read_questions
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_metrics.accuracy import Accuracy


@pytest.fixture
def tiny_layout(tiny_files):
    """Six train questions and four test questions, answers countable by hand."""
    tiny_files.text("data/train/questions.json", json.dumps([
        ["is there a red shape?", "no", 0], ["is there a red shape?", "yes", 1], ["is there a red shape?", "no", 2],
        ["what color is the shape?", "blue", 3], ["what color is the shape?", "red", 4],
        ["what shape is in the image?", "circle", 5],
    ]).encode())
    tiny_files.text("data/test/questions.json", json.dumps([
        ["is there a red shape?", "no", 0], ["is there a red shape?", "yes", 1],
        ["what color is the shape?", "blue", 2], ["what shape is in the image?", "triangle", 3],
    ]).encode())
    for image_id in range(4):
        tiny_files.image(f"data/test/images/{image_id}.png")
    return tiny_files.folder / "data"


def test_prior_on_a_hand_made_layout(tiny_layout):
    # The validation split takes image 0 (id % 10 == 0), so the prior is fitted on questions 1..5:
    # "is there a red shape?" -> yes 1, no 1: the first seen ("yes") wins the tie;
    # "what color is the shape?" -> blue 1, red 1: "blue" was seen first; the shape question -> circle.
    prior = easy_vqa_prior(tiny_layout)

    assert dict(prior.answers) == {"is there a red shape?": "yes", "what color is the shape?": "blue",
                                   "what shape is in the image?": "circle"}
    report = easy_vqa_prior_accuracy(prior, "test", data_dir=tiny_layout)
    assert report.overall == Accuracy(correct=2, n=4)
    assert dict(report.by_type) == {"colour": Accuracy(1, 1), "shape": Accuracy(0, 1), "yes_no": Accuracy(1, 2)}
    env = make_env("easy_vqa", split="test", data_dir=str(tiny_layout))
    assert prior.accuracy(env.items) == report


def test_prior_answers_the_most_common_train_answer_on_the_real_data():
    train = read_questions(package_data_dir(), "train")
    colour_answers = Counter(q.answer for q in train if q.text == "what color is the shape?")
    assert colour_answers.most_common(2) == [("teal", 165), ("black", 164)]

    prior = easy_vqa_prior()

    assert prior.predict("what color is the shape?") == "teal"
    assert prior.predict("what shape is in the image?") == "circle"
    assert prior.predict("a question never asked") == prior.fallback == "yes"
    assert len(prior.answers) == len({q.text for q in train})


def test_prior_accuracy_on_a_fixed_test_sample():
    report = easy_vqa_prior_accuracy(easy_vqa_prior(), "test", limit=500, seed=0)

    assert report.overall == Accuracy(correct=340, n=500)
    assert dict(report.by_type) == {"colour": Accuracy(8, 59), "shape": Accuracy(15, 64), "yes_no": Accuracy(317, 377)}
    assert report.overall.accuracy == 0.68
    assert math.isclose(report.overall.standard_error, math.sqrt(0.68 * 0.32 / 500))


def test_question_prior_keys_ignore_case_and_spacing():
    prior = QuestionPrior.fit([("Is it  red?", "no"), ("is it red?", "yes"), ("IS IT RED?", "yes")])

    assert dict(prior.answers) == {"is it red?": "yes"}
    with pytest.raises(ValueError, match="at least one"):
        QuestionPrior.fit([])

