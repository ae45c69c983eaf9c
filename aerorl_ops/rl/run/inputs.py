"""What a run of ``TrainingSettings`` trains on: its training, held-out and validation environments,
the base model's source (location and chat template) and the vLLM rollout engine's settings.

Shared by the ``rl_run`` asset, the torchrun worker and the benchmarks. :func:`run_datasets` says what
each environment is drawn from (a dataset table per stage, nothing read: the ``rl_run`` asset's rows
inputs are made of it); :func:`run_environments` builds them, each over its cached rows when a table
holding exactly what its source gives is at hand (``envs.cached``), else from the source.
:func:`check_training_inputs` resolves every input of a run (and the base model's folder) without
loading a model: ``aerorl train`` runs it before the training job starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import torch

from aerorl_ops.config.benchmark import BenchmarkConfig, model_entry
from aerorl_ops.config.curriculum import CurriculumStage, parse_curriculum
from aerorl_ops.config.datasets import DatasetSettings, held_out_tables
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.cached import EnvInput, cached_env, cached_mixture_env
from aerorl_ops.envs.configured import drawn_parts, named_dataset, named_dataset_env
from aerorl_ops.envs.registry import ENVIRONMENTS
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.loading import ModelSource
from aerorl_ops.models.sources import TORCH_DTYPES, check_local_model, model_source
from aerorl_ops.rl.record.recorder import HELD_OUT_STAGE, TRAINING_STAGE, VALIDATION_STAGE
from aerorl_ops.rl.run.embedded_builds import EMBEDDED_BUILDERS
from aerorl_ops.rl.runtime.distributed import check_data_parallel

TRAIN_SEED_OFFSET = 1000
EVAL_SAMPLE_SEED = 0
ROLE = "training environment"


def distribution_stage(name: str) -> str:
    """The stage of held-out distribution ``name`` (its rows asset, its ``rejected_rows.stage``).

    >>> distribution_stage("minigrid_8x8")
    'held_out:minigrid_8x8'
    """
    return f"{HELD_OUT_STAGE}:{name}"


@dataclass(frozen=True)
class RunDatasets:
    """What a run draws its environments from, each as a dataset table (``envs.configured.named_dataset``):
    the training items, the held-out sample, the sampled evaluations' validation sample (None: they
    use the held-out set, or are off) and the held-out distributions (the training table's ``held_out``)."""

    train: DatasetSettings
    held_out: DatasetSettings
    validation: DatasetSettings | None
    distributions: tuple[DatasetSettings, ...] = ()

    def by_stage(self) -> dict[str, DatasetSettings]:
        """Each table by the stage it feeds (``rl.record.recorder``'s ``*_STAGE``, a distribution's
        ``distribution_stage``), validation when there is one."""
        stages = {TRAINING_STAGE: self.train, HELD_OUT_STAGE: self.held_out, VALIDATION_STAGE: self.validation,
                  **{distribution_stage(dataset.name): dataset for dataset in self.distributions}}
        return {stage: dataset for stage, dataset in stages.items() if dataset is not None}


def run_datasets(settings: TrainingSettings, seed: int, datasets: Sequence[DatasetSettings] = ()) -> RunDatasets:
    """What each environment of a run of ``settings`` (seeded by ``seed``) is drawn from; nothing is read.

    ``env`` / ``eval_env`` (empty: ``env``) name a registry kind, whose ``train_split`` /
    ``eval_split`` is used, else one of ``datasets`` (the config's ``[datasets.<name>]``), which
    brings its own kind, path, split and settings (a kind wins over a dataset of the same name);
    ``train_limit`` (when > 0; drawn with ``seed`` + ``TRAIN_SEED_OFFSET``) and ``eval_size`` (a fixed
    sample, seed 0) replace its limit. The sampled evaluations draw ``sampled_eval_size`` items of a
    registry env's ``validation_split``. A configured training dataset's ``held_out`` tables are its held-out
    distributions, each an ``eval_size`` sample (seed 0) of its own split. An unknown name is a ``ConfigError``
    listing both kinds and datasets.
    """
    held_out_name = settings.eval_env or settings.env
    has_validation = bool(settings.sampled_eval_size) and held_out_name in ENVIRONMENTS
    train = named_dataset(settings.env, datasets, settings.train_split, settings.train_limit or None,
                          seed + TRAIN_SEED_OFFSET, ROLE)
    return RunDatasets(
        train,
        named_dataset(held_out_name, datasets, settings.eval_split, settings.eval_size, EVAL_SAMPLE_SEED, ROLE),
        named_dataset(held_out_name, (), settings.validation_split, settings.sampled_eval_size, EVAL_SAMPLE_SEED,
                      ROLE) if has_validation else None,
        tuple(replace(dataset, limit=settings.eval_size, seed=EVAL_SAMPLE_SEED)
              for dataset in held_out_tables(train, tuple(datasets))))


@dataclass(frozen=True)
class RunEnvironments:
    """A run's environments (``validation`` None as in :class:`RunDatasets`; each held-out distribution's by its
    name) and where each came from."""

    train: TaskEnv
    held_out: TaskEnv
    validation: TaskEnv | None
    inputs: dict[str, EnvInput]  # by stage, as RunDatasets.by_stage
    distributions: dict[str, TaskEnv] = field(default_factory=dict)


def run_environments(settings: TrainingSettings, seed: int, datasets: Sequence[DatasetSettings] = (),
                     cached: Mapping[str, pa.Table] | None = None) -> RunEnvironments:
    """The environments :func:`run_datasets` names, each over ``cached[stage]`` (a table of its cached rows,
    ``envs.cached.env_table``) when that holds exactly what its source gives now, else read from the
    source; a mixture over each of its parts' cached rows, ``cached[part_stage(stage, part)]``
    (:func:`cached_stages`). A curriculum naming a question type the training environment does not have
    is a ``ConfigError`` listing those it has."""
    envs, inputs, cached = {}, {}, cached or {}
    chosen = run_datasets(settings, seed, datasets)
    for stage, dataset in chosen.by_stage().items():
        if dataset.parts:  # a mixture: over each part's cached rows
            tables = {part: cached.get(part_stage(stage, part)) for part in drawn_parts(dataset)}
            envs[stage], inputs[stage] = cached_mixture_env(
                dataset, tables, lambda parts, dataset=dataset: named_dataset_env(dataset, ROLE, parts))
        else:
            envs[stage], inputs[stage] = cached_env(dataset, cached.get(stage),
                                                    lambda dataset=dataset: named_dataset_env(dataset, ROLE))
        if stage == TRAINING_STAGE:
            check_curriculum_types(parse_curriculum(settings.curriculum), envs[stage])
    return RunEnvironments(envs[TRAINING_STAGE], envs[HELD_OUT_STAGE], envs.get(VALIDATION_STAGE), inputs,
                           {d.name: envs[distribution_stage(d.name)] for d in chosen.distributions})


def part_stage(stage: str, part: str) -> str:
    """The stage of a mixture part's cached rows: ``"training/shapes"``."""
    return f"{stage}/{part}"


def cached_stages(chosen: RunDatasets) -> dict[str, DatasetSettings]:
    """What each cached rows table of a run holds, by stage: each environment's dataset table, a mixture's
    each part as the mixture draws it (:func:`part_stage`, ``envs.configured.drawn_parts``)."""
    stages = {}
    for stage, dataset in chosen.by_stage().items():
        if dataset.parts:
            stages.update({part_stage(stage, name): part for name, part in drawn_parts(dataset).items()})
        else:
            stages[stage] = dataset
    return stages


def training_environments(settings: TrainingSettings, seed: int,
                          datasets: Sequence[DatasetSettings] = ()) -> tuple[TaskEnv, TaskEnv]:
    """The training environment and the held-out one (:func:`run_datasets`), read from their sources."""
    chosen = run_datasets(settings, seed, datasets)
    train = named_dataset_env(chosen.train, ROLE)
    check_curriculum_types(parse_curriculum(settings.curriculum), train)
    return train, named_dataset_env(chosen.held_out, ROLE)


def validation_environment(settings: TrainingSettings, datasets: Sequence[DatasetSettings] = ()) -> TaskEnv | None:
    """The environment of the sampled evaluations during training, read from its source: ``sampled_eval_size``
    items of a registry env's ``validation_split``; None (use the held-out set) for a configured dataset or
    when off."""
    validation = run_datasets(settings, 0, datasets).validation
    return named_dataset_env(validation, ROLE) if validation is not None else None


def check_curriculum_types(stages: Sequence[CurriculumStage], env: TaskEnv) -> None:
    """``ConfigError`` when a stage names a question type that no item of ``env`` has (a typo would
    otherwise quietly train on the stage's other types)."""
    if not stages:
        return
    types = {env.question_type(index) for index in range(len(env))} - {None}
    for number, stage in enumerate(stages, start=1):
        unknown = [kind for kind in stage.focus_types if kind not in types]
        if unknown:
            raise ConfigError(f"training curriculum stage {number} (until step {stage.until_step}) names question "
                              f"types {unknown} that environment {env.name!r} does not have; its types: "
                              f"{', '.join(sorted(types)) or 'none (its items have no question type)'}")


def check_training_inputs(settings: TrainingSettings, bench: BenchmarkConfig, where: str,
                          models_dir: Path | None = None, cached: Mapping[str, pa.Table] | None = None) -> None:
    """Every input of a run of ``settings`` (with the config file ``bench``) resolved, no model
    loaded: the rules across settings, the split of every update over the ``world_size`` ranks, the
    base model (a ``[models]`` key, or a checkpoint folder with a VLM's config and processor) and the
    environments (names, splits, the curriculum's question types), built as the run builds them
    (:func:`run_environments`): over the ``cached`` rows that hold exactly what their source gives now,
    else read from the source, so a rerun reads no source again. Each setting's own check ran where
    ``settings`` came in. ``ConfigError`` (or ``ModelUnavailableError`` for
    the base model's folder), one line, naming ``where``."""
    settings.check_rules(where)
    try:
        check_data_parallel(settings.world_size, settings.grad_accumulation, settings.ppo_mini_batches,
                            settings.prompts_per_step * settings.group_size,
                            settings.warmup_batch_size if settings.warmup_steps else 0)
    except ValueError as error:  # what the ranks' launch would refuse
        raise ConfigError(f"{where}: {error}") from error
    try:
        check_local_model(model_entry(settings.base_model, bench, "base_model"), models_dir)
        run_environments(settings, bench.seed + settings.seed, bench.datasets, cached)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from error


def base_model_source(base_model: str, bench: BenchmarkConfig, models_dir: Path,
                      local_files_only: bool) -> ModelSource:
    """Where ``base_model`` (a model key of ``bench``, else a checkpoint directory) loads from, with its
    ``[models.<key>]`` ``chat_template`` (empty: the checkpoint's own), as the benchmark loads it."""
    entry = model_entry(base_model, bench, "rl_run config base_model")
    return model_source(entry, Path(models_dir), local_files_only, EMBEDDED_BUILDERS)


def base_model_dtype(base_model: str, bench: BenchmarkConfig) -> torch.dtype:
    """The dtype the policy and the reference load in: the base model's ``[models.<key>]`` ``dtype``
    (float32 for a checkpoint folder), as the benchmark loads it."""
    return TORCH_DTYPES[model_entry(base_model, bench, "rl_run config base_model").dtype]


def rollout_engine_of(base_model: str, bench: BenchmarkConfig) -> GenerationBackend | None:
    """The vLLM engine settings of ``rollout_backend = "vllm"``: the base model's ``[models.<key>]``
    table's when that is a vLLM entry, else None (vLLM's defaults)."""
    if base_model not in bench.model_keys:
        return None
    backend = bench.model(base_model).backend
    return backend if backend.uses_engine else None
