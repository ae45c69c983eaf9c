"""Asset checks of the benchmark partitions: thin wrappers around ``aerorl_ops.reporting.checks``.

The checks are partitioned like the assets they check (model x batch size), so the ``benchmark``
job runs them in the same run as the partition it materializes, each check loads only that
partition, and the UI records a result per partition. Partitioned checks are a preview feature
of Dagster 1.13; unpartitioned checks of a partitioned asset would load every partition of it
and keep one result for the whole asset (dagster issue 27747).

- ``generations``: ``no_prompt_echo`` (blocking: a broken partition is not scored), ``valid_latencies``.
- ``reward_scores``: ``no_nan_scores``, ``one_score_per_sample`` (the same sample ids as the
  generations). Blocking: nothing broken lands in DuckDB.
- ``benchmark_report``: ``no_metric_drop`` against the previous run on any dataset (WARN), ``no_row_drop``,
  no significant drop row by row against it (ERROR, blocking: exact McNemar on ``correct`` at alpha 0.05,
  the changed rows listed), ``batch_invariant``: greedy answers at this batch size match batch 1 of the
  same run (ERROR; drift makes batch sizes incomparable), and ``library_canary``: when torch /
  transformers / vLLM / bitsandbytes / peft changed since the previous run, the same greedy answers
  (WARN, naming the version changes and the changed answers).
"""

import warnings
from typing import NamedTuple

import dagster as dg
import pandas as pd
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.reporting.checks import (
    REFERENCE_BATCH_SIZE,
    Finding,
    latency_findings,
    nan_score_findings,
    previous_runs,
    prompt_echo_findings,
    regressions,
    response_drift,
    responses_by_sample,
    sample_id_mismatch,
)
from aerorl_ops.reporting.library_canary import VersionChange, run_library_versions, version_changes
from aerorl_ops.reporting.row_regressions import ALPHA, RowComparison, compare_rows, row_outcomes
from assets.benchmark.partitions import key_parts
from assets.metadata import markdown_preview, readable
from assets.runs import BENCHMARK_RUN_TAG, benchmark_run_id
from assets.step_placement import DUCKDB_WRITER_POOL, DUCKDB_WRITER_TAGS

DUCKDB_WRITER = {"pool": DUCKDB_WRITER_POOL, "op_tags": DUCKDB_WRITER_TAGS}
"""Checks that read the report database run where its one writer runs (they would wait on its lock)."""

SHOWN_FINDINGS = 20


class RegressionCheckConfig(dg.Config):
    """max_relative_drop: how far below the previous run's value (relative) pass rate and
    samples/s may fall before the check warns; 0.1 = 10 %."""

    max_relative_drop: float = 0.10


class RowRegressionCheckConfig(dg.Config):
    """alpha: the significance level below which a drop in correct rows (exact McNemar) fails the check."""

    alpha: float = ALPHA


def _partitioned_check(partitions: dg.PartitionsDefinition, fn, **kwargs) -> dg.AssetChecksDefinition:
    """``@dg.asset_check`` for a benchmark partition (the preview warning is expected, see above)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def.*")
        return dg.asset_check(partitions_def=partitions, **kwargs)(fn)


def check_partition(context: dg.AssetCheckExecutionContext) -> tuple[str, int]:
    """(model key, batch size) of the checked partition."""
    return key_parts(context.op_execution_context.assets_def.partitions_def, context.partition_key)


def report_run_id(context: dg.AssetCheckExecutionContext) -> str:
    """The benchmark run whose rows this check reads: the run's benchmark tag when it has one, else
    the run id recorded by this partition's latest ``benchmark_report`` materialization (a check
    launched alone from the UI, or after the report in a run launched from the UI), else the id
    ``benchmark_run_id`` derives for this run."""
    run = context.op_execution_context
    if BENCHMARK_RUN_TAG in run.run.tags:
        return benchmark_run_id(run)
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("benchmark_report"), asset_partitions=[str(context.partition_key)]),
        limit=1).records
    recorded = records[0].asset_materialization.metadata.get("run_id") if records else None
    return str(recorded.value) if recorded is not None else benchmark_run_id(run)


def findings_result(findings: list[Finding], what: str) -> dg.AssetCheckResult:
    frame = pd.DataFrame(findings, columns=list(Finding._fields))
    return dg.AssetCheckResult(
        passed=not findings,
        description=f"{len(findings)} {what}" if findings else None,
        metadata={"failures": len(findings),
                  "examples": markdown_preview(frame, rows=SHOWN_FINDINGS) if findings else "none"},
    )


def generations_are_not_prompt_echoes(generations: pa.Table) -> dg.AssetCheckResult:
    """No response equals, starts with or contains its prompt, or holds the chat template's <|im_start|>."""
    return findings_result(prompt_echo_findings(generations), "responses echo the prompt")


def generations_latencies_are_valid(generations: pa.Table) -> dg.AssetCheckResult:
    """Every latency_ms and batch_latency_ms is a finite, non-negative number. Not blocking: the
    report rejects such rows into ``rejected_rows`` with their reasons and writes the rest."""
    return findings_result(latency_findings(generations), "latencies are missing, NaN or negative")


def reward_scores_have_no_nan(reward_scores: pa.Table) -> dg.AssetCheckResult:
    """No score column holds NaN and every row has a total reward."""
    return findings_result(nan_score_findings(reward_scores), "scores are NaN or missing")


def reward_scores_match_generations(reward_scores: pa.Table, generations: pa.Table) -> dg.AssetCheckResult:
    """Exactly one score per generated sample of the same partition."""
    mismatch = sample_id_mismatch(generations.column("sample_id").to_pylist(),
                                  reward_scores.column("sample_id").to_pylist())
    return dg.AssetCheckResult(
        passed=mismatch.ok,
        description=None if mismatch.ok else (
            f"{len(mismatch.missing)} generated samples unscored, {len(mismatch.unexpected)} scores of "
            f"unknown samples, {len(mismatch.duplicated)} samples scored twice"),
        metadata={"generations": generations.num_rows, "reward_scores": reward_scores.num_rows,
                  **{name: ", ".join(ids[:SHOWN_FINDINGS]) or "none" for name, ids in mismatch._asdict().items()}},
    )


def benchmark_report_has_not_regressed(context: dg.AssetCheckExecutionContext, config: RegressionCheckConfig,
                                       duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Pass rate, accuracy and samples/s on each dataset are within max_relative_drop of the previous run
    of this model x batch size on that dataset."""
    model_key, batch_size = check_partition(context)
    run_id = report_run_id(context)
    with duckdb.get_connection() as conn:
        runs = previous_runs(conn, run_id, model_key, batch_size)
    if not runs:
        raise dg.Failure(f"benchmark_summary has no row for run {run_id!r}, partition {context.partition_key}; "
                         "materialize benchmark_report for this partition first")
    compared = [run for run in runs if run.previous_run_id is not None]
    if not compared:
        return dg.AssetCheckResult(passed=True, description="first run of this model x batch size: nothing to compare",
                                   metadata={"run_id": run_id})
    found = [(run.dataset, r) for run in compared for r in regressions(run.current, run.previous,
                                                                        config.max_relative_drop)]
    table = pd.DataFrame([{"dataset": run.dataset, "metric": m, "previous": run.previous[m],
                           "current": run.current[m]} for run in compared for m in run.current])
    return dg.AssetCheckResult(
        passed=not found,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(f"{dataset}: {r.metric} fell {-r.relative_change:.1%} ({r.previous:.4g} -> "
                              f"{r.current:.4g})" for dataset, r in found) or None,
        metadata={"run_id": run_id, "previous_run_id": ", ".join(sorted({str(r.previous_run_id) for r in compared})),
                  "max_relative_drop": config.max_relative_drop, "metrics": markdown_preview(table)},
    )


class ComparedDataset(NamedTuple):
    """A dataset of this partition against the previous run of the same model x batch size on it."""

    dataset: str
    previous_run_id: str
    rows: RowComparison
    library_changes: tuple[VersionChange, ...]


def compared_datasets(duckdb: DuckDBResource, context: dg.AssetCheckExecutionContext
                      ) -> tuple[str, list[ComparedDataset]]:
    """This partition's run id and, per dataset with a previous run, the row-by-row comparison and the
    library versions that changed (raises when the partition has no report yet)."""
    model_key, batch_size = check_partition(context)
    run_id = report_run_id(context)
    with duckdb.get_connection() as conn:  # (no raise inside: dagster-duckdb closes only on a clean exit)
        runs = previous_runs(conn, run_id, model_key, batch_size)
        compared = [ComparedDataset(run.dataset, run.previous_run_id, compare_rows(
            row_outcomes(conn, run.previous_run_id, model_key, batch_size, run.dataset),
            row_outcomes(conn, run_id, model_key, batch_size, run.dataset)),
            version_changes(run_library_versions(conn, run.previous_run_id), run_library_versions(conn, run_id)))
            for run in runs if run.previous_run_id]
    if not runs:
        raise dg.Failure(f"benchmark_summary has no row for run {run_id!r}, partition {context.partition_key}; "
                         "materialize benchmark_report for this partition first")
    return run_id, compared


def _changed_rows(compared: list[ComparedDataset]) -> dg.MetadataValue:
    return markdown_preview(pd.DataFrame([
        {"dataset": c.dataset, "sample_id": row.sample_id, "change": row.change,
         "previous_response": row.before.response, "response": row.after.response,
         "score_delta": row.after.score - row.before.score} for c in compared for row in c.rows.changed]),
        rows=SHOWN_FINDINGS)


def benchmark_report_rows_have_not_regressed(context: dg.AssetCheckExecutionContext, config: RowRegressionCheckConfig,
                                            duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Row by row against the previous run of this model x batch size on each dataset (same sample ids):
    fails when correctness drops significantly (exact McNemar, ``alpha``); reports the changed rows, the
    mean score difference with its paired bootstrap interval, and the rows whose greedy text changed."""
    run_id, compared = compared_datasets(duckdb, context)
    if not compared:
        return dg.AssetCheckResult(passed=True, description="first run of this model x batch size: nothing to compare",
                                   metadata={"run_id": run_id})
    drops = [c for c in compared if c.rows.significant_drop(config.alpha)]
    summary = pd.DataFrame([{"dataset": c.dataset, "previous_run_id": c.previous_run_id, "rows": c.rows.rows,
                             "lost": c.rows.lost, "gained": c.rows.gained, "mcnemar_p": c.rows.p_value,
                             "mean_score_difference": c.rows.mean_score_difference,
                             "interval_low": c.rows.interval[0], "interval_high": c.rows.interval[1],
                             "changed_text": c.rows.changed_text, "unmatched": c.rows.unmatched} for c in compared])
    return dg.AssetCheckResult(
        passed=not drops,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{c.dataset}: {c.rows.lost} rows lost, {c.rows.gained} gained (McNemar p = "
                              f"{c.rows.p_value:.3g}), mean score {c.rows.mean_score_difference:+.3f} "
                              f"[{c.rows.interval[0]:+.3f}, {c.rows.interval[1]:+.3f}]" for c in drops) or None,
        metadata={"run_id": run_id, "alpha": config.alpha,
                  "rows_lost": sum(c.rows.lost for c in compared),
                  "rows_gained": sum(c.rows.gained for c in compared),
                  "rows_changed_text": sum(c.rows.changed_text for c in compared),
                  "comparison": markdown_preview(summary), "changed_rows": _changed_rows(compared)},
    )


def benchmark_report_answers_survive_library_changes(context: dg.AssetCheckExecutionContext,
                                                     duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """When torch, transformers, vLLM, bitsandbytes or peft changed since the previous run of this model x
    batch size, its greedy answers on the same rows are the previous run's; reports how many answers changed
    under which version change (``aerorl_ops.reporting.library_canary``)."""
    run_id, compared = compared_datasets(duckdb, context)
    changes = sorted({str(change) for c in compared for change in c.library_changes})
    if not changes:
        return dg.AssetCheckResult(passed=True, description=(
            "no library change since the previous run" if compared else "first run of this model x batch size"),
            metadata={"run_id": run_id})
    changed = sum(c.rows.changed_text for c in compared)
    rows = sum(c.rows.rows for c in compared)
    return dg.AssetCheckResult(
        passed=changed == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{'; '.join(changes)}: {changed} of {rows} answers changed (" + ", ".join(
            f"{c.dataset} {c.rows.changed_text} of {c.rows.rows}" for c in compared) + ")",
        metadata={"run_id": run_id, "library_changes": "; ".join(changes), "answers_changed": changed,
                  "answers_compared": rows, "changed_rows": _changed_rows(compared)},
    )


def benchmark_report_is_batch_size_invariant(context: dg.AssetCheckExecutionContext,
                                             duckdb: DuckDBResource) -> dg.AssetCheckResult:
    """Greedy answers at this batch size equal those at batch size 1 of the same run and model."""
    model_key, batch_size = check_partition(context)
    run_id = report_run_id(context)
    if batch_size == REFERENCE_BATCH_SIZE:
        return dg.AssetCheckResult(passed=True, description="batch size 1 is the reference")
    with duckdb.get_connection() as conn:
        reference = responses_by_sample(conn, run_id, model_key, REFERENCE_BATCH_SIZE)
        candidate = responses_by_sample(conn, run_id, model_key, batch_size)
    drift = response_drift(reference, candidate)
    if not drift.compared:
        return dg.AssetCheckResult(
            passed=True, description=f"skipped: run {run_id!r} has no batch size 1 answers of {model_key} (yet)",
            metadata={"run_id": run_id, "compared": 0})
    examples = pd.DataFrame(drift.mismatches, columns=["sample_id", "batch_1", f"batch_{batch_size}"])
    return dg.AssetCheckResult(
        passed=not drift.mismatches,
        description=(f"{len(drift.mismatches)} of {drift.compared} answers differ from batch size 1"
                     if drift.mismatches else None),
        metadata=readable({"run_id": run_id, "compared": drift.compared, "mismatches": len(drift.mismatches),
                           "mismatch_rate": drift.mismatch_rate, "only_at_batch_1": len(drift.only_in_reference),
                           "only_at_this_batch": len(drift.only_in_candidate),
                           "examples": markdown_preview(examples, rows=SHOWN_FINDINGS) if drift.mismatches
                           else "none"}),
    )


CHECKS = (
    (generations_are_not_prompt_echoes, {"name": "no_prompt_echo", "asset": "generations", "blocking": True}),
    (generations_latencies_are_valid, {"name": "valid_latencies", "asset": "generations"}),
    (reward_scores_have_no_nan, {"name": "no_nan_scores", "asset": "reward_scores", "blocking": True}),
    (reward_scores_match_generations, {"name": "one_score_per_sample", "asset": "reward_scores", "blocking": True,
                                       "additional_ins": {"generations": dg.AssetIn("generations")}}),
    (benchmark_report_has_not_regressed, {"name": "no_metric_drop", "asset": "benchmark_report", **DUCKDB_WRITER}),
    (benchmark_report_rows_have_not_regressed, {"name": "no_row_drop", "asset": "benchmark_report", "blocking": True,
                                                **DUCKDB_WRITER}),
    (benchmark_report_answers_survive_library_changes, {"name": "library_canary", "asset": "benchmark_report",
                                                        **DUCKDB_WRITER}),
    (benchmark_report_is_batch_size_invariant, {"name": "batch_invariant", "asset": "benchmark_report",
                                                **DUCKDB_WRITER}),
)
"""Each check with its ``@dg.asset_check`` arguments; the partitions come from the config file. The UI
shows a check's name beside its asset's and cuts it after about 16 characters, so names are short,
distinct at a glance, and do not repeat the asset's name."""


def build_benchmark_checks(partitions: dg.PartitionsDefinition) -> list[dg.AssetChecksDefinition]:
    """The benchmark checks, partitioned like the benchmark assets."""
    return [_partitioned_check(partitions, fn, **kwargs) for fn, kwargs in CHECKS]
