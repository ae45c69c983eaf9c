"""``benchmark_report``: one partition's generations, scores and summary land in DuckDB.

Generations with impossible measurements (NaN or negative latency, negative token counts) go
to ``rejected_rows`` with their reasons instead. All tables are replaced for (run_id, model_key,
batch_size) in one transaction, so a
failed or repeated write never leaves partial or duplicate rows. Writes queue on the
``duckdb_writer`` pool, so parallel partitions never contend for DuckDB's single writer.
After the write it (re)creates the report views, draws figures (throughput vs batch size
over every partition of the run so far, this partition's reward and latency distributions) as
``plots/benchmark/<run>/<model>__bs<N>/<figure>.png`` beside the database and inline in the metadata,
and writes the dated JSON artifact ``<reports_dir>/<YYYY-MM-DD>/<run>__<model>__bs<N>.json``.
"""


import hashlib
import json
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pandas as pd
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.envs.configured import row_max_new_tokens
from aerorl_ops.generation.partition_run import partition_stats
from aerorl_ops.generation.validation import split_valid_generations
from aerorl_ops.reporting.artifacts import benchmark_artifact, write_benchmark_artifact
from aerorl_ops.reporting.library_canary import partition_library_changes
from aerorl_ops.reporting.partition_summary import summary_row, summary_rows
from aerorl_ops.reporting.plots import latency_distribution_png, reward_distribution_png, throughput_vs_batch_size_png
from aerorl_ops.storage.cost_views import create_cost_views
from aerorl_ops.storage.duckdb_store import (
    PartitionWrite,
    ensure_tables,
    rejected_rows_table,
    transaction,
    write_partitions,
    write_run,
)
from aerorl_ops.storage.schema import BENCHMARK_SUMMARY, GENERATIONS, REJECTED_ROWS, REWARD_SCORES
from aerorl_ops.storage.views import create_views
from assets.benchmark.partitions import partition_parts
from assets.figures import Figure, benchmark_plots_dir, saved_figures
from assets.metadata import markdown_preview, readable
from assets.runs import benchmark_run_id, git_sha, library_versions
from assets.step_placement import DUCKDB_WRITER_POOL, DUCKDB_WRITER_TAGS

REJECTION_STAGE = "benchmark_report[{}|{}]"


class ReportConfig(dg.Config):
    """reports_dir: where the dated JSON artifacts go; empty means the folder of the DuckDB
    report database (``reports/`` with the default resources)."""

    reports_dir: str = ""


def artifacts_dir(config: ReportConfig, duckdb: DuckDBResource) -> Path:
    return Path(config.reports_dir) if config.reports_dir else Path(duckdb.database).resolve().parent


def with_key(frame: pd.DataFrame, run_id: str, model_key: str, batch_size: int, **extra) -> pa.Table:
    keyed = frame.assign(run_id=run_id, model_key=model_key, batch_size=batch_size, **extra)
    return pa.Table.from_pandas(keyed, preserve_index=False)


def input_hashes(rows: dict[str, pa.Table]) -> dict[str, str]:
    """SHA-256 over each rows asset's (sample id, answers, image hash), in row order, by asset name."""
    hashes = {}
    for name, table in sorted(rows.items()):
        digest = hashlib.sha256()
        for record in table.select(["sample_id", "answers", "image_sha256"]).to_pylist():
            digest.update(json.dumps(record, sort_keys=True).encode())
        hashes[name] = digest.hexdigest()
    return hashes


def build_benchmark_report(bench: BenchmarkConfig, partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The ``benchmark_report`` asset of the models in ``bench``."""

    rows_ins = {dataset.asset_name: dg.AssetIn(dataset.asset_name) for dataset in bench.benchmarked}

    @dg.asset(group_name="benchmark", partitions_def=partitions, pool=DUCKDB_WRITER_POOL, op_tags=DUCKDB_WRITER_TAGS,
              kinds={"duckdb"},
              ins={"generations": dg.AssetIn("generations"), "reward_scores": dg.AssetIn("reward_scores"),
                   **rows_ins})
    def benchmark_report(context: dg.AssetExecutionContext, config: ReportConfig, duckdb: DuckDBResource,
                         generations: pa.Table, reward_scores: pa.Table, **rows: pa.Table) -> dg.MaterializeResult:
        """Write the partition's `generations`, `reward_scores` and `benchmark_summary` rows (one per dataset)
        and its `runs` row."""
        return write_report(context, bench, config, duckdb, generations, reward_scores, rows)

    return benchmark_report


def write_report(context: dg.AssetExecutionContext, bench: BenchmarkConfig, config: ReportConfig,
                 duckdb: DuckDBResource, generations: pa.Table, reward_scores: pa.Table,
                 rows: dict[str, pa.Table]) -> dg.MaterializeResult:
    """The body of ``benchmark_report``: one transaction of the partition's rows, then views, figures, artifact."""
    model_key, batch_size = partition_parts(context)
    run_id = benchmark_run_id(context)
    stats = partition_stats(generations)
    accepted, rejected = split_valid_generations(generations)
    for rejection in rejected[:20]:
        context.log.warning(f"rejected generation {rejection.locator}: {rejection.reason}")
    gen_frame = accepted.to_pandas()
    score_frame = reward_scores.to_pandas()
    score_frame = score_frame[score_frame["sample_id"].isin(gen_frame["sample_id"])]
    summaries = summary_rows(gen_frame, score_frame, stats)
    summary = summary_row(gen_frame, score_frame, stats, dataset="all")  # the partition as a whole
    key = {"run_id": run_id, "model_key": model_key, "batch_size": batch_size}
    writes = [
        PartitionWrite(GENERATIONS, key, with_key(gen_frame.drop(columns=["batch_size"]), run_id, model_key,
                                                  batch_size, dagster_run_id=context.run.run_id)),
        PartitionWrite(REWARD_SCORES, key, with_key(score_frame, run_id, model_key, batch_size)),
        PartitionWrite(BENCHMARK_SUMMARY, key, BENCHMARK_SUMMARY.rows(summaries, **key)),
        PartitionWrite(REJECTED_ROWS, {"run_id": run_id, "stage": REJECTION_STAGE.format(model_key, batch_size),
                                       "dataset": "generations"},
                       rejected_rows_table(run_id, REJECTION_STAGE.format(model_key, batch_size), "generations",
                                           rejected)),
    ]
    reward_config = json.loads(score_frame["reward_config"].iloc[0]) if len(score_frame) else None
    finished = datetime.now(UTC)
    with duckdb.get_connection() as conn:
        ensure_tables(conn)
        budgets = row_max_new_tokens(bench.benchmarked)
        with transaction(conn):  # the partition's rows and its runs row land together, or not at all
            inserted = write_partitions(conn, writes)
            write_run(conn, {
                "run_id": run_id, "kind": "benchmark",
                "started_at": finished - timedelta(seconds=stats.wall_s + stats.model_load_s),
                "finished_at": finished, "git_sha": git_sha(),
                "config": json.dumps({"benchmark": bench.path, "models": [asdict(m) for m in bench.models],
                                      "batch_sizes": list(bench.batch_sizes), "generation": stats.generation,
                                      "rewards": reward_config,
                                      # the datasets whose rows had their own max_new_tokens (row_groups)
                                      **({"dataset_max_new_tokens": budgets} if budgets else {})}),
                "seeds": json.dumps({"benchmark": bench.seed, "generation": stats.generation["seed"]}),
                "library_versions": json.dumps(library_versions()),
                "input_hashes": json.dumps(input_hashes(rows)),
            })
        create_views(conn)
        create_cost_views(conn, bench.costs)
        library_changes = partition_library_changes(conn, run_id, model_key, batch_size)
        run_summary = pd.DataFrame(conn.execute("SELECT model_key, batch_size, sum(samples) / sum(wall_s) "
                                                "FROM benchmark_summary WHERE run_id = ? AND wall_s > 0 "
                                                "GROUP BY model_key, batch_size", [run_id]).fetchall(),
                                   columns=["model_key", "batch_size", "samples_per_s"])
    artifact = write_benchmark_artifact(artifacts_dir(config, duckdb), summary.created_at.date(),
                                        benchmark_artifact(run_id, model_key, batch_size, asdict(summary),
                                                           reward_config, [asdict(s) for s in summaries]))
    shown = {k: v for k, v in asdict(summary).items() if k in ("samples", "samples_per_s", "generated_tokens_per_s",
                                                        "latency_p50_ms", "latency_p95_ms", "pass_rate",
                                                        "accuracy", "peak_memory_mb")}
    return dg.MaterializeResult(metadata=readable({
        "run_id": run_id,
        "generations_rows": inserted[0],
        "reward_scores_rows": inserted[1],
        "rows_in": generations.num_rows,
        "rows_rejected": len(rejected),
        "summary": markdown_preview(pd.DataFrame([shown])),
        "datasets": markdown_preview(pd.DataFrame([{"dataset": s.dataset, "samples": s.samples, "accuracy": s.accuracy,
                                                    "pass_rate": s.pass_rate} for s in summaries])),
        "artifact": dg.MetadataValue.path(str(artifact)),
        "library_changes": "; ".join(str(change) for change in library_changes) or "none",
        **saved_figures(benchmark_plots_dir(duckdb.database, run_id, model_key, batch_size), {
            "throughput_vs_batch_size": Figure("throughput vs batch size, this run", throughput_vs_batch_size_png,
                                               run_summary),
            "reward_distribution": Figure("reward distribution", reward_distribution_png, score_frame),
            "latency_distribution": Figure("latency distribution", latency_distribution_png,
                                           gen_frame[["latency_ms"]])}),
        **{k: float(v) for k, v in shown.items() if v is not None},
    }))
