"""verl's VLM recipe on the embedded tiny Qwen2-VL: a frozen vision tower, LoRA, and the LoRA base as
the KL reference. Real steps on the tiny model; outputs compared exactly or at float32 rounding."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from aerorl_ops.config.fields import ConfigError, parse_section
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import items_at
from aerorl_ops.envs.registry import make_env
from aerorl_ops.models.family_parts import FamilyParts, part_parameters
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.checkpoint_files import load_checkpoint_state, save_checkpoint
from aerorl_ops.rl.runtime.lora import ADAPTER_DIR, attach_lora, lora_layers
from aerorl_ops.rl.runtime.policy import LoraBaseReference, ReferenceRuntime, policy_and_reference
from aerorl_ops.rl.runtime.vision_tower import find_vision_tower, freeze_vision_tower
from aerorl_ops.rl.step.rollout import supervised_batch
from aerorl_ops.rl.step.scoring import reference_logprobs
from aerorl_ops.rl.step.sequences import completion_logprobs
from aerorl_ops.rl.step.trainer import RLTrainer

LORA = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, lora_rank=4, learning_rate=1e-2, seed=3)


@pytest.fixture(scope="module")
def env():
    torch.set_num_threads(1)
    return make_env("easy_vqa", split="train", limit=32, seed=1)


def logprobs(model, loaded, env, indices=(0, 1, 2)) -> torch.Tensor:
    with torch.no_grad():
        return completion_logprobs(model, supervised_batch(loaded, env, items_at(env, list(indices)))).logprobs  # [n]


@pytest.mark.parametrize(("fields", "named"), [
    ({"lora_rank": -1}, "lora_rank"),
    ({"reference": "lora_base"}, "reference"),  # lora_base without LoRA
    ({"reference": "bf16"}, "reference"),
    ({"lora_rank": 4, "lora_dropout": 1.0}, "lora_dropout"),
    ({"lora_rank": 4, "lora_alpha": 0}, "lora_alpha"),
])
def test_invalid_lora_settings_name_the_field(fields, named):
    with pytest.raises(ConfigError, match=rf"^run.toml: (setting 'training.)?{named}'? must be"):
        parse_section(TrainingSettings, "run.toml", "training", fields).check_rules("run.toml")


def test_the_file_check_names_the_setting():
    settings = parse_section(TrainingSettings, "run.toml", "training",
                             {"lora_rank": 8, "reference": "lora_base", "freeze_vision_tower": True})
    assert (settings.lora_rank, settings.lora_alpha, settings.lora_target_modules, settings.reference,
            settings.freeze_vision_tower) == (8, 16, "all-linear", "lora_base", True)
    with pytest.raises(ConfigError, match="'training.lora_rank' must be an integer >= 0"):
        parse_section(TrainingSettings, "run.toml", "training", {"lora_rank": -2})
    with pytest.raises(ConfigError, match="^run.toml: reference must be 'quantized' when lora_rank = 0"):
        TrainingSettings(reference="lora_base").check_rules("run.toml")


def test_freezing_needs_a_vision_encoder():
    with pytest.raises(ValueError, match=r"^Sequential has no vision encoder \(its traced parts: FamilyParts\(encoder="
                                         r"\('visual',\), projector=\(\)\)\); freeze_vision_tower needs one"):
        freeze_vision_tower(torch.nn.Sequential(torch.nn.Linear(2, 2)), FamilyParts(("visual",), ()))


def test_a_frozen_vision_encoder_does_not_change_and_has_no_optimizer_state(tiny_model_dir, env):
    # freeze_vision_tower freezes the encoder only: Qwen2-VL's merger (its projector, inside model.visual)
    # trains unless freeze_projector (before, the whole of model.visual was frozen)
    config = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.0, freeze_vision_tower=True, seed=0)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    model, parts = policy.loaded.model, policy.loaded.vision.parts
    name, _ = find_vision_tower(model, parts)
    assert name == "model.visual"
    encoder = set(part_parameters(model, parts, "encoder"))
    assert encoder and not any(".merger." in n for n in encoder)
    assert sorted(part_parameters(model, parts, "projector")) == sorted(
        n for n, _ in model.named_parameters() if n.startswith("model.visual.merger."))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = RLTrainer(config.resolve(), policy)
    for step in range(2):
        trainer.supervised_step(env, [4 * step + i for i in range(4)])
    trainer.rl_step(env, [8, 9])
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], before[n]) and not after[n].requires_grad for n in encoder)
    others = [n for n in after if n not in encoder]
    assert all(not torch.equal(after[n], before[n]) for n in others)  # every other parameter trained, the merger too
    held = {id(p) for p in trainer.optimizer.state}
    assert held == {id(after[n]) for n in others}


def test_lora_adapts_only_the_language_model(fresh_tiny_vlm):
    config = TrainingSettings(lora_rank=2, lora_target_modules="q_proj, qkv, lm_head")  # qkv: vision only
    model = attach_lora(fresh_tiny_vlm.model, config, fresh_tiny_vlm.vision.parts)
    assert [n.split("layers.")[-1] for n, _ in lora_layers(model)] == ["0.self_attn.q_proj", "1.self_attn.q_proj"]
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert len(trainable) == 4 and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    plain = load_vlm(fresh_tiny_vlm.source, torch.device("cpu"))
    all_linear = attach_lora(plain.model, LORA, plain.vision.parts)
    names = [n for n, _ in lora_layers(all_linear)]
    assert len(names) == 14 and not any(".visual." in n or "lm_head" in n for n in names)  # 2 layers x 7
    first = next(m for _, m in lora_layers(all_linear))  # q_proj [128 -> 128]: A [r, in], B [out, r]
    assert first.lora_A["default"].weight.shape == (4, 128) and first.lora_B["default"].weight.shape == (128, 4)
    assert first.scaling["default"] == 16 / 4  # lora_alpha / lora_rank


def test_a_lora_checkpoint_loads_as_a_plain_model_and_resumes_its_adapter(tiny_model_dir, env, tmp_path):
    policy, _ = policy_and_reference(str(tiny_model_dir), LORA, device="cpu")
    trainer = RLTrainer(LORA.resolve(), policy)
    for step in range(2):
        trainer.supervised_step(env, [4 * step + i for i in range(4)])
    folder = save_checkpoint(tmp_path / "step-2", policy.loaded, trainer.optimizer, 2, "base")
    assert (folder / ADAPTER_DIR / "adapter_config.json").exists()
    plain = load_vlm(ModelSource(str(folder)), torch.device("cpu"))  # no peft: the merged weights
    assert not any(True for _ in lora_layers(plain.model))
    trained = logprobs(policy.loaded.model, policy.loaded, env)
    assert torch.allclose(logprobs(plain.model, plain, env), trained, atol=2e-6, rtol=0)

    resumed, _ = policy_and_reference(str(folder), LORA, device="cpu")
    again = RLTrainer(LORA.resolve(), resumed)
    again.optimizer.load_state_dict(load_checkpoint_state(folder).optimizer)
    saved = dict(policy.loaded.model.named_parameters())
    loaded = dict(resumed.loaded.model.named_parameters())
    assert saved.keys() == loaded.keys()
    for name in saved:  # the adapter exactly; the base as merged - delta, at float32 rounding
        assert torch.equal(loaded[name], saved[name]) if "lora_" in name else torch.allclose(
            loaded[name], saved[name], atol=1e-6, rtol=0), name
    losses = [t.supervised_step(env, [8, 9, 10, 11]).loss for t in (trainer, again)]
    assert losses[1] == pytest.approx(losses[0], abs=1e-6)
    assert torch.allclose(logprobs(resumed.loaded.model, resumed.loaded, env),
                          logprobs(policy.loaded.model, policy.loaded, env), atol=1e-5, rtol=0)


def test_the_lora_base_reference_is_the_rl_start_model(tiny_model_dir, env, tmp_path):
    config = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.1, lora_rank=4, reference="lora_base",
                          learning_rate=1e-2, seed=3)
    policy, reference = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    assert isinstance(reference, LoraBaseReference)
    trainer = RLTrainer(config.resolve(), policy)
    for step in range(2):
        trainer.supervised_step(env, [4 * step + i for i in range(4)])
    warmup = save_checkpoint(tmp_path / "warmup", policy.loaded, trainer.optimizer, 2, str(tmp_path / "warmup"))
    warmup_optimizer = trainer.optimizer
    reference.anchor(str(warmup), rl_start=True)  # merge the warm-up adapter, attach fresh ones
    trainer.reference = reference
    assert trainer.optimizer is not warmup_optimizer and not trainer.optimizer.state
    batch = supervised_batch(policy.loaded, env, items_at(env, [0, 1, 2]))
    # zero RL updates: the policy is its base
    scored = reference_logprobs(trainer.reference, batch, policy.loaded.device)
    assert torch.equal(scored, logprobs(policy.loaded.model, policy.loaded, env))
    stats = trainer.rl_step(env, [4, 5])
    assert stats.kl == 0.0  # the rollout's policy was the reference
    trainer.supervised_step(env, [8, 9, 10, 11])
    fresh = load_vlm(ModelSource(str(warmup)), torch.device("cpu"))
    start = logprobs(fresh.model, fresh, env)
    assert torch.allclose(reference_logprobs(trainer.reference, batch, policy.loaded.device), start, atol=1e-6, rtol=0)
    assert float((logprobs(policy.loaded.model, policy.loaded, env) - start).abs().max()) > 1e-2
    assert reference._loaded is policy.loaded  # scored with the policy itself: no second copy
    assert all(p.requires_grad for n, p in policy.loaded.model.named_parameters() if "lora_" in n)


@pytest.mark.parametrize("reference", ["lora_base", "quantized"])
def test_a_lora_run_checkpoints_plain_models(tiny_model_dir, env, tmp_path, monkeypatch, reference):
    def refuse(self):
        raise AssertionError("a quantized reference was loaded although reference = 'lora_base'")

    if reference == "lora_base":
        monkeypatch.setattr(ReferenceRuntime, "loaded", property(refuse))
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.1, lora_rank=4, reference=reference,
                                freeze_vision_tower=True, seed=3, warmup_steps=1, warmup_batch_size=4, steps=1,
                                prompts_per_step=2, eval_interval=10, control=True, swap_check_type="")
    result = run_training(str(tiny_model_dir), tmp_path / "run", settings, env, env, range(4), device="cpu",
                          resume=False)
    assert result.reference_loaded and [e.phase for e in result.evals][-2:] == ["final", "control"]
    # the first RL step's policy is the RL start model: KL 0 to its own base; int8 rounding to the quantized copy
    kl = result.steps[-1].kl
    assert kl == 0.0 if reference == "lora_base" else 0 < kl < 1e-4
    for folder in (tmp_path / "run" / "warmup", result.final_checkpoint):
        assert (folder / ADAPTER_DIR).is_dir()
        assert not any(True for _ in lora_layers(load_vlm(ModelSource(str(folder)), torch.device("cpu")).model))


def test_a_lora_base_run_resumed_mid_rl_continues_as_if_uninterrupted(tiny_model_dir, env, tmp_path):
    # the entropy bonus moves the policy even where every reply of a group scores the same
    settings = TrainingSettings(group_size=2, max_new_tokens=3, kl_coef=0.1, lora_rank=4, reference="lora_base",
                                learning_rate=1e-2, entropy_coef=0.1, seed=4, warmup_steps=1, warmup_batch_size=4,
                                steps=3, prompts_per_step=2, eval_interval=10, control=False, swap_check_type="")

    def run(folder: str, rl_steps: int, resume: bool):
        return run_training(str(tiny_model_dir), tmp_path / folder, replace(settings, steps=rl_steps), env,
                            env, range(2), device="cpu", resume=resume)

    whole = run("whole", 3, resume=False)
    run("split", 1, resume=False)  # stops after the first RL step (checkpoint step-2)
    resumed = run("split", 3, resume=True)  # the adapter on its base (the RL start), not re-based
    assert resumed.resumed_from_step == 2 and [s.step for s in resumed.steps] == [3, 4]
    for mine, theirs in zip(resumed.steps, whole.steps[2:], strict=True):
        assert mine.loss == pytest.approx(theirs.loss, abs=1e-6) and mine.kl == pytest.approx(theirs.kl, rel=1e-4)
    assert min(s.kl for s in whole.steps[2:]) > 1e-3  # the policy moved away from the reference
