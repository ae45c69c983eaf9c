"""`aerorl eval`: run the ``evaluation`` job (a model against its baseline) and print the comparison.

The inputs are checked before anything loads: a flag's value (by its setting's check), an unknown
model key (that is not a checkpoint directory either), a model folder that cannot load (no
config.json, not a VLM, a processor that cannot be built), an unknown dataset or an unreadable
split is a configuration error (exit 2), and so is an input error raised in the job (weights that
cannot load, say).
A failed run exits 1 with the error; a finished one prints the side-by-side table (every metric of
both models, the difference and, for accuracy, the paired 95% interval), per question type too,
then one per held-out distribution of the dataset, and where the figure and the rows are.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from aerorl_ops.config.evaluation import EvalSettings
from aerorl_pipeline.failures import CommandFailed, failure_from_results
from aerorl_pipeline.settings_flags import checked_flags, flag_values

if TYPE_CHECKING:
    pass

# The model, dataset, Dagster and DuckDB imports happen inside the functions: building the `aerorl`
# parser (every command) must not pay for them.


def check_inputs(args: argparse.Namespace) -> EvalSettings:
    """The eval settings of the command line, with the models and the dataset resolved (else ConfigError)."""
    from aerorl_ops.config.benchmark import model_entry
    from aerorl_ops.envs.configured import dataset_env, dataset_settings
    from aerorl_ops.models.sources import check_local_model
    from assets.evaluation.eval_run import held_out_envs
    from assets.project import MODELS_DIR

    settings = checked_flags(EvalSettings, "eval", "eval", flag_values(args, args.eval_flags))
    check_local_model(model_entry(settings.model, args.settings), MODELS_DIR)
    check_local_model(model_entry(settings.baseline, args.settings, "baseline"), MODELS_DIR)
    dataset = dataset_settings(settings.dataset, args.settings, settings.split, settings.n)
    dataset_env(dataset)
    held_out_envs(dataset, args.settings)
    return settings


def run_eval(args: argparse.Namespace) -> int:
    from aerorl_ops.storage.database_check import check_report_database
    from aerorl_pipeline.sql import REPORT_LOCK_WAIT_S, connect_when_unlocked

    check_report_database(args.database)  # a damaged report database is named before any work
    settings = check_inputs(args)
    import time
    from dataclasses import replace

    from dagster_duckdb import DuckDBResource

    from aerorl_ops.reporting.eval_report import format_side_by_side, side_by_side
    from aerorl_pipeline.instance import local_instance

    instance = local_instance()
    args.slot_wait.watch(instance)  # the main thread watches its waits for pool slots
    from aerorl_pipeline.console import CONSOLE_LOGS, console_job
    from aerorl_pipeline.definitions import build_definitions
    from assets.resources import default_resources

    resources = default_resources()
    args.database.parent.mkdir(parents=True, exist_ok=True)
    resources["duckdb"] = DuckDBResource(database=str(args.database))
    run_config = {"ops": {"eval_run": {"config": {**flag_values(args, args.eval_flags), "eval_id": args.eval_id}}},
                  **CONSOLE_LOGS}
    from aerorl_pipeline.stale_rows import refresh_run_rows
    from assets.run_rows import eval_rows

    bench = replace(args.settings, eval=settings)  # its eval_rows asset caches what this eval draws
    defs = build_definitions(bench, resources)
    refresh_run_rows(defs, instance, [rows for rows in [eval_rows(bench)] if rows is not None])
    job = console_job(defs.resolve_job_def("evaluation"))
    result = job.execute_in_process(instance=instance, run_config=run_config, raise_on_error=False)
    failure = failure_from_results([result])
    if failure is not None:  # bad input (exit 2), a stop asked for by a signal, or a fault: one line
        raise CommandFailed(failure)
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    eval_id = metadata["eval_id"].value
    distributions = metadata["distributions"].value or {}
    with connect_when_unlocked(Path(args.database), REPORT_LOCK_WAIT_S, time.sleep) as conn:  # another writer
        table = format_side_by_side(side_by_side(conn, eval_id))
        held = {name: format_side_by_side(side_by_side(conn, held_id)) for name, held_id in distributions.items()}
    print(f"eval {eval_id}: {metadata['model'].value} vs baseline {metadata['baseline'].value} on "
          f"{metadata['questions'].value} questions of {metadata['dataset'].value} ({metadata['wall_s'].value} s)\n")
    print(table.to_string(index=False))
    if metadata["rejected_rows"].value:
        print(f"\n{metadata['dataset'].value}: {metadata['rejections'].value} (in rejected_rows under run id "
              f"{eval_id})")
    for distribution, held_id in distributions.items():
        print(f"\nheld-out distribution {distribution} (eval {held_id}):\n{held[distribution].to_string(index=False)}")
    figure = metadata.get("accuracy_by_setting_png")
    print(f"\nfigure: {figure.value if figure else '(none)'}\nDuckDB: {args.database}\n"
          f"  aerorl sql \"SELECT * FROM eval_vs_baseline WHERE eval_id = '{eval_id}'\"")
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser, default_database: Path) -> None:
    """The flags of `aerorl eval` that are not settings."""
    parser.add_argument("--database", type=Path, default=default_database, metavar="PATH",
                        help="the report database the eval's rows go to (default: %(default)s)")
    parser.add_argument("--eval-id", default="",
                        help="eval id (default: a digest of the settings and the dataset; the same eval replaces "
                             "its own rows)")
