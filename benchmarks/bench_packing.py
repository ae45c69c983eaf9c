"""Packed vs padded sequences in the log-prob and update passes, on a batch shaped like the Geometry3K GRPO step.

The batch: ``--prompts`` prompts (8) x ``--replies`` replies (5), one image each, as EasyR1's Geometry3K step
(issue 39: Qwen2.5-VL-3B, 8 x 5 replies of up to 512 tokens). Each prompt is the model's own chat template around
one synthetic image and a question of a varied number of words; each reply a seeded length drawn uniformly from
``--min-reply`` to ``--max-reply`` tokens (plain word tokens). Micro-batches of ``--micro-batch`` rows, in order,
built as the trainer builds them (``SequenceBatch``: prompts left-padded, replies right-padded).

Both paths are the trainer's own scoring (``rl.step.token_scoring.TokenScoring``): ``padded`` (packed_sequences
off) and ``packed`` (auto: each micro-batch one row of its real tokens where the model's check holds, and the
printed path says whether it did; the text attention ``rl.step.varlen_attention``'s, each sequence's own:
variable-length FlashAttention on CUDA, sdpa sequence by sequence on CPU; or with ``--packed-attention sdpa``
sdpa's dense block-diagonal mask over the row), in the same precision (``--autocast``: bf16 on CUDA by default,
float32 master weights) and the same LM-head kernel. Per path and pass, the median over ``--repeats`` of the
time over all micro-batches, repeats alternating which path goes first, after a warm-up of each (the packed
path's check runs there):

* ``logprob``: the scores of every micro-batch under ``torch.no_grad`` (the rollout's and the reference's pass);
* ``update``: the scores, then backward of a loss of the log-probs and entropies (an update pass, no optimizer).

Printed: tokens each path runs through the model (padded: rows x longest row per micro-batch; packed: real
tokens), seconds, real tokens per second, the ratios padded / packed, the largest log-prob difference between the
paths, and on CUDA the model FLOP utilisation of the update pass (6 x the language model's parameters x real
tokens / seconds / ``--peak-tflops``; the vision tower and attention's quadratic term are left out). With
``--kernels``, the LM head's log-probs and entropies of the batch's counted tokens (forward and backward) by our
kernel (``losses.fused_token_logprobs``) and by Liger Kernel's (``losses.liger_logprobs``, where liger-kernel is
installed). ``--out FILE`` writes the figures as JSON.

    python benchmarks/bench_packing.py --quick                  # CPU, the embedded tiny Qwen2-VL, seconds
    python benchmarks/bench_packing.py                          # CPU, tiny model, lengths scaled down 8x
    python benchmarks/bench_packing.py --device cuda --model PATH --kernels   # GPU (Qwen2.5-VL-3B: < 2 minutes)

``--model PATH``: a checkpoint folder (its processor, chat template and weights); with ``--random-init`` its
config.json only, the weights random (built on the device).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from quiet_logs import quiet_model_logs  # noqa: E402

from aerorl_ops.generation.batched import encode_prompts  # noqa: E402
from aerorl_ops.losses import fused_token_logprobs  # noqa: E402
from aerorl_ops.losses.liger_logprobs import liger_head_logprobs  # noqa: E402
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl  # noqa: E402
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_processor, load_vlm  # noqa: E402
from aerorl_ops.rl.step.packing import token_counts  # noqa: E402
from aerorl_ops.rl.step.sequences import SequenceBatch, append_completions, padded_rows  # noqa: E402
from aerorl_ops.rl.step.token_scoring import TokenScoring, scoring_path  # noqa: E402
from aerorl_ops.rl.step.varlen_attention import VARLEN_ATTENTION  # noqa: E402
from aerorl_ops.rows.task_item import TaskItem  # noqa: E402

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models" / "tiny-qwen2-vl"
WORDS = ("triangle angle side length circle radius area point line segment parallel equal degrees measure find "
         "the of and is in a what if").split()


def png(side: int, seed: int) -> bytes:
    """A ``side`` x ``side`` image of seeded noise."""
    generator = random.Random(seed)
    image = Image.frombytes("RGB", (side, side), bytes(generator.getrandbits(8) for _ in range(side * side * 3)))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def prompt_rows(count: int, words: int, image_side: int, seed: int) -> list[TaskItem]:
    """``count`` questions of 0.5 to 1.5 x ``words`` words, one image each."""
    generator = random.Random(seed)
    rows = []
    for index in range(count):
        text = " ".join(generator.choice(WORDS) for _ in range(generator.randint(words // 2, words * 3 // 2)))
        rows.append(TaskItem(f"q{index}", "geometry", "bench", "bench", text + "?", ("1",),
                             (png(image_side, seed + index),)))
    return rows


def reply_lengths(count: int, shortest: int, longest: int, seed: int) -> list[int]:
    generator = random.Random(seed + 1)
    return [generator.randint(shortest, longest) for _ in range(count)]


def build_batches(loaded: LoadedVLM, prompts: list[TaskItem], replies: int, lengths: list[int],
                  rows_per_batch: int) -> list[SequenceBatch]:
    """Micro-batches of ``rows_per_batch`` rows in order: prompt i's ``replies`` rows, then prompt i + 1's."""
    words = loaded.tokenizer.encode(" " + " ".join(WORDS), add_special_tokens=False)
    rows = [prompts[index // replies] for index in range(len(prompts) * replies)]
    batches = []
    for start in range(0, len(rows), rows_per_batch):
        part = range(start, min(start + rows_per_batch, len(rows)))
        completions = [[words[(row + k) % len(words)] for k in range(lengths[row])] for row in part]
        batches.append(append_completions(encode_prompts(loaded, [rows[row] for row in part]), completions, loaded))
    return batches


def load_model(args, device: torch.device) -> LoadedVLM:
    """The tiny embedded Qwen2-VL, ``--model``'s checkpoint, or (``--random-init``) its config with random weights
    built on the device; float32 master weights unless ``--dtype bfloat16``."""
    dtype = getattr(torch, args.dtype)
    if args.model is None:
        return load_vlm(ModelSource(str(build_tiny_qwen2vl(MODEL_DIR))), device, dtype=dtype)
    source = ModelSource(args.model)
    if not args.random_init:
        return load_vlm(source, device, dtype=dtype)
    from transformers import AutoConfig, AutoModelForImageTextToText

    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(args.model),
                                                        attn_implementation="sdpa", dtype=dtype)
    return LoadedVLM(load_processor(source), source, device, 0.0, dtype, loaded_model=model)


def synchronized(device: torch.device, step: Callable[[], None]) -> float:
    """Seconds of ``step``, the device's queued work included."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def small_loss(tokens) -> torch.Tensor:
    return -tokens.logprobs.mean() - 0.01 * tokens.entropy.mean()


def measure_paths(model, batches, paths: dict[str, TokenScoring], repeats: int, device) -> dict:
    """Median seconds per (path, pass) and each path's log-probs (``module docstring``)."""

    def logprob_pass(scoring: TokenScoring) -> None:
        with torch.no_grad():
            for batch in batches:
                scoring(model, batch)

    def update_pass(scoring: TokenScoring) -> None:
        model.zero_grad(set_to_none=True)
        for batch in batches:
            small_loss(scoring(model, batch)).backward()

    passes = {"logprob": logprob_pass, "update": update_pass}
    for run in passes.values():  # warm-up (and the packed path's check)
        for scoring in paths.values():
            run(scoring)
    times = {(name, p): [] for name in paths for p in passes}
    for repeat in range(repeats):
        order = list(paths) if repeat % 2 == 0 else list(reversed(paths))
        for p, run in passes.items():
            for name in order:
                times[name, p].append(synchronized(device, lambda run=run, name=name: run(paths[name])))
    with torch.no_grad():
        logprobs = {name: torch.cat([scoring(model, b).logprobs.float() for b in batches]) for name, scoring in
                    paths.items()}
    return {"seconds": {f"{name}/{p}": statistics.median(t) for (name, p), t in times.items()}, "logprobs": logprobs}


def measure_kernels(model, batches, autocast: torch.dtype | None, repeats: int, device) -> dict[str, float | str]:
    """Seconds of the LM head's log-probs and entropies (forward and backward) of the batches' counted tokens by
    our kernel and by Liger's."""
    dtype = autocast or next(model.parameters()).dtype
    with torch.no_grad():
        rows = [padded_rows(model, b) for b in batches]
    hidden = torch.cat([r.hidden for r in rows]).to(dtype)  # [N, H]
    targets = torch.cat([r.targets for r in rows])  # [N]
    head = model.get_output_embeddings()

    def ours() -> None:
        h = hidden.detach().requires_grad_()
        n = targets.shape[0]
        out = fused_token_logprobs(h[None], head.weight.to(dtype), targets[None], torch.ones((1, n), dtype=torch.bool,
                                   device=device), out_dtype=torch.float32)
        (out.logprobs.sum() + out.entropy.sum()).backward()

    def liger() -> None:
        h = hidden.detach().requires_grad_()
        out = liger_head_logprobs(head, h, targets)
        (out.logprobs.sum() + out.entropy.sum()).backward()

    results: dict[str, float | str] = {"rows": float(targets.shape[0])}
    for name, run in (("aerorl", ours), ("liger", liger)):
        try:
            run()  # warm-up
        except ImportError as error:
            results[name] = f"not run: {str(error).splitlines()[0][:120]}"
            continue
        results[name] = statistics.median(synchronized(device, run) for _ in range(repeats))
    return results


def language_parameters(model) -> int:
    """Parameters of the language model and LM head (not the vision tower): the 6N of the update's FLOPs."""
    return sum(p.numel() for name, p in model.named_parameters() if "visual" not in name and "vision" not in name)


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark (arguments: ``argv``, else the command line); returns the figures it printed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny Qwen2-VL)")
    parser.add_argument("--random-init", action="store_true", help="--model's config only, random weights")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="parameters' dtype")
    parser.add_argument("--autocast", default=None, choices=("bf16", "off"), help="default: bf16 on CUDA, else off")
    parser.add_argument("--packed-attention", default=None, choices=("varlen", "sdpa"),
                        help="the packed rows' text attention (default varlen: rl.step.varlen_attention)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--replies", type=int, default=5)
    parser.add_argument("--min-reply", type=int, default=None, help="default: 32 on CUDA, 4 on CPU")
    parser.add_argument("--max-reply", type=int, default=None, help="default: 512 on CUDA, 64 on CPU")
    parser.add_argument("--prompt-words", type=int, default=None, help="mean question words (default 200, CPU 24)")
    parser.add_argument("--image-side", type=int, default=392, help="pixels (392: 196 Qwen2.5-VL tokens)")
    parser.add_argument("--micro-batch", type=int, default=8, help="rows per micro-batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kernels", action="store_true", help="also time the LM-head kernels: ours and Liger's")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100/H200 SXM: 989)")
    parser.add_argument("--threads", type=int, default=1, help="CPU torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    parser.add_argument("--quick", action="store_true", help="CPU seconds: 2 prompts x 3 replies, 1 repeat")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.quick:
        args.prompts, args.replies, args.repeats, args.micro_batch = 2, 3, 1, 3
    shortest = args.min_reply or (32 if cuda else 4)
    longest = args.max_reply or (512 if cuda else 64)
    words = args.prompt_words or (200 if cuda else 24)
    quiet_model_logs(0 if cuda else args.threads)
    torch.manual_seed(args.seed)

    loaded = load_model(args, device)
    model = loaded.model.train()
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    autocast = torch.bfloat16 if (args.autocast == "bf16" or (args.autocast is None and cuda)) else None
    attention = None if args.packed_attention == "sdpa" else VARLEN_ATTENTION
    paths = {"padded": TokenScoring("off", autocast), "packed": TokenScoring("auto", autocast, attention=attention)}

    prompts = prompt_rows(args.prompts, words, args.image_side, args.seed)
    lengths = reply_lengths(args.prompts * args.replies, shortest, longest, args.seed)
    batches = build_batches(loaded, prompts, args.replies, lengths, args.micro_batch)
    real = sum(token_counts(b)[0] for b in batches)
    padded_positions = sum(token_counts(b)[1] for b in batches)
    tokens = {"padded": padded_positions, "packed": real}

    measured = measure_paths(model, batches, paths, args.repeats, device)
    seconds = measured["seconds"]
    gap = float((measured["logprobs"]["packed"] - measured["logprobs"]["padded"]).abs().max())
    figures = {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu", "model": args.model or "tiny-qwen2-vl",
        "rows": args.prompts * args.replies, "micro_batches": len(batches), "reply_lengths": [shortest, longest],
        "autocast": str(autocast), "packed_path": scoring_path(model, paths["packed"]),
        "tokens": tokens, "seconds": seconds, "max_logprob_difference": gap,
        "ratios": {p: seconds[f"padded/{p}"] / seconds[f"packed/{p}"] for p in ("logprob", "update")},
    }
    print(f"{figures['device']}, {figures['model']}: {figures['rows']} rows in {len(batches)} micro-batches of "
          f"{args.micro_batch}, replies {shortest}-{longest} tokens, autocast {autocast}, packed path: "
          f"{figures['packed_path']}")
    print(f"{'pass':8s} {'path':7s} {'tokens run':>11s} {'seconds':>9s} {'real tokens/s':>14s}")
    for p in ("logprob", "update"):
        for name in paths:
            s = seconds[f"{name}/{p}"]
            print(f"{p:8s} {name:7s} {tokens[name]:>11d} {s:>9.3f} {real / s:>14.0f}")
    print(f"padded / packed: tokens {padded_positions / real:.2f}x, log-prob pass "
          f"{figures['ratios']['logprob']:.2f}x, update pass {figures['ratios']['update']:.2f}x faster packed; "
          f"largest log-prob difference {gap:.2e}")
    if cuda:
        flops = 6 * language_parameters(model) * real
        figures["update_mfu"] = {name: flops / seconds[f"{name}/update"] / (args.peak_tflops * 1e12) for name in paths}
        print("update-pass MFU: " + ", ".join(f"{name} {value:.1%}" for name, value in figures["update_mfu"].items()))
        figures["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    if args.kernels:
        figures["kernels"] = measure_kernels(model, batches, autocast, args.repeats, device)
        print("LM-head log-probs + entropies, forward and backward, "
              f"{int(figures['kernels']['rows'])} rows: " + ", ".join(
                  f"{k} {v:.4f} s" if isinstance(v, float) else f"{k} {v}"
                  for k, v in figures["kernels"].items() if k != "rows"))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
