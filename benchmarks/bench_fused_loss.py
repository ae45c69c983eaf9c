"""Memory and time of the masked LM-head cross-entropy: naive full logits vs the fused, chunked path.

Shapes default to a Qwen2-VL-2B-like training micro-batch: V = 151,936, B = 4, T = 1024,
70% of positions are vision tokens (a leading block of each sequence, as image tokens sit
before the text), H = 1536 (``--hidden``). Both paths compute forward + backward of the
same loss w.r.t. the hidden states and the LM-head weight, or, with ``--frozen-head``, w.r.t.
the hidden states only (the weight has ``requires_grad=False`` in both paths, as under LoRA,
where the LM head is never adapted):

* naive: ``logits = hidden @ W.T`` for every position ([B, T, V]), then
  :func:`aerorl_ops.losses.masked_cross_entropy_loss` (AeroRL's semantics);
* fused: :func:`aerorl_ops.losses.fused_masked_cross_entropy` (counted rows selected before
  the LM head, ``--chunk-size`` rows at a time).

Each path runs in its own subprocess (this script re-invokes itself with ``--path``) so the
peak of one cannot hide the other's. Memory is the peak the loss step adds above what the
inputs and weights already hold: on CPU the process's peak RSS (``getrusage``) minus the RSS
measured right after the inputs are allocated; on CUDA ``torch.cuda.max_memory_allocated``
minus the allocated bytes at that point. With a trainable head it includes the [V, H] weight
gradient, which both paths must produce; with ``--frozen-head`` neither path allocates it.
Time is the median of ``--repeats`` forward + backward steps after one warm-up step.
Simplifications: random weights and labels, fp32, no model body.

    python benchmarks/bench_fused_loss.py --quick          # smoke test, seconds
    python benchmarks/bench_fused_loss.py --threads 2      # full shapes, minutes on CPU
    python benchmarks/bench_fused_loss.py --frozen-head    # the LM head frozen (LoRA), both paths
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from aerorl_ops.losses import DEFAULT_CHUNK_SIZE, fused_masked_cross_entropy, masked_cross_entropy_loss  # noqa: E402

GIB = 1024**3
MEMORY_FLOOR = 4.0  # trainable head: both paths hold the [V, H] weight gradient
FROZEN_HEAD_MEMORY_FLOOR = 15.0  # frozen head: the fused path holds about one [chunk_size, V] block
SPEED_FLOOR = 2.0


@dataclass(frozen=True)
class Shapes:
    batch: int
    seq: int
    vocab: int
    hidden: int
    vision_fraction: float

    @property
    def counted_rows(self) -> int:
        return self.batch * (self.seq - int(self.seq * self.vision_fraction))


@dataclass(frozen=True)
class PathResult:
    path: str
    baseline_bytes: int
    peak_added_bytes: int
    peak_is_upper_bound: bool
    times_s: list[float]
    loss: float
    weight_grad_bytes: int


def make_inputs(shapes: Shapes, device: str, frozen_head: bool, seed: int = 0):
    gen = torch.Generator(device=device).manual_seed(seed)
    hidden = torch.randn(shapes.batch, shapes.seq, shapes.hidden, generator=gen, device=device)  # [B, T, H]
    weight = torch.randn(shapes.vocab, shapes.hidden, generator=gen, device=device)  # [V, H]
    weight.mul_(shapes.hidden**-0.5)
    labels = torch.randint(0, shapes.vocab, (shapes.batch, shapes.seq), generator=gen, device=device)  # [B, T]
    vision_mask = torch.zeros(shapes.batch, shapes.seq, dtype=torch.bool, device=device)  # [B, T]
    vision_mask[:, : int(shapes.seq * shapes.vision_fraction)] = True
    return hidden.requires_grad_(True), weight.requires_grad_(not frozen_head), labels, vision_mask


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_path(args: argparse.Namespace, shapes: Shapes) -> PathResult:
    """One path in this process: warm-up, timed repeats, peak memory above the inputs."""
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    hidden, weight, labels, vision_mask = make_inputs(shapes, args.device, args.frozen_head)

    def step() -> float:
        hidden.grad = weight.grad = None
        if args.path == "naive":
            logits = F.linear(hidden, weight)  # [B, T, V]
            loss = masked_cross_entropy_loss(logits, labels, vision_mask)
            del logits
        else:
            loss = fused_masked_cross_entropy(hidden, weight, labels, vision_mask, chunk_size=args.chunk_size)
        loss.backward()
        return loss.item()

    if cuda:
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        baseline = current_rss_bytes()
        peak_before = peak_rss_bytes()

    times = []
    for i in range(1 + args.repeats):
        start = time.perf_counter()
        loss = step()
        if cuda:
            torch.cuda.synchronize()
        if i > 0:
            times.append(time.perf_counter() - start)

    peak = torch.cuda.max_memory_allocated() if cuda else peak_rss_bytes()
    return PathResult(
        path=args.path,
        baseline_bytes=baseline,
        peak_added_bytes=peak - baseline,
        # On CPU, if the loss never rose above an earlier high-water mark the figure is only an upper bound.
        peak_is_upper_bound=not cuda and peak == peak_before,
        times_s=times,
        loss=loss,
        weight_grad_bytes=0 if weight.grad is None else weight.grad.numel() * weight.grad.element_size(),
    )


def spawn(path: str, argv: list[str]) -> PathResult:
    proc = subprocess.run(
        [sys.executable, __file__, *argv, "--path", path], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"--path {path} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return PathResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


def report(shapes: Shapes, args: argparse.Namespace, naive: PathResult, fused: PathResult) -> None:
    logits_bytes = shapes.batch * shapes.seq * shapes.vocab * 4
    print(
        f"shapes: B={shapes.batch} T={shapes.seq} V={shapes.vocab} H={shapes.hidden} "
        f"vision={shapes.vision_fraction:.0%} counted rows N={shapes.counted_rows} "
        f"fp32 device={args.device} threads={args.threads} chunk_size={args.chunk_size} repeats={args.repeats} "
        f"LM head {'frozen (no weight gradient)' if args.frozen_head else 'trainable'}"
    )
    print(f"inputs+weights baseline: {naive.baseline_bytes / GIB:.2f} GiB (naive), "
          f"{fused.baseline_bytes / GIB:.2f} GiB (fused)")
    print(f"naive [B, T, V] fp32 logits alone: {logits_bytes / GIB:.2f} GiB")
    print(f"{'path':<6} {'peak added (GiB)':>17} {'median fwd+bwd (s)':>19}  times (s)           loss")
    for r in (naive, fused):
        bound = "<=" if r.peak_is_upper_bound else "  "
        times = ", ".join(f"{t:.2f}" for t in r.times_s)
        print(f"{r.path:<6} {bound}{r.peak_added_bytes / GIB:>15.3f} {statistics.median(r.times_s):>19.3f}  "
              f"[{times}]  {r.loss:.6f}")
    memory_ratio = naive.peak_added_bytes / max(fused.peak_added_bytes, 1)
    speed_ratio = statistics.median(naive.times_s) / statistics.median(fused.times_s)
    memory_floor = FROZEN_HEAD_MEMORY_FLOOR if args.frozen_head else MEMORY_FLOOR
    for name, ratio, floor in (("memory", memory_ratio, memory_floor), ("speed", speed_ratio, SPEED_FLOOR)):
        verdict = "meets" if ratio >= floor else "BELOW"
        print(f"{name} ratio naive/fused: {ratio:.2f}x ({verdict} the {floor:.0f}x floor)")
    print(f"loss |naive - fused|: {abs(naive.loss - fused.loss):.2e}")
    block_rows = min(args.chunk_size, shapes.counted_rows)
    block_bytes = block_rows * shapes.vocab * 4
    if args.frozen_head:
        print(
            f"frozen head: no weight gradient in either path (naive {naive.weight_grad_bytes} B, fused "
            f"{fused.weight_grad_bytes} B); one [{block_rows}, V] fp32 logits block is "
            f"{block_bytes / GIB:.3f} GiB = {block_bytes / max(fused.peak_added_bytes, 1):.0%} "
            "of the fused path's added peak."
        )
        return
    grad_w = fused.weight_grad_bytes
    share = grad_w / max(fused.peak_added_bytes, 1)
    print(
        f"V x H weight gradient: {grad_w / GIB:.3f} GiB = {share:.0%} of the fused path's added peak. "
        "Both paths must hold it; it grows with H while the fused chunk workspace "
        f"(~{args.chunk_size} x V floats) does not, so at large H it dominates the total."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=1536, help="hidden size H (default 1536, Qwen2-VL-2B)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--vision-fraction", type=float, default=0.7)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after one warm-up step")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch.set_num_threads")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="small shapes for a smoke test")
    parser.add_argument(
        "--frozen-head", action="store_true", help="LM-head weight frozen in both paths (LoRA): no [V, H] gradient"
    )
    parser.add_argument("--path", choices=("naive", "fused"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.seq, args.vocab, args.hidden = 2, 256, 16_384, 256
    shapes = Shapes(args.batch, args.seq, args.vocab, args.hidden, args.vision_fraction)

    if args.path is not None:
        print(json.dumps(asdict(run_path(args, shapes))))
        return
    forwarded = [*(argv if argv is not None else sys.argv[1:]), "--threads", str(args.threads)]
    results = {path: spawn(path, forwarded) for path in ("naive", "fused")}
    report(shapes, args, results["naive"], results["fused"])


if __name__ == "__main__":
    main()
