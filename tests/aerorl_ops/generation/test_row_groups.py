"""A dataset's own ``max_new_tokens`` (``generation.row_groups``) through a partition's generation on the embedded
tiny Qwen2-VL: its rows get their budget in batches of their own, the other rows are generated exactly as without
it, the batches numbered on across the cut, and a partition whose datasets set none is one run of batches."""

from __future__ import annotations

import doctest

import aerorl_ops.generation.row_groups as row_groups
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.generation.partition_run import run_generation

SETTINGS = GenerationSettings(max_new_tokens=2)
COLUMNS = ["sample_id", "dataset", "response", "generated_tokens", "batch_index", "batch_size"]


def test_a_dataset_budget_is_its_rows_own_in_batches_of_their_own(tiny_vlm, few_rows):
    plain = run_generation(tiny_vlm, few_rows, 2, SETTINGS).select(COLUMNS).to_pylist()
    rows = run_generation(tiny_vlm, few_rows, 2, SETTINGS, max_new_tokens={"chartqa": 6}).select(COLUMNS).to_pylist()
    assert [row["dataset"] for row in rows] == ["docvqa"] * 3 + ["chartqa"] * 2
    assert [(row["batch_index"], row["batch_size"]) for row in plain] == [(0, 2), (0, 2), (1, 2), (1, 2), (2, 1)]
    # numbered on across the cut: one partition, one run of batch indices
    assert [(row["batch_index"], row["batch_size"]) for row in rows] == [(0, 2), (0, 2), (1, 1), (2, 2), (2, 2)]
    assert rows[:2] == plain[:2]  # the same batch as before: the same rows
    assert [row["generated_tokens"] for row in rows] == [2, 2, 2, 6, 6]  # random weights: no EOS within 6


def test_datasets_that_set_no_budget_are_generated_exactly_as_before(tiny_vlm, few_rows):
    plain = run_generation(tiny_vlm, few_rows, 2, SETTINGS).select(COLUMNS)
    assert run_generation(tiny_vlm, few_rows, 2, SETTINGS, max_new_tokens={"arc": 128}).select(COLUMNS) == plain


def test_the_module_examples_hold():
    result = doctest.testmod(row_groups)
    assert result.failed == 0 and result.attempted > 0
