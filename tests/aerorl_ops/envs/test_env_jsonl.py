from __future__ import annotations

import pytest

from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion


def maye_lines(files) -> list:
    files.image("imgs/a.png", (255, 0, 0))
    files.image("imgs/b.png", (0, 0, 255))
    files.text("imgs/broken.png", b"not a png at all")
    return [
        {"question": "<image>In the figure, what is BC?", "answer": "20", "solution": "\\boxed{20}",
         "id": "geo_1", "image": "imgs/a.png"},
        {"question": "What colour is it?", "solution": "It is \\boxed{Blue}.", "id": "geo_2", "image": "imgs/b.png",
         "kind": "colour"},
        "",
        {"question": "Missing image?", "answer": "1", "id": "geo_3", "image": "imgs/nope.png"},
        {"question": "No answer?", "answer": "", "solution": "no box here", "id": "geo_4", "image": "imgs/a.png"},
        '{"question": "cut off", "answer": ',
        {"question": "Broken image?", "answer": "2", "id": "geo_5", "image": "imgs/broken.png"},
        {"question": "<image> and <image>?", "answer": "3", "id": "geo_6", "image": "imgs/a.png"},
        {"question": "Same id again", "answer": "4", "id": "geo_1", "image": "imgs/b.png"},
        ["not", "an", "object"],
    ]


def test_maye_file_items_and_exact_rejections(tiny_files):
    path = tiny_files.jsonl("geo.jsonl", maye_lines(tiny_files))

    env = make_env("jsonl", path=str(path), type_field="kind")

    assert env.name == "geo"
    assert len(env) == 2
    assert env.counts == (9, 2, 7)  # the blank line is skipped, not a record
    first, second = env.items
    assert (first.item_id, first.question, first.answers, first.split) == (
        "geo_1", "In the figure, what is BC?", ("20",), "train")
    assert first.images == (tiny_files.png((255, 0, 0)),)
    assert (second.item_id, second.answers, second.question_type) == ("geo_2", ("Blue",), "colour")
    assert env.question_type(0) is None
    reasons = [(row.locator.rsplit("#", 1)[1], row.sample_id, row.reason) for row in env.rejected]
    assert reasons[:2] == [
        ("line=4", "geo_3", f"image file not found: {tiny_files.folder / 'imgs/nope.png'}"),
        ("line=5", "geo_4", "no answers"),
    ]
    assert reasons[2][:2] == ("line=6", "line-6") and reasons[2][2].startswith("not valid JSON: ")
    assert reasons[3][:2] == ("line=7", "geo_5") and reasons[3][2].startswith("corrupt image: 16 bytes")
    assert reasons[4:] == [
        ("line=8", "geo_6", "text has 2 <image> markers for 1 images"),
        ("line=9", "geo_1", f"duplicate item id (first seen at {path}#line=1)"),
        ("line=10", "line-10", "not a JSON object (found list)"),
    ]
    assert {row.source for row in env.rejected} == {str(path)}


def test_markers_place_images_and_instruction_follows(tiny_files):
    path = tiny_files.jsonl("geo.jsonl", maye_lines(tiny_files))

    env = make_env("jsonl", path=str(path), instruction="Put the answer in \\boxed{}.", name="geometry")

    _, observation = env.reset(env.items[0])
    assert observation.messages == [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "In the figure, what is BC?\nPut the answer in \\boxed{}."}]}]
    assert [image.size for image in observation.images] == [(2, 2)]
    assert observation.images[0].getpixel((0, 0)) == (255, 0, 0)
    assert env.name == "geometry" and env.items[0].dataset == "geometry"


def test_boxed_reply_is_graded_against_answer(tiny_files):
    env = make_env("jsonl", path=str(tiny_files.jsonl("geo.jsonl", maye_lines(tiny_files))))
    state, _ = env.reset(env.items[1])

    right = env.step(state, Completion("Thinking... so \\boxed{blue}", (5, 6, 7)))
    wrong = env.step(state, Completion("\\boxed{red}"))

    assert (right.reward, right.done, right.info.correct, right.info.prediction) == (1.0, True, True, "blue")
    assert (wrong.reward, wrong.info.correct, dict(wrong.info.components)) == (0.0, False, {"exact_match": 0.0})


def test_limit_and_seed_sample_lines_deterministically(tiny_files):
    lines = []
    for index in range(6):
        tiny_files.image(f"i{index}.png")
        lines.append({"question": f"Q{index}?", "answer": str(index), "id": f"q{index}", "image": f"i{index}.png"})
    path = tiny_files.jsonl("six.jsonl", lines)

    first = make_env("jsonl", path=str(path), limit=3, seed=5)
    again = make_env("jsonl", path=str(path), limit=3, seed=5)
    other = make_env("jsonl", path=str(path), limit=3, seed=6)

    assert [item.item_id for item in first.items] == ["q2", "q4", "q5"]
    assert [item.item_id for item in again.items] == ["q2", "q4", "q5"]
    assert [item.item_id for item in other.items] == ["q0", "q3", "q4"]
    assert first.counts == (3, 3, 0)


def test_id_defaults_to_line_number_and_numeric_answer_is_text(tiny_files):
    tiny_files.image("a.png")
    path = tiny_files.jsonl("d.jsonl", [{"question": "How many?", "answer": 3, "image": "a.png"}])

    (item,) = make_env("jsonl", path=str(path)).items

    assert (item.item_id, item.answers) == ("line-1", ("3",))


def test_missing_dataset_file_names_the_path(tmp_path):
    missing = tmp_path / "absent.jsonl"

    with pytest.raises(FileNotFoundError, match=f"jsonl: dataset file {missing} does not exist"):
        make_env("jsonl", path=str(missing))
