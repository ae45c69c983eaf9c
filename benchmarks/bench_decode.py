"""Decoding per step: transformers' ``generate`` (dynamic cache) against the static-cache paths of
``aerorl_ops.generation.decode`` (``static``: eager step; ``compiled``: the step compiled once per shape bucket,
CUDA graphs on a GPU), on the same batch in the same run, beside the memory-bound floor.

The batch is ``--sequences`` prompts, each one synthetic page image and a question, through the model's own
processor and chat template (``generation.batched.encode_prompts``), greedy, every reply exactly
``--new-tokens`` long (EOS suppressed, so each path decodes the same number of steps). Per path: the prefill
seconds (one new token), the decode milliseconds per step ((t(N) - t(1)) / (N - 1), best of ``--repeats``), tokens
per second, the first call's extra seconds (compilation), and the share of replies identical to ``generate``'s.

The floor: the bytes a decode step must read once (the text decoder's and LM head's weights, and the KV cache at
its mean length over the reply), over the device's memory bandwidth (``--bandwidth-tbs``; H200 4.8 TB/s).

    python benchmarks/bench_decode.py --model PATH --device cuda --sequences 40 --new-tokens 256
    python benchmarks/bench_decode.py --shape qwen2.5-vl-3b --build-dir /tmp/q3b --device cuda   # built here
    python benchmarks/bench_decode.py --quick          # the embedded tiny model on this CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from aerorl_ops.generation.batched import encode_prompts, eos_token_ids  # noqa: E402
from aerorl_ops.generation.decode import NewTokens, decode_new_tokens  # noqa: E402
from aerorl_ops.generation.suppression import suppressed_token_ids  # noqa: E402
from aerorl_ops.models.entry import DECODE_COMPILED, DECODE_GENERATE, DECODE_STATIC  # noqa: E402
from aerorl_ops.models.loading import LoadedVLM, ModelSource, load_vlm  # noqa: E402
from aerorl_ops.rows.task_item import TaskItem  # noqa: E402

GREEDY = {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
PATHS = (DECODE_GENERATE, DECODE_STATIC, DECODE_COMPILED)


@dataclass
class PathResult:
    path: str
    used: str  # the path that decoded (a refused static path falls back to generate, saying why)
    prefill_s: float
    step_ms: float
    tokens_per_s: float
    first_call_extra_s: float
    identical_share: float
    floor_ratio: float = 0.0


def page(index: int, size: tuple[int, int]) -> bytes:
    """A synthetic document page of ``size`` pixels (text lines), PNG."""
    import io

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    for line in range(0, size[1] - 20, 24):
        draw.text((12, line + 4), f"Invoice {index}-{line}: total {index * 7 + line} USD, due 2026-12-{line % 28 + 1}",
                  fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def batch_rows(count: int, size: tuple[int, int]) -> list[TaskItem]:
    return [TaskItem(f"q{i}", "docvqa", "test", "synthetic", f"What is the total of invoice {i}?", ("x",),
                     (page(i, size),)) for i in range(count)]


def weight_bytes(loaded: LoadedVLM) -> int:
    """Bytes of the text decoder's and LM head's weights (a decode step reads them once)."""
    decoder = loaded.model.get_decoder()
    head = loaded.model.get_output_embeddings()
    embed = decoder.get_input_embeddings()
    params = {id(p): p for module in (decoder, head) for p in module.parameters()}
    params.pop(id(embed.weight), None)  # embedding rows are gathered, not read whole
    if head.weight is embed.weight:  # tied: the head reads it whole
        params[id(head.weight)] = head.weight
    return sum(p.numel() * p.element_size() for p in params.values())


def kv_bytes_per_token(loaded: LoadedVLM) -> int:
    text = loaded.model.config.get_text_config(decoder=True)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    element = next(loaded.model.parameters()).element_size()
    return 2 * text.num_hidden_layers * kv_heads * head_dim * element


def timed(loaded: LoadedVLM, inputs, new_tokens: int, suppressed: list[int], eos: list[int]
          ) -> tuple[float, NewTokens]:
    if loaded.device.type == "cuda":
        torch.cuda.synchronize(loaded.device)
    started = time.perf_counter()
    out = decode_new_tokens(loaded, inputs, new_tokens, GREEDY, eos, suppressed)
    if loaded.device.type == "cuda":
        torch.cuda.synchronize(loaded.device)
    return time.perf_counter() - started, out


def measure_path(loaded: LoadedVLM, path: str, inputs, new_tokens: int, repeats: int, eos: list[int],
                 reference: list | None) -> tuple[PathResult, list]:
    loaded.source = replace(loaded.source, backend=replace(loaded.source.backend, decode=path))
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    suppressed = sorted(set(suppressed_token_ids(loaded.tokenizer, eos, vocab)) | set(eos))  # every reply N long
    first_s, _ = timed(loaded, inputs, new_tokens, suppressed, eos)  # the check, the compile, warm-up
    prefill = min(timed(loaded, inputs, 1, suppressed, eos)[0] for _ in range(repeats))
    runs = [timed(loaded, inputs, new_tokens, suppressed, eos) for _ in range(repeats)]
    total = min(seconds for seconds, _ in runs)
    tokens = runs[0][1].token_ids
    step_ms = 1000 * (total - prefill) / max(1, new_tokens - 1)
    rows = len(tokens)
    identical = 1.0 if reference is None else sum(a == b for a, b in zip(tokens, reference, strict=True)) / rows
    used = runs[0][1].path
    return PathResult(path, used, prefill, step_ms, rows * new_tokens / total, first_s - total, identical), tokens


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a model folder (a hub checkpoint's layout)")
    parser.add_argument("--shape", help="build this real shape first (aerorl_ops.models.real_shapes)")
    parser.add_argument("--build-dir", type=Path, default=Path("/tmp/aerorl-real-shape"))
    parser.add_argument("--layers", type=int, default=None, help="with --shape: its depth (a quick test)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--sequences", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--image", default="588x560", help="page size WxH (588x560: 420 Qwen vision tokens)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--bandwidth-tbs", type=float, default=4.8, help="device memory bandwidth, TB/s")
    parser.add_argument("--quick", action="store_true", help="the embedded tiny model, fp32, 8 x 32 tokens on CPU")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        from aerorl_ops.models.embedded_default import build_tiny_qwen2vl

        args.model = args.model or build_tiny_qwen2vl(Path("data/models/tiny-qwen2-vl"))
        args.dtype, args.sequences, args.new_tokens, args.image = "float32", 8, 32, "224x224"
    if args.shape:
        from aerorl_ops.models.real_shapes import build_real_shape

        started = time.perf_counter()
        args.model = build_real_shape(args.shape, args.build_dir, args.device, getattr(torch, args.dtype), args.layers)
        print(f"built {args.shape} on {args.device} in {time.perf_counter() - started:.1f} s", flush=True)
    device = torch.device(args.device)
    started = time.perf_counter()
    loaded = load_vlm(ModelSource(str(args.model)), device, getattr(torch, args.dtype))
    loaded.model.eval()
    print(f"loaded in {time.perf_counter() - started:.1f} s", flush=True)
    width, height = (int(v) for v in args.image.split("x"))
    inputs = encode_prompts(loaded, batch_rows(args.sequences, (width, height)))
    prompt = int(inputs["attention_mask"].sum(dim=1).float().mean())
    eos = eos_token_ids(loaded)
    floor_bytes = weight_bytes(loaded) + kv_bytes_per_token(loaded) * args.sequences * (prompt + args.new_tokens / 2)
    floor_ms = 1000 * floor_bytes / (args.bandwidth_tbs * 1e12)
    results, reference = [], None
    for path in args.paths:
        result, tokens = measure_path(loaded, path, inputs, args.new_tokens, args.repeats, eos, reference)
        if path == DECODE_GENERATE:
            reference = tokens
        result.floor_ratio = result.step_ms / floor_ms
        results.append(result)
        print(f"{path:9s} ({result.used}): prefill {result.prefill_s:.3f} s, {result.step_ms:.2f} ms/step "
              f"({result.floor_ratio:.1f}x the floor), {result.tokens_per_s:.0f} tokens/s, first call "
              f"+{result.first_call_extra_s:.1f} s, identical to generate {result.identical_share:.1%}", flush=True)
    summary = {"model": str(args.model), "device": str(device), "dtype": args.dtype, "sequences": args.sequences,
               "prompt_tokens_mean": prompt, "new_tokens": args.new_tokens, "floor_ms": floor_ms,
               "floor_bytes": floor_bytes, "paths": [asdict(r) for r in results]}
    base = next((r for r in results if r.path == DECODE_GENERATE), None)
    for result in results:
        if base is not None and result is not base:
            print(f"{result.path}: {base.step_ms / result.step_ms:.1f}x faster per step than generate")
    print(f"floor {floor_ms:.2f} ms/step ({floor_bytes / 1e9:.2f} GB at {args.bandwidth_tbs} TB/s), "
          f"{args.sequences} sequences of {prompt} prompt tokens")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
