"""The training job end to end through Dagster on the embedded default (a tiny run): the training
tables, the sampled (MAYE) evaluations in the eval tables, TensorBoard event files, the figures;
and where vLLM rollouts take their engine settings from."""

from __future__ import annotations

import shutil
import uuid

import duckdb
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aerorl_ops.config.benchmark import parse_benchmark_config
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.rl.run.inputs import rollout_engine_of
from aerorl_pipeline.definitions import build_definitions
from assets.project import BENCHMARK_CONFIG_PATH
from tests.assets.training.run_helpers import rl_run_materialization, run_checkpoints

RUN = {"warmup_steps": 2, "warmup_batch_size": 4, "steps": 1, "prompts_per_step": 2, "group_size": 2,
       "eval_size": 6, "eval_interval": 2, "kl_coef": 0.0, "control": False, "swap_check_type": "",
       "train_limit": 32, "sampled_eval_size": 2}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dagster_env_factory):
    env = dagster_env_factory(tmp_path_factory.mktemp("training_job"))
    run_name = f"test-{uuid.uuid4().hex[:8]}"
    job = build_definitions(BENCHMARK_CONFIG_PATH, env.resources).resolve_job_def("training")
    result = job.execute_in_process(instance=env.instance, raise_on_error=False, run_config={
        "ops": {"rl_run": {"config": {**RUN, "run_name": run_name}}}})
    yield env, result, run_name
    env.instance.dispose()
    shutil.rmtree(run_checkpoints(env, run_name), ignore_errors=True)


def test_the_training_job_writes_its_tables_and_sampled_evals(trained):
    env, result, run_name = trained
    assert result.success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        phases = conn.execute("SELECT phase, step, n FROM training_evals WHERE run_id = ? ORDER BY step, phase",
                              [run_name]).fetchall()
        steps = conn.execute("SELECT step, phase, episodes_seen FROM training_steps WHERE run_id = ? ORDER BY step",
                             [run_name]).fetchall()
        sampled = conn.execute("SELECT eval_id, step, split, questions FROM eval_runs WHERE training_run_id = ? "
                               "ORDER BY step, split DESC", [run_name]).fetchall()
    assert phases == [("base", 0, 6), ("no_image_prior", 0, 6), ("warmup", 2, 6), ("final", 3, 6)]
    assert steps == [(1, "warmup", 4), (2, "warmup", 8), (3, "grpo", 12)]  # 4 items per step, then 2 x 2 replies
    assert sampled == [(f"{run_name}@2:validation", 2, "validation", 2), (f"{run_name}@3:validation", 3,
                       "validation", 2), (f"{run_name}@3:test", 3, "test", 2)]


def test_the_run_logs_tensorboard_scalars_and_attaches_figures(trained):
    env, result, run_name = trained
    folder = env.root / "tensorboard" / run_name
    events = EventAccumulator(str(folder))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3]
    assert [e.step for e in events.Scalars("held_out/accuracy")] == [0, 2, 3]  # base, warm-up end, final
    # the sampled evaluations: at the warm-up eval (validation) and at the end (validation, then test)
    assert [e.step for e in events.Scalars("eval/high_temp_pass8/accuracy")] == [2, 3, 3]
    materialization = rl_run_materialization(result)
    assert any("accuracy" in key for key in materialization.metadata)


def test_rerunning_the_finished_run_trains_nothing_and_reports_the_stored_figures(trained):
    env, first, run_name = trained
    tables = ("training_runs", "training_steps", "training_evals", "training_eval_types", "eval_runs")

    def stored() -> dict[str, list[tuple]]:
        with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
            return {table: conn.execute(f"SELECT * FROM {table} WHERE "
                                        f"{'training_run_id' if table == 'eval_runs' else 'run_id'} = ? ORDER BY ALL",
                                        [run_name]).fetchall() for table in tables}

    before = stored()
    events = sorted((env.root / "tensorboard" / run_name).iterdir())
    checkpoints = sorted((p.name, p.stat().st_mtime_ns) for p in (run_checkpoints(env, run_name)).iterdir())
    job = build_definitions(BENCHMARK_CONFIG_PATH, env.resources).resolve_job_def("training")
    again = job.execute_in_process(instance=env.instance, raise_on_error=False, run_config={
        "ops": {"rl_run": {"config": {**RUN, "run_name": run_name}}}})
    assert again.success
    assert stored() == before and len(before["training_steps"]) == 3
    assert sorted((env.root / "tensorboard" / run_name).iterdir()) == events  # no new event file: no training
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (run_checkpoints(env, run_name)).iterdir()) == (
        checkpoints)
    messages = [record.user_message for record in env.instance.all_logs(again.run_id)
                if "nothing to train" in record.user_message]
    assert len(messages) == 1 and messages[0].startswith(f"run {run_name} finished at ")
    was, now = (rl_run_materialization(run).metadata for run in (first, again))
    for name in ("warmup_accuracy", "final_accuracy", "evaluations", "final_checkpoint", "resumed_from_step",
                 "rejected_rows"):
        assert now[name] == was[name], name
    assert (was["resumed_from_step"].value, was["rejected_rows"].value) == (0, 0)
    shown = [row.split("|")[1:3] for row in was["evaluations"].value.splitlines()[2:]]  # the table's rows
    assert [(step.strip(), phase.strip()) for step, phase in shown] == [
        ("0", "no_image_prior"), ("0", "base"), ("2", "warmup"), ("3", "final")]


def test_vllm_rollouts_take_the_engine_settings_of_a_vllm_base_model_entry():
    bench = parse_benchmark_config({"benchmark": {"batch_sizes": [1]}, "models": {
        "served": {"source": "embedded:tiny-qwen2-vl", "backend": "vllm", "gpu_memory_utilization": 0.3},
        "plain": {"source": "embedded:tiny-qwen2-vl"}}}, path="bench.toml")
    assert rollout_engine_of("served", bench) == GenerationBackend("vllm", gpu_memory_utilization=0.3)
    assert rollout_engine_of("plain", bench) is None  # vLLM's defaults
    assert rollout_engine_of("/some/checkpoint", bench) is None


def test_the_rl_run_asset_is_a_thin_wrapper_of_the_library():
    """The program (environments, base model, records, reporters) lives in ``aerorl_ops.rl``: the asset
    function itself stays within 40 lines."""
    import inspect

    from assets.project import BENCHMARK_CONFIG_PATH, benchmark_config
    from assets.training.rl_run import build_rl_run

    body = inspect.getsource(build_rl_run(benchmark_config(BENCHMARK_CONFIG_PATH)).op.compute_fn.decorated_fn)
    assert "def rl_run(" in body.splitlines()[1] and len(body.splitlines()) <= 40
    assert "train_and_record(" in body
