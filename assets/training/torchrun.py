"""``rl_run`` on several torchrun ranks, launched through Dagster Pipes.

With ``nnodes = 1`` the step runs, as a ``PipesSubprocessClient`` subprocess,

    python -m torch.distributed.run --standalone --nproc-per-node N -m assets.training.torchrun_worker

With ``nnodes`` > 1 it runs one torchrun agent per node: on this machine (``[training_launch] launcher =
"local"``) through ``assets.training.local_nodes``, which starts the agents at a c10d rendezvous on
localhost, again as one Pipes subprocess; on Kubernetes (``launcher = "k8s"``) one pod per node
(``assets.training.k8s_nodes``).

The Pipes context's extras carry what every rank needs: the config file, the run's settings and run
fields (``RunOptions``), the model runtime, the report database and where a failing rank writes its
error. Rank 0 streams its log lines, one custom message per step and per evaluation, and the
materialization (the in-process path's metadata) back; the step adds a table of the reported steps.

A rank that fails writes its error before it exits (``rank_failures``); torchrun then stops the other
ranks of its node, the launcher stops the other nodes (a rank stuck in a collective gives up after
``dist_timeout_s``), and the step fails with one line naming the first failing rank, its node and its
error.
"""

from __future__ import annotations

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
from assets.training.rank_failures import failure_line, first_failure

WORKER_MODULE = "assets.training.torchrun_worker"
LOCAL_NODES_MODULE = "assets.training.local_nodes"
STEP_COLUMNS = ("step", "phase", "loss", "reward_mean", "accuracy", "kl", "grad_norm", "step_s")
"""The reported step statistics the materialization's ``reported_steps`` table shows."""


def torchrun_command(nproc_per_node: int, module: str) -> list[str]:
    """torchrun, on this machine only (a free rendezvous port), running ``module`` on every rank."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            str(nproc_per_node), "-m", module]


def local_nodes_command(nnodes: int, nproc_per_node: int, rdzv_id: str, failures: Path, module: str) -> list[str]:
    """``nnodes`` torchrun agents on this machine (``assets.training.local_nodes``), running ``module`` on
    ``nproc_per_node`` ranks each; a failed agent is recorded in ``failures``."""
    return [sys.executable, "-m", LOCAL_NODES_MODULE, "--nnodes", str(nnodes), "--nproc-per-node",
            str(nproc_per_node), "--rdzv-id", rdzv_id, "--failures", str(failures), "-m", module]


def rank_failure(failure: dict[str, Any], settings: TrainingSettings) -> dg.Failure:
    """The step's failure: one line naming the rank (or node) and its error, with its traceback."""
    return dg.Failure(description=failure_line(failure, settings.world_size, settings.nnodes),
                      metadata={"traceback": dg.MetadataValue.text(failure.get("traceback", ""))})


def launch_here(context: dg.AssetExecutionContext, settings: TrainingSettings,
                extras: dict[str, Any]) -> dg.PipesClientCompletedInvocation:
    """Every rank on this machine: one torchrun agent, or one per node (``nnodes`` > 1), as one Pipes
    subprocess whose CPUs are split between all the ranks."""
    with tempfile.TemporaryDirectory(prefix="aerorl-ranks-") as failures:
        if settings.nnodes == 1:
            command = torchrun_command(settings.nproc_per_node, WORKER_MODULE)
        else:
            command = local_nodes_command(settings.nnodes, settings.nproc_per_node, context.run.run_id, Path(failures),
                                          WORKER_MODULE)
        try:
            return dg.PipesSubprocessClient(cwd=str(PROJECT_ROOT)).run(
                command=command, context=context, extras={**extras, "failures": failures, "failure_log": ""},
                env=threads_per_process(settings.world_size))  # the CPUs split between the ranks, not all of them each
        except Exception as error:  # the client's (private) DagsterPipesExecutionError: torchrun failed
            failure = first_failure(Path(failures))
            if failure is None:
                raise
            raise rank_failure(failure, settings) from error


def launch_ranks(context: dg.AssetExecutionContext, bench: BenchmarkConfig, settings: TrainingSettings,
                 options: RunOptions, model_runtime: ModelRuntime, duckdb: DuckDBResource,
                 cached_rows: dict[str, Any]) -> dg.MaterializeResult:
    """Run ``settings`` (with ``rl_run``'s run fields ``options``) on ``settings.world_size`` ranks, where
    ``bench.training_launch`` says, each reading the cached rows ``cached_rows`` points at
    (``run_parts.rows_extras``); the materialization."""
    check_data_parallel(settings.world_size, settings.grad_accumulation, settings.ppo_mini_batches,
                        settings.prompts_per_step * settings.group_size,
                        settings.warmup_batch_size if settings.warmup_steps else 0)
    extras = {"config_path": str(bench.path), "settings": asdict(settings), "options": asdict(options),
              "model_runtime": {name: getattr(model_runtime, name) for name in type(model_runtime).model_fields},
              "database": duckdb.database, "cached_rows": cached_rows}
    if bench.training_launch.launcher == "k8s":
        from assets.training.k8s_nodes import NodePods, launch_on_kubernetes

        pods = NodePods.of(context.run.run_id, settings, bench.training_launch, str(PROJECT_ROOT), WORKER_MODULE)
        invocation = launch_on_kubernetes(context, pods, extras)
    else:
        invocation = launch_here(context, settings, extras)
    messages = invocation.get_custom_messages()
    steps = pd.DataFrame([[m.get(name) for name in STEP_COLUMNS] for m in messages if m["kind"] == "step"],
                         columns=list(STEP_COLUMNS), dtype=object)  # object: an unset statistic shows empty
    materialization = invocation.get_materialize_result()
    return dg.MaterializeResult(metadata={
        **materialization.metadata,
        "nproc_per_node": settings.nproc_per_node,
        "nnodes": settings.nnodes,
        "reported_steps": markdown_preview(steps, rows=len(steps) or 1),
        "reported_evals": sum(m["kind"] == "eval" for m in messages),
    })
