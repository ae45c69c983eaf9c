"""What LoRA and the ``lora_base`` reference save: parameter memory and RL step time (issue 12, item 5).

Four set-ups of the same RL step (the pipeline's default algorithm and KL coefficient, the
easy_vqa training environment), each on a fresh copy of the same model:
- ``full+int8``: full fine-tuning, the reference a bitsandbytes int8 copy (the baseline);
- ``full+nf4``: full fine-tuning, an nf4 reference copy;
- ``lora+int8``: LoRA (rank ``--lora-rank``, verl's alpha 16, all-linear, vision tower and LM head
  excluded), an int8 reference copy;
- ``lora+base``: LoRA, the reference the policy itself with its adapters disabled (no copy).

Per set-up: trainable parameters and AdamW state (bytes, measured after the steps), the
reference's own parameters and buffers (0 for ``lora+base``), the policy's, the sum of the
three, and the median RL step time (rollout, reference log-probs, update) over ``--steps``
timed steps after one untimed step. Ratios are to ``full+int8`` measured in the same run.

    python benchmarks/bench_lora_reference.py                       # embedded tiny model, CPU
    python benchmarks/bench_lora_reference.py --larger --steps 3    # a ~17M-parameter Qwen2-VL shape
    python benchmarks/bench_lora_reference.py --device cuda --base-model path/to/checkpoint
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.models.embedded_default import TinyQwen2VLSpec, build_tiny_qwen2vl
from aerorl_ops.rl.runtime.policy import LoraBaseReference, policy_and_reference
from aerorl_ops.rl.step.trainer import RLTrainer

LARGER = TinyQwen2VLSpec(hidden_size=512, intermediate_size=1536, num_layers=4, num_attention_heads=8,
                         num_key_value_heads=4, vision_embed_dim=256, vision_depth=4, vision_heads=4)
SETUPS = {  # name: (LoRA on, reference mode, reference bits)
    "full+int8": (False, "quantized", 8),
    "full+nf4": (False, "quantized", 4),
    "lora+int8": (True, "quantized", 8),
    "lora+base": (True, "lora_base", 8),
}
BASELINE = "full+int8"


class Measured(NamedTuple):
    trainable_bytes: int
    optimizer_bytes: int
    reference_bytes: int
    policy_bytes: int
    step_s: float

    @property
    def held_bytes(self) -> int:
        return self.optimizer_bytes + self.reference_bytes + self.policy_bytes


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def module_bytes(model: torch.nn.Module) -> int:
    """Parameters and buffers (quantized weights at their packed size)."""
    return tensor_bytes(list(model.parameters()) + list(model.buffers()))


def measure(model_dir: Path, config: TrainingSettings, steps: int, prompts: int, device: str) -> Measured:
    env = make_env(TRAINING_DEFAULTS.env, split=TRAINING_DEFAULTS.train_split, limit=256, seed=config.seed)
    policy, reference = policy_and_reference(str(model_dir), config, device=device)
    trainer = RLTrainer(config.resolve(), policy)
    reference.anchor(str(model_dir), rl_start=True)
    trainer.reference = reference
    times = []
    for step in range(steps + 1):  # the first step is untimed (lazy loads, allocator warm-up)
        stats = trainer.rl_step(env, [(step * prompts + i) % len(env) for i in range(prompts)])
        times.append(stats.step_s)
    model = policy.loaded.model
    state = [v for per_param in trainer.optimizer.state.values() for v in per_param.values()
             if isinstance(v, torch.Tensor)]
    held_by_reference = 0 if isinstance(reference, LoraBaseReference) else module_bytes(reference.loaded.model)
    return Measured(tensor_bytes(p for p in model.parameters() if p.requires_grad), tensor_bytes(state),
                    held_by_reference, module_bytes(model), statistics.median(times[1:]))


def mib(value: int) -> str:
    return f"{value / 2**20:10.3f}"


def print_table(results: dict[str, Measured | str]) -> None:
    base = results[BASELINE]
    columns = ("trainable", "adam state", "reference", "policy", "held", "step s")
    print(f"{'set-up':>10} " + " ".join(f"{c:>10}" for c in columns) + "   (MiB; held = state + reference + policy)")
    for name, m in results.items():
        if isinstance(m, str):
            print(f"{name:>10} {m}")
            continue
        print(f"{name:>10} {mib(m.trainable_bytes)} {mib(m.optimizer_bytes)} {mib(m.reference_bytes)} "
              f"{mib(m.policy_bytes)} {mib(m.held_bytes)} {m.step_s:10.3f}")
    if isinstance(base, str):
        return
    print(f"\nratios to {BASELINE} (same run):")
    print(f"{'set-up':>10} " + " ".join(f"{c:>10}" for c in ("trainable", "adam state", "reference", "held",
                                                               "step s")))
    for name, m in results.items():
        if isinstance(m, str):
            continue
        ratios = (m.trainable_bytes / base.trainable_bytes, m.optimizer_bytes / base.optimizer_bytes,
                  m.reference_bytes / base.reference_bytes, m.held_bytes / base.held_bytes, m.step_s / base.step_s)
        print(f"{name:>10} " + " ".join(f"{r:10.3f}" for r in ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-model", default="", help="a checkpoint directory (default: the embedded tiny model)")
    parser.add_argument("--larger", action="store_true", help=f"a random Qwen2-VL of shape {LARGER}")
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="timed RL steps per set-up (after one untimed)")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per RL step")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    quiet_model_logs(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = Path(args.base_model) if args.base_model else build_tiny_qwen2vl(
            Path(scratch) / "model", LARGER if args.larger else TinyQwen2VLSpec())
        base = TrainingSettings(group_size=args.group_size)  # the pipeline's algorithm and kl_coef
        print(f"model {model_dir.name if args.base_model else ('larger' if args.larger else 'embedded tiny')}; "
              f"{args.prompts} prompts x {args.group_size} replies, {base.algorithm}, kl_coef {base.kl_coef}, "
              f"LoRA rank {args.lora_rank} alpha {base.lora_alpha}; device {args.device}; median of {args.steps}\n")
        results: dict[str, Measured | str] = {}
        for name, (lora, mode, bits) in SETUPS.items():
            config = dataclasses.replace(base, lora_rank=args.lora_rank if lora else 0, reference=mode,
                                         quant_bits=bits)
            try:
                results[name] = measure(model_dir, config, args.steps, args.prompts, args.device)
            except (RuntimeError, ValueError, ImportError) as error:  # e.g. no bitsandbytes kernel on this device
                results[name] = f"not measured: {type(error).__name__}: {error}"
        print_table(results)


if __name__ == "__main__":
    main()
