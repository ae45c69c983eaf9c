"""Rows with several images on the embedded tiny Qwen2-VL: the benchmark's prompt places them, the record
counts them and every image's vision tokens (checked by hand against the processor's own grid), evaluation
and training take them, and a single-image row is prompted exactly as before.

The tiny model's processor resizes an image to multiples of 28 px with at least 112 x 112 pixels, cuts it
into 14 px patches and merges 2 x 2 patches into one vision token: a 112 x 112 image is 8 x 8 patches, 16
tokens; a 224 x 112 one 8 x 16 patches, 32 tokens.
"""

from __future__ import annotations

import doctest
import io
import json
from contextlib import contextmanager
from dataclasses import replace

import pyarrow as pa
import pytest
import torch
from PIL import Image

from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.eval_runner.runner import evaluate_model
from aerorl_ops.generation import backends, batched, partition_run, prompts, shown_video, vllm_backend, vllm_engine
from aerorl_ops.generation.batched import encode_prompts, generate_rows, prompt_texts, shown_rows
from aerorl_ops.generation.generations_table import generations_table
from aerorl_ops.generation.prompts import benchmark_messages, chat_messages
from aerorl_ops.generation.shown_video import media_limits
from aerorl_ops.generation.validation import split_valid_generations
from aerorl_ops.generation.vllm_engine import MediaLimits
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.loading import ModelSource
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs
from aerorl_ops.rows import image_markers, item_table
from aerorl_ops.rows.image_markers import MarkerMismatch
from aerorl_ops.rows.item_table import items_to_table, table_to_items
from aerorl_ops.rows.task_item import TaskItem, prompt_text
from tests.aerorl_ops.rl.run.test_family_training import generated_with_logprobs

SQUARE_TOKENS, WIDE_TOKENS = 16, 32  # (112 / 14) * (112 / 14) / 4 and (112 / 14) * (224 / 14) / 4


def png(size: tuple[int, int], colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


SQUARE, WIDE = png((112, 112), "red"), png((224, 112), "blue")
PAIR = TaskItem("pair", "pairs", "test", "pairs.jsonl", "Same colour?", ("no",), (SQUARE, WIDE), (
    {"role": "user", "content": [{"type": "text", "text": "Left "}, {"type": "image"},
                                 {"type": "text", "text": ", right "}, {"type": "image"},
                                 {"type": "text", "text": ". Same colour?"}]},))
SINGLE = TaskItem("single", "pairs", "test", "pairs.jsonl", "What colour?", ("red",), (SQUARE,))


def test_the_docstring_examples_of_the_multi_image_modules_hold():
    for module in (prompts, batched, shown_video, vllm_engine, image_markers, item_table):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_a_two_image_row_records_two_images_and_both_images_vision_tokens_by_hand(tiny_vlm):
    samples = generate_rows(tiny_vlm, [PAIR, SINGLE], batch_size=2, settings=GenerationSettings(max_new_tokens=3))
    inputs = encode_prompts(tiny_vlm, [PAIR, SINGLE])
    merge = tiny_vlm.processor.image_processor.merge_size
    per_image = (inputs["image_grid_thw"].prod(dim=1) // merge**2).tolist()  # the processor's own count, in order
    assert per_image == [SQUARE_TOKENS, WIDE_TOKENS, SQUARE_TOKENS]
    pair, single = samples
    assert (pair.image_count, pair.vision_tokens) == (2, SQUARE_TOKENS + WIDE_TOKENS)
    assert (single.image_count, single.vision_tokens) == (1, SQUARE_TOKENS)
    assert pair.prompt == "Left , right . Same colour?"  # the text of its user turn
    assert pair.prompt_text_tokens == int(inputs["attention_mask"][0].sum()) - 48
    table = generations_table([PAIR, SINGLE], samples)
    assert table.column("image_count").to_pylist() == [2, 1]
    assert table.column("vision_tokens").to_pylist() == [48, 16]


def test_the_images_sit_at_the_rows_placeholders_in_image_order(tiny_vlm):
    text = prompt_texts(tiny_vlm, [PAIR])[0]
    block = "<|vision_start|><|image_pad|><|vision_end|>"
    assert f"user\nLeft {block}, right {block}. Same colour?<|im_end|>" in text
    pad = tiny_vlm.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    ids = encode_prompts(tiny_vlm, [PAIR])["input_ids"][0].tolist()
    runs = [len(run) for run in "".join("x" if token == pad else " " for token in ids).split()]
    assert runs == [SQUARE_TOKENS, WIDE_TOKENS]  # the square image first, where the first placeholder is
    swapped = encode_prompts(tiny_vlm, [replace(PAIR, images=(WIDE, SQUARE))])["input_ids"]
    runs = [len(run) for run in "".join("x" if token == pad else " " for token in swapped[0].tolist()).split()]
    assert runs == [WIDE_TOKENS, SQUARE_TOKENS]


def test_markers_in_a_question_place_the_images_else_they_come_first():
    marked = TaskItem("m", "pairs", "test", "f", "<image> or <image>: which is red?", ("left",), (SQUARE, WIDE))
    assert benchmark_messages(marked)[0]["content"][:3] == [
        {"type": "image"}, {"type": "text", "text": " or "}, {"type": "image"}]
    bare = TaskItem("b", "pairs", "test", "f", "Which is red?", ("left",), (SQUARE, WIDE))
    content = benchmark_messages(bare)[0]["content"]
    assert content[:2] == [{"type": "image"}, {"type": "image"}] and content[2]["text"].startswith("Which is red?\n")
    with pytest.raises(MarkerMismatch, match="text has 1 <image> markers for 2 images"):
        benchmark_messages(TaskItem("x", "pairs", "test", "f", "<image> which?", ("a",), (SQUARE, WIDE)))


def test_a_single_image_row_is_prompted_and_encoded_as_before(tiny_vlm, few_rows):
    marked = TaskItem("j", "geo", "test", "g.jsonl", "Look here", ("3",), (SQUARE,), (
        {"role": "user", "content": [{"type": "text", "text": "Look "}, {"type": "image"},
                                     {"type": "text", "text": " here"}]},))
    rows = [*few_rows[:2], marked]
    before = [tiny_vlm.processor.apply_chat_template(chat_messages(r.question, prompt_text(r)),
                                                     add_generation_prompt=True, tokenize=False) for r in rows]
    assert prompt_texts(tiny_vlm, rows) == before  # the one image first, whatever the messages' placement
    images = [[Image.open(io.BytesIO(r.images[0])).convert("RGB")] for r in rows]
    expected = tiny_vlm.processor(text=before, images=images, return_tensors="pt", padding=True)
    encoded = encode_prompts(tiny_vlm, rows)
    assert encoded.keys() == expected.keys() and all(torch.equal(encoded[k], expected[k]) for k in expected)


def test_a_generations_table_cached_before_image_count_gains_it_as_null():
    samples = [batched.GeneratedSample("single", "p", "r", "r", 1, 2, 16, 1, 1.0, 1.0, 0, 1)]
    table = generations_table([SINGLE], samples).drop_columns(["image_count"])
    table = table.replace_schema_metadata({b"aerorl.partition_stats": b"{}"})
    accepted, rejected = split_valid_generations(table)
    assert accepted.column("image_count").to_pylist() == [None] and not rejected
    assert accepted.schema.metadata == {b"aerorl.partition_stats": b"{}"}


def test_the_vllm_engine_takes_as_many_images_per_prompt_as_the_largest_row(tiny_vlm):
    limits = [media_limits(shown_rows(tiny_vlm, rows)) for rows in ([SINGLE], [PAIR, SINGLE], [])]
    assert limits == [MediaLimits(1, 0), MediaLimits(2, 0), MediaLimits(1, 0)]
    source = ModelSource("/m", backend=GenerationBackend("vllm"))
    kwargs = vllm_engine.llm_kwargs(source, "/m", torch.float32, 0, sleep_mode=False, limits=MediaLimits(2),
                                    on_cpu=True, in_process_group=False)
    assert kwargs["limit_mm_per_prompt"] == {"image": 2, "video": 0} and kwargs["enable_chunked_prefill"] is False
    single = vllm_engine.llm_kwargs(source, "/m", torch.float32, 0, sleep_mode=False, limits=vllm_engine.SINGLE_IMAGE,
                                    on_cpu=False, in_process_group=False)
    assert single["limit_mm_per_prompt"] == {"image": 1, "video": 0}  # what every engine was started with before
    own = ModelSource("/m", backend=GenerationBackend("vllm", engine_args=(("limit_mm_per_prompt", {"image": 5}),)))
    assert vllm_engine.llm_kwargs(own, "/m", torch.float32, 0, sleep_mode=False, limits=MediaLimits(2), on_cpu=False,
                                  in_process_group=False)["limit_mm_per_prompt"] == {"image": 5}
    with pytest.raises(ValueError, match="max_images must be >= 1, got 0"):
        vllm_engine.engine_defaults(MediaLimits(0))


def test_a_partition_starts_its_engine_for_its_largest_row(tiny_vlm, monkeypatch):
    started = []

    @contextmanager
    def fake_engine(source, dtype, seed, limits=vllm_engine.SINGLE_IMAGE):
        started.append(limits)
        yield None

    monkeypatch.setattr(vllm_backend, "started_engine", fake_engine)
    with backends.ROW_GENERATORS["vllm"](tiny_vlm, GenerationSettings(), MediaLimits(2)):
        pass
    opened = []

    @contextmanager
    def recording(loaded, settings, limits):
        opened.append(limits)
        with backends.hf_row_generator(loaded, settings, limits) as generator:
            yield generator

    monkeypatch.setattr(partition_run, "open_row_generator", recording)
    table = partition_run.run_generation(tiny_vlm, [SINGLE, PAIR], 2, GenerationSettings(max_new_tokens=1))
    assert started == [MediaLimits(2, 0)] and opened == [MediaLimits(2, 0)]
    assert table.column("image_count").to_pylist() == [1, 2]


@pytest.fixture(scope="module")
def pairs_env(tmp_path_factory):
    """A JSONL dataset of four questions about two images each, placed by ``<image>`` markers."""
    folder = tmp_path_factory.mktemp("pairs")
    colours = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    for name, colour in colours.items():
        Image.new("RGB", (112, 112), colour).save(folder / f"{name}.png")
    lines = [{"id": f"p{n}", "question": "Left <image>, right <image>: same colour?",
              "answer": "yes" if left == right else "no", "image": [f"{left}.png", f"{right}.png"]}
             for n, (left, right) in enumerate([("red", "red"), ("red", "blue"), ("blue", "red"), ("blue", "blue")])]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return make_env("jsonl", path=str(folder / "pairs.jsonl"), split="test", instruction="Answer yes or no.")


def test_evaluation_encodes_both_images_of_each_question_and_grades_every_reply(tiny_vlm, pairs_env):
    assert [len(item.images) for item in pairs_env.items] == [2, 2, 2, 2]
    inputs = encode_observations(tiny_vlm, observe_all(pairs_env, pairs_env.items))
    pad = tiny_vlm.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert (inputs["input_ids"] == pad).sum(dim=1).tolist() == [2 * SQUARE_TOKENS] * 4
    greedy = SamplingSetting("greedy_pass1", greedy=True)
    outcome = evaluate_model(tiny_vlm, pairs_env, range(4), [greedy], max_new_tokens=3, batch_size=4)
    assert [s.item_id for s in outcome.samples] == ["p0", "p1", "p2", "p3"]  # pairs.jsonl's ids: jsonl_env's
    assert outcome.metric("greedy_pass1").questions == 4


def test_training_scores_a_two_image_reply_as_generate_did_and_masks_both_images(tiny_vlm, pairs_env):
    inputs = encode_observations(tiny_vlm, observe_all(pairs_env, items_at(pairs_env, [0, 1])))
    tokens, expected = generated_with_logprobs(tiny_vlm, inputs)
    batch = append_completions(inputs, tokens, tiny_vlm)
    assert batch.vision_mask.sum(dim=1).tolist() == [2 * SQUARE_TOKENS] * 2
    with torch.no_grad():
        scored = completion_logprobs(tiny_vlm.model, batch).logprobs  # [N]
    assert torch.allclose(scored, torch.cat(expected), atol=1e-5, rtol=0)


def test_a_rows_table_of_two_image_items_is_what_the_benchmark_reads(tiny_vlm, pairs_env):
    table = items_to_table(pairs_env.items)
    assert table.schema.field("images").type == pa.list_(pa.binary())
    rows = table_to_items(table)
    samples = generate_rows(tiny_vlm, rows, batch_size=4, settings=GenerationSettings(max_new_tokens=1))
    assert [(s.image_count, s.vision_tokens) for s in samples] == [(2, 2 * SQUARE_TOKENS)] * 4


def test_a_tiny_rl_run_trains_on_two_image_questions(tiny_model_dir, pairs_env, tmp_path):
    settings = TrainingSettings(group_size=2, max_new_tokens=3, learning_rate=1e-2, seed=3, warmup_steps=0, steps=1,
                                prompts_per_step=2, eval_interval=1, checkpoint_interval=100, control=False)
    result = run_training(str(tiny_model_dir), tmp_path / "run", settings, pairs_env, pairs_env, range(4),
                          device="cpu", resume=False)
    (step,) = result.steps
    assert step.phase == "grpo" and step.episodes_seen == 4 and 0.0 <= step.accuracy <= 1.0
    assert [e.phase for e in result.evals] == ["no_image_prior", "base", "final"]  # the last step: "final" only
    assert all(e.report.overall.n == 4 for e in result.evals)


def test_a_rollout_engine_starts_for_as_many_images_as_it_is_asked(tiny_vlm, monkeypatch):
    """The trainer asks for the training items' largest image count (``multi_turn.episode_limits``)."""
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.rl.step.rollout_engine import RolloutEngine

    started = []

    class Synced:
        def sync_weights(self, model) -> None:
            started.append("synced")

    def start(cls, loaded, backend=None, seed=0, sleep_mode=False, limits=vllm_engine.SINGLE_IMAGE):
        started.append(limits)
        return Synced()

    monkeypatch.setattr(VLLMSampler, "start", classmethod(start))
    engine = RolloutEngine("vllm", None, seed=0)
    engine.synced(tiny_vlm, MediaLimits(2))
    engine.synced(tiny_vlm, MediaLimits(2))  # started once, synced each time
    assert started == [MediaLimits(2, 0), "synced", "synced"]
    assert RolloutEngine("hf", None, seed=0).synced(tiny_vlm, MediaLimits(2)) is None


def test_an_eval_id_changes_with_max_images_only_off_its_default():
    from aerorl_ops.config.datasets import DEFAULT_DATASETS
    from aerorl_ops.config.evaluation import EvalSettings
    from aerorl_ops.eval_runner.model_vs_baseline import eval_id_of

    dataset = DEFAULT_DATASETS[2]
    same = eval_id_of(EvalSettings(), replace(dataset, max_images=dataset.max_images))
    assert eval_id_of(EvalSettings(), dataset) == same != eval_id_of(EvalSettings(), replace(dataset, max_images=2))
