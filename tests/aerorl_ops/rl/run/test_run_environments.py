"""What a run draws its environments from (one dataset table per stage, nothing read), and the environments
built over cached rows: the very items the sources give, at the shipped settings and the fingerprint's."""

from __future__ import annotations

import dataclasses

import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TRAINING_DEFAULTS
from aerorl_ops.envs.cached import env_table, items_sha256
from aerorl_ops.rl.run.inputs import (
    RunDatasets,
    run_datasets,
    run_environments,
    training_environments,
    validation_environment,
)
from tests.aerorl_ops.rl.run.test_run_inputs import shapes_dataset

FINGERPRINT_RUN = {"eval_size": 32, "sampled_eval_size": 0, "train_limit": 400}
"""What scripts/behaviour_fingerprint.py's TRAIN_FLAGS change of what a run draws."""


def test_a_registry_kind_is_drawn_at_the_runs_splits_sizes_and_seeds():
    chosen = run_datasets(TRAINING_DEFAULTS, seed=7)
    assert chosen == RunDatasets(
        DatasetSettings("easy_vqa", kind="easy_vqa", split="train", limit=None, seed=1007),
        DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=500, seed=0),
        DatasetSettings("easy_vqa", kind="easy_vqa", split="validation", limit=64, seed=0))
    assert list(chosen.by_stage()) == ["training", "held_out", "validation"]
    fingerprint = run_datasets(dataclasses.replace(TRAINING_DEFAULTS, **FINGERPRINT_RUN), seed=0)
    assert (fingerprint.train.limit, fingerprint.train.seed, fingerprint.held_out.limit) == (400, 1000, 32)
    assert fingerprint.validation is None and list(fingerprint.by_stage()) == ["training", "held_out"]


def test_a_configured_dataset_brings_its_table_and_has_no_validation_sample(tmp_path):
    table = shapes_dataset(tmp_path, "shapes", ["red", "blue"])
    chosen = run_datasets(dataclasses.replace(TRAINING_DEFAULTS, env="shapes", eval_size=3), 0, [table])
    assert chosen.train == dataclasses.replace(table, limit=None, seed=1000)
    assert chosen.held_out == dataclasses.replace(table, limit=3, seed=0) and chosen.validation is None
    with pytest.raises(ConfigError, match=r"^training environment 'shape' is neither an environment kind"):
        run_datasets(dataclasses.replace(TRAINING_DEFAULTS, env="shape"), 0, [table])


@pytest.mark.parametrize("changes", [{"train_limit": 40, "eval_size": 12, "sampled_eval_size": 5}, FINGERPRINT_RUN],
                         ids=["small", "fingerprint"])
def test_environments_over_cached_rows_hold_the_items_their_sources_give(changes):
    settings = dataclasses.replace(TRAINING_DEFAULTS, **changes)
    train, held_out = training_environments(settings, 0)
    validation = validation_environment(settings)
    tables = {stage: env_table(dataset) for stage, dataset in run_datasets(settings, 0).by_stage().items()}
    envs = run_environments(settings, 0, cached=tables)
    assert [came.why_source for came in envs.inputs.values()] == [""] * len(tables)
    for source, cached in [(train, envs.train), (held_out, envs.held_out), (validation, envs.validation)]:
        if source is None:
            assert cached is None
            continue
        assert [(i.item_id, i.question, i.answers, i.images, i.messages) for i in cached.items] == [
            (i.item_id, i.question, i.answers, i.images, i.messages) for i in source.items]
        assert cached.items == source.items and cached.name == source.name
    assert envs.inputs["training"].content_sha256 == items_sha256(train.items)
    assert envs.inputs["training"].items == changes["train_limit"]


def test_rows_cached_for_other_settings_leave_each_stage_to_its_source():
    small = dataclasses.replace(TRAINING_DEFAULTS, train_limit=6, eval_size=4, sampled_eval_size=0)
    tables = {stage: env_table(dataset) for stage, dataset in run_datasets(small, 0).by_stage().items()}
    envs = run_environments(dataclasses.replace(small, eval_size=5), 0, cached=tables)
    assert envs.inputs["training"].cached and len(envs.held_out) == 5
    assert envs.inputs["held_out"].why_source == (
        "the cached rows were drawn from another source: its settings changed (limit 4 -> 5)")


def test_a_curriculum_is_checked_against_the_cached_training_items():
    settings = dataclasses.replace(TRAINING_DEFAULTS, train_limit=6, eval_size=2, sampled_eval_size=0,
                                   curriculum="50: colour,size @ 0.75")
    tables = {stage: env_table(dataset) for stage, dataset in run_datasets(settings, 0).by_stage().items()}
    with pytest.raises(ConfigError, match=r"names question types \['size'\] that environment 'easy_vqa' does not"):
        run_environments(settings, 0, cached=tables)
