"""The `aerorl` command: bench, rerun, train, replay, dev."""

from __future__ import annotations

import argparse
import os
import sys


def _bench(args: argparse.Namespace) -> int:
    from aerorl_pipeline.instance import local_instance

    instance = local_instance()
    from aerorl_pipeline.bench import plan_bench, run_bench, summary_table
    from assets.project import DUCKDB_PATH

    plan = plan_bench(args.model or (), args.batch_size or (), args.run_id)
    print(f"benchmark run {plan.run_id}: {len(plan.partition_keys)} partitions "
          f"(DAGSTER_HOME={os.environ['DAGSTER_HOME']})")
    results = run_bench(plan, instance, refresh_rows=not args.skip_rows)
    failed = [r for r in results if not r.success]
    print(summary_table(str(DUCKDB_PATH), plan.run_id))
    print(f"\nDuckDB: {DUCKDB_PATH}\n  duckdb {DUCKDB_PATH} \"SELECT * FROM benchmark_summary WHERE run_id = '{plan.run_id}'\"")
    return 1 if failed else 0


def _train(args: argparse.Namespace) -> int:
    from aerorl_pipeline.instance import local_instance

    instance = local_instance()
    from aerorl_pipeline.bench import QUIET_LOGS
    from aerorl_pipeline.definitions import defs

    settings = {name: value for name, value in vars(args).items()
                if (name in TRAIN_SETTINGS or name == "resume") and value is not None}
    settings["progress_bar"] = True
    run_config = {"ops": {"rl_run": {"config": settings}}, **QUIET_LOGS}
    result = defs.resolve_job_def("training").execute_in_process(instance=instance, run_config=run_config)
    for event in result.get_asset_materialization_events():
        metadata = event.materialization.metadata
        print(metadata["evaluations"].value)
        print(f"\nrun {metadata['run_id'].value}: warm-up reward {metadata['warmup_reward'].value}, "
              f"final reward {metadata['final_reward'].value}; checkpoint {metadata['final_checkpoint'].value}")
    return 0 if result.success else 1


TRAIN_SETTINGS = {
    "base_model": (str, "model key from config/benchmark.toml, or a checkpoint directory"),
    "algorithm": (str, "grpo or reinforce_pp"),
    "steps": (int, "RL steps after the warm-up"),
    "warmup_steps": (int, "supervised warm-up steps"),
    "group_size": (int, "samples per prompt"),
    "learning_rate": (float, "RL learning rate"),
    "kl_coef": (float, "KL coefficient to the reference"),
    "quant_bits": (int, "reference precision: 4 (nf4), 8 (int8) or 16"),
    "seed": (int, "seed"),
    "eval_interval": (int, "evaluate every N RL steps"),
    "checkpoint_interval": (int, "checkpoint every N steps"),
    "run_name": (str, "run id (default: derived from the settings; the same settings resume)"),
}


def _replay(argv: list[str]) -> int:
    from aerorl_ops.replay import main as replay_main

    return replay_main(argv)


def _dev(args: argparse.Namespace) -> int:
    from aerorl_pipeline.instance import ensure_dagster_home

    ensure_dagster_home()
    command = [sys.executable, "-m", "dagster", "dev", "-m", "aerorl_pipeline.definitions",
               "--host", args.host, "--port", str(args.port)]
    os.execv(command[0], command)  # the venv's own dagster, whether or not the venv is activated
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aerorl", description="AeroRL Pipeline: VLM benchmark and RL on Dagster.")
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="materialize the nightly benchmark (rows, every partition, report)")
    bench.add_argument("--model", action="append", help="only this model key (repeatable); rerun one model")
    bench.add_argument("--batch-size", action="append", type=int, help="only this batch size (repeatable)")
    bench.add_argument("--run-id", help="benchmark run id shared by the partitions (default: bench-<time>)")
    bench.add_argument("--skip-rows", action="store_true", help="reuse the cached dataset rows")
    bench.set_defaults(handler=_bench)

    train = commands.add_parser("train", help="run the training job (warm-up + RL vs a quantized reference)")
    for name, (kind, text) in TRAIN_SETTINGS.items():
        train.add_argument(f"--{name.replace('_', '-')}", type=kind, help=text)
    train.add_argument("--no-resume", dest="resume", action="store_false", default=None,
                       help="start over even when a checkpoint of this run exists")
    train.set_defaults(handler=_train)

    commands.add_parser("replay", help="score a replay JSONL with the reward stack (see `aerorl replay -h`)",
                        add_help=False)

    dev = commands.add_parser("dev", help="start the Dagster UI on the project's instance")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=3000)
    dev.set_defaults(handler=_dev)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        return _replay(argv[1:])
    args = build_parser().parse_args(argv)
    from aerorl_ops.config.benchmark import ConfigError

    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"aerorl: configuration error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
