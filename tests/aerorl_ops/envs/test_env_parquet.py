from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.envs.parquet_task import load_parquet
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.rows import MissingColumnError, TableFileError


def verl_rows(files) -> list[dict]:
    files.image("pics/on_disk.png", (0, 255, 0))
    red = {"bytes": files.png((255, 0, 0)), "path": None}
    record = files.verl_record
    return [
        record(10, "<image>Find x. Answer in \\boxed{}.", "3", [red], system="Think first."),
        record(11, "Compare <image> with <image>.", "left", [red, {"bytes": None, "path": "pics/on_disk.png"}]),
        record(12, "<image>No truth?", None, [red]),
        record(13, "<image>Where is it?", "1", [{"bytes": None, "path": "pics/absent.png"}]),
        record(14, "No marker here", "2", [red]),
        record(15, "<image>Broken?", "4", [{"bytes": b"\x89PNG truncated", "path": None}]),
        record(10, "<image>Repeated index", "5", [red]),
    ]


def test_verl_rows_items_and_exact_rejections(tiny_files):
    path = tiny_files.verl_parquet("geo3k_train.parquet", verl_rows(tiny_files))

    env = make_env("parquet", path=str(path))

    assert env.name == "geo3k_train"
    assert env.counts == (7, 2, 5)
    first, second = env.items
    assert (first.item_id, first.dataset, first.question, first.answers) == (
        "geo3k_train-10", "hiyouga/geometry3k", "Find x. Answer in \\boxed{}.", ("3",))
    assert second.images == (tiny_files.png((255, 0, 0)), tiny_files.png((0, 255, 0)))
    assert second.question == "Compare with ."
    assert [(row.locator, row.sample_id, row.reason) for row in env.rejected[:3]] == [
        (f"{path}#row=2", "geo3k_train-12", "no answers"),
        (f"{path}#row=3", "geo3k_train-13", f"image file not found: {tiny_files.folder / 'pics/absent.png'}"),
        (f"{path}#row=4", "geo3k_train-14", "prompt has 0 <image> markers for 1 images"),
    ]
    assert env.rejected[3].locator == f"{path}#row=5"
    assert env.rejected[3].reason.startswith("corrupt image: ")
    assert (env.rejected[4].locator, env.rejected[4].reason) == (
        f"{path}#row=6", f"duplicate item id (first seen at {path}#row=0)")


def test_prompt_messages_keep_roles_and_place_images_at_markers(tiny_files):
    env = make_env("parquet", path=str(tiny_files.verl_parquet("g.parquet", verl_rows(tiny_files))))

    _, first = env.reset(env.items[0])
    _, second = env.reset(env.items[1])

    assert first.messages == [
        {"role": "system", "content": [{"type": "text", "text": "Think first."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Find x. Answer in \\boxed{}."}]},
    ]
    assert second.messages[0]["content"] == [
        {"type": "text", "text": "Compare "}, {"type": "image"}, {"type": "text", "text": " with "},
        {"type": "image"}, {"type": "text", "text": "."}]
    assert [image.getpixel((1, 1)) for image in second.images] == [(255, 0, 0), (0, 255, 0)]


def test_ground_truth_graded_by_exact_match(tiny_files):
    env = make_env("parquet", path=str(tiny_files.verl_parquet("g.parquet", verl_rows(tiny_files))))
    state, _ = env.reset(env.items[0])

    assert env.step(state, Completion("<think>x=3</think> \\boxed{3}")).info.correct is True
    assert env.step(state, Completion("\\boxed{3.0}")).reward == 1.0
    assert env.step(state, Completion("\\boxed{4}")).reward == 0.0


def test_image_paths_as_plain_strings_and_type_column(tiny_files):
    tiny_files.image("a.png")
    table = pa.table({
        "prompt": [[{"role": "user", "content": "<image>What?"}]],
        "images": [["a.png"]],
        "reward_model": [{"ground_truth": "cat"}],
        "topic": ["animals"],
    })
    path = tiny_files.folder / "plain.parquet"
    pq.write_table(table, path)

    env = make_env("parquet", path=str(path), type_column="topic", name="pets", split="test")

    (item,) = env.items
    assert (item.item_id, item.dataset, item.split, item.question_type) == ("pets-0", "pets", "test", "animals")
    assert item.images == (tiny_files.png(),)


def test_limit_draws_rows_with_seed(tiny_files):
    red = {"bytes": tiny_files.png(), "path": None}
    records = [tiny_files.verl_record(i, f"<image>Q{i}", str(i), [red]) for i in range(6)]
    path = tiny_files.verl_parquet("six.parquet", records)

    env = make_env("parquet", path=str(path), limit=3, seed=5)

    assert [item.item_id for item in env.items] == ["six-2", "six-4", "six-5"]
    assert env.counts == (3, 3, 0)


def test_missing_file_and_missing_column_are_named(tiny_files):
    missing = tiny_files.folder / "none.parquet"
    with pytest.raises(FileNotFoundError, match=f"parquet: dataset file {missing} does not exist"):
        make_env("parquet", path=str(missing))

    path = tiny_files.folder / "no_truth.parquet"
    pq.write_table(pa.table({"prompt": [[{"role": "user", "content": "q"}]], "images": [["a.png"]]}), path)
    with pytest.raises(MissingColumnError, match=r"no_truth\.parquet: missing required column 'reward_model'"):
        make_env("parquet", path=str(path))


def test_messages_render_through_the_qwen2_vl_chat_template(tiny_files):
    import jinja2

    from aerorl_ops.models.chat_template import QWEN2_VL_CHAT_TEMPLATE

    env = make_env("parquet", path=str(tiny_files.verl_parquet("g.parquet", verl_rows(tiny_files))))
    template = jinja2.Environment().from_string(QWEN2_VL_CHAT_TEMPLATE)

    text = template.render(messages=env.reset(env.items[0])[1].messages, add_generation_prompt=True)

    assert text == ("<|im_start|>system\nThink first.<|im_end|>\n"
                    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
                    "Find x. Answer in \\boxed{}.<|im_end|>\n"
                    "<|im_start|>assistant\n")


# --- minimal files found by fuzzing (tests/reliability/test_fuzzed_inputs.py) --------------------------------

PROMPT = [{"role": "user", "content": "<image>What colour?"}]
TRUTH = {"ground_truth": "red"}


@pytest.mark.parametrize(("images", "reason"), [
    (pa.array([3], pa.int64()), "images is a int, expected a list of images"),  # TypeError: no len()
    (pa.array(["a.png"]), "images is a str, expected a list of images"),  # read as 5 images, one per character
])
def test_an_images_cell_that_is_not_a_list_is_a_rejection(tiny_files, images, reason):
    path = tiny_files.folder / "fuzzed.parquet"
    pq.write_table(pa.table({"prompt": [PROMPT], "images": images, "reward_model": [TRUTH]}), path)

    result = load_parquet(path)

    assert [(row.locator, row.reason) for row in result.rejected] == [(f"{path}#row=0", reason)]


def test_a_row_with_invalid_utf8_text_is_a_rejection_and_the_others_are_read(tiny_files):
    # found by fuzzing: to_pylist's UnicodeDecodeError failed the whole file; Parquet stores any bytes a writer gives
    good, bad = b"hiyouga/geometry3k", b"geo\xc3metry"
    offsets = pa.py_buffer(pa.array([0, len(good), len(good) + len(bad)], pa.int32()).buffers()[1])
    source = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(good + bad)])
    image = [{"bytes": tiny_files.png(), "path": None}]
    path = tiny_files.folder / "fuzzed.parquet"
    pq.write_table(pa.table({"prompt": [PROMPT] * 2, "images": [image] * 2, "reward_model": [TRUTH] * 2,
                             "data_source": source}), path)

    result = load_parquet(path)

    assert [item.item_id for item in result.items] == ["fuzzed-0"]
    assert [(row.locator, row.sample_id, row.reason) for row in result.rejected] == [
        (f"{path}#row=1", "fuzzed-1", "row holds text that is not valid UTF-8 (invalid continuation byte at byte 3)")]


def test_a_file_damaged_past_its_header_is_a_table_file_error_naming_it(tiny_files):
    # found by fuzzing: the damage raised Arrow's own error (OSError, ArrowInvalid) as the rows were read
    table = pa.table({"prompt": [PROMPT] * 3, "images": [[{"bytes": tiny_files.png(), "path": None}]] * 3,
                      "reward_model": [TRUTH] * 3})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    path = tiny_files.text("fuzzed.arrow", sink.getvalue().to_pybytes()[:-40])  # the one batch cut short

    with pytest.raises(TableFileError, match=rf"^{path}: not a readable Parquet or Arrow IPC file \(.+\); pass "):
        load_parquet(path)
