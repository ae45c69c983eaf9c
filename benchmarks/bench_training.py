"""Evidence that training learns, and what the quantized reference costs.

Measured in one run on the embedded default (tiny Qwen2-VL, CPU unless --device says otherwise):
1. held-out reward (greedy, reward stack) of the base model, after the supervised warm-up, and
   after RL; the mean KL to the reference over the RL steps;
2. reference parameter memory at fp32, int8 (bitsandbytes) and nf4 (bitsandbytes);
3. mean KL(fp32 || quantized) of the next-token distributions over the completion tokens of the
   same policy rollouts, for int8 and nf4.

    python benchmarks/bench_training.py                     # default settings (a few minutes)
    python benchmarks/bench_training.py --warmup-steps 20 --rl-steps 4   # smoke run
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from aerorl_ops.config.rewards import RewardSettings
from aerorl_ops.config.training import QUANT_REF_BITS, TRAINING_DEFAULTS
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.rollout import collect_rollout
from aerorl_ops.rl.runtimes import REFERENCE_QUANTIZATIONS
from aerorl_ops.rl.sequences import SequenceBatch, final_hidden_states
from aerorl_ops.rl.training_run import TrainingPlan, run_training
from aerorl_ops.rows import synthetic_chartqa_rows, synthetic_docvqa_rows
from aerorl_ops.scoring.partition_scores import reward_stack_for


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TRAINING_DEFAULTS  # the pipeline's training defaults (config/benchmark.toml [training])
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--rl-steps", type=int, default=defaults.steps)
    parser.add_argument("--group-size", type=int, default=defaults.group_size)
    parser.add_argument("--prompts-per-step", type=int, default=defaults.prompts_per_step)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--kl-coef", type=float, default=defaults.kl_coef)
    parser.add_argument("--temperature", type=float, default=AeroRLConfig().temperature)
    parser.add_argument("--quant-bits", type=int, default=defaults.quant_bits, choices=QUANT_REF_BITS)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-training-"))
    base = str(build_tiny_qwen2vl(work / "tiny-qwen2-vl"))
    train = synthetic_docvqa_rows(32, 1000, "train") + synthetic_chartqa_rows(32, 1000, "train")
    held_out = synthetic_docvqa_rows(8, 2000, "heldout") + synthetic_chartqa_rows(8, 2000, "heldout")
    config = AeroRLConfig(quant_ref_bits=args.quant_bits, group_size=args.group_size,
                          learning_rate=args.learning_rate, kl_coef=args.kl_coef, temperature=args.temperature)
    plan = TrainingPlan(warmup_steps=args.warmup_steps, rl_steps=args.rl_steps,
                        prompts_per_step=args.prompts_per_step, eval_interval=10,
                        checkpoint_interval=10_000)
    started = time.perf_counter()
    result = run_training(base, work / "run", config, plan, train, held_out, RewardSettings(), device=args.device)
    elapsed = time.perf_counter() - started
    evals = {e.phase: e for e in result.evals}
    rl_kl = [s.kl for s in result.steps if s.kl is not None]
    print(f"== training ({elapsed:.0f} s, {args.warmup_steps} warm-up + {args.rl_steps} {config.algorithm} steps, "
          f"reference {REFERENCE_QUANTIZATIONS[args.quant_bits].mode}, torch threads {torch.get_num_threads()})")
    for e in result.evals:
        parts = ", ".join(f"{k} {v:+.3f}" for k, v in e.component_means.items())
        print(f"held-out reward step {e.step:4d} {e.phase:>6}: {e.reward_mean:+.4f}  ({parts})")
    print(f"reward change after RL vs warm-up: {evals['final'].reward_mean - evals['warmup'].reward_mean:+.4f}")
    if rl_kl:
        print(f"KL to reference over RL steps: mean {sum(rl_kl) / len(rl_kl):.5f}, last {rl_kl[-1]:.5f}")

    print("\n== reference memory and fidelity (model: the warm-up checkpoint)")
    source = ModelSource(result.reference_source)
    full = load_vlm(source, device)
    policy = load_vlm(ModelSource(str(result.final_checkpoint)), device)
    torch.manual_seed(0)
    rollout = collect_rollout(policy, train[:4], config, reward_stack_for(RewardSettings()))
    reference_logp = completion_distributions(full.model, rollout.batch)  # [N, V]
    full_bytes = parameter_bytes(full.model)
    print(f"fp32 : {full_bytes / 2**20:8.3f} MiB parameters+buffers (1.00x)")
    for bits in (8, 4):
        quantization = REFERENCE_QUANTIZATIONS[bits]
        quantized = load_vlm(source, device, quantization_config=quantization.transformers_config())
        q_bytes = parameter_bytes(quantized.model)
        q_logp = completion_distributions(quantized.model, rollout.batch)  # [N, V]
        kl = F.kl_div(q_logp, reference_logp, log_target=True, reduction="batchmean")
        print(f"{quantization.precision:5}: {q_bytes / 2**20:8.3f} MiB ({full_bytes / q_bytes:.2f}x smaller); "
              f"mean KL(fp32 || {quantization.precision}) over {reference_logp.shape[0]} rollout tokens: "
              f"{float(kl):.6f}")
    print("note: embeddings, norms and the LM head stay unquantized; on the tiny model they are a large share "
          "of the parameters, so the ratios are far below 4x/8x. Linear layers shrink 4x (int8) and ~8x (nf4).")


if __name__ == "__main__":
    main()
