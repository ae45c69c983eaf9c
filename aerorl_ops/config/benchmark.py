"""The benchmark config file: models, batch sizes, rows and reward settings.

Parsed into frozen dataclasses and validated before anything loads a model. Every error names
the file and the setting.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from aerorl_ops.rewards.registry import REWARD_COMPONENTS

EMBEDDED_PREFIX = "embedded:"
EMBEDDED_MODELS = ("tiny-qwen2-vl",)
SAFE_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DTYPES = ("float32", "bfloat16", "float16")


class ConfigError(ValueError):
    """A setting in the benchmark config is invalid."""


@dataclass(frozen=True)
class ModelEntry:
    """One benchmarked model: a safe partition key mapped to where the weights are."""

    key: str
    source: str
    dtype: str = "float32"
    trust_remote_code: bool = False

    @property
    def embedded_name(self) -> str | None:
        return self.source[len(EMBEDDED_PREFIX):] if self.source.startswith(EMBEDDED_PREFIX) else None


@dataclass(frozen=True)
class RewardSettings:
    weights: dict[str, float] = field(
        default_factory=lambda: {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}
    )
    require_json: bool = True
    regex_pattern: str | None = None
    target_tokens: int = 24
    latency_budget_ms: float = 2000.0
    pass_threshold: float = 0.3


@dataclass(frozen=True)
class BenchmarkConfig:
    models: tuple[ModelEntry, ...]
    batch_sizes: tuple[int, ...]
    docvqa_rows: int = 48
    chartqa_rows: int = 48
    seed: int = 0
    max_new_tokens: int = 24
    rewards: RewardSettings = RewardSettings()
    path: str = "<memory>"

    @property
    def model_keys(self) -> tuple[str, ...]:
        return tuple(model.key for model in self.models)

    def model(self, key: str) -> ModelEntry:
        for model in self.models:
            if model.key == key:
                return model
        raise ConfigError(f"{self.path}: unknown model key {key!r}; configured keys: {', '.join(self.model_keys)}")


def _fail(path: str, setting: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}: setting {setting!r} {problem}")


def _positive_int(path: str, setting: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(path, setting, f"must be a positive integer, got {value!r}")
    return value


def _integer(path: str, setting: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, setting, f"must be an integer, got {value!r}")
    return value


def _boolean(path: str, setting: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, setting, f"must be true or false, got {value!r}")
    return value


def _number(path: str, setting: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(path, setting, f"must be a finite number, got {value!r}")
    return float(value)


def parse_model(path: str, key: str, table: object, root: Path) -> ModelEntry:
    setting = f"models.{key}"
    if not SAFE_KEY.match(key):
        raise _fail(path, setting, "is not a safe partition key (lower-case letters, digits, '-', '_'; at most 64)")
    if not isinstance(table, dict) or not isinstance(table.get("source"), str) or not table["source"]:
        raise _fail(path, f"{setting}.source", "must be a non-empty string")
    unknown = set(table) - {"source", "dtype", "trust_remote_code"}
    if unknown:
        raise _fail(path, setting, f"has unknown keys {sorted(unknown)}")
    source = table["source"]
    if source.startswith(EMBEDDED_PREFIX):
        if source[len(EMBEDDED_PREFIX):] not in EMBEDDED_MODELS:
            raise _fail(path, f"{setting}.source", f"names no embedded model; known: {EMBEDDED_MODELS}")
    elif source.startswith((".", "/", "~")):
        resolved = (root / source).expanduser() if source.startswith(".") else Path(source).expanduser()
        if not resolved.is_dir():
            raise _fail(path, f"{setting}.source", f"points at {str(resolved)!r}, which is not a directory")
        source = str(resolved)
    dtype = table.get("dtype", "float32")
    if dtype not in DTYPES:
        raise _fail(path, f"{setting}.dtype", f"must be one of {DTYPES}, got {dtype!r}")
    trust = _boolean(path, f"{setting}.trust_remote_code", table.get("trust_remote_code", False))
    return ModelEntry(key=key, source=source, dtype=dtype, trust_remote_code=trust)


def parse_rewards(path: str, table: dict) -> RewardSettings:
    defaults = RewardSettings()
    weights_table = table.get("weights", defaults.weights)
    if not isinstance(weights_table, dict):
        raise _fail(path, "rewards.weights", "must be a table of name = number")
    for name in weights_table:
        if name not in REWARD_COMPONENTS:
            raise _fail(path, f"rewards.weights.{name}",
                        f"names no reward component; known: {', '.join(sorted(REWARD_COMPONENTS))}")
    weights = {name: _number(path, f"rewards.weights.{name}", value) for name, value in weights_table.items()}
    regex = table.get("regex_pattern")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as error:
            raise _fail(path, "rewards.regex_pattern", f"is not a valid regular expression ({error})") from error
    return RewardSettings(
        weights=weights,
        require_json=_boolean(path, "rewards.require_json", table.get("require_json", defaults.require_json)),
        regex_pattern=regex,
        target_tokens=_positive_int(path, "rewards.target_tokens", table.get("target_tokens", defaults.target_tokens)),
        latency_budget_ms=_number(path, "rewards.latency_budget_ms",
                                  table.get("latency_budget_ms", defaults.latency_budget_ms)),
        pass_threshold=_number(path, "rewards.pass_threshold", table.get("pass_threshold", defaults.pass_threshold)),
    )


def parse_benchmark_config(data: dict, path: str = "<memory>", root: Path | None = None) -> BenchmarkConfig:
    root = root or Path.cwd()
    bench = data.get("benchmark", {})
    models_table = data.get("models")
    if not isinstance(models_table, dict) or not models_table:
        raise _fail(path, "models", "must define at least one [models.<key>] table")
    batch_sizes = bench.get("batch_sizes")
    if not isinstance(batch_sizes, list) or not batch_sizes:
        raise _fail(path, "benchmark.batch_sizes", "must be a non-empty list of positive integers")
    sizes = tuple(sorted({_positive_int(path, "benchmark.batch_sizes", size) for size in batch_sizes}))
    return BenchmarkConfig(
        models=tuple(parse_model(path, key, table, root) for key, table in models_table.items()),
        batch_sizes=sizes,
        docvqa_rows=_positive_int(path, "benchmark.docvqa_rows", bench.get("docvqa_rows", 48)),
        chartqa_rows=_positive_int(path, "benchmark.chartqa_rows", bench.get("chartqa_rows", 48)),
        seed=_integer(path, "benchmark.seed", bench.get("seed", 0)),
        max_new_tokens=_positive_int(path, "benchmark.max_new_tokens", bench.get("max_new_tokens", 24)),
        rewards=parse_rewards(path, data.get("rewards", {})),
        path=path,
    )


def load_benchmark_config(path: Path) -> BenchmarkConfig:
    """Read and validate a benchmark TOML file; relative model paths resolve against its folder."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as error:
        raise ConfigError(f"benchmark config {str(path)!r} does not exist") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"benchmark config {str(path)!r} is not valid TOML: {error}") from error
    return parse_benchmark_config(data, str(path), root=path.resolve().parent)
