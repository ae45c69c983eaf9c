"""Evidence that training learns on easy-VQA, and what the quantized reference costs.

Measured in one run of the pipeline's training settings (``TRAINING_DEFAULTS``, the same settings
and environments as the ``rl_run`` asset; embedded tiny Qwen2-VL; CPU unless --device):
1. held-out accuracy (greedy; n and binomial standard error) of the no-image prior, the base
   model, after the supervised warm-up, after RL (final) and of the supervised control trained for
   the RL phase's time; overall and per question type; the KL to the reference over the RL steps;
2. reference parameter memory at fp32, int8 and nf4 (bitsandbytes);
3. mean KL(fp32 || quantized) per token of the next-token distributions over the completion tokens
   of the same policy rollouts (sampled from the easy_vqa training environment), for int8 and nf4.

    python benchmarks/bench_training.py                    # default settings (long on CPU)
    python benchmarks/bench_training.py --warmup-steps 2 --rl-steps 2 --eval-size 16   # smoke run
    python benchmarks/bench_training.py --device cuda --base-model path/to/checkpoint
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from quiet_logs import quiet_model_logs

from aerorl_ops.config.training import TRAINING_DEFAULTS
from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.record.result import TrainingResult
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.policy import REFERENCE_QUANTIZATIONS, reference_mode
from aerorl_ops.rl.step.rollout import collect_rollout
from aerorl_ops.rl.step.sequences import SequenceBatch, final_hidden_states

ROLLOUT_PROMPTS = 4
PHASES = ("no_image_prior", "base", "warmup", "final", "control")


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes held by parameters and buffers (quantized weights count at their packed size)."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def completion_distributions(model, batch: SequenceBatch) -> torch.Tensor:
    """Next-token log-distributions at counted completion positions: [N, V]."""
    with torch.inference_mode():
        hidden = final_hidden_states(model, batch)[:, :-1]  # [B, T-1, H]
        rows = hidden[batch.completion_mask[:, 1:]]  # [N, H]
        logits = model.get_output_embeddings()(rows).float()  # [N, V]
    return F.log_softmax(logits, dim=-1)


def rollout_distributions(model, batches: list[SequenceBatch]) -> torch.Tensor:
    return torch.cat([completion_distributions(model, batch) for batch in batches])  # [N, V]


def print_accuracy(result: TrainingResult) -> None:
    """Accuracy ± standard error (n) per phase, overall and per question type."""
    rows = [e for phase in PHASES if (e := result.eval_of(phase)) is not None]
    types = sorted({t for e in rows for t in e.report.by_type})
    print(f"{'phase':>15} {'step':>5} {'train_s':>8} {'accuracy':>17} " + " ".join(f"{t:>17}" for t in types))
    for e in rows:
        cells = [e.report.overall] + [e.report.by_type.get(t) for t in types]
        shown = [f"{c.accuracy:.3f}±{c.standard_error:.3f} ({c.n:3d})" if c else f"{'-':>17}" for c in cells]
        print(f"{e.phase:>15} {e.step:5d} {e.wall_s:8.1f} " + " ".join(f"{s:>17}" for s in shown))
    final, warmup, control = (result.eval_of(p) for p in ("final", "warmup", "control"))
    if final and warmup:
        print(f"RL (final - warm-up): {final.accuracy - warmup.accuracy:+.3f}"
              + (f"; supervised control (control - warm-up): {control.accuracy - warmup.accuracy:+.3f}"
                 if control else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TRAINING_DEFAULTS  # the pipeline's training defaults (config [training])
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--rl-steps", type=int, default=defaults.steps)
    parser.add_argument("--eval-size", type=int, default=defaults.eval_size, help="held-out questions")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--base-model", default="", help="checkpoint directory (default: the embedded tiny model)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    quiet_model_logs(args.threads)
    settings = dataclasses.replace(defaults, warmup_steps=args.warmup_steps, steps=args.rl_steps,
                                   eval_size=args.eval_size, seed=args.seed,
                                   sampled_eval_size=0)  # MAYE's evals change no training, cost time
    settings.check_rules("bench_training")
    train_env, held_out = training_environments(settings, settings.seed)
    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-training-"))
    base = args.base_model or str(build_tiny_qwen2vl(work / "tiny-qwen2-vl"))

    started = time.perf_counter()
    result = run_training(base, work / "run", settings, train_env, held_out, list(range(len(held_out))),
                          device=args.device, resume=False)
    elapsed = time.perf_counter() - started
    print(f"== training on {settings.env} ({elapsed:.0f} s wall; {settings.warmup_steps} warm-up steps of "
          f"{settings.warmup_batch_size} + {settings.steps} {settings.algorithm} steps of {settings.prompts_per_step}x"
          f"{settings.group_size}; {len(train_env)} training items, {len(held_out)} held-out; reference "
          f"{reference_mode(settings)}, kl_coef {settings.kl_coef}; device {args.device}, "
          f"torch threads {torch.get_num_threads()})")
    print_accuracy(result)
    rl_kl = [s.kl for s in result.steps if s.kl is not None]
    if rl_kl:
        print(f"KL to the reference over RL steps: mean {sum(rl_kl) / len(rl_kl):.5f}, last {rl_kl[-1]:.5f}")
    if result.swap:
        print(f"image swap ({result.swap.question_type}, {result.swap.questions} questions): "
              f"{result.swap.changed:.3f} of final answers change")

    print("\n== reference memory and fidelity (reference: the RL start checkpoint; rollouts: the final policy)")
    device = torch.device(args.device)
    source = ModelSource(result.reference_source)
    full = load_vlm(source, device)
    policy = load_vlm(ModelSource(str(result.final_checkpoint)), device)
    torch.manual_seed(settings.seed)
    prompts = list(range(min(ROLLOUT_PROMPTS, len(train_env))))
    rollout = collect_rollout(policy, train_env, prompts, settings.group_size, settings.max_new_tokens,
                              Sampling(settings.temperature, settings.top_k, settings.top_p))
    reference_logp = rollout_distributions(full.model, rollout.batches)  # [N, V]
    full_bytes = parameter_bytes(full.model)
    print(f"fp32 : {full_bytes / 2**20:8.3f} MiB parameters+buffers (1.00x)")
    for bits in (8, 4):
        quantization = REFERENCE_QUANTIZATIONS[bits]
        quantized = load_vlm(source, device, quantization_config=quantization.transformers_config())
        q_bytes = parameter_bytes(quantized.model)
        q_logp = rollout_distributions(quantized.model, rollout.batches)  # [N, V]
        kl = F.kl_div(q_logp, reference_logp, log_target=True, reduction="batchmean")
        print(f"{quantization.precision:5}: {q_bytes / 2**20:8.3f} MiB ({full_bytes / q_bytes:.2f}x smaller); "
              f"mean KL(fp32 || {quantization.precision}) over {reference_logp.shape[0]} rollout tokens "
              f"({len(prompts)} prompts x {settings.group_size}): {float(kl):.6f} per token")
    print("note: embeddings, norms and the LM head stay unquantized; on the tiny model they are a large share "
          "of the parameters, so the ratios are far below 4x/8x. Linear layers shrink 4x (int8) and ~8x (nf4).")


if __name__ == "__main__":
    main()
