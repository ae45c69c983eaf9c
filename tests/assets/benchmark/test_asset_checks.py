"""The benchmark asset checks, run by the real ``benchmark`` job in the same run as the partition, and
what the report shows them: its figures as files, its floats rounded, the run id of a UI launch.

``generations`` is replaced by a stand-in that returns hand-made generations (no model), so each
scenario (clean, throughput drop, batch-size drift, prompt echo, broken latency) takes a second.
``reward_scores``, ``benchmark_report`` and every check are the real definitions.
"""

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pytest
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill  # what the UI's backfill stores
from dagster_duckdb import DuckDBResource

from aerorl_ops.generation.generations_table import GENERATION_SCHEMA
from aerorl_ops.generation.partition_run import PartitionStats, with_partition_stats
from aerorl_ops.storage.views import VIEWS
from aerorl_pipeline.jobs import benchmark_job
from assets.benchmark.checks import build_benchmark_checks
from assets.benchmark.partitions import build_benchmark_partitions
from assets.benchmark.reports import build_benchmark_report
from assets.benchmark.scoring import build_reward_scores
from assets.io_managers import ParquetTableIOManager
from assets.project import benchmark_config
from assets.runs import BACKFILL_TAG, BENCHMARK_RUN_TAG

MODEL = "tiny-qwen2-vl"
PROMPT = 'What is the total?\nAnswer with strict JSON of the form {"answer": "<answer>"} and nothing else.'
SAMPLES = [("docvqa", "doc-1", ["12"]), ("docvqa", "doc-2", ["May 4"]), ("chartqa", "chart-1", ["40"])]
CONFIG = benchmark_config()
benchmark_partitions = build_benchmark_partitions(CONFIG)
benchmark_checks = build_benchmark_checks(benchmark_partitions)
reward_scores = build_reward_scores(CONFIG, benchmark_partitions)
benchmark_report = build_benchmark_report(CONFIG, benchmark_partitions)
CHECKS = {check.check_key.name for check in benchmark_checks}


class StandInGeneration(dg.Config):
    """What the stand-in generations look like: answers, speed, and the defects a check must catch."""

    answer: str = "12"
    wall_s: float = 1.0
    echo: bool = False
    latency_ms: float = 10.0
    more_docs: int = 0  # DocVQA questions "doc-x<k>" whose answer is "12", besides SAMPLES


@dg.asset(partitions_def=benchmark_partitions, group_name="benchmark")
def generations(context: dg.AssetExecutionContext, config: StandInGeneration) -> pa.Table:
    batch_size = int(context.partition_key.keys_by_dimension["batch_size"])
    records = [{
        "sample_id": sample_id, "dataset": dataset, "prompt": PROMPT,
        "response": f"system\nuser\n{PROMPT}\nassistant\n" if config.echo else json.dumps({"answer": config.answer}),
        "raw_response": "", "reference": reference, "evidence_entities": reference, "claimed_entities": [],
        "latency_ms": config.latency_ms, "batch_latency_ms": 30.0, "generated_tokens": 5,
        "prompt_text_tokens": 20, "vision_tokens": 4, "batch_index": 0, "batch_size": batch_size,
    } for dataset, sample_id, reference in [*SAMPLES, *(("docvqa", f"doc-x{k}", ["12"])
                                                          for k in range(config.more_docs))]]
    stats = PartitionStats(model_source="stand-in", device="cpu", batch_size=batch_size, samples=len(records),
                           wall_s=config.wall_s, model_load_s=0.1, telemetry=None, generation={"seed": 0})
    return with_partition_stats(pa.Table.from_pylist(records, schema=GENERATION_SCHEMA), stats)


@dg.asset(group_name="datasets")
def docvqa_rows() -> pa.Table:
    return pa.table({"sample_id": ["doc-1", "doc-2"], "answers": [["12"], ["May 4"]], "image_sha256": ["a", "b"]})


@dg.asset(group_name="datasets")
def chartqa_rows() -> pa.Table:
    return pa.table({"sample_id": ["chart-1"], "answers": [["40"]], "image_sha256": ["c"]})


@dg.asset(group_name="datasets")
def easy_vqa_rows() -> pa.Table:
    return pa.table({"sample_id": ["easy-1"], "answers": [["teal"]], "image_sha256": ["d"]})


@dg.asset(group_name="datasets")
def arc_rows() -> pa.Table:  # the shipped config's fourth dataset: benchmark_report takes its rows too
    return pa.table({"sample_id": ["arc-1"], "answers": [["01\n10"]], "image_sha256": ["e"]})


ROWS_ASSETS = [docvqa_rows, chartqa_rows, easy_vqa_rows, arc_rows]


@pytest.fixture
def bench(tmp_path: Path):
    """Runs the ``benchmark`` job for (run id, batch size, stand-in settings) on tmp resources."""
    database = tmp_path / "reports" / "aerorl.duckdb"
    database.parent.mkdir()
    defs = dg.Definitions(
        assets=[*ROWS_ASSETS, generations, reward_scores, benchmark_report],
        asset_checks=benchmark_checks,
        jobs=[benchmark_job,
              dg.define_asset_job("report_checks", dg.AssetSelection.checks_for_assets("benchmark_report"))],
        resources={"duckdb": DuckDBResource(database=str(database)),
                   "io_manager": ParquetTableIOManager(base_dir=str(tmp_path / "cache"))},
    )
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize(ROWS_ASSETS, instance=instance, resources=defs.resources)

    def run(run_id: str | None, batch_size: int, tags: dict[str, str] | None = None,
            **stand_in) -> dg.ExecuteInProcessResult:
        """A run of the partition tagged with benchmark run ``run_id``; untagged (as from the UI) when None."""
        return defs.resolve_job_def("benchmark").execute_in_process(
            partition_key=partition(batch_size), instance=instance, raise_on_error=False,
            tags={**({BENCHMARK_RUN_TAG: run_id} if run_id else {}), **(tags or {})},
            run_config={"ops": {"generations": {"config": stand_in}}})

    def run_report_checks(batch_size: int) -> dg.ExecuteInProcessResult:
        """Only the report's checks, untagged: what "Execute checks" in the UI launches."""
        # A checks-only job has no assets to infer partitions from, so the partition goes in as run tags.
        return defs.resolve_job_def("report_checks").execute_in_process(
            instance=instance, tags={"dagster/partition": str(partition(batch_size))})

    run.database = database
    run.instance = instance
    run.report_checks = run_report_checks
    yield run
    instance.dispose()


def partition(batch_size: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": MODEL, "batch_size": str(batch_size)})


def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}


def failed(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    """Failed checks of a run, by name, with their severity."""
    return {name: e.severity.value for name, e in evaluations(result).items() if not e.passed}


def test_a_clean_partition_runs_every_check_in_its_own_run_and_all_pass(bench):
    result = bench("run-1", 8)
    assert result.success
    found = evaluations(result)
    assert set(found) == CHECKS
    assert {e.partition for e in found.values()} == {f"8|{MODEL}"}
    assert not failed(result)
    invariance = found["batch_invariant"]
    assert invariance.description.startswith("skipped: run 'run-1' has no batch size 1 answers")
    assert found["no_metric_drop"].description.startswith("first run")


def test_the_report_writes_views_figures_and_the_dated_artifact(bench):
    bench("run-1", 1)
    result = bench("run-1", 8)
    (materialization,) = [m for m in result.asset_materializations_for_node("benchmark_report")]
    metadata = materialization.metadata
    for figure in ("throughput_vs_batch_size", "reward_distribution", "latency_distribution"):
        text = metadata[figure].value
        assert text.startswith("![") and "](data:image/png;base64," in text
        png = base64.b64decode(text.split("base64,", 1)[1].rstrip(")"))
        assert png.startswith(b"\x89PNG")
    artifact = Path(metadata["artifact"].value)
    assert artifact.parent.parent == bench.database.parent  # next to the report database by default
    assert artifact.name == f"run-1__{MODEL}__bs8.json"
    payload = json.loads(artifact.read_text())
    assert (payload["run_id"], payload["batch_size"], payload["summary"]["samples"]) == ("run-1", 8, 3)
    with duckdb.connect(str(bench.database), read_only=True) as conn:
        views = {name for (name,) in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert views == set(VIEWS) | {"cost_ledger", "cost_per_1k_samples", "training_cost"}
        assert conn.execute("SELECT batch_size, dataset, run_id FROM latest_benchmark_summary "
                            "ORDER BY 1, 2").fetchall() == [
            (1, "chartqa", "run-1"), (1, "docvqa", "run-1"), (8, "chartqa", "run-1"), (8, "docvqa", "run-1")]
    assert set(payload["datasets"]) == {"chartqa", "docvqa"}


def test_throughput_drop_warns_and_batch_size_drift_fails(bench):
    assert bench("run-1", 1).success and bench("run-1", 8).success
    slower = bench("run-2", 1, wall_s=2.0)  # half the samples/s of run-1
    assert slower.success  # WARN checks never fail the run
    assert failed(slower) == {"no_metric_drop": "WARN"}
    regression = evaluations(slower)["no_metric_drop"]
    assert regression.description == ("chartqa: samples_per_s fell 50.0% (3 -> 1.5); "
                                      "docvqa: samples_per_s fell 50.0% (3 -> 1.5)")
    assert regression.metadata["previous_run_id"].value == "run-1"

    within_margin = bench("run-3", 1, wall_s=2.1)  # 4.8 % slower than run-2: under the 10 % default
    assert not failed(within_margin)

    drifted = bench("run-3", 8, answer="13")  # batch 8 answers differ from run-3's batch 1, and are all wrong
    assert failed(drifted) == {"batch_invariant": "ERROR", "no_metric_drop": "WARN"}
    pass_rate = evaluations(drifted)["no_metric_drop"]
    assert pass_rate.description == "docvqa: pass_rate fell 100.0% (0.5 -> 0)"  # chartqa's was 0 already
    rows = evaluations(drifted)["no_row_drop"]  # vs run-1 at batch 8: "13" is
    # within DocVQA's ANLS threshold of "12", so no row's correctness changed; all three texts did
    assert rows.passed and (rows.metadata["rows_lost"].value, rows.metadata["rows_changed_text"].value) == (0, 3)
    drift = evaluations(drifted)["batch_invariant"]
    assert drift.description == "3 of 3 answers differ from batch size 1"
    assert drift.metadata["mismatches"].value == 3


def test_the_same_answers_twice_change_no_row_and_a_significant_drop_blocks_with_its_rows(bench):
    """10 questions, 7 answered right (doc-1 and the 6 extra "12"s). A rerun that answers alike changes no
    row; one that answers "99" (ANLS 0) loses those 7 and gains none: exact McNemar p = 2 / 2**7 < 0.05."""
    assert bench("run-1", 1, more_docs=6).success
    same = bench("run-2", 1, more_docs=6)
    rows = evaluations(same)["no_row_drop"]
    assert rows.passed and rows.description is None
    assert (rows.metadata["rows_lost"].value, rows.metadata["rows_gained"].value,
            rows.metadata["rows_changed_text"].value) == (0, 0, 0)

    worse = bench("run-3", 1, more_docs=6, answer="99")
    assert not worse.success  # blocking: the report's downstream would not run
    assert failed(worse)["no_row_drop"] == "ERROR"
    rows = evaluations(worse)["no_row_drop"]
    assert rows.description.startswith("docvqa: 7 rows lost, 0 gained (McNemar p = 0.0156), mean score -")
    assert "chartqa" not in rows.description  # its one row changed text but was wrong both times
    assert "| docvqa    | doc-x0      | lost" in rows.metadata["changed_rows"].value
    with duckdb.connect(str(bench.database), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM benchmark_regressions WHERE run_id = 'run-2'").fetchone() == (0,)
        changes = conn.execute("SELECT dataset, change, count(*), max(score_delta) FROM benchmark_regressions "
                               "WHERE run_id = 'run-3' GROUP BY ALL ORDER BY ALL").fetchall()
        previous = conn.execute("SELECT DISTINCT previous_run_id, previous_response, response "
                                "FROM benchmark_regressions WHERE run_id = 'run-3' AND change = 'lost'").fetchall()
    assert [(d, c, n) for d, c, n, _ in changes] == [("chartqa", "text", 1), ("docvqa", "lost", 7),
                                                     ("docvqa", "text", 1)]
    assert dict(((d, c), delta) for d, c, _, delta in changes)[("docvqa", "lost")] < 0
    assert previous == [("run-2", '{"answer": "12"}', '{"answer": "99"}')]


def test_a_library_bump_is_named_and_the_answers_it_changed_are_counted(bench, monkeypatch):
    """A fake transformers bump recorded with run-2, whose stand-in model is perturbed (answers "13", not
    "12"): the report names the bump and the canary counts the changed answers; run-3, same versions and
    answers as run-2, has nothing to report; a bump that changes no answer passes."""
    import assets.benchmark.reports as reports

    real = reports.library_versions()
    assert bench("run-1", 1).success
    monkeypatch.setattr(reports, "library_versions", lambda: {**real, "transformers": "99.0.0"})
    bumped = bench("run-2", 1, answer="13")
    (report,) = bumped.asset_materializations_for_node("benchmark_report")
    assert report.metadata["library_changes"].value == f"transformers {real['transformers']} -> 99.0.0"
    canary = evaluations(bumped)["library_canary"]
    assert (canary.passed, canary.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert canary.description == (f"transformers {real['transformers']} -> 99.0.0: 3 of 3 answers changed "
                                  "(chartqa 1 of 1, docvqa 2 of 2)")
    assert '| docvqa    | doc-1       | text     | {"answer": "12"}' in canary.metadata["changed_rows"].value

    steady = bench("run-3", 1, answer="13")
    assert evaluations(steady)["library_canary"].description == \
        "no library change since the previous run"
    monkeypatch.setattr(reports, "library_versions", lambda: {**real, "transformers": "99.0.1", "peft": "0.0.1"})
    harmless = evaluations(bench("run-4", 1, answer="13"))["library_canary"]
    assert harmless.passed and harmless.description == (
        f"peft {real['peft']} -> 0.0.1; transformers 99.0.0 -> 99.0.1: 0 of 3 answers changed "
        "(chartqa 0 of 1, docvqa 0 of 2)")


def test_checks_launched_alone_read_the_run_of_the_latest_report(bench):
    bench("run-1", 1)
    bench("run-1", 8, answer="13")
    alone = bench.report_checks(8)
    assert set(evaluations(alone)) == {"no_metric_drop", "no_row_drop", "library_canary", "batch_invariant"}
    drift = evaluations(alone)["batch_invariant"]
    assert (drift.metadata["run_id"].value, drift.metadata["compared"].value, drift.passed) == ("run-1", 3, False)


def test_a_prompt_echo_blocks_scoring_and_the_report(bench):
    result = bench("run-1", 4, echo=True)
    assert not result.success
    assert failed(result) == {"no_prompt_echo": "ERROR"}
    echo = evaluations(result)["no_prompt_echo"]
    assert echo.description == "3 responses echo the prompt"
    assert result.asset_materializations_for_node("benchmark_report") == []
    assert not bench.database.exists()  # nothing reached DuckDB


def test_a_negative_latency_fails_its_check_and_the_report_rejects_those_rows(bench):
    result = bench("run-1", 4, latency_ms=-1.0)
    assert failed(result) == {"valid_latencies": "ERROR"}
    assert evaluations(result)["valid_latencies"].metadata["failures"].value == 3
    (report,) = result.asset_materializations_for_node("benchmark_report")
    assert (report.metadata["rows_in"].value, report.metadata["rows_rejected"].value) == (3, 3)
    with duckdb.connect(str(bench.database), read_only=True) as conn:
        reasons = [r[0] for r in conn.execute("SELECT reason FROM rejected_rows WHERE run_id = 'run-1'").fetchall()]
        kept = conn.execute("SELECT count(*) FROM generations WHERE run_id = 'run-1'").fetchone()[0]
    assert len(reasons) == 3 and all("latency_ms is negative" in reason for reason in reasons)
    assert kept == 0


def summary_run_ids(database: Path) -> list[str]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return [run_id for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM benchmark_summary ORDER BY 1")
                .fetchall()]


def test_a_partition_launched_from_the_ui_gets_a_run_id_like_the_cli_and_is_tagged_with_it(bench):
    result = bench(None, 8)
    assert result.success
    record = bench.instance.get_run_record_by_id(result.run_id)
    expected = f"bench-{record.create_timestamp.astimezone(UTC):%Y%m%dT%H%M%SZ}-{result.run_id[:6]}"
    assert re.fullmatch(r"bench-\d{8}T\d{6}Z-[0-9a-f]{6}", expected)  # the form `aerorl bench` gives
    assert record.dagster_run.tags[BENCHMARK_RUN_TAG] == expected
    assert summary_run_ids(bench.database) == [expected]
    assert evaluations(result)["batch_invariant"].metadata["run_id"].value == expected


def test_the_partitions_of_one_ui_backfill_share_one_run_id(bench):
    launched = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    bench.instance.add_backfill(PartitionBackfill("qwertyui", BulkActionStatus.REQUESTED, from_failure=False, tags={},
                                                  backfill_timestamp=launched.timestamp()))
    first, second = (bench(None, size, tags={BACKFILL_TAG: "qwertyui"}) for size in (1, 4))
    assert first.success and second.success
    assert summary_run_ids(bench.database) == ["bench-20260304T050607Z-qwerty"]
    invariance = evaluations(second)["batch_invariant"]  # batch 4 found batch 1 of the same run
    assert (invariance.metadata["compared"].value, invariance.passed) == (3, True)


def test_the_reports_figures_are_png_files_under_reports_plots_named_in_its_metadata(bench):
    (report,) = bench("run-1", 8).asset_materializations_for_node("benchmark_report")
    folder = bench.database.parent / "plots" / "benchmark" / "run-1" / f"{MODEL}__bs8"
    for figure in ("throughput_vs_batch_size", "reward_distribution", "latency_distribution"):
        png = folder / f"{figure}.png"
        assert png.read_bytes().startswith(b"\x89PNG")
        assert report.metadata[f"{figure}_png"].value == str(png)
        assert base64.b64encode(png.read_bytes()).decode() in report.metadata[figure].value


def test_the_reports_floats_are_shown_to_four_significant_digits(bench):
    (report,) = bench("run-1", 8, wall_s=432.0).asset_materializations_for_node("benchmark_report")
    assert report.metadata["samples_per_s"].value == 0.006944  # 3 samples / 432 s = 0.0069444…
    summary = report.metadata["summary"].value
    assert "0.006944 " in summary and "0.0069444" not in summary
