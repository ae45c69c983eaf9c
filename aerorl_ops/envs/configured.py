"""Configured datasets (``[datasets.<name>]``) as environments, and their items as benchmark rows.

``check_datasets`` checks each table against the registry: the kind exists (else the error
lists the known kinds) and takes the table's settings; every error names the config file and
the setting. ``load_config`` reads a config file and runs that check: the project's commands and
definitions load their config through it. ``dataset_rows`` builds a dataset's environment and
turns its items into :class:`Row` s, one image per question (an item with another number of
images is rejected with the reason), ``prompt`` being the text the environment shows with the
image, so generation asks each dataset its own way. A dataset with no usable row raises the
environment's ``NoUsableRowsError`` (a ``ConfigError`` holding the rejections).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aerorl_ops.config.benchmark import BenchmarkConfig, load_benchmark_config
from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.fields import ConfigError, fail
from aerorl_ops.envs.registry import ENVIRONMENTS, env_settings, make_env
from aerorl_ops.envs.reward_stack_grader import prompt_text
from aerorl_ops.envs.types import TaskItem
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.row import Row

PATH_SETTING = {"easy_vqa": "data_dir", "docvqa": "files", "chartqa": "files"}
"""The environment setting a dataset's ``path`` becomes (``path`` for any other kind)."""
LIST_PATH_KINDS = ("docvqa", "chartqa")
TABLE_FILE_SUFFIXES = (".parquet", ".arrow")


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


def check_datasets(config: BenchmarkConfig) -> BenchmarkConfig:
    """``config`` when every dataset's kind is registered and takes its settings, else ConfigError."""
    for dataset in config.datasets:
        section = f"datasets.{dataset.name}"
        if dataset.kind not in ENVIRONMENTS:
            raise fail(config.path, f"{section}.kind",
                       f"names no environment kind: {dataset.kind!r}; known kinds: {', '.join(sorted(ENVIRONMENTS))}")
        accepted = env_settings(dataset.kind)
        path_setting = PATH_SETTING.get(dataset.kind, "path")
        for key in dataset.settings:
            if key not in accepted or key in (path_setting, "name"):
                raise fail(config.path, f"{section}.{key}",
                           f"is not a setting of kind {dataset.kind!r}; its settings: kind, path, split, limit, seed"
                           + "".join(f", {name}" for name in accepted
                                     if name not in ("split", "limit", "seed", "name", path_setting)))
        if dataset.image_roots and "image_roots" not in accepted:
            readers = ", ".join(kind for kind in sorted(ENVIRONMENTS) if "image_roots" in env_settings(kind))
            raise fail(config.path, f"{section}.image_roots", f"is not a setting of kind {dataset.kind!r}: its rows "
                       f"name no image paths (kinds that read them: {readers})")
        if path_setting == "path" and "path" in accepted and dataset.path is None:
            raise fail(config.path, f"{section}.path", f"is required for kind {dataset.kind!r}: the dataset file")
    return config


def load_config(path: Path) -> BenchmarkConfig:
    """``load_benchmark_config`` plus :func:`check_datasets`: how the project reads a config file."""
    return check_datasets(load_benchmark_config(path))


def item_row(item: TaskItem, dataset: str) -> Row | RejectedRow:
    """A task item as a benchmark row of ``dataset``, or the rejection saying why it cannot be one.

    >>> item = TaskItem("q1", "easy_vqa", "test", "q.json", "What shape?", ("circle",), (b"png",),
    ...                 ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What shape?"}]},),
    ...                 question_type="shape")
    >>> row = item_row(item, "shapes"); (row.dataset, row.prompt, row.question_type)
    ('shapes', 'What shape?', 'shape')
    """
    if len(item.images) != 1:
        return RejectedRow(item.source, item.item_id, item.item_id,
                           f"has {len(item.images)} images; the benchmark shows one image per question")
    return Row(sample_id=item.item_id, dataset=dataset, split=item.split, question=item.question,
               answers=item.answers, image_bytes=item.images[0], source=item.source,
               evidence_entities=item.evidence_entities, prompt=prompt_text(item), question_type=item.question_type)


def dataset_rows(dataset: DatasetSettings, files: Sequence[str] = ()) -> LoadResult:
    """The rows of a configured dataset: its environment's items as rows, its rejections kept."""
    try:
        env = make_env(dataset.kind, **env_kwargs(dataset, files))
    except FileNotFoundError as error:
        raise ConfigError(f"dataset {dataset.name!r}: {error}") from error
    rows: list[Row] = []
    rejected = list(env.rejected)
    for item in env.items:
        outcome = item_row(item, dataset.name)
        (rejected if isinstance(outcome, RejectedRow) else rows).append(outcome)
    return LoadResult(rows=rows, rejected=rejected)
