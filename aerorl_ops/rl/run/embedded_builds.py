"""The trained embedded models' training: the recipe of ``models.embedded_easy_vqa`` run through the trainer,
and every embedded model by name (``EMBEDDED_BUILDERS``), which resolving a model source may build."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.build_progress import say, step_bar
from aerorl_ops.models.embedded_easy_vqa import (
    HELD_OUT_QUESTIONS,
    SHIPPED_RECIPE,
    EasyVQAWarmStart,
    HeldOutScore,
    build_easy_vqa_model,
)
from aerorl_ops.models.entry import EMBEDDED_EASY_VQA
from aerorl_ops.models.sources import BASE_BUILDERS, EmbeddedBuilder

if TYPE_CHECKING:
    from aerorl_ops.eval_runner.held_out import EvalResult


def training_settings(recipe: EasyVQAWarmStart) -> TrainingSettings:
    """The recipe as a run's settings: its supervised steps are a run's warm-up steps."""
    return TrainingSettings(warmup_steps=recipe.steps, steps=0, warmup_batch_size=recipe.batch_size,
                            warmup_learning_rate=recipe.learning_rate, warmup_lr_schedule="cosine",
                            warmup_lr_warmup_steps=recipe.lr_warmup_steps, lr_min_ratio=recipe.lr_min_ratio,
                            curriculum=recipe.curriculum, seed=recipe.seed, control=False)


def held_out_score_of(model: EvalResult, prior: EvalResult) -> HeldOutScore:
    """The build's score: accuracy by question type of the model and of the no-image prior."""

    def by_type(result: EvalResult) -> dict[str, float]:
        return {kind: score.accuracy for kind, score in sorted(result.report.by_type.items())}
    return HeldOutScore(model.n, model.accuracy, by_type(model), prior.accuracy, by_type(prior))


def build_tiny_qwen2vl_easy_vqa(output_dir: Path, recipe: EasyVQAWarmStart = SHIPPED_RECIPE) -> Path:
    """``tiny-qwen2-vl-easy-vqa`` built into ``output_dir`` (``models.embedded_easy_vqa.build_easy_vqa_model``),
    trained by :func:`_train`."""
    return build_easy_vqa_model(output_dir, recipe, _train)


def _train(base: Path, output_dir: Path, recipe: EasyVQAWarmStart) -> HeldOutScore:
    """``recipe``'s supervised steps from ``base``, saved into ``output_dir``; the held-out score. The
    trainer's modules (peft, bitsandbytes) load here, not with this module: every benchmark partition
    imports the registry, few build."""
    from aerorl_ops.envs.easy_vqa import easy_vqa_env
    from aerorl_ops.eval_runner.held_out import evaluate_policy, prior_evaluation
    from aerorl_ops.rl.runtime.lora import save_policy
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.schedule import ItemSampler, warmup_learning_rate
    from aerorl_ops.rl.step.trainer import RLTrainer

    settings = training_settings(recipe).resolve()  # this build's run: resolved once
    threads, rng_state = torch.get_num_threads(), torch.random.get_rng_state()
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    try:
        train = easy_vqa_env("train", seed=recipe.seed)
        policy, _ = policy_and_reference(str(base), settings, device="cpu")
        trainer = RLTrainer(settings, policy)
        sampler = ItemSampler(train, settings.seed, settings.curriculum_stages)
        with step_bar(settings.warmup_steps, f"building {EMBEDDED_EASY_VQA}") as advance:
            for step in range(settings.warmup_steps):  # as a training run's warm-up steps (rl.run.phases)
                trainer.set_learning_rate(warmup_learning_rate(settings, step))
                trainer.supervised_step(train, sampler.batch(step, settings.warmup_batch_size))
                advance()
        say(f"{EMBEDDED_EASY_VQA}: scoring {HELD_OUT_QUESTIONS} held-out questions")
        loaded = policy.loaded
        save_policy(loaded.model, output_dir)
        loaded.processor.save_pretrained(output_dir)
        held_out = easy_vqa_env("test", limit=HELD_OUT_QUESTIONS, seed=0)
        indices = list(range(len(held_out)))
        loaded.model.eval()
        with torch.no_grad():
            model = evaluate_policy(loaded, held_out, indices, settings.max_new_tokens, recipe.steps, "final")
        return held_out_score_of(model, prior_evaluation(train, held_out, indices))
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng_state)


EMBEDDED_BUILDERS: dict[str, EmbeddedBuilder] = {**BASE_BUILDERS, EMBEDDED_EASY_VQA: build_tiny_qwen2vl_easy_vqa}
"""Every embedded model by name: what ``models.sources.model_source`` takes from the layers above ``rl``."""
