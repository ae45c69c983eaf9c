"""The `aerorl` command: bench, rerun, train, eval, replay, sql, worker, dev."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from aerorl_ops.config.benchmark import BenchmarkConfig, ConfigError
from aerorl_ops.config.generation import GenerationSettings
from aerorl_ops.config.presets import PRESETS, preset_overrides, quick_eval_overrides
from aerorl_ops.config.rewards import RewardSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.quiet import quiet_known_logs
from aerorl_pipeline.failures import FAULT, INPUT_ERROR, CommandFailed, failure_from_error, failure_from_results
from aerorl_pipeline.settings_flags import (
    add_setting_flags,
    checked_flags,
    config_path_from,
    flag_values,
)
from assets.project import BENCHMARK_CONFIG_PATH, CONFIG_ENV, load_config
from assets.step_placement import WORKER_QUEUES

JOB_COMMANDS = ("bench", "train", "eval")
"""The commands that run a Dagster job here: a signal stops them at a safe point (``aerorl_pipeline.console``)."""
CONFIG_COMMANDS = ("bench", "train", "eval", "dev", "worker")
"""The commands that read the settings file (``--config``): those that load models and Dagster when
they run. The others (``sql``, ``-h``, an argument error) import neither, nor torch, so they start fast."""


def _bench(args: argparse.Namespace) -> int:
    checked_flags(GenerationSettings, "bench", "generation", flag_values(args, args.generation_flags))
    checked_flags(RewardSettings, "bench", "rewards", flag_values(args, args.reward_flags))
    from aerorl_pipeline.bench import plan_bench, run_bench, summary_table

    plan = plan_bench(args.model or (), args.batch_size or (), args.run_id, config=args.settings)
    from aerorl_ops.storage.database_check import check_report_database
    from assets.project import DUCKDB_PATH

    check_report_database(DUCKDB_PATH)  # a damaged report database is named before any partition runs
    from aerorl_pipeline.instance import local_instance

    instance = local_instance()
    args.slot_wait.watch(instance)  # the main thread watches its waits for pool slots
    from aerorl_pipeline.definitions import build_definitions

    print(f"benchmark run {plan.run_id}: {len(plan.partition_keys)} partitions "
          f"(config {args.config}, DAGSTER_HOME={os.environ['DAGSTER_HOME']})")
    ops_config = {"generations": {"config": flag_values(args, args.generation_flags)},
                  "reward_scores": {"config": flag_values(args, args.reward_flags)}}
    from aerorl_pipeline.stale_rows import rows_to_refresh

    refresh = rows_to_refresh(args.settings, instance, args.skip_rows, args.stale_ok)  # names the stale ones
    if args.settings.executor.kind == "default":
        results = run_bench(plan, build_definitions(args.config), instance, refresh_rows=refresh,
                            ops_config=ops_config)
        failure = failure_from_results(results)
        rows_failed = bool(refresh) and not results[0].success  # then no partition ran
        if failure is not None and (rows_failed or failure.exit_code == INPUT_ERROR):
            raise CommandFailed(failure)  # bad rows or input (the same in every partition): one line
    else:  # each partition a run on the configured engine (docs/scaling-out.md)
        from aerorl_pipeline.bench import run_bench_distributed

        print(f"executor: {args.settings.executor.kind}")
        results = run_bench_distributed(plan, args.config, instance, refresh_rows=refresh,
                                        ops_config=ops_config)
    failed = [r for r in results if not r.success]
    print(summary_table(str(DUCKDB_PATH), plan.run_id))
    print(f"\nDuckDB: {DUCKDB_PATH}\n  aerorl sql \"SELECT * FROM benchmark_summary WHERE run_id = '{plan.run_id}'\"")
    return 1 if failed else 0


def _train(args: argparse.Namespace) -> int:
    from assets.project import MODELS_DIR

    if args.preset:
        apply_preset(args, args.train_parser, preset_overrides(args.preset))
    settings = flag_values(args, args.training_flags)
    checked = checked_flags(TrainingSettings, "train", "training", settings)
    from aerorl_ops.storage.database_check import check_report_database
    from assets.project import DUCKDB_PATH

    check_report_database(DUCKDB_PATH)  # a damaged report database is named before any work
    if args.resume is not False and _says_it_finished(checked, args.run_name or ""):
        return 0  # its rows are left as they are
    from aerorl_ops.rl.run.inputs import check_training_inputs

    check_training_inputs(checked, args.settings, "aerorl train", MODELS_DIR)  # before a model loads or a job starts
    from aerorl_pipeline.instance import local_instance

    instance = local_instance()
    args.slot_wait.watch(instance)  # the main thread watches its waits for pool slots
    from aerorl_pipeline.console import CONSOLE_LOGS, console_job
    from aerorl_pipeline.definitions import build_definitions

    settings.update({name: getattr(args, name) for name in ("run_name", "resume", "wandb_project")
                     if getattr(args, name) is not None})
    settings["progress_bar"] = True
    run_config = {"ops": {"rl_run": {"config": settings}}, **CONSOLE_LOGS}
    from dataclasses import replace

    from aerorl_pipeline.stale_rows import refresh_run_rows
    from assets.run_rows import training_rows

    bench = replace(args.settings, training=checked)  # its rows assets cache what this run draws
    defs = build_definitions(bench)
    refresh_run_rows(defs, instance, training_rows(bench).values())  # the others are read as cached
    job = console_job(defs.resolve_job_def("training"))
    result = job.execute_in_process(instance=instance, run_config=run_config, raise_on_error=False)
    failure = failure_from_results([result])
    if failure is not None:
        raise CommandFailed(failure)
    events = [event.materialization for event in result.get_asset_materialization_events()]
    checkpoints = [event.partition for event in events if event.asset_key.path == ["checkpoints"]]
    for event in events:
        if event.asset_key.path != ["rl_run"]:
            continue  # the run's checkpoints: listed below
        metadata = event.metadata
        print(metadata["evaluations"].value)
        swap = metadata["swap_changed"].value if "swap_changed" in metadata else None
        print(f"\nrun {metadata['run_id'].value}: warm-up accuracy {metadata['warmup_accuracy'].value}, "
              f"final accuracy {metadata['final_accuracy'].value}; image-swap check: "
              f"{'skipped' if swap is None else f'{swap:.1%} of answers changed'}; "
              f"checkpoint {metadata['final_checkpoint'].value}")
    if checkpoints:
        print(f"checkpoints (usable wherever a model key is): {', '.join(checkpoints)}")
    return 0 if result.success else 1


def _says_it_finished(settings: TrainingSettings, run_name: str) -> bool:
    """Print so when the run of ``settings`` has finished (its rows are kept as they are), before a model loads."""
    from aerorl_ops.rl.run.run_id import training_run_id
    from aerorl_ops.storage.finished_runs import finished_at
    from assets.project import DUCKDB_PATH

    run_id = training_run_id(settings, settings.resolve(), run_name)
    when = finished_at(DUCKDB_PATH, run_id, settings.total_steps)
    if when is not None:
        print(f"run {run_id} finished at {when:%Y-%m-%d %H:%M:%S %Z}: nothing to train "
              "(use --no-resume to train it again)")
    return when is not None


def _eval(args: argparse.Namespace) -> int:
    from aerorl_pipeline.evaluate import run_eval

    if args.quick:
        apply_preset(args, args.eval_parser, quick_eval_overrides())
    return run_eval(args)


def apply_preset(args: argparse.Namespace, parser: argparse.ArgumentParser, overrides: dict[str, object]) -> None:
    """Set ``overrides`` on the parsed ``args``: a preset replaces the file's values, and a flag given with
    another value than the file's wins over the preset."""
    for name, value in overrides.items():
        if getattr(args, name) == parser.get_default(name):
            setattr(args, name, value)


def _replay(argv: list[str]) -> int:
    from aerorl_ops.replay.cli import main as replay_main

    return replay_main(argv)


def _worker(args: argparse.Namespace) -> int:
    from aerorl_pipeline.celery_workers import run_worker
    from aerorl_pipeline.executors import celery_app

    if args.settings.executor.kind != "celery":
        raise ConfigError(f"{args.config}: [executor] kind is {args.settings.executor.kind!r}; `aerorl worker` "
                          "serves the \"celery\" executor")
    app = celery_app(args.settings.executor)
    print(f"aerorl worker {args.name}: queue {args.queue}, broker {app.broker}")
    return run_worker(app, args.queue, args.name, Path(tempfile.mkdtemp(prefix=f"aerorl-{args.name}-")), args.config)


def _dev(args: argparse.Namespace) -> int:
    from aerorl_pipeline.instance import ensure_dagster_home

    ensure_dagster_home()
    os.environ[CONFIG_ENV] = str(args.config)  # read by aerorl_pipeline.definitions.defs when dagster loads it
    command = [sys.executable, "-m", "dagster", "dev", "-m", "aerorl_pipeline.definitions",
               "--host", args.host, "--port", str(args.port)]
    os.execv(command[0], command)  # the venv's own dagster, whether or not the venv is activated
    return 0


def _add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=BENCHMARK_CONFIG_PATH, metavar="FILE",
                        help="the settings file; its values are the other flags' defaults (default: %(default)s)")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print its traceback before its one line")


def build_parser(settings: BenchmarkConfig | None = None) -> argparse.ArgumentParser:
    """The ``aerorl`` parser; the settings flags default to the values in ``settings`` (the ``--config``
    file). ``main`` reads that file first for the commands that take it."""
    defaults = settings or BenchmarkConfig(models=(), batch_sizes=())  # else the dataclass defaults (no file read)
    parser = argparse.ArgumentParser(prog="aerorl", description="AeroRL Pipeline: VLM benchmark and RL on Dagster.")
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="materialize the nightly benchmark (rows, every partition, report)")
    _add_config_flag(bench)
    bench.add_argument("--model", action="append", help="only this model key (repeatable); rerun one model")
    bench.add_argument("--batch-size", action="append", type=int, help="only this batch size (repeatable)")
    bench.add_argument("--run-id", help="benchmark run id shared by the partitions (default: bench-<time>)")
    bench.add_argument("--skip-rows", action="store_true", help="reuse the cached dataset rows (those whose "
                       "source changed since they were cached are refreshed, with a warning)")
    bench.add_argument("--stale-ok", action="store_true",
                       help="with --skip-rows, keep cached rows even when their source has changed since")
    bench.set_defaults(handler=_bench, settings=settings,
                       generation_flags=add_setting_flags(bench.add_argument_group("generation"), defaults.generation),
                       reward_flags=add_setting_flags(bench.add_argument_group("rewards"), defaults.rewards))

    train = commands.add_parser("train", help="run the training job (warm-up + RL vs a quantized reference)")
    _add_config_flag(train)
    training_flags = add_setting_flags(train.add_argument_group("training"), defaults.training)
    train.add_argument("--preset", choices=sorted(PRESETS), default=None,
                       help="a named set of training settings (flags override it): aerorl_ops/config/presets.py")
    train.add_argument("--run-name", help="run id (default: derived from the settings; the same settings resume)")
    train.add_argument("--no-resume", dest="resume", action="store_false", default=None,
                       help="start over even when a checkpoint of this run exists")
    train.add_argument("--wandb-project", default=None,
                       help="also log the run to this wandb project (offline mode) when wandb is installed")
    train.set_defaults(handler=_train, settings=settings, training_flags=training_flags, train_parser=train)

    evaluate = commands.add_parser("eval", help="evaluate a model against its baseline at MAYE's three sampling "
                                   "settings (the evaluation job)")
    _add_config_flag(evaluate)
    from aerorl_pipeline.evaluate import add_eval_arguments
    from assets.project import DUCKDB_PATH

    add_eval_arguments(evaluate, DUCKDB_PATH)
    evaluate.add_argument("--quick", action="store_true",
                          help="about a minute: 100 questions, pass@4 (flags override it; config/presets.py)")
    evaluate.set_defaults(handler=_eval, settings=defaults, eval_parser=evaluate,
                          eval_flags=add_setting_flags(evaluate.add_argument_group("eval"), defaults.eval))

    commands.add_parser("replay", help="score a replay JSONL with the reward stack (see `aerorl replay -h`)",
                        add_help=False)

    from aerorl_pipeline.sql import add_sql_command

    add_sql_command(commands)

    worker = commands.add_parser("worker", help="serve the benchmark's Celery queue on this machine "
                                 "([executor] kind = \"celery\"; docs/scaling-out.md)")
    _add_config_flag(worker)
    worker.add_argument("--queue", choices=WORKER_QUEUES, default=WORKER_QUEUES[0],
                        help="dagster: partition steps (any number of workers); duckdb_writer: the steps that write "
                        "the report (exactly one worker, on the machine with the database) (default: %(default)s)")
    worker.add_argument("--name", default=f"worker-{os.getpid()}", help="the worker's Celery name")
    worker.set_defaults(handler=_worker, settings=settings)

    dev = commands.add_parser("dev", help="start the Dagster UI on the project's instance")
    _add_config_flag(dev)
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=3000)
    dev.set_defaults(handler=_dev)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        quiet_known_logs()
        return _replay(argv[1:])
    try:
        settings = (load_config(config_path_from(argv, BENCHMARK_CONFIG_PATH))
                    if argv[:1] and argv[0] in CONFIG_COMMANDS else None)
        args = build_parser(settings).parse_args(argv)
        if hasattr(args, "config"):
            args.config = args.config.expanduser().resolve()
        if args.command in CONFIG_COMMANDS:
            quiet_known_logs()  # it imports transformers; before bitsandbytes loads: it logs a known line as it imports
        if args.command in JOB_COMMANDS:
            from aerorl_pipeline.console import interruptible
            from aerorl_pipeline.slot_wait import SlotWait

            args.slot_wait = SlotWait(limit_s=args.settings.executor.pool_wait_limit_s)  # the job's waits for slots
            return interruptible(lambda: args.handler(args), args.slot_wait)  # SIGINT / SIGTERM: a stop at a safe point
        return args.handler(args)
    except Exception as error:  # raised here or in a job's step: one line (--debug: the traceback too)
        failure = failure_from_error(error)
        if "--debug" in argv:
            print(failure.detail, file=sys.stderr)
        kind = "configuration error: " if failure.exit_code == INPUT_ERROR else ""
        hint = (" (--debug shows the traceback)" if failure.exit_code == FAULT and failure.detail
                and "--debug" not in argv else "")
        print(f"aerorl: {kind}{failure.message}{hint}", file=sys.stderr)
        return failure.exit_code


if __name__ == "__main__":
    sys.exit(main())
