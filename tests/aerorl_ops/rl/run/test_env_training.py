"""Training on a task environment with the embedded tiny model: tiny runs, real outputs."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import duckdb
import pytest
import torch

from aerorl_ops.config.curriculum import parse_curriculum
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.record.recorder import RunRecorder
from aerorl_ops.rl.record.result import TrainingResult
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.policy import ReferenceRuntime, policy_and_reference
from aerorl_ops.rl.step.schedule import ItemSampler, learning_rate_at
from aerorl_ops.rl.step.trainer import NonFiniteTrainingError, RLTrainer
from aerorl_ops.telemetry import TelemetrySample, summarize

SETTINGS = TrainingSettings(group_size=4, max_new_tokens=4, learning_rate=1e-3, quant_bits=8, seed=3,
                            warmup_steps=2, warmup_batch_size=8, steps=2, prompts_per_step=2, eval_interval=1,
                            checkpoint_interval=100, control=True, swap_check_type="colour",
                            curriculum="1: colour @ 1.0; 3: shape @ 0.5")


SAMPLED = EvalSettings(samples=2, k=2, greedy=True, batch_size=4)
"""The sampled evaluations' [eval]: pass@2 of 2 samples at temperature 1, pass@1 at 0.6, greedy."""


def record_all(path, record: TrainingRunRecord, result: TrainingResult) -> None:
    """Every row of ``result`` through a recorder, as a run writes them when they happen."""
    recorder = RunRecorder(partial(duckdb.connect, str(path)), record.run_id)
    recorder.start(record, fresh=True)
    for stats in result.steps:
        recorder.step(stats)
    for evaluation in result.evals:
        recorder.evaluation(evaluation)
    for sampled in result.sampled:
        recorder.sampled(sampled)
    recorder.finish(record)


@pytest.fixture(scope="module")
def envs():
    torch.set_num_threads(1)
    return make_env("easy_vqa", split="train", limit=64, seed=1), make_env("easy_vqa", split="test", limit=16, seed=0)


def test_a_tiny_run_writes_accuracy_per_type_and_the_prior(tiny_model_dir, envs, tmp_path):
    train_env, eval_env = envs
    result = run_training(str(tiny_model_dir), tmp_path / "run", SETTINGS, train_env, eval_env, range(16),
                          device="cpu", resume=False)
    assert [(e.phase, e.step) for e in result.evals][:6] == [
        ("no_image_prior", 0), ("base", 0), ("warmup", 1), ("warmup", 2), ("rl", 3), ("final", 4)]
    assert [e.phase for e in result.evals][6:] == ["control"] and result.evals[6].step > 2  # after >= 1 step
    assert [s.phase for s in result.steps] == ["warmup", "warmup", "grpo", "grpo"]
    # stage 0 covers step 0, stage 1 steps 1-2, then the natural mix; episodes: 8 items per warm-up step,
    # then 2 prompts x 4 replies per RL step
    assert [s.curriculum_stage for s in result.steps] == [0, 1, 1, None]
    assert [s.episodes_seen for s in result.steps] == [8, 16, 24, 32]
    assert result.reference_loaded and result.swap is not None and result.swap.question_type == "colour"
    rl = result.steps[-1]
    assert rl.kl is not None and rl.kl >= 0 and rl.accuracy is not None and 0 <= rl.response_clip_ratio <= 1
    when = datetime(2026, 1, 1, tzinfo=UTC)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1, interval_s=0.1)
    record = TrainingRunRecord.of("r1", str(tiny_model_dir), SETTINGS.resolve(), result, when, when, telemetry)
    record_all(tmp_path / "t.duckdb", record, result)
    with duckdb.connect(str(tmp_path / "t.duckdb")) as conn:
        evals = conn.execute("SELECT phase, accuracy, n FROM training_evals ORDER BY step, phase").fetchall()
        types = conn.execute("SELECT phase, question_type, accuracy, n FROM training_eval_types "
                             "WHERE phase = 'no_image_prior' ORDER BY question_type").fetchall()
        total = conn.execute("SELECT sum(n) FROM training_eval_types WHERE phase = 'final'").fetchone()[0]
        swap = conn.execute("SELECT swap_question_type, swap_changed FROM training_runs").fetchone()
    assert all(n == 16 for _, _, n in evals) and len(evals) == 7
    prior = result.eval_of("no_image_prior").report
    assert types == [("no_image_prior", kind, value.accuracy, value.n) for kind, value in prior.by_type.items()]
    assert total == 16 and swap[0] == "colour"


def test_kl_zero_loads_and_runs_no_reference(tiny_model_dir, envs, tmp_path, monkeypatch):
    def refuse(self):
        raise AssertionError("the reference was loaded although kl_coef = 0")

    monkeypatch.setattr(ReferenceRuntime, "loaded", property(refuse))
    settings = TrainingSettings(group_size=2, max_new_tokens=4, kl_coef=0.0, seed=0, warmup_steps=1,
                                warmup_batch_size=4, steps=1, prompts_per_step=2, control=False, swap_check_type="")
    result = run_training(str(tiny_model_dir), tmp_path / "run", settings, *envs, range(4), device="cpu", resume=False)
    assert not result.reference_loaded and result.steps[-1].kl is None


def test_same_settings_give_the_same_step_losses(tiny_model_dir, envs, tmp_path):
    settings = TrainingSettings(group_size=2, max_new_tokens=4, kl_coef=0.0, seed=5, warmup_steps=2,
                                warmup_batch_size=4, steps=2, prompts_per_step=2, control=False, swap_check_type="",
                                eval_interval=10)
    runs = [run_training(str(tiny_model_dir), tmp_path / f"run{i}", settings, *envs, range(4), device="cpu",
                         resume=False) for i in range(2)]
    first, second = ([s.loss for s in run.steps] for run in runs)
    assert len(first) == 4 and first == second


def test_grad_accumulation_equals_one_big_batch(tiny_model_dir, envs):
    train_env, _ = envs
    indices = ItemSampler(train_env, 0).batch(0, 6)
    grads = []
    for accumulation in (1, 3):
        config = TrainingSettings(grad_accumulation=accumulation, kl_coef=0.0, group_size=2)
        policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
        trainer = RLTrainer(config.resolve(), policy)
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.accumulate_supervised(train_env, indices)
        grads.append({n: p.grad.clone() for n, p in policy.loaded.model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    assert max(float((grads[0][n] - grads[1][n]).abs().max()) for n in grads[0]) < 1e-6


def test_nonfinite_steps_are_skipped_then_the_run_stops(tiny_model_dir, envs):
    train_env, _ = envs
    config = TrainingSettings(kl_coef=0.0, group_size=2, max_nonfinite_steps=2)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy)
    head = policy.loaded.model.get_output_embeddings().weight
    saved = head.detach().clone()
    with torch.no_grad():
        head[0, 0] = float("nan")
    first = trainer.supervised_step(train_env, [0, 1])
    assert first.skipped and trainer.state.skipped_steps == 1
    with torch.no_grad():
        head.copy_(saved)
    assert not trainer.supervised_step(train_env, [0, 1]).skipped  # a finite step resets the count
    with torch.no_grad():
        head[0, 0] = float("inf")
    assert trainer.supervised_step(train_env, [0, 1]).skipped
    with pytest.raises(NonFiniteTrainingError, match="2 steps in a row"):
        trainer.supervised_step(train_env, [0, 1])
    assert trainer.state.skipped_steps == 3


def test_learning_rate_schedules_by_hand():
    assert learning_rate_at(7, 1e-3, 10, "constant", 3) == 1e-3
    # cosine over 10 steps after 2 warm-up steps: warm-up 1/2, 2/2; then (1 + cos(pi * k / 7)) / 2
    assert learning_rate_at(0, 1.0, 10, "cosine", 2) == 0.5
    assert learning_rate_at(1, 1.0, 10, "cosine", 2) == 1.0
    assert learning_rate_at(2, 1.0, 10, "cosine", 2) == 1.0
    assert learning_rate_at(9, 1.0, 10, "cosine", 2) == pytest.approx(0.0, abs=1e-12)
    assert learning_rate_at(5, 2.0, 10, "cosine", 2) == pytest.approx(2.0 * 0.5 * (1 + 0.2225209339563144))
    with pytest.raises(ValueError, match="linear"):
        learning_rate_at(0, 1.0, 10, "linear")


def test_curriculum_batches_hold_each_stage_share(envs):
    train_env, _ = envs
    stages = parse_curriculum("2: colour,shape @ 0.75; 4: colour @ 1.0")
    sampler = ItemSampler(train_env, 0, stages)
    first, second, natural = sampler.batch(0, 8), sampler.batch(2, 8), sampler.batch(4, 8)
    assert sum(train_env.question_type(i) in ("colour", "shape") for i in first[:6]) == 6
    assert all(train_env.question_type(i) not in ("colour", "shape") for i in first[6:])
    assert all(train_env.question_type(i) == "colour" for i in second)
    assert [sampler.stage(s) for s in range(5)] == [0, 0, 1, 1, None]
    assert natural == ItemSampler(train_env, 0).batch(4, 8)  # after the last stage: the natural mix
    assert first == ItemSampler(train_env, 0, stages).batch(0, 8)  # a function of (seed, step) alone


def test_curriculum_stage_naming_a_missing_type_is_an_error(envs):
    with pytest.raises(ValueError, match=r"stage 1 \(until step 5\).*'diagram'.*it has"):
        ItemSampler(envs[0], 0, parse_curriculum("5: diagram"))


def test_cosine_floor_and_control_rate():
    assert learning_rate_at(9, 1.0, 10, "cosine", 2, min_ratio=0.1) == pytest.approx(0.1)
    assert learning_rate_at(2, 1.0, 10, "cosine", 2, min_ratio=0.1) == pytest.approx(1.0)
    assert learning_rate_at(5, 2.0, 10, "cosine", 2, min_ratio=0.5) == pytest.approx(
        2.0 * (0.5 + 0.5 * 0.5 * (1 + 0.2225209339563144)))


def test_sampled_evaluations_during_training_land_in_the_eval_tables(tiny_model_dir, envs, tmp_path):
    """MAYE's evaluation beside each held-out eval of the warm-up and RL phases (on the validation env)
    and at the end (validation and held-out), written as eval_* rows tied to the run and step."""
    train_env, eval_env = envs
    validation = make_env("easy_vqa", split="validation", limit=8, seed=0)
    settings = TrainingSettings(group_size=2, max_new_tokens=4, kl_coef=0.0, seed=1, warmup_steps=2,
                                warmup_batch_size=4, steps=2, prompts_per_step=2, eval_interval=2, control=False,
                                swap_check_type="", sampled_eval_size=3)
    result = run_training(str(tiny_model_dir), tmp_path / "run", settings, train_env, eval_env, range(5),
                          device="cpu", resume=False, validation_env=validation, evaluation=SAMPLED)
    assert [(s.step, s.phase, s.split) for s in result.sampled] == [
        (2, "warmup", "validation"), (4, "final", "validation"), (4, "final", "test")]
    assert all(s.outcome.indices == (0, 1, 2) for s in result.sampled)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    telemetry = summarize([TelemetrySample(0.1, rss_mb=700.0, cpu_pct=90.0, gpus=())], duration_s=0.1, interval_s=0.1)
    record = TrainingRunRecord.of("r2", str(tiny_model_dir), settings.resolve(), result, when, when, telemetry)
    record_all(tmp_path / "t.duckdb", record, result)
    with duckdb.connect(str(tmp_path / "t.duckdb")) as conn:
        runs = conn.execute("SELECT eval_id, training_run_id, step, split, questions FROM eval_runs "
                            "ORDER BY step, split DESC").fetchall()
        samples = conn.execute("SELECT setting, count(*) FROM eval_samples GROUP BY setting ORDER BY 1").fetchall()
        metric = conn.execute("SELECT accuracy FROM eval_metrics WHERE eval_id = 'r2@4:test' AND "
                              "setting = 'greedy_pass1' AND question_type = 'all'").fetchone()[0]
    assert runs == [("r2@2:validation", "r2", 2, "validation", 3), ("r2@4:validation", "r2", 4, "validation", 3),
                    ("r2@4:test", "r2", 4, "test", 3)]
    assert samples == [("greedy_pass1", 3 * 3), ("high_temp_pass2", 3 * 3 * 2),
                       ("medium_temp_pass1", 3 * 3)]  # 3 evals x 3 questions x n
    final_test = result.sampled[-1].outcome
    greedy = [s.correct for s in final_test.samples if s.setting == "greedy_pass1"]
    assert metric == pytest.approx(sum(greedy) / 3)


def test_sampled_evaluations_change_no_training_step(tiny_model_dir, envs, tmp_path):
    runs = [run_training(str(tiny_model_dir), tmp_path / f"run{i}", TrainingSettings(
                group_size=2, max_new_tokens=4, kl_coef=0.0, seed=5, warmup_steps=2, warmup_batch_size=4, steps=2,
                prompts_per_step=2, control=False, swap_check_type="", eval_interval=1, sampled_eval_size=size),
                         *envs, range(4), device="cpu", resume=False, evaluation=SAMPLED)
            for i, size in enumerate((0, 3))]
    assert [len(run.sampled) for run in runs] == [0, 3 + 2]  # steps 1-3, then the end twice (validation, held-out)
    assert [s.loss for s in runs[0].steps] == [s.loss for s in runs[1].steps]
    assert [e.accuracy for e in runs[0].evals] == [e.accuracy for e in runs[1].evals]
