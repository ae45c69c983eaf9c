"""GPU figures from the product itself: `aerorl train` at EasyR1's Geometry3K shape and `aerorl bench` partitions at
AeroRL's settings, each beside the published figures it is compared with.

Parts (``--parts``, in this order; each a real `aerorl` command in a process of its own, on a random-init
checkpoint of the real configuration built on the device by ``aerorl_ops.models.real_shapes``):

- ``train3b``: Qwen2.5-VL-3B fully fine-tuned. ``aerorl train`` on a JSONL dataset of ``--prompts`` x 4
  questions, one 392x392 page image each (196 vision tokens), 8 prompts x 5 replies a step, replies of exactly
  512 new tokens (a random-init model never ends one earlier), GRPO against the int8 bitsandbytes reference,
  gradient checkpointing, lr 1e-6, ``--steps`` RL steps, no warm-up and no control; the held-out evaluations at
  the start and the end on ``--eval-size`` questions. The model table's ``decode`` is ``--decode``.
- ``lora7b``: the same with Qwen2.5-VL-7B and LoRA (rank 64).
- ``partitions``: Qwen2-VL-2B, ``aerorl bench`` at batch 1, 4, 8 and 16, 16 new tokens (AeroRL's settings) on
  synthetic document pages rendered at real page resolution (``--page``), the vision tokens per row printed.
- ``fsdp2``: the CUDA paths CI cannot run: Qwen2-VL-2B at 4 layers, ``sharding = "fsdp2"`` on one torchrun rank
  (NCCL, the bf16 ``MixedPrecisionPolicy``), ``cpu_offload``, the nf4 reference; its rows.

Printed per training run, from its ``training_steps`` rows (the first step, which compiles, apart): tokens per
second per GPU (EasyR1's definition: the prompt and reply tokens of a step over its seconds), the update's MFU and
the step's (6 x the decoder's parameters, embedding and LM head included, x the step's tokens, over the dense bf16
peak, ``--peak-tflops``, 989 for an H100 or H200 SXM), rollout, scoring and update seconds, peak memory, the decode
and scoring paths. EasyR1 (Qwen2.5-VL on 8 H100s, vLLM rollouts): 3B 1,800 tokens/s/GPU at 8.1% actor MFU; 7B
1,600-2,000 tokens/s/GPU, 16-23% MFU. Per partition, from ``benchmark_summary``: samples/s, mean and p95 latency,
GPU utilisation; AeroRL's published figures for Qwen2-VL-2B at batch 16 on DocVQA/ChartQA: 3.05 samples/s, 327.8 ms
mean latency, 86.8% mean GPU utilisation.

    python benchmarks/bench_gpu_train.py --device cuda --out $OUT                 # one H200: under 8 minutes
    python benchmarks/bench_gpu_train.py --smoke --work /tmp/gpu-train-smoke       # CPU, tiny families: the same path
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

EASYR1 = {"train3b": "EasyR1 Qwen2.5-VL-3B: 1,800 tokens/s/GPU, 8.1% actor MFU (8 H100s, vLLM rollouts)",
          "lora7b": "EasyR1 Qwen2.5-VL-7B: 1,600-2,000 tokens/s/GPU, 16-23% MFU, 120-145 s a step (8 H100s)"}
AERORL = "AeroRL Qwen2-VL-2B at batch 16: 3.05 samples/s, 327.8 ms mean latency, 86.8% mean GPU utilisation"
PEAK_TFLOPS = 989.0


@dataclass(frozen=True)
class Part:
    shape: str
    key: str
    lora_rank: int = 0


PARTS = {"train3b": Part("qwen2.5-vl-3b", "q3b"), "lora7b": Part("qwen2.5-vl-7b", "q7b", lora_rank=64),
         "partitions": Part("qwen2-vl-2b", "q2b"), "fsdp2": Part("qwen2-vl-2b", "q2b-fsdp")}
FSDP2_LAYERS = 4
"""The ``fsdp2`` part's depth: it checks the CUDA paths (FSDP2 in bf16 over NCCL on one rank, ``cpu_offload``, the
nf4 reference), not speed."""


def page_png(path: Path, index: int, size: tuple[int, int]) -> None:
    """A synthetic document page of ``size`` pixels: a synthetic DocVQA page scaled up to it."""
    import io

    from PIL import Image

    from aerorl_ops.rows import synthetic_docvqa_rows

    row = synthetic_docvqa_rows(1, seed=index)[0]
    Image.open(io.BytesIO(row.images[0])).convert("RGB").resize(size).save(path)


def write_dataset(folder: Path, count: int, size: tuple[int, int], question_words: int) -> Path:
    """A JSONL dataset of ``count`` questions, each on its own page image (MAYE's format)."""
    folder.mkdir(parents=True, exist_ok=True)
    filler = " ".join(f"word{i}" for i in range(question_words))
    with (folder / "data.jsonl").open("w") as out:
        for i in range(count):
            page_png(folder / f"p{i}.png", i, size)
            out.write(json.dumps({"id": f"q{i}", "question": f"<image>{filler} What is the total of page {i}?",
                                  "answer": str(i), "image": f"p{i}.png"}) + "\n")
    return folder / "data.jsonl"


def write_config(path: Path, model_key: str, model_dir: Path, dtype: str, decode: str, dataset: Path,
                 batch_sizes: tuple[int, ...], quant_bits: int) -> Path:
    path.write_text(f"""
[benchmark]
batch_sizes = {list(batch_sizes)}

[models.{model_key}]
source = "{model_dir}"
dtype = "{dtype}"
decode = "{decode}"

[datasets.pages]
kind = "jsonl"
path = "{dataset}"

[generation]
max_new_tokens = 16

[training]
base_model = "{model_key}"
env = "pages"
eval_env = "pages"
quant_bits = {quant_bits}
""")
    return path


def aerorl(args: list[str], env: dict[str, str], log: Path, timeout_s: float) -> tuple[int, float]:
    """Run one `aerorl` command, its output to ``log``; (exit code, seconds)."""
    started = time.perf_counter()
    with log.open("w") as out:
        try:
            code = subprocess.run([sys.executable, "-m", "aerorl_pipeline.cli", *args], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, cwd=REPO, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            code = 124
    return code, time.perf_counter() - started


def query(sql: str, params: list) -> list[dict]:
    import duckdb

    from assets.project import DUCKDB_PATH

    with duckdb.connect(str(DUCKDB_PATH), read_only=True) as conn:
        frame = conn.execute(sql, params).df()
    return frame.to_dict("records")


def decoder_parameters(model_dir: Path) -> int:
    """Parameters of the text decoder, its embedding and LM head (not the vision tower), from the config."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    text = config.get_text_config()
    hidden, layers, inter, vocab = text.hidden_size, text.num_hidden_layers, text.intermediate_size, text.vocab_size
    heads, kv = text.num_attention_heads, text.num_key_value_heads
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    attention = hidden * head_dim * (heads + 2 * kv) + heads * head_dim * hidden
    per_layer = attention + 3 * hidden * inter
    tied = getattr(config, "tie_word_embeddings", None) or getattr(text, "tie_word_embeddings", False)
    return layers * per_layer + vocab * hidden * (1 if tied else 2)


def train_figures(rows: list[dict], params: int, peak_tflops: float) -> dict:
    """The steps after the first (which compiles): tokens/s, MFU of the update and of the step, seconds."""
    timed = rows[1:] or rows
    tokens = sum(r["tokens_per_s"] * r["step_s"] for r in timed) / len(timed)
    step_s = sum(r["step_s"] for r in timed) / len(timed)
    mean = {name: sum((r[name] or 0.0) for r in timed) / len(timed) for name in ("rollout_s", "scoring_s", "update_s")}
    flops = 6 * params * tokens
    return {"steps_timed": len(timed), "tokens_per_step": tokens, "tokens_per_s_per_gpu": tokens / step_s,
            "step_s": step_s, **mean, "update_mfu": flops / mean["update_s"] / (peak_tflops * 1e12)
            if mean["update_s"] else None, "step_mfu": flops / step_s / (peak_tflops * 1e12),
            "peak_memory_gib": max(r["peak_memory_mb"] for r in rows) / 1024,
            "first_step_s": rows[0]["step_s"], "decode_path": rows[-1]["decode_path"],
            "scoring_path": rows[-1]["scoring_path"]}


def run_train(name: str, part: Part, args, env: dict[str, str], model_dir: Path) -> dict:
    dataset = write_dataset(args.work / "geo", max(args.prompts * 4, args.eval_size), (392, 392), args.question_words)
    config = write_config(args.work / f"{name}.toml", part.key, model_dir, args.dtype, args.decode, dataset, (1,),
                          args.quant_bits)
    run = f"gpu-{name}"
    flags = ["train", "--config", str(config), "--run-name", run, "--no-resume", "--steps", str(args.steps),
             "--warmup-steps", "0", "--group-size", "5", "--prompts-per-step", str(args.prompts),
             "--max-new-tokens", str(args.new_tokens), "--eval-size", str(args.eval_size), "--eval-interval", "1000",
             "--checkpoint-interval", "1000", "--sampled-eval-size", "0", "--swap-check-type", "", "--no-control",
             "--learning-rate", "1e-6", "--temperature", "1.0", "--train-limit", str(args.prompts * 4)]
    if args.kl_coef is not None:
        flags += ["--kl-coef", str(args.kl_coef)]
    if part.lora_rank:
        flags += ["--lora-rank", str(part.lora_rank), "--lora-alpha", str(2 * part.lora_rank)]
    else:
        flags += ["--gradient-checkpointing"]
    code, seconds = aerorl(flags, env, args.work / f"{name}.log", args.timeout_s)
    rows = query("SELECT * FROM training_steps WHERE run_id = ? ORDER BY step", [run]) if code == 0 else []
    figures = train_figures(rows, decoder_parameters(model_dir), args.peak_tflops) if rows else {}
    return {"part": name, "exit": code, "wall_s": seconds, **figures, "published": EASYR1[name]}


def run_fsdp2(name: str, part: Part, args, env: dict[str, str], model_dir: Path) -> dict:
    """Two warm-up and two GRPO steps with ``sharding = "fsdp2"`` (one torchrun rank: NCCL, the bf16
    ``MixedPrecisionPolicy``), ``cpu_offload`` and the nf4 reference; the rows it wrote."""
    dataset = write_dataset(args.work / "geo-short", args.prompts * 4, (392, 392), 16)
    config = write_config(args.work / f"{name}.toml", part.key, model_dir, args.dtype, args.decode, dataset, (1,), 4)
    run = f"gpu-{name}"
    flags = ["train", "--config", str(config), "--run-name", run, "--no-resume", "--steps", "2", "--warmup-steps", "2",
             "--warmup-batch-size", "4", "--group-size", "2", "--prompts-per-step", "2", "--max-new-tokens", "16",
             "--eval-size", "4", "--eval-interval", "1000", "--sampled-eval-size", "0", "--swap-check-type", "",
             "--no-control", "--train-limit", str(args.prompts * 4), "--sharding", "fsdp2", "--cpu-offload"]
    code, seconds = aerorl(flags, env, args.work / f"{name}.log", args.timeout_s)
    rows = query("SELECT step, phase, loss, step_s, peak_memory_mb, decode_path, scoring_path FROM training_steps "
                 "WHERE run_id = ? ORDER BY step", [run]) if code == 0 else []
    held = query("SELECT state_bytes_per_rank, reference_unquantized FROM training_runs WHERE run_id = ?",
                 [run]) if code == 0 else []
    return {"part": name, "exit": code, "wall_s": seconds, "steps": rows, "run": held}


def run_partitions(name: str, part: Part, args, env: dict[str, str], model_dir: Path) -> dict:
    width, height = (int(v) for v in args.page.split("x"))
    dataset = write_dataset(args.work / "pages", args.page_rows, (width, height), 8)
    sizes = tuple(args.batch_sizes)
    config = write_config(args.work / f"{name}.toml", part.key, model_dir, args.dtype, "auto", dataset, sizes,
                          args.quant_bits)
    run = f"gpu-{name}"
    code, seconds = aerorl(["bench", "--config", str(config), "--run-id", run], env, args.work / f"{name}.log",
                           args.timeout_s)
    summary = query("SELECT batch_size, samples, samples_per_s, latency_avg_ms, latency_p95_ms, gpu_util_avg, "
                    "peak_memory_mb FROM benchmark_summary WHERE run_id = ? AND dataset = 'pages' ORDER BY batch_size",
                    [run]) if code == 0 else []
    vision = query("SELECT avg(vision_tokens) AS vision_tokens, avg(prompt_text_tokens) AS text_tokens FROM "
                   "generations WHERE run_id = ?", [run]) if code == 0 else []
    return {"part": name, "exit": code, "wall_s": seconds, "partitions": summary,
            "tokens_per_row": vision[0] if vision else None, "published": AERORL}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--decode", default="compiled", help="the trained model's decode path (generation.decode)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/aerorl-gpu-train"))
    parser.add_argument("--out", type=Path, default=None, help="a folder for the figures (JSON) and the logs")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--eval-size", type=int, default=40, help="held-out questions (40: the rollouts' shape bucket, "
                        "so the evaluations replay the rollouts' compiled decode step)")
    parser.add_argument("--question-words", type=int, default=120, help="words around each image (~256 tokens)")
    parser.add_argument("--page", default="1700x2200", help="partitions: page size WxH (a scanned letter page)")
    parser.add_argument("--page-rows", type=int, default=64)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--quant-bits", type=int, default=8)
    parser.add_argument("--kl-coef", type=float, default=None, help="0: no reference (default: the algorithm's)")
    parser.add_argument("--layers", type=int, default=None, help="build every model at this depth (a quick test)")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--timeout-s", type=float, default=420.0, help="each command's limit")
    parser.add_argument("--smoke", action="store_true", help="CPU, each shape's tiny family, fp32: the same path")
    args = parser.parse_args(argv)
    if args.smoke:
        args.device, args.dtype, args.decode = "cpu", "float32", "static"
        args.steps, args.prompts, args.new_tokens, args.eval_size, args.page_rows = 2, 2, 8, 1, 4
        args.question_words, args.page, args.batch_sizes = 8, "448x448", [1, 2]
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(args.work / "dagster_home"), "PYTHONPATH": str(REPO),
           "PYTHONUNBUFFERED": "1"}
    from aerorl_ops.models.real_shapes import REAL_SHAPES, build_real_shape
    from aerorl_ops.models.tiny_family_build import build_tiny_family

    results = []
    for name in args.parts:
        part = PARTS[name]
        started = time.perf_counter()
        import torch

        layers = FSDP2_LAYERS if name == "fsdp2" else args.layers
        folder = args.work / (part.shape if layers is None else f"{part.shape}-{layers}L")
        if args.smoke:  # the shape's tiny family: the same code path at a size this CPU trains in seconds
            model_dir = build_tiny_family(REAL_SHAPES[part.shape].family, folder)
        elif (folder / "config.json").is_file():  # built by an earlier part or call (bench_decode --build-dir)
            model_dir = folder
        else:
            model_dir = build_real_shape(part.shape, folder, args.device, getattr(torch, args.dtype), layers)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()  # the built weights' memory back before the command loads them
        built_s = time.perf_counter() - started
        run = {"partitions": run_partitions, "fsdp2": run_fsdp2}.get(name, run_train)
        result = {"built_s": built_s, **run(name, part, args, env, model_dir)}
        results.append(result)
        print(json.dumps(result, indent=1, default=str), flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "bench_gpu_train.json").write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    main()
