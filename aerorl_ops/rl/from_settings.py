"""What a run of the training settings trains: its ``AeroRLConfig``, ``TrainingPlan`` and environments.

Shared by the ``rl_run`` asset and ``benchmarks/bench_training.py``. ``settings`` is a
``TrainingSettings``, or any object with its field names (the asset's run config).
:func:`check_training_inputs` resolves all of them (and the base model's folder) without loading
a model: ``aerorl train`` runs it before the training job starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.curriculum import CurriculumStage, parse_curriculum
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.configured import env_kwargs
from aerorl_ops.envs.registry import ENVIRONMENTS, make_env
from aerorl_ops.evaluator.inputs import model_entry
from aerorl_ops.models.sources import check_local_model
from aerorl_ops.rl.config import ALGORITHM_FIELDS, MODEL_FIELDS, AeroRLConfig, check_rollout_ranks
from aerorl_ops.rl.distributed import check_data_parallel
from aerorl_ops.rl.training_run import TrainingPlan

TRAIN_SEED_OFFSET = 1000
EVAL_SAMPLE_SEED = 0
EVAL_DEFAULTS = EvalSettings()


def rl_config_of(settings: TrainingSettings) -> AeroRLConfig:
    """The validated ``AeroRLConfig`` of ``settings`` (``ValueError`` names the first bad field, or
    vLLM rollouts on several ranks)."""
    config = AeroRLConfig(quant_ref_bits=settings.quant_bits, algorithm=settings.algorithm,
                          group_size=settings.group_size, learning_rate=settings.learning_rate,
                          kl_coef=settings.kl_coef, seed=settings.seed, max_new_tokens=settings.max_new_tokens,
                          temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                          rollout_backend=settings.rollout_backend,
                          grad_accumulation=settings.grad_accumulation,
                          max_nonfinite_steps=settings.max_nonfinite_steps,
                          **{name: getattr(settings, name) for name in ALGORITHM_FIELDS + MODEL_FIELDS})
    config.validate()
    check_rollout_ranks(config.rollout_backend, settings.nproc_per_node)
    return config


def training_plan_of(settings: TrainingSettings, evaluation: EvalSettings = EVAL_DEFAULTS) -> TrainingPlan:
    """The plan of ``settings``; the sampled evaluations during training use ``evaluation``'s sampling
    settings and batch size (the config's ``[eval]``)."""
    return TrainingPlan(warmup_steps=settings.warmup_steps, warmup_batch_size=settings.warmup_batch_size,
                        warmup_learning_rate=settings.warmup_learning_rate, rl_steps=settings.steps,
                        prompts_per_step=settings.prompts_per_step, eval_interval=settings.eval_interval,
                        checkpoint_interval=settings.checkpoint_interval, lr_schedule=settings.lr_schedule,
                        lr_warmup_steps=settings.lr_warmup_steps, warmup_lr_schedule=settings.warmup_lr_schedule,
                        warmup_lr_warmup_steps=settings.warmup_lr_warmup_steps, lr_min_ratio=settings.lr_min_ratio,
                        curriculum=parse_curriculum(settings.curriculum),
                        control=settings.control, swap_check_type=settings.swap_check_type,
                        sampled_eval_size=settings.sampled_eval_size,
                        sampled_settings=evaluation.sampling_settings(), sampled_batch_size=evaluation.batch_size)


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
    configured = {dataset.name: dataset for dataset in datasets}
    train = _environment(settings.env, configured, settings.train_split, settings.train_limit or None,
                         seed + TRAIN_SEED_OFFSET)
    check_curriculum_types(parse_curriculum(settings.curriculum), train)
    held_out = _environment(settings.eval_env or settings.env, configured, settings.eval_split, settings.eval_size,
                            EVAL_SAMPLE_SEED)
    return train, held_out


def validation_environment(settings: TrainingSettings, datasets: Sequence[DatasetSettings] = ()) -> TaskEnv | None:
    """The environment of the sampled evaluations during training: ``sampled_eval_size`` items of a
    registry env's ``validation_split``; None (use the held-out set) for a configured dataset or when off."""
    name = settings.eval_env or settings.env
    if not settings.sampled_eval_size or name not in ENVIRONMENTS:
        return None
    return _environment(name, {}, settings.validation_split, settings.sampled_eval_size, EVAL_SAMPLE_SEED)


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


def check_training_inputs(settings: TrainingSettings, bench: BenchmarkConfig, where: str) -> None:
    """Every input of a run of ``settings`` (with the config file ``bench``) resolved, no model
    loaded: the rules across settings, the split of every update over ``nproc_per_node`` ranks, the
    algorithm's settings, the schedules and curriculum, the base model (a ``[models]`` key, or a
    checkpoint folder with a VLM's config and processor) and the environments (names, splits, the
    curriculum's question types). ``ConfigError`` (or ``ModelUnavailableError`` for the base
    model's folder), one line, naming ``where``."""
    settings.check_rules(where)
    try:
        check_data_parallel(settings.nproc_per_node, settings.grad_accumulation, settings.ppo_mini_batches,
                            settings.prompts_per_step * settings.group_size,
                            settings.warmup_batch_size if settings.warmup_steps else 0)
    except ValueError as error:  # what the ranks' launch would refuse
        raise ConfigError(f"{where}: {error}") from error
    try:
        rl_config_of(settings)
        training_plan_of(settings, bench.eval)
        check_local_model(model_entry(settings.base_model, bench, "base_model"))
        training_environments(settings, bench.seed + settings.seed, bench.datasets)
        validation_environment(settings, bench.datasets)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from error


def _environment(name: str, configured: dict[str, DatasetSettings], split: str, limit: int | None,
                 seed: int) -> TaskEnv:
    if name not in ENVIRONMENTS and name in configured:
        dataset = configured[name]
        kwargs = env_kwargs(dataset)
        kwargs.update(limit=limit or dataset.limit or None, seed=seed)
        kind, where = dataset.kind, f"training environment {name!r} (dataset of kind {dataset.kind})"
    elif name in ENVIRONMENTS:
        kind, kwargs, where = name, {"split": split, "limit": limit, "seed": seed}, f"training environment {name!r}"
    else:
        raise ConfigError(f"training environment {name!r} is neither an environment kind "
                          f"({', '.join(sorted(ENVIRONMENTS))}) nor a configured dataset "
                          f"({', '.join(sorted(configured)) or 'none'})")
    try:
        return make_env(kind, **kwargs)
    except (ValueError, FileNotFoundError) as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"{where}: {error}") from error
