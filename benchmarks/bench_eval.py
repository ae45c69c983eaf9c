"""How long MAYE's evaluation takes: 500 easy-VQA test questions at the three default settings.

The issue's budget: under 3 minutes on 2 CPU cores for the embedded default (the tiny Qwen2-VL),
with the ``[eval]`` defaults of the shipped config (pass@8 from 8 responses at temperature 1.0,
pass@1 at 0.6, pass@1 near-greedy; ``max_new_tokens`` and ``batch_size`` from ``[eval]``). The
untrained model never emits EOS early, so every response runs to the cap: the slowest case.

    python benchmarks/bench_eval.py                        # 500 questions, 2 threads, CPU
    python benchmarks/bench_eval.py --questions 50 --threads 1
    python benchmarks/bench_eval.py --omp-wait-policy ACTIVE   # OpenMP's default

OpenMP's default (ACTIVE) keeps idle threads spinning. On cores shared with other jobs a spinning
thread waits for one that was descheduled at every one of the tiny model's many small ops, and the
eval took 10x longer (the same 64 questions: 40 s ACTIVE, 4.1 s PASSIVE, 2 threads). The script
sets PASSIVE (idle threads sleep) before torch starts, unless ``--omp-wait-policy`` or the environment
says otherwise (``aerorl_ops.cpu_threads``, which the ``aerorl`` command uses too); on dedicated cores
ACTIVE should be as fast or slightly faster (not measured: no dedicated cores were at hand).

Measured on the 2-core dev container while three other single-thread benchmarks ran on it (load
average ~5, so the figures are upper bounds; every run is appended to ``reports/bench_eval.jsonl``):

    2026-11-23, 2 threads, batch 128, max_new_tokens 16   PASSIVE (default here)   ACTIVE
    high_temp_pass8    4000 responses                        22.4 s                   229.4 s
    medium_temp_pass1   500 responses                         4.9 s                    39.1 s
    low_temp_pass1      500 responses                         5.1 s                    37.9 s
    total                                                    32.4 s (budget 180 s)    306.5 s (over)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from aerorl_ops.cpu_threads import WAIT_POLICY_ENV, configure_cpu_threads

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 180.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, help="sequences per generate call (default: [eval] batch_size)")
    parser.add_argument("--max-new-tokens", type=int, help="response cap (default: [eval] max_new_tokens)")
    parser.add_argument("--omp-wait-policy", choices=("PASSIVE", "ACTIVE"),
                        help="OpenMP's idle threads sleep (PASSIVE) or spin (ACTIVE) (default: $OMP_WAIT_POLICY, "
                        "else PASSIVE); see the module docstring")
    parser.add_argument("--models-dir", type=Path, default=ROOT / "data" / "models")
    parser.add_argument("--log", type=Path, default=ROOT / "reports" / "bench_eval.jsonl",
                        help="append one JSON line per run here")
    args = parser.parse_args()
    if args.omp_wait_policy:
        os.environ[WAIT_POLICY_ENV] = args.omp_wait_policy
    args.omp_wait_policy = configure_cpu_threads().wait_policy  # read when torch starts OpenMP: before importing it

    import torch
    from transformers.utils import logging as hf_logging

    from aerorl_ops.envs.configured import dataset_env, dataset_settings
    from aerorl_ops.eval_metrics.sampling import SamplingSetting
    from aerorl_ops.eval_runner.runner import evaluate_model
    from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from assets.project import load_config

    config = load_config(ROOT / "config" / "benchmark.toml")
    settings = config.eval
    batch_size = args.batch_size or settings.batch_size
    max_new_tokens = args.max_new_tokens or settings.max_new_tokens
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)

    model_dir = build_tiny_qwen2vl(args.models_dir / "tiny-qwen2-vl")
    loaded = load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))
    env = dataset_env(dataset_settings("easy_vqa", config, "test", args.questions))
    walls: dict[str, float] = {}

    def report(setting: SamplingSetting, wall_s: float) -> None:
        walls[setting.name] = wall_s
        print(f"{setting.name:<20} {setting.label:<45} {args.questions * setting.n:>6} responses  {wall_s:7.1f} s",
              flush=True)

    started = time.perf_counter()
    outcome = evaluate_model(loaded, env, range(len(env)), settings.sampling_settings(), max_new_tokens=max_new_tokens,
                             batch_size=batch_size, seed=settings.seed, on_setting=report)
    total = time.perf_counter() - started
    verdict = "within" if total < BUDGET_S else "OVER"
    print(f"{'total':<20} {len(env)} questions, {len(outcome.samples)} responses, {args.threads} threads, "
          f"OMP_WAIT_POLICY={args.omp_wait_policy}: {total:.1f} s ({verdict} the {BUDGET_S:.0f} s budget)")
    record = {"at": datetime.now(UTC).isoformat(), "questions": len(env), "threads": args.threads,
              "omp_wait_policy": args.omp_wait_policy, "batch_size": batch_size, "max_new_tokens": max_new_tokens,
              "settings_s": walls, "total_s": total, "responses": len(outcome.samples)}
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("a") as log:
        log.write(json.dumps(record) + "\n")
    return 0 if total < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
