"""One torchrun rank of a multi-process ``rl_run`` (launched by ``assets.training.torchrun``).

Every rank reads the run from the Pipes context's extras and joins the process group
(``rl.runtime.distributed.from_environment``: gloo on CPU, NCCL on ``cuda:LOCAL_RANK``). Rank 0 opens the
Pipes message channel and runs the library's ``rl.run.train_and_record.train_and_record`` as the in-process
step does (DuckDB, TensorBoard, checkpoints, evaluations), logging through Pipes, reporting each step
and evaluation as a custom message and its metadata as the asset's materialization; the other ranks
only train.
A rank that fails records its error before it exits (``rank_failures``): into the failures folder on
this machine, or as a line of its pod's termination log on Kubernetes (``k8s_nodes``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from aerorl_ops.quiet import quiet_known_logs

quiet_known_logs()  # before the imports below load bitsandbytes, which logs a known line as it loads

import dagster as dg  # noqa: E402
from dagster_duckdb import DuckDBResource  # noqa: E402
from dagster_pipes import PipesDefaultContextLoader, PipesEnvVarParamsLoader, open_dagster_pipes  # noqa: E402

from aerorl_ops.config.training import TrainingSettings  # noqa: E402
from aerorl_ops.rl.run.train_and_record import RunOptions, train_and_record  # noqa: E402
from aerorl_ops.rl.runtime.distributed import from_environment  # noqa: E402
from assets.project import benchmark_config  # noqa: E402
from assets.resources import ModelRuntime  # noqa: E402
from assets.training.rank_failures import record_failure  # noqa: E402
from assets.training.run_parts import (  # noqa: E402
    MessageReporter,
    model_place,
    report_place,
    rows_of_extras,
    run_metadata,
)

PIPES_METADATA_TYPES = {dg.MarkdownMetadataValue: "md", dg.PathMetadataValue: "path", dg.TextMetadataValue: "text",
                        dg.FloatMetadataValue: "float", dg.IntMetadataValue: "int", dg.BoolMetadataValue: "bool"}


def pipes_extras() -> dict[str, Any]:
    """The extras of the Pipes context, read without opening its message channel (any rank)."""
    params = PipesEnvVarParamsLoader().load_context_params()
    with PipesDefaultContextLoader().load_context(params) as data:
        return dict(data["extras"])


def pipes_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata as Pipes sends it: ``{raw_value, type}`` for a ``MetadataValue`` or None, else the value."""
    sent: dict[str, Any] = {}
    for name, value in metadata.items():
        if isinstance(value, dg.MetadataValue):
            sent[name] = {"raw_value": value.value, "type": PIPES_METADATA_TYPES[type(value)]}
        elif value is None:
            sent[name] = {"raw_value": None, "type": "null"}
        else:
            sent[name] = value
    return sent


def run_rank(extras: dict[str, Any]) -> None:
    bench = benchmark_config(Path(extras["config_path"]))
    settings, options = TrainingSettings(**extras["settings"]), RunOptions(**extras["options"])
    runtime = ModelRuntime(**extras["model_runtime"])
    dp = from_environment(settings.dist_timeout_s, runtime.torch_device())
    if dp.device.type == "cuda":  # one GPU per rank
        runtime = ModelRuntime(**{**extras["model_runtime"], "device": str(dp.device)})
    duckdb = DuckDBResource(database=extras["database"])
    place, report = model_place(runtime), report_place(duckdb, runtime)
    cached = rows_of_extras(extras["cached_rows"])  # every rank reads the run's cached rows itself
    try:
        if not dp.is_main:
            train_and_record(bench, settings, options, place, report, logging.getLogger(__name__), dp, cached=cached)
            return
        with open_dagster_pipes() as pipes:
            run = train_and_record(bench, settings, options, place, report, pipes.log, dp, MessageReporter(
                lambda kind, payload: pipes.report_custom_message({"kind": kind, **payload})), cached)
            pipes.report_asset_materialization(metadata=pipes_metadata(run_metadata(run, duckdb)))
    finally:
        dp.close()


def main() -> None:
    extras = pipes_extras()
    try:
        run_rank(extras)
    except Exception as error:
        record_failure(extras, error)
        raise


if __name__ == "__main__":
    main()
