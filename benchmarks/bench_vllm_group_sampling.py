"""vLLM rollout sampling of one RL step's replies: one request per reply (``n = 1``, each prompt's image
sent ``group_size`` times, as rollouts did before) against one request per prompt with ``n = group_size``
(what ``rl.step.rollout.sample_parts`` asks now), on the same engine, alternating, in the same run.

The pipeline's RL batch (``TRAINING_DEFAULTS``: 16 prompts x 8 samples, 4 new tokens, temperature 1)
of easy-VQA questions, from the embedded tiny Qwen2-VL. Prints the mean seconds of each way over
``--repeats`` (after one warm-up call of each) and their ratio. Run it in the vLLM environment:

    .venv-vllm/bin/python benchmarks/bench_vllm_group_sampling.py
    .venv-vllm/bin/python benchmarks/bench_vllm_group_sampling.py --group-size 4 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KV_CACHE_BYTES = 512 * 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=0, help="0 = the training default")
    parser.add_argument("--group-size", type=int, default=0, help="0 = the training default")
    parser.add_argument("--models-dir", type=Path, default=ROOT / "data" / "models")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    from quiet_logs import quiet_model_logs

    from aerorl_ops.config.training import TRAINING_DEFAULTS
    from aerorl_ops.eval_runner.episodes import Sampling, observe_all
    from aerorl_ops.eval_runner.replies import observation_prompts
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from aerorl_ops.rl.run.inputs import training_environments
    from aerorl_ops.rl.step.schedule import ItemSampler

    quiet_model_logs(args.threads)
    settings = TRAINING_DEFAULTS
    prompts_n, group = args.prompts or settings.prompts_per_step, args.group_size or settings.group_size
    train_env, _ = training_environments(settings, settings.seed)
    model_dir = build_tiny_qwen2vl(args.models_dir / "tiny-qwen2-vl")
    engine = GenerationBackend("vllm", engine_args=(("enforce_eager", True), ("kv_cache_memory_bytes", KV_CACHE_BYTES)))
    import torch

    loaded = load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))
    sampling = Sampling(settings.temperature, settings.top_k, settings.top_p)
    items = ItemSampler(train_env, 0).batch(0, prompts_n)
    observations = observe_all(train_env, [train_env.items[i] for i in items])
    texts, images = observation_prompts(loaded, observations), [o.images for o in observations]
    rows = [k for k in range(prompts_n) for _ in range(group)]
    per_row = ([texts[k] for k in rows], [images[k] for k in rows])
    times: dict[str, list[float]] = {"per reply (n=1)": [], "per prompt (n=group)": []}
    with VLLMSampler.start(loaded, engine, seed=0) as sampler:
        def per_reply() -> int:
            return len(sampler.sample(*per_row, settings.max_new_tokens, sampling, n=1, seed=1).token_ids)

        def per_prompt() -> int:
            return len(sampler.sample(texts, images, settings.max_new_tokens, sampling, n=group, seed=1).token_ids)

        assert per_reply() == per_prompt() == prompts_n * group  # warm-up, and the same number of replies
        for _ in range(args.repeats):
            for name, call in (("per reply (n=1)", per_reply), ("per prompt (n=group)", per_prompt)):
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
    print(f"{prompts_n} prompts x {group} replies, {settings.max_new_tokens} new tokens, {args.threads} threads, "
          f"{args.repeats} repeats (alternating)")
    for name, values in times.items():
        print(f"  {name:>22}: {statistics.mean(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})")
    before, after = (statistics.mean(values) for values in times.values())
    print(f"  per-prompt requests take {after / before:.2f}x the time ({before / after:.2f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
