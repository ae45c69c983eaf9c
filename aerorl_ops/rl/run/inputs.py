"""What a run of ``TrainingSettings`` trains on: its training, held-out and validation environments,
the base model's source (location and chat template) and the vLLM rollout engine's settings.

Shared by the ``rl_run`` asset, the torchrun worker and the benchmarks. :func:`check_training_inputs`
resolves every input of a run (and the base model's folder) without loading a model: ``aerorl
train`` runs it before the training job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from aerorl_ops.config.benchmark import BenchmarkConfig, model_entry
from aerorl_ops.config.curriculum import CurriculumStage, parse_curriculum
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.configured import named_env
from aerorl_ops.envs.registry import ENVIRONMENTS
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.loading import ModelSource
from aerorl_ops.models.sources import TORCH_DTYPES, check_local_model, model_source
from aerorl_ops.rl.run.embedded_builds import EMBEDDED_BUILDERS
from aerorl_ops.rl.runtime.distributed import check_data_parallel

TRAIN_SEED_OFFSET = 1000
EVAL_SAMPLE_SEED = 0
ROLE = "training environment"


def training_environments(settings: TrainingSettings, seed: int,
                          datasets: Sequence[DatasetSettings] = ()) -> tuple[TaskEnv, TaskEnv]:
    """The training environment (seeded by ``seed``) and the held-out one: a fixed sample (seed 0)
    of ``eval_size`` items.

    ``env`` / ``eval_env`` (empty: ``env``) name a registry kind, whose ``train_split`` /
    ``eval_split`` is used, else one of ``datasets`` (the config's ``[datasets.<name>]``), which
    brings its own kind, path, split and settings (a kind wins over a dataset of the same name);
    ``train_limit`` (when > 0) and ``eval_size`` replace its limit. An unknown name is a
    ``ConfigError`` listing both kinds and datasets; so is a curriculum naming a question type the
    training environment does not have (listing those it has).
    """
    train = named_env(settings.env, datasets, settings.train_split, settings.train_limit or None,
                      seed + TRAIN_SEED_OFFSET, ROLE)
    check_curriculum_types(parse_curriculum(settings.curriculum), train)
    held_out = named_env(settings.eval_env or settings.env, datasets, settings.eval_split, settings.eval_size,
                         EVAL_SAMPLE_SEED, ROLE)
    return train, held_out


def validation_environment(settings: TrainingSettings, datasets: Sequence[DatasetSettings] = ()) -> TaskEnv | None:
    """The environment of the sampled evaluations during training: ``sampled_eval_size`` items of a
    registry env's ``validation_split``; None (use the held-out set) for a configured dataset or when off."""
    name = settings.eval_env or settings.env
    if not settings.sampled_eval_size or name not in ENVIRONMENTS:
        return None
    return named_env(name, (), settings.validation_split, settings.sampled_eval_size, EVAL_SAMPLE_SEED, ROLE)


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
                          models_dir: Path | None = None) -> None:
    """Every input of a run of ``settings`` (with the config file ``bench``) resolved, no model
    loaded: the rules across settings, the split of every update over ``nproc_per_node`` ranks, the
    base model (a ``[models]`` key, or a checkpoint folder with a VLM's config and processor) and the
    environments (names, splits, the curriculum's question types); each setting's own check ran
    where ``settings`` came in. ``ConfigError`` (or ``ModelUnavailableError`` for the base model's
    folder), one line, naming ``where``."""
    settings.check_rules(where)
    try:
        check_data_parallel(settings.nproc_per_node, settings.grad_accumulation, settings.ppo_mini_batches,
                            settings.prompts_per_step * settings.group_size,
                            settings.warmup_batch_size if settings.warmup_steps else 0)
    except ValueError as error:  # what the ranks' launch would refuse
        raise ConfigError(f"{where}: {error}") from error
    try:
        check_local_model(model_entry(settings.base_model, bench, "base_model"), models_dir)
        training_environments(settings, bench.seed + settings.seed, bench.datasets)
        validation_environment(settings, bench.datasets)
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
