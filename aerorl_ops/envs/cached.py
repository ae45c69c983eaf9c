"""An environment's items cached as a rows table, and the environment built back from that table.

``env_table(dataset)`` builds the environment of a dataset table (``envs.configured.dataset_env``) from
its source and keeps its items as a rows table (``rows.item_table``: every image of each question, the
messages as JSON). The table's schema metadata says what the items were drawn from (the dataset's
``SourceFingerprint``: its files or package, and every setting, split, limit and seed included) and the
records the environment rejected. A table cached when a rows file held one image per question may say
that items were left out (``NOT_KEPT_KEY``); it is not used, so the source's items are read again.

``cached_env(dataset, table, build)`` is the environment ``dataset`` names: built over the table's items
and rejections (``envs.item_envs``) when the table holds exactly what the source gives now (the same
fingerprint, every item kept), else ``build()`` from the source. Either way the :class:`EnvInput` says
which, why, and the content hash of the items the environment holds (``items_sha256``), so two
environments hold the same items exactly when their hashes agree. A mixture has no environment over its
own items (each part grades its own): ``cached_mixture_env`` draws it over each part's cached rows, the part
as the mixture draws it (``configured.drawn_parts``), the same items as from the parts' sources.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace

import pyarrow as pa

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.configured import PartSource, dataset_env, dataset_fingerprint, env_kwargs
from aerorl_ops.envs.item_envs import items_env
from aerorl_ops.rows.item_table import items_to_table, table_to_items
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.source_fingerprint import SourceFingerprint, source_change
from aerorl_ops.rows.task_item import TaskItem, image_sha256

SOURCE_KEY = b"aerorl.source"
"""Schema metadata of a cached environment's table: the ``SourceFingerprint`` JSON of its dataset."""
REJECTED_KEY = b"aerorl.rejected"
"""Schema metadata: the records the environment rejected, a JSON list of ``RejectedRow`` fields."""
NOT_KEPT_KEY = b"aerorl.not_kept"
"""Schema metadata of a table cached when a rows file held one image per question: why some of the
environment's items are not in it ("" when every one is). Tables cached now keep every item."""


def items_sha256(items: Sequence[TaskItem]) -> str:
    """A hash of the items in order, every field (images and video frames by their SHA-256): equal exactly when
    the items are. An item without a video hashes as it did before items had one.

    >>> item = TaskItem("q1", "demo", "test", "q.json", "What shape?", ("circle",), (b"png",))
    >>> items_sha256([item]) == items_sha256([item]), items_sha256([item]) == items_sha256([])
    (True, False)
    """
    digest = hashlib.sha256()
    names = [field.name for field in fields(TaskItem)]
    for item in items:  # the fields as they are: asdict's deep copy of each item's messages was 85% of the time
        values = {**{name: getattr(item, name) for name in names},
                  "images": [image_sha256(image) for image in item.images],
                  "video": [image_sha256(frame) for frame in item.video]}
        if not item.video:
            del values["video"], values["video_fps"]
        digest.update(json.dumps(values, sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def env_table(dataset: DatasetSettings) -> pa.Table:
    """The environment of ``dataset``, built from its source, as a rows table (module docstring): every item
    with all its images; a ``ConfigError`` (or ``NoUsableRowsError``) naming the dataset as ``dataset_env``'s."""
    source = dataset_fingerprint(dataset)  # before the read: a change made during it shows next time
    env = dataset_env(dataset)
    return items_to_table(env.items).replace_schema_metadata({
        SOURCE_KEY: source.to_json(),
        REJECTED_KEY: json.dumps([asdict(rejected) for rejected in env.rejected]),
    })


def table_source(table: pa.Table) -> SourceFingerprint | None:
    """The fingerprint ``env_table`` recorded in ``table``; None for a table without one."""
    recorded = (table.schema.metadata or {}).get(SOURCE_KEY)
    return SourceFingerprint.from_json(recorded.decode()) if recorded is not None else None


def table_rejected(table: pa.Table) -> list[RejectedRow]:
    """The records the cached environment rejected, as ``env_table`` recorded them in ``table``."""
    return [RejectedRow(**fields) for fields in json.loads((table.schema.metadata or {}).get(REJECTED_KEY, b"[]"))]


def table_not_kept(table: pa.Table) -> str:
    """Why some of the cached environment's items are not in ``table`` ("" when every one is)."""
    return (table.schema.metadata or {}).get(NOT_KEPT_KEY, b"").decode()


def cache_mismatch(dataset: DatasetSettings, table: pa.Table | None) -> str | None:
    """Why ``table`` does not hold the environment of ``dataset`` as its source gives it now, in words; None
    when it does."""
    if table is None:
        return "its rows are not cached"
    cached = table_source(table)
    if cached is None:
        return "the cached rows do not say what they were drawn from"
    change = source_change(cached, dataset_fingerprint(dataset))
    if change is not None:
        return f"the cached rows were drawn from another source: {change.subject} changed ({change.details})"
    not_kept = table_not_kept(table)
    return f"the cached rows leave items out: {not_kept}" if not_kept else None


def table_env(dataset: DatasetSettings, table: pa.Table) -> TaskEnv | None:
    """The environment of ``dataset`` holding ``table``'s items and rejections; None when its kind has no
    environment over items (``envs.item_envs``)."""
    return items_env(dataset.kind, env_kwargs(dataset), LoadResult(table_to_items(table), table_rejected(table)))


@dataclass(frozen=True)
class EnvInput:
    """Where an environment of a run came from: ``dataset``'s cached rows (``why_source`` empty) or its
    source (``why_source`` says why); ``items`` it holds and their ``content_sha256`` (``items_sha256``)."""

    dataset: DatasetSettings
    why_source: str
    items: int
    content_sha256: str

    @property
    def cached(self) -> bool:
        return not self.why_source


def cached_env(dataset: DatasetSettings, table: pa.Table | None,
               build: Callable[[], TaskEnv]) -> tuple[TaskEnv, EnvInput]:
    """The environment of ``dataset`` over ``table`` when it holds exactly what the source gives
    (``cache_mismatch``), else ``build()`` (from the source); with the :class:`EnvInput` saying which."""
    why = cache_mismatch(dataset, table)
    env = table_env(dataset, table) if why is None and table is not None else None
    if env is None:
        why = why or f"kind {dataset.kind!r} has no environment over cached items"
        env = build()
    return env, EnvInput(dataset, why or "", len(env), items_sha256(env.items))


def cached_mixture_env(dataset: DatasetSettings, tables: Mapping[str, pa.Table | None],
                       build: Callable[[PartSource], TaskEnv]) -> tuple[TaskEnv, EnvInput]:
    """The mixture ``dataset``, made by ``build`` from a part builder that gives each part over its cached rows
    (``tables``, by part name: the part as the mixture draws it) when they hold exactly what the part's source
    gives (``cached_env``), else read from that source; with the :class:`EnvInput` of the mixture, whose
    ``why_source`` names each part read from its source and why."""
    read: dict[str, str] = {}

    def part(settings: DatasetSettings, limit: int, seed: int) -> TaskEnv:
        drawn = replace(settings, limit=limit, seed=seed)
        env, came = cached_env(drawn, tables.get(settings.name), lambda: dataset_env(drawn))
        if not came.cached:
            read[settings.name] = came.why_source
        return env

    env = build(part)
    why = "; ".join(f"part {name}: {reason}" for name, reason in read.items())
    return env, EnvInput(dataset, why, len(env), items_sha256(env.items))
