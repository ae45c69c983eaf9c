"""``[datasets.<name>]`` tables checked against the environment kinds: ``check_datasets``.

The registry of environment kinds sits above this layer (``aerorl_ops.envs.registry``), so the
check takes what it needs of it as a value: :class:`DatasetKinds`, each kind with the keyword
settings its factory takes (``aerorl_ops.envs.registry.dataset_kinds()`` builds it). A kind that
is not registered is an error listing the known kinds; a setting the kind does not take, an error
naming the config file and the setting and listing the kind's settings.

>>> kinds = DatasetKinds({"jsonl": ("path", "split", "limit", "seed", "name", "instruction")})
>>> kinds.names
'jsonl'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import fail

PATH_SETTING = {"easy_vqa": "data_dir", "easy_vqa_pairs": "data_dir", "easy_vqa_combinations": "data_dir",
                "docvqa": "files", "chartqa": "files"}
"""The environment setting a dataset's ``path`` becomes (``path`` for any other kind)."""
COMMON_SETTINGS = ("split", "limit", "seed", "name")
"""Settings every table has (``name`` is the table's own), so never given as a kind's extra key."""


KindCheck = Callable[[DatasetSettings], "tuple[str, str] | None"]
"""A kind's check of one table: None, or the setting at fault and what is wrong with it."""


@dataclass(frozen=True)
class DatasetKinds:
    """The environment kinds a dataset table may name, each with its factory's keyword settings in order."""

    settings: Mapping[str, tuple[str, ...]]
    checks: Mapping[str, KindCheck] = field(default_factory=dict)
    """A kind's own check of a table's values, for the kinds that have one."""

    @property
    def names(self) -> str:
        """The known kinds, sorted, comma-separated (for error messages)."""
        return ", ".join(sorted(self.settings))


def check_datasets(config: BenchmarkConfig, kinds: DatasetKinds) -> BenchmarkConfig:
    """``config`` when every dataset's kind is one of ``kinds`` and takes its settings, else ConfigError."""
    for dataset in config.datasets:
        section = f"datasets.{dataset.name}"
        if dataset.kind not in kinds.settings:
            raise fail(config.path, f"{section}.kind",
                       f"names no environment kind: {dataset.kind!r}; known kinds: {kinds.names}")
        accepted = kinds.settings[dataset.kind]
        path_setting = PATH_SETTING.get(dataset.kind, "path")
        for key in dataset.settings:
            if key not in accepted or key in (path_setting, "name"):
                raise fail(config.path, f"{section}.{key}",
                           f"is not a setting of kind {dataset.kind!r}; its settings: kind, path, split, limit, seed"
                           + "".join(f", {name}" for name in accepted
                                     if name not in (*COMMON_SETTINGS, path_setting)))
        if dataset.image_roots and "image_roots" not in accepted:
            readers = ", ".join(kind for kind in sorted(kinds.settings) if "image_roots" in kinds.settings[kind])
            raise fail(config.path, f"{section}.image_roots", f"is not a setting of kind {dataset.kind!r}: its rows "
                       f"name no image paths (kinds that read them: {readers})")
        if path_setting == "path" and "path" in accepted and dataset.path is None:
            raise fail(config.path, f"{section}.path", f"is required for kind {dataset.kind!r}: the dataset file")
        problem = kinds.checks[dataset.kind](dataset) if dataset.kind in kinds.checks else None
        if problem is not None:
            raise fail(config.path, f"{section}.{problem[0]}", problem[1])
    return config
