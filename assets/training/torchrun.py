"""``rl_run`` on ``nproc_per_node`` torchrun ranks, launched through Dagster Pipes.

The step runs, as a ``PipesSubprocessClient`` subprocess,

    python -m torch.distributed.run --standalone --nproc-per-node N -m assets.training.torchrun_worker

The Pipes context's extras carry what every rank needs: the config file, the run's settings and run
fields (``RunOptions``), the
model runtime, the report database and a folder for failures. Rank 0 streams its log lines, one
custom message per step and per evaluation, and the materialization (the in-process path's
metadata) back; the step adds a table of the reported steps.

A rank that fails writes its error into the failures folder before it exits; torchrun then stops
the other ranks (a rank stuck in a collective gives up after ``dist_timeout_s``), and the step
fails with the first failing rank's error.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.cpu_threads import threads_per_process
from aerorl_ops.rl.run.train_and_record import RunOptions
from aerorl_ops.rl.runtime.distributed import check_data_parallel
from assets.metadata import markdown_preview
from assets.project import PROJECT_ROOT
from assets.resources import ModelRuntime

WORKER_MODULE = "assets.training.torchrun_worker"
STEP_COLUMNS = ("step", "phase", "loss", "reward_mean", "accuracy", "kl", "grad_norm", "step_s")
"""The reported step statistics the materialization's ``reported_steps`` table shows."""


def torchrun_command(nproc_per_node: int, module: str) -> list[str]:
    """torchrun, on this machine only (a free rendezvous port), running ``module`` on every rank."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            str(nproc_per_node), "-m", module]


def failure_path(folder: Path, rank: int) -> Path:
    return Path(folder) / f"rank-{rank}.json"


def first_failure(folder: Path) -> dict[str, Any] | None:
    """The earliest error a rank wrote into ``folder`` (the root cause: the ranks that fail because a
    peer left fail later), or None."""
    failures = [json.loads(path.read_text()) for path in sorted(Path(folder).glob("rank-*.json"))]
    return min(failures, key=lambda failure: failure["time"]) if failures else None


def launch_ranks(context: dg.AssetExecutionContext, bench: BenchmarkConfig, settings: TrainingSettings,
                 options: RunOptions, model_runtime: ModelRuntime, duckdb: DuckDBResource) -> dg.MaterializeResult:
    """Run ``settings`` (with ``rl_run``'s run fields ``options``) on ``settings.nproc_per_node`` ranks;
    the materialization."""
    ranks = settings.nproc_per_node
    check_data_parallel(ranks, settings.grad_accumulation, settings.ppo_mini_batches,
                        settings.prompts_per_step * settings.group_size,
                        settings.warmup_batch_size if settings.warmup_steps else 0)
    with tempfile.TemporaryDirectory(prefix="aerorl-ranks-") as failures:
        extras = {"config_path": str(bench.path), "settings": asdict(settings), "options": asdict(options),
                  "model_runtime": {name: getattr(model_runtime, name) for name in type(model_runtime).model_fields},
                  "database": duckdb.database, "failures": failures}
        try:
            invocation = dg.PipesSubprocessClient(cwd=str(PROJECT_ROOT)).run(
                command=torchrun_command(ranks, WORKER_MODULE), context=context, extras=extras,
                env=threads_per_process(ranks))  # the CPUs split between the ranks, not all of them each
        except Exception as error:  # the client's (private) DagsterPipesExecutionError: torchrun failed
            failure = first_failure(Path(failures))
            if failure is None:
                raise
            raise dg.Failure(description=f"training rank {failure['rank']} of {ranks} failed: {failure['error']}",
                             metadata={"traceback": dg.MetadataValue.text(failure["traceback"])}) from error
    messages = invocation.get_custom_messages()
    steps = pd.DataFrame([[m.get(name) for name in STEP_COLUMNS] for m in messages if m["kind"] == "step"],
                         columns=list(STEP_COLUMNS), dtype=object)  # object: an unset statistic shows empty
    materialization = invocation.get_materialize_result()
    return dg.MaterializeResult(metadata={
        **materialization.metadata,
        "nproc_per_node": ranks,
        "reported_steps": markdown_preview(steps, rows=len(steps) or 1),
        "reported_evals": sum(m["kind"] == "eval" for m in messages),
    })
