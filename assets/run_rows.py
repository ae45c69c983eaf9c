"""The rows a training run and an evaluation read: one asset per environment the config file's settings name.

``rl_run`` draws three environments (``aerorl_ops.rl.run.inputs.run_datasets``): the training items
(``training/train_rows``), the held-out sample (``training/held_out_rows``) and, when the sampled
evaluations have one, the validation sample (``training/validation_rows``), plus one per held-out
distribution of the training dataset (``training/held_out_<name>_rows``); ``eval_run`` and
``checkpoint_eval`` draw the ``[eval]`` questions (``evaluation/eval_rows``). Each asset caches exactly
the items its environment holds for the config file's settings, drawn by the environment's own loader
(``aerorl_ops.envs.cached.env_table``), so the asset graph shows which data trained and evaluated what,
and a changed dataset turns its readers stale. A run's mixture has an asset per part instead, the part
as the mixture draws it (``training/train_rows/shapes``), and is drawn over them. The datasets domain
builds these assets; training and evaluation read them through the Parquet IO manager
(``cached_tables``), so they are defined here, beside the other shared modules.

A name the settings cannot resolve (an unknown dataset) makes no asset: the reader names the error
when it runs, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg
import pyarrow as pa

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.configured import dataset_settings
from aerorl_ops.rl.record.recorder import HELD_OUT_STAGE, TRAINING_STAGE, VALIDATION_STAGE
from aerorl_ops.rl.run.inputs import cached_stages, distribution_stage, run_datasets
from assets.io_managers import ParquetTableIOManager

TRAINING_ROWS_KEYS = {TRAINING_STAGE: dg.AssetKey(["training", "train_rows"]),
                      HELD_OUT_STAGE: dg.AssetKey(["training", "held_out_rows"]),
                      VALIDATION_STAGE: dg.AssetKey(["training", "validation_rows"])}
EVAL_ROWS_KEY = dg.AssetKey(["evaluation", "eval_rows"])
EVAL_STAGE = "evaluation"


@dataclass(frozen=True)
class RunRows:
    """One rows asset: its ``key``, the dataset table its environment is drawn from, and who reads it."""

    key: dg.AssetKey
    dataset: DatasetSettings
    readers: str

    @property
    def description(self) -> str:
        dataset = self.dataset
        drawn = f"{dataset.limit} drawn with seed {dataset.seed}" if dataset.limit else "every item"
        return (f"The items of {dataset.name!r} (kind {dataset.kind}) read by {self.readers}: split "
                f"{dataset.split!r}, {drawn}; question, answers, image, messages.")


def training_rows(bench: BenchmarkConfig) -> dict[str, RunRows]:
    """The rows assets of ``rl_run`` at ``bench``'s ``[training]`` settings, by stage
    (``rl.run.inputs.cached_stages``: a mixture's part by ``<stage>/<part>``, its key the stage's with the
    part's name after it); none when those name an unknown environment: ``rl_run`` says so when it runs."""
    try:
        chosen = run_datasets(bench.training, bench.seed + bench.training.seed, bench.datasets)
        stages = cached_stages(chosen)
    except ConfigError:
        return {}
    keys = {**TRAINING_ROWS_KEYS, **{distribution_stage(dataset.name): distribution_rows_key(dataset.name)
                                     for dataset in chosen.distributions}}
    return {stage: RunRows(dg.AssetKey([*keys[stage.split("/")[0]].path, *stage.split("/")[1:]]), dataset, "rl_run")
            for stage, dataset in stages.items()}


def distribution_rows_key(name: str) -> dg.AssetKey:
    """The rows asset of held-out distribution ``name`` (a ``[datasets]`` table the training dataset's
    ``held_out`` names): ``training/held_out_<name>_rows``."""
    return dg.AssetKey(["training", f"held_out_{name}_rows"])


def eval_rows(bench: BenchmarkConfig) -> RunRows | None:
    """The rows asset of ``eval_run`` and ``checkpoint_eval`` at ``bench``'s ``[eval]`` settings (None when
    those name an unknown dataset)."""
    try:
        dataset = dataset_settings(bench.eval.dataset, bench, bench.eval.split, bench.eval.n)
    except ConfigError:
        return None
    return RunRows(EVAL_ROWS_KEY, dataset, "eval_run and checkpoint_eval")


def cached_tables(store: ParquetTableIOManager, keys: Mapping[str, dg.AssetKey]) -> dict[str, pa.Table]:
    """The stored table of each asset of ``keys`` (by stage) that has one."""
    tables = {stage: store.stored_table(key) for stage, key in keys.items()}
    return {stage: table for stage, table in tables.items() if table is not None}
