"""``eval_run``: a model against its baseline on the same questions, at MAYE's three sampling settings.

Both models answer ``n`` questions of a configured dataset (pass@k at temperature 1.0, pass@1 at
0.6, pass@1 near-greedy); ``eval_runs`` / ``eval_samples`` / ``eval_metrics`` / ``eval_comparisons``
get the eval's rows and the ``eval_vs_baseline`` view is refreshed; the dataset rows the environment
rejected are logged (one line: count and top reasons) and stored in ``rejected_rows`` under the eval id.
On a multi-turn dataset (a Gymnasium grid) each response is a whole episode (``rl.step.multi_turn.sample_episodes``).
Each held-out distribution of the dataset (its ``held_out`` tables) is evaluated the same way, on as many
questions, as an eval of its own (id ``<eval id>/<name>``, rows with ``distribution`` = the name).
The questions are read from the ``evaluation/eval_rows`` asset (``assets.run_rows``, the asset's upstream)
when it holds exactly what the settings draw from the dataset now, else from the dataset's source, with a
warning saying why. The metadata shows the side-by-side table (with the paired 95% intervals), the
accuracy figure, and where the questions came from with their content hash.
"""

from collections.abc import Sequence
from dataclasses import replace

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig, EvalSettings, model_entry
from aerorl_ops.config.datasets import DatasetSettings, held_out_tables
from aerorl_ops.config.fields import ConfigError, checked
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.envs.cached import cached_env
from aerorl_ops.envs.configured import dataset_env, dataset_settings
from aerorl_ops.envs.rejections import rejection_summary
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.eval_runner.model_vs_baseline import compare_models
from aerorl_ops.reporting.eval_report import format_side_by_side, side_by_side
from aerorl_ops.rl.step.multi_turn import sample_episodes
from aerorl_ops.storage.cost_views import create_cost_views
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables, replace_partitions
from aerorl_ops.storage.eval_schema import EVAL_TABLES
from aerorl_ops.storage.eval_views import create_eval_views
from aerorl_ops.storage.schema import REJECTED_ROWS
from assets.figures import eval_figures
from assets.io_managers import ParquetTableIOManager
from assets.metadata import markdown_preview, readable
from assets.resources import ModelRuntime
from assets.run_rows import EVAL_ROWS_KEY, eval_rows
from assets.settings_config import config_class, settings_values

EVAL_DOC = """Eval settings of this run; the defaults are the config file's [eval].

model / baseline: a model key from the config file, or a checkpoint directory. dataset: a
[datasets] name; n questions of its split (or of `split`), the same for both models."""
RUN_FIELDS = {"eval_id": (str, "", "eval id (default: a digest of the settings and the dataset; the same eval "
                                   "replaces its own rows)")}


class EvalRunConfig(dg.Config):
    """What ``eval_run``'s run config does with its fields (generated per config file by
    :func:`eval_config_class`)."""

    def settings(self) -> EvalSettings:
        return checked(EvalSettings, "eval_run config", "eval", settings_values(self, EvalSettings))


def eval_config_class(settings: EvalSettings) -> type["EvalRunConfig"]:
    """``eval_run`` run config: the ``[eval]`` settings (defaults: ``settings``), then ``RUN_FIELDS``."""
    return config_class("EvalConfig", settings, EVAL_DOC, base=EvalRunConfig, extra=RUN_FIELDS)


def build_eval_run(bench: BenchmarkConfig) -> dg.AssetsDefinition:
    """The ``eval_run`` asset; its run config defaults to the ``[eval]`` settings in ``bench``."""
    EvalConfig = eval_config_class(bench.eval)  # a Config class, made per config file
    rows = eval_rows(bench)  # the questions' rows asset

    @dg.asset(group_name="evaluation", kinds={"pytorch", "duckdb"}, deps=[rows.key] if rows else [])
    def eval_run(context: dg.AssetExecutionContext, config: EvalConfig, model_runtime: ModelRuntime,
                 duckdb: DuckDBResource, io_manager: dg.ResourceParam[ParquetTableIOManager]) -> dg.MaterializeResult:
        """A model against its baseline at MAYE's settings, paired; rows and the comparison view in DuckDB."""
        return evaluate(context, bench, config, model_runtime, duckdb, io_manager)

    return eval_run


def evaluate(context: dg.AssetExecutionContext, bench: BenchmarkConfig, config: EvalRunConfig,
             model_runtime: ModelRuntime, duckdb: DuckDBResource,
             store: ParquetTableIOManager) -> dg.MaterializeResult:
    """The body of ``eval_run``: check the inputs, evaluate both models, write the eval's rows."""
    try:
        settings = config.settings()
    except ConfigError as error:
        raise dg.Failure(f"eval_run config: {error}") from error
    return run_evaluation(context, bench, settings, config.eval_id or None, model_runtime, duckdb,
                          cached=store.stored_table(EVAL_ROWS_KEY))


def run_evaluation(context: dg.AssetExecutionContext, bench: BenchmarkConfig, settings: EvalSettings,
                   eval_id: str | None, model_runtime: ModelRuntime, duckdb: DuckDBResource,
                   lineage: Sequence[PartitionWrite] = (), cached: pa.Table | None = None) -> dg.MaterializeResult:
    """``settings.model`` against ``settings.baseline``: both evaluated, the eval's rows written (with the
    ``lineage`` rows, in the same transaction), the side-by-side table and figures as metadata. The
    questions come from ``cached`` (the ``evaluation/eval_rows`` table) when it holds what the dataset gives."""
    try:
        model, baseline = model_entry(settings.model, bench), model_entry(settings.baseline, bench, "baseline")
        dataset = dataset_settings(settings.dataset, bench, settings.split, settings.n)
        env, came = cached_env(dataset, cached, lambda: dataset_env(dataset))
        held_out_envs(dataset, bench)  # every held-out distribution readable before any model loads
    except ConfigError as error:
        raise dg.Failure(f"eval_run config: {error}") from error
    if not came.cached:
        context.log.warning(f"dataset {dataset.name!r}: questions read from its source ({came.why_source})")
    if env.rejected:
        context.log.warning(f"dataset {dataset.name!r}: {rejection_summary(env.rejected)}")

    def progress(role: str, setting: SamplingSetting, wall_s: float) -> None:
        context.log.info(f"{role}: {setting.label} on {len(env)} questions in {wall_s:.1f} s")

    result = compare_models(model_runtime.load, model, baseline, env, dataset, settings, eval_id, progress,
                            sample_episodes)
    distributions = [compare_models(model_runtime.load, model, baseline, held_env, held, settings,
                                    f"{result.eval_id}/{held.name}", progress, sample_episodes, held.name)
                     for held, held_env in held_out_envs(dataset, bench)]
    with duckdb.get_connection() as conn:
        ensure_tables(conn, (*EVAL_TABLES, REJECTED_ROWS, *(write.spec for write in lineage)))
        replace_partitions(conn, [*result.writes(), *(w for d in distributions for w in d.writes()), *lineage])
        create_eval_views(conn)
        create_cost_views(conn, bench.costs)
        table = format_side_by_side(side_by_side(conn, result.eval_id))
        figures = eval_figures(conn, duckdb.database, result.eval_id)
    return dg.MaterializeResult(metadata=readable({
        "eval_id": result.eval_id, "model": settings.model, "baseline": settings.baseline,
        "dataset": f"{dataset.name} ({dataset.split})", "questions": len(env),
        "questions_from": "cached rows (evaluation/eval_rows)" if came.cached else f"source: {came.why_source}",
        "questions_sha256": came.content_sha256,
        "rejected_rows": len(env.rejected), "rejections": rejection_summary(env.rejected),
        "samples": len(result.model.outcome.samples) + len(result.baseline.outcome.samples),
        "wall_s": result.model.outcome.wall_s + result.baseline.outcome.wall_s,
        "comparison": markdown_preview(table, rows=len(table)), **figures,
        "distributions": {d.distribution: d.eval_id for d in distributions},
    }))


def held_out_envs(dataset: DatasetSettings, bench: BenchmarkConfig) -> list[tuple[DatasetSettings, TaskEnv]]:
    """Each held-out distribution of ``dataset`` (its ``held_out`` tables) with the eval's question count, and
    its environment read from its source; a ConfigError names a table that cannot be read."""
    chosen = [replace(held, limit=dataset.limit) for held in held_out_tables(dataset, bench.datasets)]
    return [(held, dataset_env(held)) for held in chosen]
