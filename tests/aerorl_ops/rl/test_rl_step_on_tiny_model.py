"""One real RL step on the tiny model, the quantized reference, and checkpoint resume."""

import shutil

import pytest
import torch

from aerorl_ops.config.benchmark import RewardSettings, parse_benchmark_config
from aerorl_ops.generation.batched import GenerationSettings, generate_rows
from aerorl_ops.models.loading import load_vlm
from aerorl_ops.models.sources import model_source
from aerorl_ops.rl.checkpoint import latest_checkpoint
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.runtimes import wrap_vlm_for_rl
from aerorl_ops.rl.trainer import AeroRLTrainer
from aerorl_ops.rl.training_run import TrainingPlan, run_training
from aerorl_ops.scoring.partition_scores import reward_stack_for

CONFIG = AeroRLConfig(group_size=2, max_new_tokens=4, learning_rate=1e-3, quant_ref_bits=8, seed=3)


@pytest.fixture
def trainer(tiny_model_dir):
    torch.set_num_threads(1)
    policy, reference = wrap_vlm_for_rl(str(tiny_model_dir), CONFIG, device="cpu")
    return AeroRLTrainer(CONFIG, policy, reference, reward_stack_for(RewardSettings()))


def test_one_rl_step_trains_the_policy_and_leaves_the_int8_reference_untouched(trainer, few_rows):
    reference_model = trainer.reference.loaded.model
    assert type(reference_model.model.language_model.layers[0].mlp.up_proj).__name__ == "Linear8bitLt"
    assert not reference_model.training
    assert not any(p.requires_grad for p in reference_model.parameters())
    reference_before = {k: v.clone() for k, v in reference_model.state_dict().items()}
    policy_before = {k: v.clone() for k, v in trainer.policy.loaded.model.state_dict().items()}

    stats = trainer.rl_step(few_rows[:2])

    assert torch.isfinite(torch.tensor(stats.loss))
    assert stats.kl is not None and stats.kl >= 0.0
    assert 0.0 < stats.masked_token_fraction < 1.0
    assert stats.vision_token_fraction > 0.5  # the document and chart images dominate the sequence
    after_reference = reference_model.state_dict()
    assert all(torch.equal(v, after_reference[k]) for k, v in reference_before.items())
    after_policy = trainer.policy.loaded.model.state_dict()
    assert any(not torch.equal(v, after_policy[k]) for k, v in policy_before.items())


def test_supervised_step_excludes_vision_and_prompt_tokens(trainer, few_rows):
    stats = trainer.supervised_step(few_rows[:2])
    assert stats.phase == "warmup" and torch.isfinite(torch.tensor(stats.loss))
    # only the answer tokens count: far fewer than the attended tokens
    assert stats.masked_token_fraction < 0.2


def test_resume_from_checkpoint_gives_the_same_next_loss(tiny_model_dir, few_rows, tmp_path):
    torch.set_num_threads(1)
    plan = TrainingPlan(warmup_steps=1, warmup_batch_size=2, rl_steps=2, prompts_per_step=1, eval_interval=100,
                        checkpoint_interval=2)
    train, held_out = few_rows[:3], few_rows[3:4]
    full = run_training(str(tiny_model_dir), tmp_path / "full", CONFIG, plan, train, held_out, RewardSettings(),
                        device="cpu")
    assert [s.step for s in full.steps] == [1, 2, 3]

    interrupted = tmp_path / "interrupted"
    shutil.copytree(tmp_path / "full", interrupted)
    shutil.rmtree(interrupted / "step-3")  # as if the run died after the step-2 checkpoint
    assert latest_checkpoint(interrupted).name == "step-2"
    resumed = run_training(str(tiny_model_dir), interrupted, CONFIG, plan, train, held_out, RewardSettings(),
                           device="cpu")
    assert resumed.resumed_from_step == 2
    assert [s.step for s in resumed.steps] == [3]
    assert resumed.steps[0].loss == full.steps[-1].loss
    assert [e.phase for e in full.evals] == ["base", "warmup", "final"]


def test_a_trained_checkpoint_is_benchmarked_as_one_more_model(tiny_model_dir, few_rows, tmp_path):
    torch.set_num_threads(1)
    plan = TrainingPlan(warmup_steps=1, warmup_batch_size=2, rl_steps=1, prompts_per_step=1, eval_interval=100,
                        checkpoint_interval=100)
    result = run_training(str(tiny_model_dir), tmp_path / "run", CONFIG, plan, few_rows[:2], few_rows[2:3],
                          RewardSettings(), device="cpu")
    config = parse_benchmark_config({"benchmark": {"batch_sizes": [2]},
                                     "models": {"my-rl-policy": {"source": str(result.final_checkpoint)}}})
    entry = config.model("my-rl-policy")
    loaded = load_vlm(model_source(entry, tmp_path / "models"), torch.device("cpu"))
    samples = generate_rows(loaded, few_rows[:2], batch_size=2, settings=GenerationSettings(max_new_tokens=3))
    assert [s.sample_id for s in samples] == [r.sample_id for r in few_rows[:2]]
    assert all(0 < s.generated_tokens <= 3 for s in samples)
