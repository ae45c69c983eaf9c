"""``checkpoint_eval``: a training run's checkpoint against the base model it was trained from.

One partition per checkpoint (``<run_id>@<step>``, the ``checkpoints`` asset's partitions), so the asset
graph shows the lineage training rows -> rl_run -> checkpoints -> checkpoint_eval partition by partition,
with the questions' ``evaluation/eval_rows`` (``assets.run_rows``) upstream too. The evaluation is
``eval_run``'s, at the config file's ``[eval]`` settings with ``model`` = the checkpoint and ``baseline`` =
its base model; its eval id is ``<run_id>@<step>/<first 12 of the content hash>``, and a
``checkpoint_evals`` row links checkpoint and eval (with the Dagster run id) in the same transaction as
the eval's rows. The ``checkpoint_evaluations`` sensor (``aerorl_pipeline.sensors``) launches it for new
checkpoints.
"""

from dataclasses import replace
from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.models.checkpoint_refs import CheckpointRef
from aerorl_ops.storage.checkpoint_schema import CHECKPOINT_EVALS, CHECKPOINT_TABLES, CheckpointEvalRow
from aerorl_ops.storage.duckdb_store import PartitionWrite, ensure_tables
from assets.checkpoints import CHECKPOINT_PARTITIONS, CHECKPOINTS_ASSET
from assets.evaluation.eval_run import run_evaluation
from assets.io_managers import ParquetTableIOManager
from assets.resources import ModelRuntime
from assets.run_rows import EVAL_ROWS_KEY, eval_rows

CHECKPOINT_EVAL_ASSET = "checkpoint_eval"


def build_checkpoint_eval(bench: BenchmarkConfig) -> dg.AssetsDefinition:
    """The ``checkpoint_eval`` asset, at ``bench``'s ``[eval]`` settings."""

    rows = eval_rows(bench)  # the questions' rows asset, as eval_run's

    @dg.asset(name=CHECKPOINT_EVAL_ASSET, partitions_def=CHECKPOINT_PARTITIONS,
              deps=[CHECKPOINTS_ASSET, *([rows.key] if rows else [])], group_name="evaluation",
              kinds={"pytorch", "duckdb"})
    def checkpoint_eval(context: dg.AssetExecutionContext, model_runtime: ModelRuntime, duckdb: DuckDBResource,
                        io_manager: dg.ResourceParam[ParquetTableIOManager]) -> dg.MaterializeResult:
        """This partition's checkpoint against its base model at the [eval] settings; lineage in checkpoint_evals."""
        key = context.partition_key
        ref = CheckpointRef.parse(key)
        if ref is None or ref.step is None:
            raise dg.Failure(f"checkpoint_eval partition {key!r} is not a checkpoint <run_id>@<step>")
        with duckdb.get_connection() as conn:
            ensure_tables(conn, CHECKPOINT_TABLES)
            found = conn.execute("SELECT base_model, content_sha256 FROM checkpoints WHERE run_id = ? AND step = ?",
                                 [ref.run_id, ref.step]).fetchone()
        if found is None:
            raise dg.Failure(f"checkpoint {key} has no row in the checkpoints table of {duckdb.database}: "
                             "materialize rl_run for its run first")
        base_model, content_sha256 = found
        eval_id = f"{key}/{content_sha256[:12]}"
        lineage = PartitionWrite(CHECKPOINT_EVALS, {"run_id": ref.run_id, "step": ref.step, "eval_id": eval_id},
                                 CHECKPOINT_EVALS.rows([CheckpointEvalRow(
                                     run_id=ref.run_id, step=ref.step, eval_id=eval_id, checkpoint=key,
                                     content_sha256=content_sha256, base_model=base_model,
                                     dagster_run_id=context.run.run_id, evaluated_at=datetime.now(UTC))]))
        result = run_evaluation(context, bench, replace(bench.eval, model=key, baseline=base_model), eval_id,
                                model_runtime, duckdb, [lineage], io_manager.stored_table(EVAL_ROWS_KEY))
        return dg.MaterializeResult(metadata={**result.metadata, "checkpoint": key,
                                              "content_sha256": content_sha256})

    return checkpoint_eval
