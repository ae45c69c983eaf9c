"""``rl_run`` with ``nproc_per_node = 2``: two torchrun gloo ranks launched through Dagster Pipes on the
embedded tiny model. Rank 0 reports the steps and evaluations and writes the run's rows (once); a
rank that fails fails the step with its own error, without waiting for the collective timeout."""

from __future__ import annotations

import shutil
import time
import uuid

import dagster as dg
import duckdb
import pytest

import assets.training.torchrun as torchrun
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.train_and_record import train_and_record
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_pipeline.definitions import build_definitions
from assets.project import BENCHMARK_CONFIG_PATH, benchmark_config
from assets.training.rl_run import training_config_class
from assets.training.run_parts import model_place, report_place, run_options
from tests.assets.training.run_helpers import rl_run_materialization, run_checkpoints

# Dagster's own Pipes client reads a preview property of its own message reader on every run
pytestmark = pytest.mark.filterwarnings("ignore:Function `PipesMessageReader.expected_writer_count`")

TIMEOUT_S = 120
RUN = {"warmup_steps": 1, "warmup_batch_size": 4, "steps": 2, "prompts_per_step": 2, "group_size": 2,
       "grad_accumulation": 2, "eval_size": 4, "eval_interval": 2, "kl_coef": 0.0, "control": False,
       "swap_check_type": "", "train_limit": 16, "sampled_eval_size": 0, "nproc_per_node": 2,
       "dist_timeout_s": TIMEOUT_S}


def run_job(env, run_name: str, **settings) -> dg.ExecuteInProcessResult:
    job = build_definitions(BENCHMARK_CONFIG_PATH, env.resources).resolve_job_def("training")
    return job.execute_in_process(instance=env.instance, raise_on_error=False, run_config={
        "ops": {"rl_run": {"config": {**RUN, **settings, "run_name": run_name}}}})


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dagster_env_factory):
    env = dagster_env_factory(tmp_path_factory.mktemp("torchrun_job"))
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    result = run_job(env, run_name)
    yield env, result, run_name
    env.instance.dispose()
    shutil.rmtree(run_checkpoints(env, run_name), ignore_errors=True)


@pytest.mark.slow
def test_two_ranks_report_their_steps_and_rank_0_writes_the_rows_once(trained):
    env, result, run_name = trained
    assert result.success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        steps = conn.execute("SELECT step, phase FROM training_steps WHERE run_id = ? ORDER BY step",
                             [run_name]).fetchall()
        evals = conn.execute("SELECT phase, step FROM training_evals WHERE run_id = ? ORDER BY step, phase",
                             [run_name]).fetchall()
        runs = conn.execute("SELECT count(*) FROM training_runs WHERE run_id = ?", [run_name]).fetchone()
    assert steps == [(1, "warmup"), (2, "grpo"), (3, "grpo")]  # one row per step, not one per rank
    assert evals == [("base", 0), ("no_image_prior", 0), ("warmup", 1), ("rl", 2), ("final", 3)]
    assert runs == (1,)
    assert len(list((env.root / "tensorboard" / run_name).glob("events.out.tfevents.*"))) == 1  # one writer
    metadata = rl_run_materialization(result).metadata
    assert metadata["run_id"].value == run_name and metadata["nproc_per_node"].value == 2
    assert metadata["reported_evals"].value == 5
    reported = metadata["reported_steps"].value.splitlines()[2:]  # the markdown table's rows
    assert [tuple(cell.strip() for cell in row.split("|")[1:3]) for row in reported] == [
        ("1", "warmup"), ("2", "grpo"), ("3", "grpo")]
    assert "final" in metadata["evaluations"].value and str(metadata["final_checkpoint"].value).endswith("step-3")


@pytest.mark.slow
def test_sharded_ranks_store_the_state_each_rank_held(trained):
    """``sharding = "fsdp2"`` through Pipes: rank 0 stores the bytes of parameters, gradients and AdamW state a
    rank held, about half of what each replicated rank of the same run held (``rl.runtime.sharding``)."""
    env, _, replicated = trained
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    assert run_job(env, run_name, sharding="fsdp2").success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        held = {name: conn.execute("SELECT state_bytes_per_rank FROM training_runs WHERE run_id = ?",
                                   [name]).fetchone()[0] for name in (replicated, run_name)}
    shutil.rmtree(run_checkpoints(env, run_name), ignore_errors=True)
    assert 0 < held[run_name] <= 0.6 * held[replicated]


@pytest.mark.slow
def test_fsdp2_on_one_rank_shards_through_torchrun(trained):
    """``sharding = "fsdp2"`` with one process per node and one node: still a torchrun rank with a process group,
    so FSDP2 holds the policy (on a GPU: its bf16 mixed precision and ``cpu_offload``); the run's rows as usual."""
    env, _, replicated = trained
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    result = run_job(env, run_name, sharding="fsdp2", nproc_per_node=1)
    shutil.rmtree(run_checkpoints(env, run_name), ignore_errors=True)
    assert result.success
    metadata = rl_run_materialization(result).metadata
    assert "reported_steps" in metadata and metadata["nproc_per_node"].value == 1  # the rank reported through Pipes
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        steps = conn.execute("SELECT step, phase FROM training_steps WHERE run_id = ? ORDER BY step",
                             [run_name]).fetchall()
        held = conn.execute("SELECT state_bytes_per_rank FROM training_runs WHERE run_id = ?", [run_name]).fetchone()
    assert steps == [(1, "warmup"), (2, "grpo"), (3, "grpo")]
    assert held[0] > 0


@pytest.mark.slow
def test_a_rank_that_fails_fails_the_step_with_its_error(dagster_env, monkeypatch):
    monkeypatch.setattr(torchrun, "WORKER_MODULE", "tests.assets.training.crashing_worker")
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    try:
        result = run_job(dagster_env, run_name)
    finally:
        shutil.rmtree(run_checkpoints(dagster_env, run_name), ignore_errors=True)
    assert time.monotonic() - started < TIMEOUT_S  # torchrun stopped rank 0: nobody waited for a collective
    assert not result.success
    failure = result.failure_data_for_node("rl_run")
    assert failure.user_failure_data.description == (
        "training rank 1 of 2 failed: RuntimeError: rank 1 failed on purpose at its first RL step")
    assert "crashing_rl_step" in failure.user_failure_data.metadata["traceback"].value


def test_a_batch_the_ranks_cannot_share_fails_before_any_rank_starts(dagster_env, monkeypatch):
    monkeypatch.setattr(torchrun, "torchrun_command", lambda *args: pytest.fail("torchrun was launched"))
    result = run_job(dagster_env, "never-started", grad_accumulation=3)
    assert not result.success
    assert "ValueError: grad_accumulation (3) must be a multiple of nproc_per_node x nnodes (2)" in (
        result.failure_data_for_node("rl_run").error.cause.message)


def test_another_rank_only_trains_and_writes_nothing(dagster_env, monkeypatch):
    trained = []
    monkeypatch.setattr(TrainingRun, "run", lambda run: trained.append(run))
    bench = benchmark_config(BENCHMARK_CONFIG_PATH)
    config = training_config_class(bench.training)(**RUN, run_name="rank-1")
    assert train_and_record(bench, config.settings(), run_options(config.model_dump()),
                            model_place(dagster_env.resources["model_runtime"]),
                            report_place(dagster_env.resources["duckdb"], dagster_env.resources["model_runtime"]),
                            log=None,
                            dp=DataParallel(rank=1, world_size=2)) is None
    assert len(trained) == 1 and trained[0].dp.rank == 1 and trained[0].run_dir.name == "rank-1"
    assert not dagster_env.duckdb_path.exists() and not (dagster_env.root / "tensorboard").exists()


def test_the_launch_settings_leave_the_run_id_as_it_was():
    TrainingConfig = training_config_class(benchmark_config(BENCHMARK_CONFIG_PATH).training)
    assert TrainingConfig(nproc_per_node=4, dist_timeout_s=60).run_id() == TrainingConfig().run_id()
    assert TrainingConfig(nnodes=3, nproc_per_node=2).run_id() == TrainingConfig().run_id()
    assert TrainingConfig(nproc_per_node=2, sharding="fsdp2", cpu_offload=True,
                          gradient_checkpointing=True).run_id() == TrainingConfig().run_id()


def test_the_torchrun_worker_runs_the_library_not_the_asset_module():
    """A rank calls ``rl.run.train_and_record.train_and_record``; nothing of ``assets.training.rl_run`` is imported."""
    import ast
    import inspect

    from assets.training import torchrun_worker

    tree = ast.parse(inspect.getsource(torchrun_worker))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "assets.training.rl_run" not in imported and "aerorl_ops.rl.run.train_and_record" in imported
