"""What an eval is asked to run on, as the user names it: a model key or checkpoint directory, and a
configured dataset. Every error names the input and lists what would have been accepted.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.configured import env_kwargs
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.rejections import NoUsableRowsError
from aerorl_ops.models.entry import ModelEntry


def model_entry(name: str, config: BenchmarkConfig, role: str = "model") -> ModelEntry:
    """``name`` as a model: a ``[models]`` key of ``config``, else an existing checkpoint directory
    (``key`` is then the resolved path)."""
    if name in config.model_keys:
        return config.model(name)
    path = Path(name).expanduser()
    if path.is_dir():
        resolved = str(path.resolve())
        return ModelEntry(key=resolved, source=resolved)
    raise ConfigError(f"{role} {name!r} is neither a model key of {config.path} ({', '.join(config.model_keys)}) "
                      "nor a checkpoint directory")


def dataset_settings(name: str, config: BenchmarkConfig, split: str = "", n: int | None = None) -> DatasetSettings:
    """The ``[datasets.<name>]`` table of ``config``, with ``split`` (when not empty) and ``n`` questions."""
    for dataset in config.datasets:
        if dataset.name == name:
            return replace(dataset, split=split or dataset.split, limit=n or dataset.limit)
    configured = ", ".join(dataset.name for dataset in config.datasets)
    raise ConfigError(f"unknown dataset {name!r}: {config.path} configures {configured} ([datasets.<name>] tables)")


def dataset_env(dataset: DatasetSettings) -> TaskEnv:
    """The environment of a dataset table; a split or file it cannot read is a ConfigError naming the dataset,
    and one without a usable row the environment's ``NoUsableRowsError`` (naming its top rejection reasons)."""
    try:
        return make_env(dataset.kind, **env_kwargs(dataset))
    except NoUsableRowsError as error:  # named as the config names it (a docvqa kind names itself)
        if error.dataset == dataset.name:
            raise
        raise NoUsableRowsError(dataset.name, error.source, error.rejected) from error
    except (ValueError, FileNotFoundError) as error:
        where = f"dataset {dataset.name!r} (kind {dataset.kind}, split {dataset.split!r})"
        raise ConfigError(f"{where}: {error}") from error
