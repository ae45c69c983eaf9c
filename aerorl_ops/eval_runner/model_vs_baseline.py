"""A model against its baseline on the same questions (mixtrain's ``vlm-rl-eval``): ``compare_models``.

Both models answer every item of one environment (a configured dataset's sample) at the settings of
``EvalSettings`` with the same seed; they are loaded one after the other, so only one is in memory
at a time. The result holds both outcomes and the paired comparison at every setting and question
type, ready for ``eval_rows.eval_tables``.

An eval's id, unless given, is a digest of its settings and of its dataset table: the same eval run
again replaces its own rows. The rows the environment rejected are counted in both ``eval_runs``
rows and listed in ``rejected_rows`` (run id: the eval id; stage :data:`EVAL_STAGE`).
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import torch

from aerorl_ops.config.datasets import MAX_IMAGES_DEFAULT, DatasetSettings
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.rejections import rejections_write
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.eval_rows import EvalRunRecord, RoleEvaluation, eval_tables
from aerorl_ops.eval_runner.paired_differences import ComparisonRow, compare_outcomes
from aerorl_ops.eval_runner.runner import EpisodePlayer, evaluate_model
from aerorl_ops.models.entry import ModelEntry
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows.load_result import RejectedRow
from aerorl_ops.stop import stop_here
from aerorl_ops.storage.duckdb_store import PartitionWrite
from aerorl_ops.storage.eval_schema import BASELINE_ROLE, MODEL_ROLE

ProgressFn = Callable[[str, SamplingSetting, float], None]
"""``(role, setting, wall_s)`` after each setting of each model."""
EVAL_STAGE = "evaluation"
"""The ``stage`` of an eval's rows in ``rejected_rows``."""


@dataclass(frozen=True)
class ModelComparison:
    eval_id: str
    model: RoleEvaluation
    baseline: RoleEvaluation
    comparisons: tuple[ComparisonRow, ...]
    dataset: str
    rejected: tuple[RejectedRow, ...] = ()
    distribution: str | None = None  # a held-out distribution of the eval's dataset (its [datasets] name)

    def writes(self) -> list[PartitionWrite]:
        """The eval's rows of every ``eval_*`` table, and its dataset's rejections in ``rejected_rows``."""
        return [*eval_tables(self.eval_id, [self.model, self.baseline], self.comparisons, self.distribution),
                rejections_write(self.eval_id, EVAL_STAGE, self.dataset, self.rejected)]


def dataset_record(dataset: DatasetSettings) -> dict[str, object]:
    """The dataset table as JSON values; ``image_roots`` and ``held_out`` only when set, ``max_images`` only when
    not its default and a mixture's ``parts`` (each part's table) only for a mixture (so an eval id without them
    is unchanged)."""
    record = {"name": dataset.name, "kind": dataset.kind, "split": dataset.split, "limit": dataset.limit,
              "path": dataset.path, "seed": dataset.seed, "settings": dict(dataset.settings)}
    return (record | ({"image_roots": list(dataset.image_roots)} if dataset.image_roots else {})
            | ({"max_images": dataset.max_images} if dataset.max_images != MAX_IMAGES_DEFAULT else {})
            | ({"held_out": list(dataset.held_out)} if dataset.held_out else {})
            | ({"parts": [dataset_record(part) for part in dataset.parts]} if dataset.parts else {}))


NOT_EVALUATED = ("follow_checkpoints",)
"""``[eval]`` settings that choose which evals run, not what one measures: left out of the eval id."""


def eval_id_of(settings: EvalSettings, dataset: DatasetSettings) -> str:
    """``eval-<digest>`` of the settings and the dataset table (the same eval keeps its id).

    >>> from aerorl_ops.config.datasets import DEFAULT_DATASETS
    >>> eval_id_of(EvalSettings(), DEFAULT_DATASETS[2]) == eval_id_of(EvalSettings(), DEFAULT_DATASETS[2])
    True
    """
    evaluated = {name: value for name, value in asdict(settings).items() if name not in NOT_EVALUATED}
    payload = json.dumps({"eval": evaluated, "dataset": dataset_record(dataset)}, sort_keys=True, default=str)
    return f"eval-{hashlib.sha256(payload.encode()).hexdigest()[:12]}"


def _evaluate(role: str, name: str, entry: ModelEntry, load: Callable[[ModelEntry], LoadedVLM], env: TaskEnv,
              dataset: DatasetSettings, settings: EvalSettings, on_setting: ProgressFn | None,
              play: EpisodePlayer | None) -> RoleEvaluation:
    started, cpu_started = datetime.now(UTC), time.process_time()
    loaded = load(entry)
    source, device = loaded.source.location, loaded.device
    def after_setting(setting: SamplingSetting, wall_s: float) -> None:
        if on_setting is not None:
            on_setting(role, setting, wall_s)
        stop_here(f"interrupted after the {role}'s {setting.name} setting; an eval stores its rows when it ends: "
                  "run the same command again")  # a signal's stop, between settings

    try:
        outcome = evaluate_model(
            loaded, env, range(len(env)), settings.sampling_settings(), max_new_tokens=settings.max_new_tokens,
            batch_size=settings.batch_size, seed=settings.seed, on_setting=after_setting, play=play)
    finally:
        del loaded  # the next model loads into the memory this one held
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    record = EvalRunRecord.of(role, name, outcome, model_source=source, dataset=dataset.name, split=dataset.split,
                              device=str(device), started_at=started, finished_at=datetime.now(UTC),
                              config={"eval": asdict(settings), "dataset": dataset_record(dataset)},
                              rejected_rows=len(env.rejected), cpu_s=time.process_time() - cpu_started)
    return RoleEvaluation(record, outcome)


def compare_models(load: Callable[[ModelEntry], LoadedVLM], model: ModelEntry, baseline: ModelEntry, env: TaskEnv,
                   dataset: DatasetSettings, settings: EvalSettings, eval_id: str | None = None,
                   on_setting: ProgressFn | None = None, play: EpisodePlayer | None = None,
                   distribution: str | None = None) -> ModelComparison:
    """Evaluate ``model`` then ``baseline`` on every item of ``env`` and compare them, paired; a multi-turn
    ``env``'s episodes played by ``play`` (``runner.evaluate_model``); ``distribution``: the held-out
    distribution ``dataset`` is, in the rows (None: the eval's own dataset)."""
    evaluated = _evaluate(MODEL_ROLE, settings.model, model, load, env, dataset, settings, on_setting, play)
    against = _evaluate(BASELINE_ROLE, settings.baseline, baseline, load, env, dataset, settings, on_setting, play)
    comparisons = compare_outcomes(evaluated.outcome, against.outcome, settings.resamples, seed=settings.seed)
    return ModelComparison(eval_id or eval_id_of(settings, dataset), evaluated, against, comparisons, dataset.name,
                           tuple(env.rejected), distribution)
