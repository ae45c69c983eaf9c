"""``easy_vqa_pairs``: image attributes from easy-VQA's questions, statements and their truth, items drawn per
seed with balanced labels, true/false grading with yes/no aliases, the no-image priors, the kind's config checks."""

from __future__ import annotations

import doctest
import importlib
import json
from collections import Counter

import pytest
from PIL import Image

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.envs.configured import dataset_env, env_kwargs
from aerorl_ops.envs.easy_vqa import EasyVQAQuestion, package_data_dir, read_questions
from aerorl_ops.envs.easy_vqa_annotations import ShapeAttributes, annotate, split_annotations
from aerorl_ops.envs.easy_vqa_pairs import (
    NAME,
    PairStatement,
    load_easy_vqa_pairs,
    template_prior,
    template_prior_accuracy,
)
from aerorl_ops.envs.item_envs import items_env
from aerorl_ops.envs.pair_statements import TEMPLATES, Statement, template
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.registry import dataset_kinds, make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.eval_runner.held_out import prior_evaluation
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.task_item import TaskItem

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}
RED_CIRCLE, BLUE_TRIANGLE = ShapeAttributes("circle", "red"), ShapeAttributes("triangle", "blue")


@pytest.mark.parametrize("name", ["aerorl_ops.envs.easy_vqa_annotations", "aerorl_ops.envs.pair_statements"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_attributes_are_read_from_answers_words_and_negations():
    questions = [EasyVQAQuestion(0, "what is the blue shape?", "triangle", 1),       # colour in the question
                 EasyVQAQuestion(1, "what color is the rectangle?", "red", 2),        # shape in the question
                 EasyVQAQuestion(2, "is no circle present?", "yes", 3),               # negated, yes: not a circle
                 EasyVQAQuestion(3, "does the image contain a triangle?", "no", 3),   # not a triangle: a rectangle
                 EasyVQAQuestion(4, "is there not a gray shape?", "no", 3),           # negated, no: gray
                 EasyVQAQuestion(5, "what shape is present?", "circle", 4),
                 EasyVQAQuestion(6, "is there a triangle?", "yes", 4),                # contradicts the answer
                 EasyVQAQuestion(7, "what color is the shape?", "red", 4)]
    annotations = annotate(questions)
    assert annotations.known == {1: BLUE_TRIANGLE, 2: ShapeAttributes("rectangle", "red"),
                                 3: ShapeAttributes("rectangle", "gray")}
    assert annotations.unknown == {4: "its questions contradict each other about its shape "
                                      "(is ['circle', 'triangle'], is not [])"}


def test_the_package_annotations_agree_with_every_question_and_cover_nine_in_ten_images():
    annotations = split_annotations("test")
    assert (len(annotations.known), len(annotations.unknown)) == (888, 112)
    for question in read_questions(package_data_dir(), "test"):  # every direct answer agrees
        known = annotations.known.get(question.image_id)
        if known is not None and question.answer in ("circle", "rectangle", "triangle"):
            assert known.shape == question.answer
        elif known is not None and question.answer not in ("yes", "no"):
            assert known.colour == question.answer


@pytest.mark.parametrize(("key", "values", "left", "right", "holds"), [
    ("same_colour", {}, RED_CIRCLE, ShapeAttributes("triangle", "red"), True),
    ("same_colour", {}, RED_CIRCLE, BLUE_TRIANGLE, False),
    ("different_colours", {}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("left_colour", {"colour": "red"}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("right_colour", {"colour": "red"}, RED_CIRCLE, BLUE_TRIANGLE, False),
    ("same_shape", {}, RED_CIRCLE, BLUE_TRIANGLE, False),
    ("different_shapes", {}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("left_shape", {"shape": "triangle"}, RED_CIRCLE, BLUE_TRIANGLE, False),
    ("right_shape", {"shape": "triangle"}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("left_shape_right_colour", {"shape": "circle", "colour": "blue"}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("left_colour_right_shape", {"colour": "blue", "shape": "triangle"}, RED_CIRCLE, BLUE_TRIANGLE, False),
    ("left_colour_shape", {"colour": "red", "shape": "circle"}, RED_CIRCLE, BLUE_TRIANGLE, True),
    ("right_colour_shape", {"colour": "blue", "shape": "circle"}, RED_CIRCLE, BLUE_TRIANGLE, False),
])
def test_each_template_is_true_exactly_when_its_conditions_hold(key, values, left, right, holds):
    assert Statement(template(key), **values).holds(left, right) is holds


def test_three_items_hand_checked_against_the_package_questions():
    """Test split, seed 0: the statements, images and labels of items 0, 1 and 3; each image's shape and colour
    as the package's own questions state them (and as the images show, looked at by hand)."""
    data = load_easy_vqa_pairs("test", 4, 0)
    questions = {(q.image_id, q.text): q.answer for q in read_questions(package_data_dir(), "test")}
    first, second, fourth = (data.pairs[i] for i in (0, 1, 3))
    assert (first.statement.text, first.left, first.right, first.label) == \
        ("Both shapes are the same shape.", 414, 862, False)
    assert questions[(414, "what is the color of the rectangle?")] == "brown"  # a brown rectangle
    assert questions[(862, "what shape is in the image?")] == "circle"        # a blue circle
    assert (second.statement.text, second.left, second.right, second.label) == \
        ("The left shape is yellow.", 623, 393, True)
    assert questions[(623, "what color is the rectangle?")] == "yellow"
    assert (fourth.statement.text, fourth.left, fourth.right, fourth.label) == \
        ("The right shape is a blue triangle.", 16, 879, False)
    assert questions[(879, "what color is the shape?")] == "black"
    item = data.data.items[1]
    assert (item.item_id, item.question, item.answers, item.question_type) == \
        ("easy_vqa_pairs-test-0-1", "The left shape is yellow.", ("true", "yes"), "colour")
    images = package_data_dir() / "test" / "images"
    assert item.images == ((images / "623.png").read_bytes(), (images / "393.png").read_bytes())
    assert item.messages == ({"role": "user", "content": [
        {"type": "text", "text": "Left image: "}, {"type": "image"}, {"type": "text", "text": " Right image: "},
        {"type": "image"},
        {"type": "text", "text": " Statement: The left shape is yellow. Answer true or false."}]},)


def test_items_are_the_same_for_a_seed_other_for_another_and_a_smaller_limit_is_a_prefix():
    first, again = (load_easy_vqa_pairs("validation", 30, 5).data.items for _ in range(2))
    assert first == again
    assert load_easy_vqa_pairs("validation", 12, 5).data.items == first[:12]
    other = load_easy_vqa_pairs("validation", 30, 6).data.items
    assert [i.question for i in other] != [i.question for i in first]


def test_labels_alternate_within_each_template_and_types_are_equally_common():
    data = load_easy_vqa_pairs("test", 240, 0)
    per_template = Counter((pair.statement.template.key, pair.label) for pair in data.pairs)
    assert {per_template[(t.key, True)] for t in TEMPLATES} == {10}
    assert {per_template[(t.key, False)] for t in TEMPLATES} == {10}
    assert Counter(pair.question_type for pair in data.pairs) == {"colour": 80, "shape": 80, "mixed": 80}
    assert all(p.statement.holds(data.pool.attributes[p.left], data.pool.attributes[p.right]) == p.label
               and p.left != p.right for p in data.pairs)


def test_false_statements_of_two_conditions_fail_on_either_side():
    """Which conditions fail in a false conjunction is drawn uniformly: neither image alone gives it away."""
    data = load_easy_vqa_pairs("train", 2400, 1)  # 100 false items of each two-condition template
    failing = Counter(p.statement.outcomes(data.pool.attributes[p.left], data.pool.attributes[p.right])
                      for p in data.pairs if len(p.statement.template.conditions) == 2 and not p.label)
    assert set(failing) == {(True, False), (False, True), (False, False)}
    assert sum(failing.values()) == 400 and min(failing.values()) >= 105  # 133 expected each, SE 9.4


def test_true_false_grading_accepts_yes_and_no():
    env = make_env(NAME, split="test", limit=2, seed=0)
    false_item, true_item = env.items
    for item, reply, reward in [(true_item, "true", 1.0), (true_item, "Yes.", 1.0), (true_item, "false", 0.0),
                                (false_item, "False", 1.0), (false_item, "no", 1.0), (false_item, "yes", 0.0),
                                (false_item, "circle", 0.0)]:
        state, observation = env.reset(item)
        assert len(observation.images) == 2
        assert env.step(state, Completion(reply)).reward == reward, (item.answers, reply)


def test_the_no_image_priors_on_a_tiny_set():
    def item(number: int, statement: str, label: str, kind: str = "colour") -> TaskItem:
        return TaskItem(f"p{number}", NAME, "train", "q.json", statement, (label,), (), question_type=kind)

    train = [item(0, "The left shape is red.", "true"), item(1, "The left shape is red.", "true"),
             item(2, "The left shape is red.", "false"), item(3, "Both shapes are the same color.", "false"),
             item(4, "The right shape is a circle.", "true", "shape")]
    test = [item(5, "The left shape is red.", "true"), item(6, "The left shape is red.", "false"),
            item(7, "Both shapes are the same color.", "true"),
            item(8, "The right shape is a circle.", "true", "shape"),
            item(9, "The left shape is blue.", "true")]  # unseen: the most common answer overall, true
    train_env = items_env(NAME, {}, LoadResult(train))
    result = prior_evaluation(train_env, items_env(NAME, {}, LoadResult(test)), range(5))
    assert (result.report.overall.correct, result.report.overall.n) == (3, 5)
    assert {k: (v.correct, v.n) for k, v in result.report.by_type.items()} == {"colour": (2, 4), "shape": (1, 1)}
    statements = [PairStatement(n, 0, 1, Statement(template("left_colour"), colour=colour), label)
                  for n, (colour, label) in enumerate([("red", True), ("blue", True), ("red", False)])]
    statements.append(PairStatement(3, 0, 1, Statement(template("same_shape")), False))
    prior = template_prior(statements)
    assert isinstance(prior, QuestionPrior) and prior.predict("left_colour") == "true"
    report = template_prior_accuracy(prior, [statements[2], statements[3]])
    assert (report.overall.correct, report.overall.n) == (1, 2)


def test_a_missing_image_file_rejects_the_items_that_show_it(tmp_path):
    root = tmp_path / "easy"
    (root / "test" / "images").mkdir(parents=True)
    questions = []
    for image_id, (shape, colour) in enumerate([("circle", "red"), ("triangle", "blue")] * 2):
        questions += [["what shape is present?", shape, image_id], ["what color is the shape?", colour, image_id]]
        if image_id != 3:
            Image.new("RGB", (4, 4), (200, 0, 0)).save(root / "test" / "images" / f"{image_id}.png")
    (root / "test" / "questions.json").write_text(json.dumps(questions))
    data = load_easy_vqa_pairs("test", 8, 0, ("colour",), root).data
    assert len(data.items) + len(data.rejected) == 8 and data.rejected
    for rejected in data.rejected:
        assert "image: image file not found: " in rejected.reason and rejected.reason.endswith("3.png")


def parsed(datasets: dict):
    return check_datasets(parse_benchmark_config({**MINIMAL, "datasets": datasets}, path="bench.toml"),
                          dataset_kinds())


@pytest.mark.parametrize(("table", "setting", "problem"), [
    ({"split": "dev"}, "datasets.p.split", "is 'dev'; kind easy_vqa_pairs has the splits train, validation, test"),
    ({"question_types": ["colour", "size"]}, "datasets.p.question_types",
     "names unknown question type(s) ['size']; choose from colour, shape, mixed"),
    ({"instruction": "One word."}, "datasets.p.instruction", "is not a setting of kind 'easy_vqa_pairs'"),
    ({"image_roots": ["."]}, "datasets.p.image_roots", "is not a setting of kind 'easy_vqa_pairs'"),
])
def test_the_kind_refuses_a_bad_table_naming_the_setting(table, setting, problem):
    with pytest.raises(ConfigError) as error:
        parsed({"p": {"kind": NAME, **table}})
    assert setting in str(error.value) and problem in str(error.value)


def test_a_table_of_the_kind_builds_its_environment():
    dataset = parsed({"p": {"kind": NAME, "split": "validation", "limit": 6, "seed": 2,
                            "question_types": ["shape"]}}).datasets[0]
    assert env_kwargs(dataset) == {"split": "validation", "limit": 6, "seed": 2, "question_types": ("shape",)}
    env = dataset_env(dataset)
    assert (env.name, len(env), {item.question_type for item in env.items}) == (NAME, 6, {"shape"})
    assert [item.item_id for item in env.items][:2] == ["easy_vqa_pairs-validation-2-0",
                                                         "easy_vqa_pairs-validation-2-1"]


def test_training_and_evaluation_read_the_kind_by_name_and_from_its_cached_rows():
    """What ``aerorl train --env easy_vqa_pairs`` and ``aerorl eval`` build: the environment a name gives, and the
    same environment over its cached rows table (both images of every item kept)."""
    from aerorl_ops.config.datasets import DatasetSettings
    from aerorl_ops.envs.cached import cached_env, env_table
    from aerorl_ops.envs.configured import named_env

    by_name = named_env(NAME, (), "test", 6, 0)
    dataset = DatasetSettings(NAME, kind=NAME, split="test", limit=6, seed=0)

    def unexpected_rebuild():
        raise AssertionError("the cached table should have been used")

    cached, source = cached_env(dataset, env_table(dataset), unexpected_rebuild)
    assert (cached.name, source.why_source) == (NAME, "")
    assert cached.items == by_name.items and {len(item.images) for item in cached.items} == {2}
