"""The benchmark config file (``config/benchmark.toml``): one home for every setting.

The file maps onto frozen dataclasses: ``[benchmark]`` onto ``BenchmarkConfig`` itself,
``[models.<key>]`` onto ``ModelEntry``, ``[datasets.<name>]`` onto ``DatasetSettings``,
``[generation]`` onto ``GenerationSettings``,
``[rewards]`` onto ``RewardSettings``, ``[training]`` onto ``TrainingSettings`` and ``[eval]`` onto
``EvalSettings``. A key left
out keeps the dataclass default. Everything is validated before anything loads a model; every
error names the file and the setting.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from aerorl_ops.config.costs import CostSettings
from aerorl_ops.config.datasets import (
    DEFAULT_DATASETS,
    DatasetSettings,
    benchmark_dataset_names,
    parse_datasets,
)
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.fields import (
    ConfigError,
    boolean,
    fail,
    integer,
    parse_section,
    positive_int,
    setting,
    setting_fields,
)
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.judge import check_judges
from aerorl_ops.config.model_backend import BACKEND_KEYS, parse_backend
from aerorl_ops.config.rewards import RewardSettings, parse_rewards
from aerorl_ops.config.scale_out import ExecutorSettings, StorageSettings, TrainingLaunchSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.checkpoint_refs import CheckpointRef
from aerorl_ops.models.entry import EMBEDDED_MODELS, EMBEDDED_PREFIX, ModelEntry
from aerorl_ops.models.prompt_template import template_text

__all__ = ["BenchmarkConfig", "ConfigError", "DatasetSettings", "EvalSettings", "GenerationSettings",
           "RewardSettings", "TrainingSettings",
           "load_benchmark_config", "model_entry", "parse_benchmark_config", "parse_rewards"]

SAFE_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DTYPES = ("float32", "bfloat16", "float16")


def batch_size_list(where: str, setting_name: str, value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise fail(where, setting_name, "must be a non-empty list of positive integers")
    return tuple(sorted({positive_int(where, setting_name, size) for size in value}))


@dataclass(frozen=True)
class BenchmarkConfig:
    """The whole file. Its own fields are the ``[benchmark]`` table; ``seed`` also seeds generation.

    ``datasets`` are the ``[datasets.<name>]`` tables; ``benchmark_datasets`` the names of those the
    benchmark runs on (``[benchmark] datasets``; every configured one when left out).
    """

    models: tuple[ModelEntry, ...]
    batch_sizes: tuple[int, ...] = setting(help="batch sizes each model is benchmarked at (required)",
                                           check=batch_size_list)
    seed: int = setting(0, help="seed of generation sampling (rows use their [datasets.*] seed)", check=integer)
    datasets: tuple[DatasetSettings, ...] = DEFAULT_DATASETS
    benchmark_datasets: tuple[str, ...] = ()
    generation: GenerationSettings = GenerationSettings()
    rewards: RewardSettings = RewardSettings()
    training: TrainingSettings = TrainingSettings()
    eval: EvalSettings = EvalSettings()
    executor: ExecutorSettings = ExecutorSettings()
    storage: StorageSettings = StorageSettings()
    training_launch: TrainingLaunchSettings = TrainingLaunchSettings()
    costs: CostSettings = CostSettings()
    path: str = "<memory>"

    def __post_init__(self) -> None:
        if self.generation.seed != self.seed:  # one seed: [benchmark] seed seeds sampling too
            object.__setattr__(self, "generation", replace(self.generation, seed=self.seed))
        if not self.benchmark_datasets:
            object.__setattr__(self, "benchmark_datasets", tuple(dataset.name for dataset in self.datasets))

    @property
    def benchmarked(self) -> tuple[DatasetSettings, ...]:
        """The datasets the benchmark runs on, in ``benchmark_datasets`` order."""
        by_name = {dataset.name: dataset for dataset in self.datasets}
        return tuple(by_name[name] for name in self.benchmark_datasets)

    @property
    def model_keys(self) -> tuple[str, ...]:
        return tuple(model.key for model in self.models)

    def model(self, key: str) -> ModelEntry:
        for model in self.models:
            if model.key == key:
                return model
        raise ConfigError(f"{self.path}: unknown model key {key!r}; configured keys: {', '.join(self.model_keys)}")


SECTIONS: Mapping[str, type] = {"benchmark": BenchmarkConfig, "generation": GenerationSettings,
                                "rewards": RewardSettings, "training": TrainingSettings, "eval": EvalSettings,
                                "executor": ExecutorSettings, "storage": StorageSettings,
                                "training_launch": TrainingLaunchSettings, "costs": CostSettings}
TABLES = ("benchmark", "models", "datasets", "generation", "rewards", "training", "eval", "executor", "storage",
          "training_launch", "costs")


def parse_model(path: str, key: str, table: object, root: Path) -> ModelEntry:
    setting_name = f"models.{key}"
    if not SAFE_KEY.match(key):
        raise fail(path, setting_name, "is not a safe partition key (lower-case letters, digits, '-', '_'; at most 64)")
    if not isinstance(table, dict) or not isinstance(table.get("source"), str) or not table["source"]:
        raise fail(path, f"{setting_name}.source", "must be a non-empty string")
    unknown = set(table) - {"source", "dtype", "trust_remote_code", "chat_template", *BACKEND_KEYS}
    if unknown:
        raise fail(path, setting_name, f"has unknown keys {sorted(unknown)}")
    source = table["source"]
    if source.startswith(EMBEDDED_PREFIX):
        if source[len(EMBEDDED_PREFIX):] not in EMBEDDED_MODELS:
            raise fail(path, f"{setting_name}.source", f"names no embedded model; known: {EMBEDDED_MODELS}")
    elif source.startswith((".", "/", "~")):
        resolved = root / source if source.startswith(".") else Path(os.path.expanduser(source))
        if not os.path.isdir(resolved):  # False, not an error, for a name too long or holding NUL
            raise fail(path, f"{setting_name}.source", f"points at {str(resolved)!r}, which is not a directory")
        source = str(resolved)
    dtype = table.get("dtype", "float32")
    if dtype not in DTYPES:
        raise fail(path, f"{setting_name}.dtype", f"must be one of {DTYPES}, got {dtype!r}")
    trust = boolean(path, f"{setting_name}.trust_remote_code", table.get("trust_remote_code", False))
    return ModelEntry(key=key, source=source, dtype=dtype, trust_remote_code=trust,
                      backend=parse_backend(path, setting_name, table),
                      chat_template=chat_template_setting(path, f"{setting_name}.chat_template",
                                                          table.get("chat_template", ""), root))


def chat_template_setting(path: str, setting_name: str, value: object, root: Path) -> str:
    """A model's ``chat_template``: the Jinja text itself, or a file (relative to the config's folder)
    whose text is returned; empty: the checkpoint's own."""
    if not isinstance(value, str):
        raise fail(path, setting_name, f"must be a template file or the template's Jinja text, got {value!r}")
    if not value or template_text(value):
        return value
    file = root / os.path.expanduser(value)
    if not os.path.isfile(file):  # False, not an error, for a name too long or holding NUL
        raise fail(path, setting_name, f"names {str(file)!r}, which is not a file (nor is it Jinja text)")
    try:
        return file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail(path, setting_name, f"names {str(file)!r}, which is not UTF-8 text ({error.reason} at byte "
                   f"{error.start})") from None
    except OSError as error:
        raise fail(path, setting_name, f"names {str(file)!r}, which cannot be read ({error.strerror or error})") \
            from None


def _refuse_misplaced_keys(path: str, data: Mapping[str, object]) -> None:
    """A key written under the wrong table names the table it belongs in (not just "unknown")."""
    unknown_tables = sorted(set(data) - set(TABLES))
    if unknown_tables:
        raise fail(path, unknown_tables[0], f"is not a table of this file; tables: {', '.join(TABLES)}")
    for section, cls in SECTIONS.items():
        table = data.get(section, {})
        if not isinstance(table, Mapping):
            raise fail(path, section, "must be a table")
        own = {f.name for f in setting_fields(cls)}
        for key in table:
            if section == "benchmark" and key == "datasets":  # the [datasets] names, not a setting field
                continue
            homes = [other for other, other_cls in SECTIONS.items()
                     if key not in own and key in {f.name for f in setting_fields(other_cls)}]
            if homes:
                raise fail(path, f"{section}.{key}",
                           f"belongs in {' or '.join(f'[{home}]' for home in homes)}, not in [{section}]")


def _parsed(cls, path: str, section: str, table: object):
    """``parse_section``, with the dataclass's own cross-setting checks (a ValueError, or a ConfigError that
    cannot know the file) reported against the file."""
    try:
        return parse_section(cls, path, section, table)
    except ValueError as error:
        if isinstance(error, ConfigError) and str(error).startswith(f"{path}: "):
            raise
        raise ConfigError(f"{path}: {error}") from error


def parse_benchmark_config(data: dict, path: str = "<memory>", root: Path | None = None) -> BenchmarkConfig:
    root = root or Path.cwd()
    _refuse_misplaced_keys(path, data)
    bench = dict(data.get("benchmark", {}))
    models_table = data.get("models")
    if not isinstance(models_table, dict) or not models_table:
        raise fail(path, "models", "must define at least one [models.<key>] table")
    if "batch_sizes" not in bench:
        raise fail(path, "benchmark.batch_sizes", "must be a non-empty list of positive integers")
    datasets = parse_datasets(path, data.get("datasets"), root, SAFE_KEY)
    benchmark_datasets = benchmark_dataset_names(path, bench.pop("datasets", []), datasets)
    rewards = parse_rewards(path, data.get("rewards", {}))
    models = tuple(parse_model(path, key, table, root) for key, table in models_table.items())  # safe keys first
    check_judges(path, rewards.judge, {dataset.name: dataset.judge for dataset in datasets},
                 [model.key for model in models])
    return parse_section(
        BenchmarkConfig, path, "benchmark", bench,
        datasets=datasets, benchmark_datasets=benchmark_datasets,
        models=models,
        generation=parse_section(GenerationSettings, path, "generation", data.get("generation", {})),
        rewards=rewards,
        training=parse_section(TrainingSettings, path, "training", data.get("training", {})).check_rules(path),
        eval=_parsed(EvalSettings, path, "eval", data.get("eval", {})),
        executor=_parsed(ExecutorSettings, path, "executor", data.get("executor", {})),
        storage=parse_section(StorageSettings, path, "storage", data.get("storage", {})),
        training_launch=_parsed(TrainingLaunchSettings, path, "training_launch", data.get("training_launch", {})),
        costs=parse_section(CostSettings, path, "costs", data.get("costs", {})),
        path=path,
    )


def load_benchmark_config(path: Path) -> BenchmarkConfig:
    """Read and validate a benchmark TOML file; relative model paths resolve against its folder."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError as error:
        raise ConfigError(f"benchmark config {str(path)!r} does not exist") from error
    except OSError as error:  # a directory, a file it may not read
        raise ConfigError(f"benchmark config {str(path)!r} cannot be read ({error.strerror or error})") from error
    except UnicodeDecodeError as error:
        raise ConfigError(f"benchmark config {str(path)!r} is not UTF-8 text, as TOML must be ({error.reason} at "
                          f"byte {error.start})") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"benchmark config {str(path)!r} is not valid TOML: {error}") from error
    except RecursionError:
        raise ConfigError(f"benchmark config {str(path)!r} nests its arrays or tables too deeply to read") from None
    return parse_benchmark_config(data, str(path), root=path.resolve().parent)


def model_entry(name: str, config: BenchmarkConfig, role: str = "model") -> ModelEntry:
    """``name`` as a model, the one place a model is named: a ``[models]`` key of ``config``, a training
    run's checkpoint ``run_id@step`` / ``run_id@latest`` (resolved when it loads, ``models.checkpoint_refs``),
    else an existing checkpoint directory (``key`` and ``source`` are then its resolved path). Otherwise a
    one-line ConfigError naming ``role``, ``name``, the config file and its model keys."""
    if name in config.model_keys:
        return config.model(name)
    if CheckpointRef.parse(name) is not None:
        return ModelEntry(key=name, source=name)
    path = Path(os.path.expanduser(name))
    if os.path.isdir(path):
        resolved = str(path.resolve())
        return ModelEntry(key=resolved, source=resolved)
    raise ConfigError(f"{role} {name!r} is neither a model key of {config.path} ({', '.join(config.model_keys)}), "
                      "a checkpoint run_id@step / run_id@latest, nor a checkpoint directory")
