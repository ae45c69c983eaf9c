from __future__ import annotations

import pytest

from aerorl_ops.envs.jsonl_task import load_jsonl
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.storage.duckdb_store import rejected_rows_table


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


# --- minimal lines found by fuzzing (tests/reliability/test_fuzzed_inputs.py): each raised, or made a row or a
# rejection that could not be stored, before it was rejected with its reason --------------------------------

GOOD = {"id": "q1", "question": "<image>What colour?", "answer": "red", "image": "a.png"}
LONE_SURROGATE = "is not valid Unicode (a lone surrogate"


@pytest.mark.parametrize(("line", "sample_id", "reason"), [
    (b"[" * 100_000 + b"]" * 100_000, "line-2", "not readable JSON: arrays or objects nested too deeply"),
    (b'{"id": ' + b"7" * 5000 + b"}", "line-2",
     "not readable JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; "
     "use sys.set_int_max_str_digits() to increase the limit"),
    ({**GOOD, "id": "q2", "image": "a\u0000b.png"}, "q2",
     "image path 'a\\x00b.png' is no file name (embedded null byte)"),
    ({**GOOD, "id": "\ud800"}, None, f"sample id {LONE_SURROGATE} at char 0)"),
    ({**GOOD, "id": "q2", "question": "<image>q\ud800?"}, "q2", f"question {LONE_SURROGATE} at char 1)"),
    ({**GOOD, "id": "q2", "answer": "\udc00"}, "q2", f"answer alias 0 {LONE_SURROGATE} at char 0)"),
    ({**GOOD, "id": "q2", "kind": "\ud800"}, "q2", f"question type {LONE_SURROGATE} at char 0)"),
])
def test_lines_found_by_fuzzing_are_rejections_that_can_be_stored(tiny_files, line, sample_id, reason):
    tiny_files.image("a.png")
    path = tiny_files.jsonl("fuzzed.jsonl", [GOOD, line])

    result = load_jsonl(path, type_field="kind")

    assert [item.item_id for item in result.items] == ["q1"]
    assert [(row.locator, row.sample_id, row.reason) for row in result.rejected] == [(f"{path}#line=2", sample_id,
                                                                                      reason)]
    rejected_rows_table("run", "stage", "fuzzed", result.rejected)  # storable: no lone surrogate left


@pytest.mark.parametrize(("image", "reason_head"), [
    ("\ud800.png", "image path '\\ud800.png' is no file name ('utf-8' codec can't encode character '\\ud800'"),
    ("x" * 300, "image file not found: "),  # OSError: file name too long
])
def test_image_paths_found_by_fuzzing_are_rejections(tiny_files, image, reason_head):
    tiny_files.image("a.png")
    path = tiny_files.jsonl("fuzzed.jsonl", [GOOD, {**GOOD, "id": "q2", "image": image}])

    (rejected,) = load_jsonl(path).rejected

    assert rejected.reason.startswith(reason_head) and rejected.sample_id == "q2"


def test_a_path_with_a_line_break_is_a_one_line_reason(tiny_files):  # found by fuzzing: the reason had two lines
    tiny_files.image("a.png")
    path = tiny_files.jsonl("fuzzed.jsonl", [GOOD, {**GOOD, "id": "q2", "image": "a\r\nb.png"}])

    (rejected,) = load_jsonl(path).rejected

    assert rejected.reason == f"image file not found: {tiny_files.folder}/a\\r\\nb.png"


@pytest.mark.parametrize("field", ["video", "frames"])
def test_a_video_path_too_long_for_a_file_is_a_rejection(tiny_files, field):  # found by fuzzing: OSError
    tiny_files.image("a.png")
    video = "x" * 300 if field == "video" else ["x" * 300]
    path = tiny_files.jsonl("fuzzed.jsonl", [GOOD, {**GOOD, "id": "q2", "video": video}])

    (rejected,) = load_jsonl(path).rejected

    expected = "video file not found: " if field == "video" else "video frame 0: image file not found: "
    assert rejected.reason == f"{expected}{tiny_files.folder / ('x' * 300)}"
