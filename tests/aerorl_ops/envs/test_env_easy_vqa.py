"""easy_vqa on the real ``easy-vqa`` package, and on a tiny copy of its layout for bad rows."""

from __future__ import annotations

import json
from collections import Counter

import easy_vqa
import pytest

from aerorl_ops.envs.easy_vqa import (
    VALIDATION_IMAGE_EVERY,
    package_data_dir,
    question_type,
    read_questions,
    sampled_questions,
)
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion


def test_reader_matches_the_package_api():
    texts, answers, image_ids = easy_vqa.get_test_questions()

    questions = read_questions(package_data_dir(), "test")

    assert [(q.text, q.answer, q.image_id) for q in questions] == list(zip(texts, answers, image_ids, strict=True))


def test_split_sizes_and_validation_shares_no_image_with_train():
    train = read_questions(package_data_dir(), "train")
    validation = read_questions(package_data_dir(), "validation")
    test = read_questions(package_data_dir(), "test")

    assert (len(train), len(validation), len(test)) == (34_676, 3_899, 9_673)
    assert len(train) + len(validation) == len(easy_vqa.get_train_questions()[0]) == 38_575
    train_images = {q.image_id for q in train}
    validation_images = {q.image_id for q in validation}
    assert (len(train_images), len(validation_images)) == (3_600, 400)
    assert train_images.isdisjoint(validation_images)
    assert all(image_id % VALIDATION_IMAGE_EVERY == 0 for image_id in validation_images)


def test_question_types_follow_the_answer():
    assert sorted({question_type(answer) for answer in easy_vqa.get_answers()}) == ["colour", "shape", "yes_no"]
    counts = Counter(question_type(q.answer) for q in read_questions(package_data_dir(), "test"))
    assert counts == {"yes_no": 7_136, "colour": 1_280, "shape": 1_257}


def test_sampling_is_deterministic_and_seed_dependent():
    first = make_env("easy_vqa", split="test", limit=5, seed=0)
    again = make_env("easy_vqa", split="test", limit=5, seed=0)
    other = make_env("easy_vqa", split="test", limit=5, seed=1)

    ids = [item.item_id for item in first.items]
    assert ids == ["easy_vqa-test-663", "easy_vqa-test-4242", "easy_vqa-test-6311", "easy_vqa-test-6890",
                   "easy_vqa-test-8376"]
    assert [item.item_id for item in again.items] == ids
    assert [item.item_id for item in other.items] != ids
    assert [first.question_type(i) for i in range(5)] == ["yes_no", "yes_no", "yes_no", "yes_no", "colour"]
    assert first.items[4].question == "what color is the shape?"
    assert first.items[4].answers == ("yellow",)
    assert first.counts == (5, 5, 0) and first.rejected == []


def test_observation_is_one_64px_image_and_the_question():
    env = make_env("easy_vqa", split="test", limit=5, seed=0)

    state, observation = env.reset(env.items[4])

    assert (state.item, state.item.item_id, state.turn) == (env.items[4], "easy_vqa-test-8376", 0)
    assert [(image.mode, image.size) for image in observation.images] == [("RGB", (64, 64))]
    assert observation.messages == [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "what color is the shape?\nAnswer with one word."}]}]
    plain = make_env("easy_vqa", split="test", limit=5, seed=0, instruction="")
    shown = plain.reset(plain.items[4])[1].messages[0]["content"][1]
    assert shown == {"type": "text", "text": "what color is the shape?"}


@pytest.mark.parametrize(("reply", "reward"), [
    ("yellow", 1.0), ("  Yellow. ", 1.0), ('{"answer": "YELLOW"}', 1.0), ("\\boxed{yellow}", 1.0),
    ("blue", 0.0), ("yellowish", 0.0), ("it is yellow", 0.0), ("", 0.0),
])
def test_reward_is_exact_match_after_normalisation(reply, reward):
    env = make_env("easy_vqa", split="test", limit=5, seed=0)
    state, _ = env.reset(env.items[4])

    result = env.step(state, Completion(reply, (1, 2)))

    assert (result.reward, result.done, result.info.correct) == (reward, True, reward == 1.0)
    assert dict(result.info.components) == {"exact_match": reward}


def test_validation_split_items_come_from_held_out_images():
    env = make_env("easy_vqa", split="validation", limit=3, seed=0)

    assert all(item.split == "validation" and item.item_id.startswith("easy_vqa-validation-") for item in env.items)
    held_out = {q.position for q in read_questions(package_data_dir(), "validation")}
    assert {int(item.item_id.rsplit("-", 1)[1]) for item in env.items} <= held_out


@pytest.fixture
def tiny_easy_vqa(tiny_files):
    """A 4-question copy of the package layout: one image missing, one corrupt."""
    tiny_files.text("data/test/questions.json", json.dumps([
        ["what shape is in the image?", "circle", 0], ["is there a red shape?", "yes", 1],
        ["what color is the shape?", "blue", 2], ["is there a circle?", "no", 3],
    ]).encode())
    tiny_files.image("data/test/images/0.png")
    tiny_files.image("data/test/images/1.png")
    tiny_files.text("data/test/images/3.png", b"\x89PNG\r\n\x1a\n broken")
    return tiny_files.folder / "data"


def test_missing_and_corrupt_images_are_rejected_and_counted(tiny_easy_vqa):
    env = make_env("easy_vqa", split="test", data_dir=str(tiny_easy_vqa))

    assert env.counts == (4, 2, 2)
    assert [item.item_id for item in env.items] == ["easy_vqa-test-0", "easy_vqa-test-1"]
    missing, corrupt = env.rejected
    questions = tiny_easy_vqa / "test" / "questions.json"
    assert (missing.locator, missing.sample_id, missing.reason) == (
        f"{questions}#question=2", "easy_vqa-test-2", f"image file not found: {tiny_easy_vqa}/test/images/2.png")
    assert (corrupt.locator, corrupt.sample_id) == (f"{questions}#question=3", "easy_vqa-test-3")
    assert corrupt.reason.startswith("corrupt image: ")


def test_missing_data_dir_and_unknown_split_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"questions file {tmp_path}/test/questions.json does not exist"):
        make_env("easy_vqa", split="test", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="unknown split 'val'; choose one of train, validation, test"):
        make_env("easy_vqa", split="val")


def test_sampled_questions_match_the_environment():
    env = make_env("easy_vqa", split="train", limit=4, seed=3)

    questions = sampled_questions("train", limit=4, seed=3)

    assert [item.item_id for item in env.items] == [f"easy_vqa-train-{q.position}" for q in questions]
