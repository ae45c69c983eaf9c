"""Real model sizes on this CPU: generation and one LoRA RL step at SmolVLM-500M, Qwen2-VL-2B and
Qwen2.5-VL-3B shapes (issue 21, item 5).

Each model is a random-init checkpoint of its family's real configuration (vocabulary, widths,
depths, heads, vision tower; public values, no hub download), in bf16, built by
``aerorl_ops.models.real_shapes`` (a small byte-level BPE tokenizer with the family's special tokens, the
family's processor and chat template, the real vocabulary size in the embedding and LM head). Per model,
each part in its own subprocess (this script
re-invokes itself with ``--part``) so one part's peak RSS cannot hide another's:

* ``build``: random init in bf16 and ``save_pretrained`` into a scratch folder;
* ``generate``: a benchmark partition (``generation.partition_run.run_generation``, the project's
  batched generation) of ``--rows`` synthetic DocVQA/ChartQA rows (``aerorl_ops.rows``) at batch
  ``--batch``, greedy, ``--max-new-tokens`` new tokens, the model loaded in bf16;
* ``rl``: one RL step (``rl.step.trainer.RLTrainer.rl_step``: rollout, reference and policy log-probs,
  update) of 2 prompts x 2 samples from the easy_vqa environment, LoRA rank 8 on a bf16 policy, the
  reference int8 (bitsandbytes), both from ``rl.runtime.policy.policy_and_reference(dtype=bfloat16)`` as a
  ``[models.<key>] dtype = "bfloat16"`` base model trains. Both models are loaded before the step is
  timed.

Printed per part: wall seconds, tokens/s, peak RSS (``getrusage``), and the work's estimated
floor: FLOPs over this machine's bf16 matmul throughput, measured at the start of the same run
(a timed 2048^3 ``torch.matmul``, bf16 and fp32). FLOPs, counted from the tokens each decoder
and vision call actually processed (forward pre-hooks): decoder 2 x non-embedding params x tokens
plus attention 4 x layers x heads x head_dim x T_q x T_kv, doubled for calls with gradients
enabled (forward + the backward through the frozen base to the adapters; LoRA's own weight
gradients are negligible); vision tower 2 x params x patches plus 4 x depth x width x patches^2
per image (Qwen2.5-VL's windowed layers counted as full attention); LM head 2 x H x V per logit
row, rows counted from the matmuls that produced V columns. The int8 reference's FLOPs are
divided by the same bf16 rate.

During the RL step a ``TorchDispatchMode`` records every tensor produced with V (vocabulary)
columns; the largest is printed next to the [B, T, V] full logits of the update's forward, the
check that the fused log-prob path never builds them.

    python benchmarks/bench_real_shapes.py --threads 2     # all three models (tens of minutes)
    python benchmarks/bench_real_shapes.py --quick         # SmolVLM-500M, 4 rows: under 2 minutes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from quiet_logs import quiet_model_logs  # noqa: E402
from transformers import AutoConfig, AutoModelForImageTextToText  # noqa: E402

from aerorl_ops.models.real_shapes import REAL_SHAPES, build_real_shape  # noqa: E402

GIB = 1024**3
MEMORY_BUDGET_GIB = 24
MATMUL_SIZE = 2048
QUICK_MODEL = "smolvlm-500m"


@dataclass(frozen=True)
class PartResult:
    """One part of one model, measured in its own process."""

    part: str
    wall_s: float
    peak_rss_bytes: int
    tokens: int = 0  # generated (generate) or attended sequence tokens (rl, the trainer's count)
    decoder_tokens: int = 0  # tokens the decoder processed, over every call (prefill, decode, scoring, update)
    flops: float = 0.0
    params: int = 0
    detail: str = ""
    largest_vocab_tensor: list[int] = dataclasses.field(default_factory=list)
    full_logits_shape: list[int] = dataclasses.field(default_factory=list)
    rss_loaded_bytes: int = 0  # rl: RSS with both models loaded, right before the step
    peak_loaded_bytes: int = 0  # rl: peak RSS up to then (loading's transients)


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def matmul_tflops(dtype: torch.dtype, size: int = MATMUL_SIZE, repeats: int = 5) -> float:
    """Measured dense matmul throughput: ``size``^3 ``torch.matmul`` in ``dtype``, best of ``repeats``."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.matmul(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e12


# ----- building a checkpoint -----
def build(name: str, folder: Path, seed: int = 0) -> PartResult:
    started = time.perf_counter()
    build_real_shape(name, folder, "cpu", torch.bfloat16, seed=seed)
    config = AutoConfig.from_pretrained(folder).get_text_config()
    with torch.device("meta"):
        params = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(folder)).num_parameters()
    return PartResult("build", time.perf_counter() - started, peak_rss_bytes(), params=params,
                      detail=f"vocab {config.vocab_size}, "
                             f"{sum(f.stat().st_size for f in folder.glob('*.safetensors')) / GIB:.2f} GiB on disk")


# ----- FLOPs of what the model actually processed -----
def _find(model: torch.nn.Module, suffixes: tuple[str, ...]) -> torch.nn.Module:
    for name, module in model.named_modules():
        if name.endswith(suffixes):
            return module
    raise ValueError(f"no module named *{'/'.join(suffixes)} in {type(model).__name__}; add its name here")


def _decoder_input(args, kwargs) -> torch.Tensor:
    """A decoder call's ``inputs_embeds`` [B, T, H], else its ``input_ids`` [B, T]."""
    states = kwargs.get("inputs_embeds")
    return states if states is not None else kwargs.get("input_ids", args[0] if args else None)


class FlopCounter:
    """Forward pre-hooks on a model's decoder and vision tower adding up the FLOPs of each call."""

    def __init__(self) -> None:
        self.flops = 0.0
        self.decoder_tokens = 0
        self.handles = []
        self.decoder_s: dict[str, float] = {}  # seconds inside each watched decoder (label, grad on/off)
        self._entered = 0.0

    def watch(self, model: torch.nn.Module, label: str = "model") -> FlopCounter:
        config = model.config
        text, vision = config.get_text_config(), config.vision_config
        decoder = _find(model, ("language_model", "text_model"))
        tower = _find(model, ("visual", "vision_model"))
        embed = decoder.get_input_embeddings().weight.numel()
        decoder_params = sum(p.numel() for p in decoder.parameters()) - embed
        tower_params = sum(p.numel() for p in tower.parameters())
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        attention_width = text.num_hidden_layers * text.num_attention_heads * head_dim
        depth = getattr(vision, "depth", None) or vision.num_hidden_layers
        width = getattr(vision, "embed_dim", None) or vision.hidden_size

        def on_decoder(module, args, kwargs) -> None:
            batch, queries = _decoder_input(args, kwargs).shape[:2]
            cache = kwargs.get("past_key_values")
            keys = queries + (cache.get_seq_length() if cache is not None else 0)
            flops = batch * queries * (2 * decoder_params + 4 * attention_width * keys)
            self.flops += flops * (2 if torch.is_grad_enabled() else 1)
            self.decoder_tokens += batch * queries
            self._entered = time.perf_counter()

        def after_decoder(module, args, output) -> None:
            key = f"{label}{' (grad)' if torch.is_grad_enabled() else ''}"
            self.decoder_s[key] = self.decoder_s.get(key, 0.0) + time.perf_counter() - self._entered

        def on_tower(module, args, kwargs) -> None:
            grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
            if grid is not None:  # Qwen: patches per image t x h x w
                patches = [int(t * h * w) for t, h, w in grid.tolist()]
            else:  # SigLIP: [N, C, H, W] pixel values
                pixels = kwargs.get("pixel_values", args[0] if args else None)
                patch = vision.patch_size
                patches = [pixels.shape[-2] // patch * (pixels.shape[-1] // patch)] * pixels.shape[0]
            self.flops += sum(2 * tower_params * p + 4 * depth * width * p * p for p in patches)

        self.handles += [decoder.register_forward_pre_hook(on_decoder, with_kwargs=True),
                         decoder.register_forward_hook(after_decoder),
                         tower.register_forward_pre_hook(on_tower, with_kwargs=True)]
        return self

    def params(self, model: torch.nn.Module) -> int:
        return sum(p.numel() for p in model.parameters())


_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
            torch.ops.aten.baddbmm.default}


class VocabColumns(TorchDispatchMode):
    """Records the largest tensor any op produces with ``vocab`` columns, and the logit rows
    (V-column matmul outputs) whose LM-head FLOPs are 2 x ``hidden`` x ``vocab`` each."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.vocab, self.hidden = vocab, hidden
        self.largest: list[int] = []
        self.logit_rows = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view:  # a view of an existing tensor (the LM head weight transposed: [H, V]) allocates nothing
            return out
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.dim() >= 2 and tensor.shape[-1] == self.vocab:
                if tensor.numel() > (torch.Size(self.largest).numel() if self.largest else 0):
                    self.largest = list(tensor.shape)
                if func in _MATMULS:
                    self.logit_rows += tensor.numel() // self.vocab
        return out

    @property
    def head_flops(self) -> float:
        return 2.0 * self.hidden * self.vocab * self.logit_rows


def _head_shape(model) -> tuple[int, int]:
    vocab, hidden = model.get_output_embeddings().weight.shape
    return vocab, hidden


# ----- the two measured parts -----
def generate(folder: Path, rows_count: int, batch: int, max_new_tokens: int) -> PartResult:
    from aerorl_ops.config.generation import GenerationSettings
    from aerorl_ops.generation.partition_run import partition_stats, run_generation
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from aerorl_ops.rows.synthetic_charts import synthetic_chartqa_rows
    from aerorl_ops.rows.synthetic_documents import synthetic_docvqa_rows

    rows = synthetic_docvqa_rows(rows_count // 2, seed=0) + synthetic_chartqa_rows(rows_count - rows_count // 2,
                                                                                  seed=0)
    loaded = load_vlm(ModelSource(str(folder)), torch.device("cpu"), dtype=torch.bfloat16)
    counter = FlopCounter().watch(loaded.model)
    vocab = VocabColumns(*_head_shape(loaded.model))
    with vocab:
        table = run_generation(loaded, rows, batch, GenerationSettings(max_new_tokens=max_new_tokens))
    generated = sum(table.column("generated_tokens").to_pylist())
    vision = sum(table.column("vision_tokens").to_pylist())
    text = sum(table.column("prompt_text_tokens").to_pylist())
    return PartResult("generate", partition_stats(table).wall_s, peak_rss_bytes(), tokens=generated,
                      decoder_tokens=counter.decoder_tokens, flops=counter.flops + vocab.head_flops,
                      params=counter.params(loaded.model), largest_vocab_tensor=vocab.largest,
                      detail=f"{len(rows)} rows at batch {batch}: prompts {text} text + {vision} vision tokens, "
                             f"{generated} generated")


def rl_step(folder: Path, max_new_tokens: int) -> PartResult:
    from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    settings = TrainingSettings(lora_rank=8, quant_bits=8, group_size=2, prompts_per_step=2,
                                max_new_tokens=max_new_tokens)
    env = make_env(TRAINING_DEFAULTS.env, split=TRAINING_DEFAULTS.train_split, limit=16, seed=settings.seed)
    policy, reference = policy_and_reference(str(folder), settings, device="cpu", dtype=torch.bfloat16)
    loaded = policy.loaded
    trainer = RLTrainer(settings.resolve(), policy)
    reference.anchor(str(folder), rl_start=True)
    trainer.reference = reference
    counter = FlopCounter().watch(loaded.model, "policy")
    counter.watch(reference.loaded.model, "reference")  # loads the reference now, before the step
    update_tokens: list[list[int]] = []
    language = _find(loaded.model, ("language_model", "text_model"))
    language.register_forward_pre_hook(lambda m, a, k: update_tokens.append(list(_decoder_input(a, k).shape[:2]))
                                       if torch.is_grad_enabled() else None, with_kwargs=True)
    vocab, hidden = _head_shape(loaded.model)
    columns = VocabColumns(vocab, hidden)
    rss_loaded, peak_loaded = current_rss_bytes(), peak_rss_bytes()
    with columns:
        stats = trainer.rl_step(env, list(range(settings.prompts_per_step)))
    params = counter.params(loaded.model)
    trainable_params = sum(p.numel() for p in loaded.model.parameters() if p.requires_grad)
    reference_bytes = sum(t.numel() * t.element_size() for t in
                          [*reference.loaded.model.parameters(), *reference.loaded.model.buffers()])
    full = [*max(update_tokens, key=lambda shape: shape[0] * shape[1], default=[0, 0]), vocab]  # largest call
    return PartResult("rl", stats.step_s, peak_rss_bytes(), tokens=round(stats.tokens_per_s * stats.step_s),
                      decoder_tokens=counter.decoder_tokens, flops=counter.flops + columns.head_flops, params=params,
                      largest_vocab_tensor=columns.largest, full_logits_shape=full,
                      rss_loaded_bytes=rss_loaded, peak_loaded_bytes=peak_loaded,
                      detail=f"{settings.prompts_per_step} prompts x {settings.group_size} samples, LoRA rank "
                             f"{settings.lora_rank}: {trainable_params / 1e6:.2f} M trainable; int8 reference "
                             f"{reference_bytes / GIB:.2f} GiB; loss {stats.loss:.4f}, kl {stats.kl}, "
                             f"response length {stats.response_length:.1f}, logit rows {columns.logit_rows}; "
                             "seconds in decoder forwards: "
                             + ", ".join(f"{k} {v:.1f}" for k, v in counter.decoder_s.items()))


# ----- orchestration -----
def spawn(part: str, model: str, folder: Path, args: argparse.Namespace) -> PartResult:
    command = [sys.executable, __file__, "--part", part, "--model", model, "--folder", str(folder),
               "--threads", str(args.threads), "--rows", str(args.rows), "--batch", str(args.batch),
               "--max-new-tokens", str(args.max_new_tokens)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{model}: --part {part} failed (exit {proc.returncode}; a negative exit is a signal, "
                         f"-9 usually the kernel's OOM killer):\n{proc.stderr[-4000:]}")
    return PartResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


def report_part(result: PartResult, bf16_tflops: float) -> None:
    print(f"  {result.part:<8} {result.wall_s:8.1f} s  peak RSS {result.peak_rss_bytes / GIB:6.2f} GiB  "
          f"{result.params / 1e9:.3f} B params  {result.detail}")
    if result.part == "build":
        return
    floor_s = result.flops / (bf16_tflops * 1e12)
    print(f"  {'':<8} {result.tokens / result.wall_s:8.2f} tok/s ({result.tokens} tokens); decoder processed "
          f"{result.decoder_tokens} tokens ({result.decoder_tokens / result.wall_s:.1f}/s); "
          f"{result.flops / 1e12:.2f} TFLOP -> floor {floor_s:.1f} s at bf16 rate = {floor_s / result.wall_s:.1%} "
          "of the measured time")
    largest = result.largest_vocab_tensor
    if result.full_logits_shape:
        full = result.full_logits_shape
        verdict = ("never built" if torch.Size(largest).numel() < full[0] * full[1] * full[2]
                   else "BUILT (or as large)")
        print(f"  {'':<8} largest tensor with V columns: {largest}; full update logits [B, T, V] = {full}: {verdict}")
    else:
        print(f"  {'':<8} largest tensor with V columns: {largest}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(REAL_SHAPES), help=f"comma-separated, of {', '.join(REAL_SHAPES)}")
    parser.add_argument("--rows", type=int, default=8, help="benchmark partition rows (half DocVQA, half ChartQA)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_MODEL} only, 4 rows, 2 new tokens")
    parser.add_argument("--part", choices=("build", "generate", "rl"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quiet_model_logs(args.threads)
    if args.part is not None:
        folder = Path(args.folder)
        result = {"build": lambda: build(args.model, folder),
                  "generate": lambda: generate(folder, args.rows, args.batch, args.max_new_tokens),
                  "rl": lambda: rl_step(folder, args.max_new_tokens)}[args.part]()
        print(json.dumps(asdict(result)))
        return
    if args.quick:
        args.models, args.rows, args.max_new_tokens = QUICK_MODEL, 4, 2
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in REAL_SHAPES]
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)}; known: {', '.join(REAL_SHAPES)}")
    bf16, fp32 = matmul_tflops(torch.bfloat16), matmul_tflops(torch.float32)
    print(f"threads {args.threads}; load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"{MATMUL_SIZE}^3 matmul: bf16 {bf16:.3f} TFLOP/s, fp32 {fp32:.3f} TFLOP/s", flush=True)
    print(f"partition: {args.rows} rows at batch {args.batch}, {args.max_new_tokens} new tokens (greedy); "
          f"RL: 2 prompts x 2 samples, LoRA rank 8, int8 reference, {args.max_new_tokens} new tokens\n")
    for model in models:
        print(f"{model}:", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"real-{model}-") as scratch:
            folder = Path(scratch)
            results = [spawn(part, model, folder, args) for part in ("build", "generate", "rl")]
        for result in results:
            report_part(result, bf16)
        rl = results[-1]
        verdict = "fits" if rl.peak_rss_bytes <= MEMORY_BUDGET_GIB * GIB else "DOES NOT FIT"
        step = (f"the step raised it to {rl.peak_rss_bytes / GIB:.2f} GiB" if rl.peak_rss_bytes > rl.peak_loaded_bytes
                else "the step stayed below loading's peak")
        print(f"  RSS with policy and reference loaded {rl.rss_loaded_bytes / GIB:.2f} GiB (peak while loading "
              f"{rl.peak_loaded_bytes / GIB:.2f} GiB); {step}")
        print(f"  policy + int8 reference + LoRA step peak RSS {rl.peak_rss_bytes / GIB:.2f} GiB: {verdict} "
              f"in {MEMORY_BUDGET_GIB} GiB; load average now {os.getloadavg()[0]:.2f}\n", flush=True)


if __name__ == "__main__":
    main()
