"""GRPO training steps of Qwen2.5-VL-3B and -7B at their real sizes on one GPU, shaped like EasyR1's
Geometry3K baseline, next to EasyR1's published figures.

Standalone: it imports only the standard library, torch, transformers (4.49 to 5.x) and, for LoRA,
peft, so it runs on a bare GPU machine from a copy of the checkout without the project installed.

Each model is a random-init Qwen2.5-VL built from its published configuration (written out below, no
download) directly on the device in bf16, attention through SDPA. Its inputs are synthesized as the
processor would give them: per prompt 256 text tokens around one image, written as
``<|vision_start|>``, ``<|image_pad|>`` x 196, ``<|vision_end|>`` for a 392x392 image (patches
``[1, 28, 28]`` = 784 rows of 3x2x14x14 = 1176 pixel values, 196 tokens after the 2x2 merge).

One GRPO step, as EasyR1 runs it: rollout with ``model.generate`` (5 sampled replies per prompt,
temperature 1), old log-probs from the actor and reference log-probs, random 0/1 rewards,
group-normalized advantages, then one optimizer step of the PPO clipped loss (clip 0.2 / 0.28) plus
0.01 x the low-variance KL (k3) to the frozen reference, token-mean, gradient clipping at 1.0, AdamW
(lr 1e-6, weight decay 0.01) with fp32 moments, gradient checkpointing, micro-batches of 8
sequences. Per-token log-probs never build [B, T, V] logits: the model's LM head is bypassed, and
the reply positions' hidden states go through it 2048 rows at a time, each chunk recomputed in the
backward pass (``torch.utils.checkpoint``).

Modes: ``plain`` (one process, the module as built) and ``fsdp2`` (``fully_shard`` at world size 1
on every decoder layer and vision block, the vision tower, then the root, ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``; the rollout runs through the sharded module, which re-gathers each layer at
every decoding step). Tuning: ``full`` (3B) or ``lora`` (7B: rank 64 on q/k/v/o/gate/up/down, which
also matches the vision tower's MLPs; the base frozen in bf16; the reference is the base with the
adapters disabled). A full run that runs out of GPU memory is rerun with LoRA, and says so.

Deliberate simplifications: random rewards (both values in every group, so that every group
trains, as after DAPO's dynamic sampling) and fixed-length replies (end-of-text tokens suppressed,
``min_new_tokens`` = ``max_new_tokens``), so that figures are comparable; rollouts by HF ``generate``
(vLLM is detected, not used: EasyR1 rolls out with vLLM, so its rollout is far faster); a bf16
reference (bitsandbytes is not on the GPU image, so no int8 reference); LoRA where full fine-tuning
does not fit one 80 GB GPU (7B: ~16 bytes a parameter); in ``plain`` full tuning the parameters and
gradients stay bf16 (fp32 moments, no fp32 master copy, so updates below bf16's resolution round
away; ``fsdp2`` keeps fp32 parameters as EasyR1 does); one optimizer step per GRPO step.

Printed and written as JSON (``--out``, after each run) per model and mode: tokens/s/GPU (EasyR1's
definition: prompt + reply tokens of the step / step seconds / GPUs), actor MFU (6 x decoder
parameters x tokens, the embedding and LM head counted as verl's counter does, attention's T^2 term
(~3% here) left out, over the update's seconds and over the step's, against the GPU's dense bf16
peak, H100/H200 SXM 989 TFLOP/s, else ``--peak-tflops``; with LoRA, 6N overstates the FLOPs done,
as no weight gradient of the base is computed), rollout, log-prob, update and step
seconds, peak GPU memory, and EasyR1's figures beside them (Qwen2.5-VL-7B on 8xH100, Geometry3K:
1,600-2,000 tokens/s/GPU, 16-23% actor MFU, 120-145 s a step; Qwen2.5-VL-3B: 1,800 tokens/s/GPU).

    python benchmarks/bench_gpu_step.py --quick     # 7B and 3B, plain and fsdp2: under 8 minutes on one H100
    python benchmarks/bench_gpu_step.py             # 16 prompts x 5 replies, 3 timed steps each
    python benchmarks/bench_gpu_step.py --smoke     # tiny model on CPU in fp32, seconds (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import importlib.util
import inspect
import json
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
import torch.utils.checkpoint
from torch import nn

try:
    import transformers
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
except ImportError as error:  # Qwen2.5-VL arrived in transformers 4.49
    sys.exit(f"bench_gpu_step needs transformers>=4.49 with Qwen2.5-VL ({error}); pip install -U transformers")

VISION_START, VISION_END, VISION_PAD, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151654, 151655, 151656
BOS, IM_END = 151643, 151645  # <|endoftext|> (also the pad id), <|im_end|> (the chat's end of turn)
NEVER_SAMPLED = [BOS, IM_END, VISION_START, VISION_END, VISION_PAD, IMAGE_PAD, VIDEO_PAD]
PATCH_VALUES = 3 * 2 * 14 * 14  # channels x temporal patch x patch x patch: 1176
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
EASYR1 = {  # EasyR1's published Geometry3K baseline (GRPO, 8xH100, vLLM rollouts)
    "qwen2.5-vl-7b": {"tokens_per_s_per_gpu": [1600, 2000], "actor_mfu": [0.16, 0.23], "step_s": [120, 145]},
    "qwen2.5-vl-3b": {"tokens_per_s_per_gpu": [1800, 1800]},
}


@dataclass(frozen=True)
class ModelSpec:
    """A Qwen2.5-VL size: its text and vision configuration, as in its published config.json."""

    name: str
    text: dict
    vision: dict
    tie_word_embeddings: bool
    tuning: str  # "full" or "lora": what fits one 80 GB GPU


def _text(vocab: int, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, window_layers: int,
          mrope: tuple[int, int, int] = (16, 24, 24)) -> dict:
    return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads, max_window_layers=window_layers,
                hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=128_000, initializer_range=0.02,
                rope_theta=1_000_000.0, rope_scaling={"type": "mrope", "mrope_section": list(mrope)},
                use_sliding_window=False, sliding_window=32_768, attention_dropout=0.0,
                bos_token_id=BOS, eos_token_id=IM_END)


def _vision(out_hidden: int, depth: int = 32, hidden: int = 1280, intermediate: int = 3420, heads: int = 16,
            full_attention: tuple[int, ...] = (7, 15, 23, 31)) -> dict:
    return dict(depth=depth, hidden_size=hidden, intermediate_size=intermediate, num_heads=heads,
                out_hidden_size=out_hidden, fullatt_block_indexes=list(full_attention), hidden_act="silu",
                in_channels=3, patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                tokens_per_second=2)


MODELS = {spec.name: spec for spec in (
    ModelSpec("qwen2.5-vl-3b", _text(151_936, 2048, 11_008, 36, 16, 2, 70), _vision(2048), True, "full"),
    ModelSpec("qwen2.5-vl-7b", _text(152_064, 3584, 18_944, 28, 28, 4, 28), _vision(3584), False, "lora"),
    # --smoke: the real vocabulary (so the real token ids), everything else tiny (head_dim 16)
    ModelSpec("tiny", _text(151_936, 64, 128, 2, 4, 2, 2, mrope=(2, 3, 3)),
              _vision(64, depth=2, hidden=32, intermediate=64, heads=2, full_attention=(1,)), True, "full"),
)}
SHORT_NAMES = {"3b": "qwen2.5-vl-3b", "7b": "qwen2.5-vl-7b", "tiny": "tiny"}


@dataclass(frozen=True)
class Settings:
    """The batch and the algorithm's constants: one set for every run of an invocation."""

    prompts: int
    replies: int  # GRPO's n
    text_tokens: int  # text tokens of a prompt, around its image
    grid: tuple[int, int, int]  # the image's patch grid (t, h, w)
    reply_tokens: int
    warmup_reply_tokens: int
    timed_steps: int
    micro_batch: int  # sequences per forward + backward of the update
    logprob_micro_batch: int  # sequences per forward of the old and reference log-probs
    logit_rows: int  # reply positions sent through the LM head at once
    lr: float = 1e-6
    weight_decay: float = 1e-2
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 1e-2
    max_grad_norm: float = 1.0
    lora_rank: int = 64
    lora_alpha: int = 32

    @property
    def image_tokens(self) -> int:
        t, h, w = self.grid
        return t * h * w // 4  # 2x2 spatial merge

    @property
    def prompt_tokens(self) -> int:
        return self.text_tokens + 2 + self.image_tokens  # + vision start and end


class Batch(NamedTuple):
    """The rollout's prompts, each repeated ``replies`` times (a group's rows are adjacent)."""

    input_ids: torch.Tensor  # [N, P] long
    mm_token_type_ids: torch.Tensor  # [N, P] int: 1 on image tokens
    pixel_values: torch.Tensor  # [N * patches, 1176]
    image_grid_thw: torch.Tensor  # [N, 3] long


@dataclass
class Policy:
    """The actor being trained, how to get its reference, and its optimizer."""

    model: nn.Module  # the HF model (LoRA layers injected in place when tuning is "lora")
    reference: Callable[[], contextlib.AbstractContextManager[nn.Module]]
    optimizer: Fp32StateAdamW
    tuning: str
    reference_kind: str


class StepFigures(NamedTuple):
    rollout_s: float
    logprob_s: float  # old (actor) and reference log-probs
    update_s: float  # forward + backward of every micro-batch and the optimizer step
    step_s: float
    tokens: int  # prompt + reply tokens of the step
    loss: float
    pg_loss: float
    kl: float
    clip_frac: float
    grad_norm: float


@dataclass
class RunResult:
    model: str
    mode: str
    tuning: str
    reference: str = ""
    note: str = ""
    error: str | None = None
    params_total: int = 0
    params_text: int = 0  # the decoder's (what the MFU counts)
    params_trainable: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    reply_tokens: int = 0
    tokens_per_step: int = 0
    setup_s: float = 0.0
    steps: list[dict] = field(default_factory=list)
    rollout_s: float | None = None
    logprob_s: float | None = None
    update_s: float | None = None
    step_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    actor_mfu_update: float | None = None
    actor_mfu_step: float | None = None
    peak_memory_gib: float | None = None
    param_delta: float | None = None  # sum |after - before| over probes of the trainable parameters
    easyr1: dict = field(default_factory=dict)


class Fp32StateAdamW:
    """AdamW (Loshchilov & Hutter) whose moments are fp32 whatever the parameters' dtype
    (``torch.optim.AdamW`` keeps them in the parameter's dtype). Works on FSDP2's DTensors
    through their local shards."""

    def __init__(self, params: list[nn.Parameter], lr: float, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.weight_decay, self.betas, self.eps = params, lr, weight_decay, betas, eps
        self.exp_avg = [torch.zeros_like(_local(p), dtype=torch.float32) for p in params]
        self.exp_avg_sq = [torch.zeros_like(_local(p), dtype=torch.float32) for p in params]
        self.steps = 0

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        beta1, beta2 = self.betas
        correction1, correction2 = 1 - beta1**self.steps, 1 - beta2**self.steps
        for param, exp_avg, exp_avg_sq in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if param.grad is None:
                continue
            grad = _local(param.grad).float()
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq / correction2).sqrt_().add_(self.eps)
            weight = _local(param)
            updated = weight.float().mul_(1 - self.lr * self.weight_decay).addcdiv_(exp_avg, denom,
                                                                                   value=-self.lr / correction1)
            weight.copy_(updated)

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (its storage, under no_grad), or the tensor itself."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


@torch.no_grad()
def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> float:
    """Scale the gradients to a total L2 norm of at most ``max_norm`` (world size 1: shards are whole)."""
    grads = [_local(p.grad) for p in params if p.grad is not None]
    total = torch.stack([g.float().norm() for g in grads]).norm()
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(scale.to(grad.dtype))
    return total.item()


def build_config(spec: ModelSpec) -> Qwen2_5_VLConfig:
    """The published configuration; flat keywords (transformers 4.49-4.52 read only those), else nested."""
    top = dict(image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START,
               vision_end_token_id=VISION_END, vision_token_id=VISION_PAD, tie_word_embeddings=spec.tie_word_embeddings)
    text, vision = copy.deepcopy(spec.text), copy.deepcopy(spec.vision)  # configs edit the rope dict in place
    nested = {**text, "tie_word_embeddings": spec.tie_word_embeddings}
    attempts = (lambda: Qwen2_5_VLConfig(**copy.deepcopy(text), vision_config=copy.deepcopy(vision), **top),
                lambda: Qwen2_5_VLConfig(text_config=copy.deepcopy(nested), vision_config=copy.deepcopy(vision), **top))
    for attempt in attempts:
        try:
            config = attempt()
        except (TypeError, ValueError):
            continue
        built = config.get_text_config()
        if (built.hidden_size, built.num_hidden_layers, built.vocab_size) == (
                text["hidden_size"], text["num_hidden_layers"], text["vocab_size"]):
            return config
    raise RuntimeError(f"transformers {transformers.__version__}: neither flat nor nested keywords gave {spec.name}'s "
                       "text configuration; update build_config for this version")


def build_model(spec: ModelSpec, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """A random-init model of ``spec``, built directly on ``device`` in ``dtype``."""
    config = build_config(spec)
    with torch.device(device):
        try:  # transformers >= 4.56 names it dtype
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, attn_implementation="sdpa", dtype=dtype)
        except TypeError:
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, attn_implementation="sdpa",
                                                                    torch_dtype=dtype)
    if any(p.dtype != dtype for p in model.parameters()):  # this version ignored the dtype keyword
        model.to(dtype)
    model.generation_config.eos_token_id = None  # replies run to max_new_tokens
    model.generation_config.pad_token_id = BOS
    return model


def synthetic_batch(settings: Settings, vocab_text: int, device: torch.device, dtype: torch.dtype,
                    generator: torch.Generator) -> Batch:
    """Prompts as Qwen2.5-VL's processor lays them out: text, one image's placeholder tokens, text."""
    before = min(16, settings.text_tokens)  # the chat template's system and user header
    ids, types = [], []
    for _ in range(settings.prompts):
        text = torch.randint(0, vocab_text, (settings.text_tokens,), generator=generator)
        image = torch.full((settings.image_tokens,), IMAGE_PAD)
        row = torch.cat([text[:before], torch.tensor([VISION_START]), image, torch.tensor([VISION_END]), text[before:]])
        ids.append(row)
        types.append((row == IMAGE_PAD).int())
    patches = math.prod(settings.grid)
    n = settings.prompts * settings.replies
    pixels = torch.randn(settings.prompts, patches, PATCH_VALUES, generator=generator)
    return Batch(
        input_ids=torch.stack(ids).repeat_interleave(settings.replies, 0).to(device),  # [N, P]
        mm_token_type_ids=torch.stack(types).repeat_interleave(settings.replies, 0).to(device),  # [N, P]
        pixel_values=pixels.repeat_interleave(settings.replies, 0).reshape(n * patches, -1).to(device, dtype),
        image_grid_thw=torch.tensor([settings.grid] * n, device=device),  # [N, 3]
    )


def _accepts_token_types(model: nn.Module) -> bool:
    """Transformers >= 5 needs ``mm_token_type_ids`` for the 3D (mrope) positions; older ones infer them."""
    return "mm_token_type_ids" in inspect.signature(model.forward).parameters


def _forget_rope_deltas(model: nn.Module) -> None:
    """Transformers 4.x reuses the 3D-position offsets of the last call when no cache position is given
    (wrong, and a shape error at another batch size): make every forward compute its own."""
    for module in model.modules():
        if getattr(module, "rope_deltas", None) is not None:
            module.rope_deltas = None


@contextlib.contextmanager
def lm_head_bypassed(model: nn.Module) -> Iterator[nn.Module]:
    """The model's forward returns hidden states in ``logits`` (no [B, T, V] tensor); yields the head."""
    head = model.lm_head
    model.lm_head = nn.Identity()
    try:
        yield head
    finally:
        model.lm_head = head


def _rows_logprobs(head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = head(hidden).float()  # [rows, V]
    return logits.gather(-1, targets[:, None]).squeeze(-1) - logits.logsumexp(-1)  # [rows]


def reply_logprobs(model: nn.Module, sequences: torch.Tensor, batch: Batch, rows: slice, prompt_len: int,
                   logit_rows: int) -> torch.Tensor:
    """Log-probs [n, R] of the reply tokens of ``sequences[rows]``, the LM head run ``logit_rows`` at a time
    (each chunk recomputed in backward when gradients are on)."""
    ids = sequences[rows]  # [n, T]
    n, reply_len = ids.shape[0], ids.shape[1] - prompt_len
    patches = batch.pixel_values.shape[0] // batch.input_ids.shape[0]
    inputs = dict(input_ids=ids, pixel_values=batch.pixel_values[rows.start * patches:rows.stop * patches],
                  image_grid_thw=batch.image_grid_thw[rows], use_cache=False)
    if _accepts_token_types(model):
        replies = torch.zeros(n, reply_len, dtype=batch.mm_token_type_ids.dtype, device=ids.device)
        inputs["mm_token_type_ids"] = torch.cat([batch.mm_token_type_ids[rows], replies], 1)  # [n, T]
    _forget_rope_deltas(model)
    with lm_head_bypassed(model) as head:
        hidden = model(**inputs).logits  # [n, T, H]
        hidden = hidden[:, prompt_len - 1:-1].to(head.weight.dtype).reshape(n * reply_len, -1)  # [n*R, H]
        targets = ids[:, prompt_len:].reshape(-1)  # [n*R]
        parts = []
        for start in range(0, targets.numel(), logit_rows):
            chunk = (head, hidden[start:start + logit_rows], targets[start:start + logit_rows])
            if torch.is_grad_enabled():
                parts.append(torch.utils.checkpoint.checkpoint(_rows_logprobs, *chunk, use_reentrant=False))
            else:
                parts.append(_rows_logprobs(*chunk))
    return torch.cat(parts).view(n, reply_len)  # [n, R]


def mixed_rewards(groups: int, replies: int, generator: torch.Generator) -> torch.Tensor:
    """Random 0/1 rewards [groups, replies], each group with at least one of each (so that every
    group has advantages, as after DAPO's dynamic sampling)."""
    correct = torch.randint(1, replies, (groups, 1), generator=generator)  # [G, 1]: 1 .. replies-1 rewarded
    order = torch.rand(groups, replies, generator=generator).argsort(-1)  # [G, n]: a random permutation
    return (order < correct).float()  # [G, n]


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO (Shao et al. 2024): each reward less its group's mean, over the group's std. [G, n] -> [G*n]."""
    mean = rewards.mean(-1, keepdim=True)  # [G, 1]
    std = rewards.std(-1, keepdim=True)  # [G, 1]
    return ((rewards - mean) / (std + 1e-6)).reshape(-1)  # [G*n]


class LossStats(NamedTuple):
    pg_loss: float
    kl: float
    clip_frac: float


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, advantages: torch.Tensor,
              settings: Settings) -> tuple[torch.Tensor, LossStats]:
    """PPO's clipped surrogate (Schulman et al. 2017, asymmetric clip as DAPO) + kl_coef x the k3 KL
    estimate (EasyR1's ``low_var_kl``), token-mean. logp, old_logp, ref_logp: [n, R]; advantages: [n]."""
    ratio = torch.exp(logp - old_logp)  # [n, R]
    adv = advantages[:, None]  # [n, 1]
    clipped = ratio.clamp(1 - settings.clip_low, 1 + settings.clip_high)  # [n, R]
    pg = torch.maximum(-adv * ratio, -adv * clipped)  # [n, R]
    log_ref_ratio = ref_logp - logp  # [n, R]
    kl = (torch.exp(log_ref_ratio) - log_ref_ratio - 1).clamp(-10, 10)  # [n, R]
    loss = pg.mean() + settings.kl_coef * kl.mean()
    clip_frac = ((-adv * clipped) > (-adv * ratio)).float().mean()
    return loss, LossStats(pg.mean().item(), kl.mean().item(), clip_frac.item())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slices(total: int, size: int) -> list[slice]:
    return [slice(start, min(start + size, total)) for start in range(0, total, size)]


def grpo_step(policy: Policy, batch: Batch, settings: Settings, reply_tokens: int, device: torch.device,
              generator: torch.Generator) -> StepFigures:
    """One rollout and one optimizer step; seconds measured after device synchronization."""
    model, n, prompt_len = policy.model, batch.input_ids.shape[0], batch.input_ids.shape[1]
    _sync(device)
    start = time.perf_counter()
    model.eval()
    gen_inputs = dict(input_ids=batch.input_ids, attention_mask=torch.ones_like(batch.input_ids),
                      pixel_values=batch.pixel_values, image_grid_thw=batch.image_grid_thw)
    if _accepts_token_types(model):
        gen_inputs["mm_token_type_ids"] = batch.mm_token_type_ids
    with torch.no_grad():
        sequences = model.generate(**gen_inputs, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                   max_new_tokens=reply_tokens, min_new_tokens=reply_tokens,
                                   suppress_tokens=NEVER_SAMPLED, pad_token_id=BOS)  # [N, P+R]
    if sequences.shape[1] != prompt_len + reply_tokens:
        raise RuntimeError(f"generate returned {sequences.shape[1] - prompt_len} new tokens, not {reply_tokens}: "
                           "this transformers version stopped early; check eos/min_new_tokens handling")
    _sync(device)
    rolled = time.perf_counter()

    with torch.no_grad():
        old = torch.cat([reply_logprobs(model, sequences, batch, rows, prompt_len, settings.logit_rows)
                         for rows in _slices(n, settings.logprob_micro_batch)])  # [N, R]
        with policy.reference() as reference:
            ref = torch.cat([reply_logprobs(reference, sequences, batch, rows, prompt_len, settings.logit_rows)
                             for rows in _slices(n, settings.logprob_micro_batch)])  # [N, R]
    advantages = group_advantages(mixed_rewards(settings.prompts, settings.replies, generator)).to(device)  # [N]
    _sync(device)
    scored = time.perf_counter()

    model.train()
    micro = _slices(n, settings.micro_batch)
    totals = torch.zeros(4)  # loss, pg_loss, kl, clip_frac summed over micro-batches
    for rows in micro:
        logp = reply_logprobs(model, sequences, batch, rows, prompt_len, settings.logit_rows)  # [n, R]
        loss, stats = grpo_loss(logp, old[rows], ref[rows], advantages[rows], settings)
        (loss * (rows.stop - rows.start) / n).backward()  # equal lengths: the global token-mean
        totals += torch.tensor([loss.item(), *stats]) * (rows.stop - rows.start) / n
    grad_norm = clip_grad_norm(policy.optimizer.params, settings.max_grad_norm)
    policy.optimizer.step()
    policy.optimizer.zero_grad()
    _sync(device)
    end = time.perf_counter()
    loss, pg_loss, kl, clip_frac = totals.tolist()
    return StepFigures(rolled - start, scored - rolled, end - scored, end - start, sequences.numel(),
                       loss, pg_loss, kl, clip_frac, grad_norm)


def shard_fsdp2(model: nn.Module, device: torch.device) -> None:
    """FSDP2 at world size 1: every decoder layer and vision block, the vision tower, then the root."""
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError as error:
        raise RuntimeError(f"FSDP2 needs torch>=2.6 (torch.distributed.fsdp.fully_shard); this is torch "
                           f"{torch.__version__}: run --modes plain") from error

    mesh = init_device_mesh(device.type, (1,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    blocks = [m for m in model.modules() if type(m).__name__.endswith(("DecoderLayer", "VisionBlock"))]
    # the vision tower is a unit of its own: transformers 5's generate runs it outside the root's forward
    visual = [m for name, m in model.named_modules() if name.split(".")[-1] == "visual"]
    if not blocks or len(visual) != 1:
        raise RuntimeError(f"found {len(blocks)} *DecoderLayer / *VisionBlock modules and {len(visual)} 'visual' "
                           f"modules to shard in transformers {transformers.__version__}; update shard_fsdp2")
    for module in [*blocks, *visual, model]:
        fully_shard(module, mesh=mesh, mp_policy=policy)


def build_policy(spec: ModelSpec, mode: str, tuning: str, settings: Settings, device: torch.device,
                 dtype: torch.dtype) -> Policy:
    torch.manual_seed(0)
    model = build_model(spec, device, dtype)
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if tuning == "full":
        reference_model = copy.deepcopy(model).requires_grad_(False).eval()
        reference = lambda: contextlib.nullcontext(reference_model)  # noqa: E731
        reference_kind = f"a frozen {str(dtype).removeprefix('torch.')} copy"
        if mode == "fsdp2":
            model.float()  # fp32 parameters, bf16 compute (EasyR1's FSDP setting)
    else:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(r=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_dropout=0.0,
                            target_modules=LORA_TARGETS)
        # fsdp2 needs one parameter dtype per group: adapters in the base's dtype; plain: fp32 adapters
        peft_model = get_peft_model(model, config, autocast_adapter_dtype=mode != "fsdp2")
        if mode == "fsdp2":
            for param in model.parameters():
                param.data = param.data.to(dtype)  # a no-op where peft already matched the base
        reference = functools.partial(_adapters_disabled, peft_model, model)
        reference_kind = "the base with the adapters disabled"
    if mode == "fsdp2":
        shard_fsdp2(model, device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = Fp32StateAdamW(trainable, settings.lr, settings.weight_decay)
    return Policy(model, reference, optimizer, tuning, reference_kind)


@contextlib.contextmanager
def _adapters_disabled(peft_model: nn.Module, model: nn.Module) -> Iterator[nn.Module]:
    with peft_model.disable_adapter():
        yield model


@torch.no_grad()
def _first_root_forward(model: nn.Module, batch: Batch) -> None:
    """FSDP2 initializes at its root's first forward, and transformers 5's generate first calls the
    vision tower alone: one prompt through the root first."""
    patches = batch.pixel_values.shape[0] // batch.input_ids.shape[0]
    inputs = dict(input_ids=batch.input_ids[:1], pixel_values=batch.pixel_values[:patches],
                  image_grid_thw=batch.image_grid_thw[:1], use_cache=False)
    if _accepts_token_types(model):
        inputs["mm_token_type_ids"] = batch.mm_token_type_ids[:1]
    with lm_head_bypassed(model):
        model(**inputs)


def text_parameters(model: nn.Module) -> int:
    """The decoder's parameters as verl's FLOPs counter (EasyR1's MFU) counts them: layers, final norm,
    input embedding and LM head (both, even when tied); no vision tower, no adapters."""
    named = [(name, p) for name, p in model.named_parameters() if "visual" not in name and "lora_" not in name]
    embedding, head = model.get_input_embeddings().weight, model.lm_head.weight
    return sum(_local(p).numel() for _, p in named) + (_local(head).numel() if head is embedding else 0)


def _probe(params: list[nn.Parameter]) -> list[torch.Tensor]:
    return [_local(p).detach().reshape(-1)[:1024].float().clone() for p in params]


def _gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def run_once(spec: ModelSpec, mode: str, tuning: str, settings: Settings, device: torch.device,
             dtype: torch.dtype, peak_flops: float | None, result: RunResult) -> None:
    """Build, warm up and time one model in one mode, filling ``result``."""
    start = time.perf_counter()
    policy = build_policy(spec, mode, tuning, settings, device, dtype)
    model = policy.model
    result.reference = policy.reference_kind
    result.params_total = sum(_local(p).numel() for p in model.parameters())
    result.params_text = text_parameters(model)
    result.params_trainable = sum(_local(p).numel() for p in policy.optimizer.params)
    generator = torch.Generator().manual_seed(0)
    batch = synthetic_batch(settings, BOS, device, dtype, generator)
    result.sequences, result.prompt_tokens = batch.input_ids.shape
    result.reply_tokens = settings.reply_tokens
    result.tokens_per_step = result.sequences * (result.prompt_tokens + settings.reply_tokens)
    if mode == "fsdp2":
        _first_root_forward(model, batch)
    result.setup_s = time.perf_counter() - start
    warm = grpo_step(policy, batch, settings, settings.warmup_reply_tokens, device, generator)
    print(f"  warm-up ({settings.warmup_reply_tokens}-token replies, not timed): {warm.step_s:.1f} s", flush=True)
    before = _probe(policy.optimizer.params)
    steps = []
    for index in range(settings.timed_steps):
        figures = grpo_step(policy, batch, settings, settings.reply_tokens, device, generator)
        steps.append(figures)
        result.steps.append(figures._asdict())
        print(f"  step {index + 1}: rollout {figures.rollout_s:.1f} s, log-probs {figures.logprob_s:.1f} s, "
              f"update {figures.update_s:.1f} s, step {figures.step_s:.1f} s, loss {figures.loss:+.4f}, "
              f"kl {figures.kl:.2e}, grad norm {figures.grad_norm:.3g}", flush=True)
    after = _probe(policy.optimizer.params)
    result.param_delta = sum((a - b).abs().sum().item() for a, b in zip(after, before, strict=True))
    mean = {key: sum(getattr(s, key) for s in steps) / len(steps)
            for key in ("rollout_s", "logprob_s", "update_s", "step_s")}
    result.rollout_s, result.logprob_s, result.update_s, result.step_s = mean.values()
    result.tokens_per_s_per_gpu = result.tokens_per_step / result.step_s  # one GPU
    if peak_flops:
        flops = 6 * result.params_text * result.tokens_per_step
        result.actor_mfu_update = flops / result.update_s / peak_flops
        result.actor_mfu_step = flops / result.step_s / peak_flops
    result.peak_memory_gib = _gib(device)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def run(spec: ModelSpec, mode: str, tuning: str, settings: Settings, device: torch.device, dtype: torch.dtype,
        peak_flops: float | None) -> RunResult:
    """One model in one mode; a full run out of GPU memory is rerun with LoRA. Errors are recorded."""
    _free(device)
    result = RunResult(spec.name, mode, tuning, easyr1=EASYR1.get(spec.name, {}))
    print(f"\n== {spec.name}, {mode}, {tuning} ==", flush=True)
    out_of_memory = False
    try:
        run_once(spec, mode, tuning, settings, device, dtype, peak_flops, result)
    except torch.cuda.OutOfMemoryError as error:
        out_of_memory = tuning == "full"
        result.error = f"out of GPU memory: {str(error).splitlines()[0]}"
    except Exception as error:  # recorded: the other runs still go on and the JSON says what failed
        traceback.print_exc()
        result.error = f"{type(error).__name__}: {error}"
    if out_of_memory:
        print(f"  full fine-tuning ran out of GPU memory ({result.error}); rerunning with LoRA", flush=True)
        _free(device)
        retry = run(spec, mode, "lora", settings, device, dtype, peak_flops)
        retry.note = f"full fine-tuning ran out of GPU memory, so LoRA rank {settings.lora_rank}"
        return retry
    return result


def _easyr1(result: RunResult, key: str, scale: float = 1.0, unit: str = "") -> str:
    """EasyR1's published figure for ``key``, in brackets, or nothing."""
    if key not in result.easyr1:
        return ""
    low, high = (f"{value * scale:,.0f}" for value in result.easyr1[key])
    return f" (EasyR1 {low}{unit})" if low == high else f" (EasyR1 {low}-{high}{unit})"


def report(result: RunResult) -> None:
    """The run's figures, EasyR1's published ones in brackets (8xH100, vLLM rollouts, 512 prompts x 5 replies)."""
    if result.error:
        print(f"  FAILED: {result.error}", flush=True)
        return
    mfu = (f"{result.actor_mfu_update:.1%} over the update{_easyr1(result, 'actor_mfu', 100, '%')}, "
           f"{result.actor_mfu_step:.1%} over the step" if result.actor_mfu_update is not None
           else "n/a (unknown peak: --peak-tflops)")
    memory = f"{result.peak_memory_gib:.1f} GiB" if result.peak_memory_gib is not None else "n/a (CPU)"
    print(f"  {result.model} {result.mode} ({result.tuning}; reference: {result.reference}) {result.note}\n"
          f"  params {result.params_total / 1e9:.2f} B (decoder as the MFU counts it {result.params_text / 1e9:.2f} B, "
          f"trainable {result.params_trainable / 1e6:.1f} M); {result.sequences} sequences x "
          f"({result.prompt_tokens} + {result.reply_tokens}) = {result.tokens_per_step} tokens a step\n"
          f"  tokens/s/GPU {result.tokens_per_s_per_gpu:,.0f}{_easyr1(result, 'tokens_per_s_per_gpu')}; "
          f"actor MFU {mfu}\n"
          f"  rollout {result.rollout_s:.1f} s, log-probs {result.logprob_s:.1f} s, update {result.update_s:.1f} s, "
          f"step {result.step_s:.1f} s{_easyr1(result, 'step_s', unit=' s')}; peak memory {memory}; "
          f"setup {result.setup_s:.1f} s; parameter change {result.param_delta:.3g}", flush=True)


def _peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    if "H100" in name and "PCIe" in name:
        return 756.0
    return next((tflops for key, tflops in (("H200", 989.0), ("H100", 989.0), ("H800", 989.0), ("A100", 312.0))
                 if key in name), None)


@contextlib.contextmanager
def process_group(device: torch.device, needed: bool) -> Iterator[None]:
    """A world-size-1 process group for FSDP2 (nccl on CUDA, gloo on CPU)."""
    import torch.distributed as dist

    if not needed or dist.is_initialized():
        yield
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)), ("RANK", "0"), ("WORLD_SIZE", "1"),
                       ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    if device.type == "cuda":
        torch.cuda.set_device(device.index or 0)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


PRESETS = {  # prompts, replies, text tokens, grid, reply, warm-up reply, timed steps, micro-batch, log-prob batch, rows
    "full": dict(prompts=16, replies=5, text_tokens=256, grid=(1, 28, 28), reply_tokens=512, warmup_reply_tokens=512,
                 timed_steps=3, micro_batch=8, logprob_micro_batch=20, logit_rows=2048),
    "quick": dict(prompts=8, replies=5, text_tokens=256, grid=(1, 28, 28), reply_tokens=512, warmup_reply_tokens=32,
                  timed_steps=2, micro_batch=8, logprob_micro_batch=20, logit_rows=2048),
    "smoke": dict(prompts=2, replies=2, text_tokens=12, grid=(1, 4, 4), reply_tokens=8, warmup_reply_tokens=4,
                  timed_steps=1, micro_batch=2, logprob_micro_batch=3, logit_rows=6),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="8 x 5 sequences, 2 timed steps: under 8 min on an H100")
    preset.add_argument("--smoke", action="store_true", help="a tiny model on CPU in fp32 (CI)")
    parser.add_argument("--models", default=None, help="comma-separated: 3b, 7b (default 7b,3b; smoke: tiny)")
    parser.add_argument("--modes", default="plain,fsdp2", help="comma-separated: plain, fsdp2")
    parser.add_argument("--tuning", choices=["auto", "full", "lora"], default="auto",
                        help="auto: full for 3B, LoRA for 7B (smoke: both)")
    parser.add_argument("--prompts", type=int, help="override the preset's prompts a step")
    parser.add_argument("--reply-tokens", type=int, help="override the preset's reply length")
    parser.add_argument("--steps", type=int, help="override the preset's timed steps")
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, when not an H100/H200/A100")
    parser.add_argument("--budget-s", type=float, help="skip runs that would end past this many seconds "
                        "(default 420 with --quick)")
    parser.add_argument("--out", type=Path, help="JSON path (default $OUT/bench_gpu_step.json, else reports/)")
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace) -> list[tuple[ModelSpec, str, str]]:
    names = (args.models or ("tiny" if args.smoke else "7b,3b")).split(",")
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in ("plain", "fsdp2"):
            raise SystemExit(f"--modes: unknown mode {mode!r}; use plain and/or fsdp2")
    plan = []
    for mode in modes:
        for name in names:
            if name not in SHORT_NAMES:
                raise SystemExit(f"--models: unknown model {name!r}; use {', '.join(SHORT_NAMES)}")
            spec = MODELS[SHORT_NAMES[name]]
            tunings = ["full", "lora"] if args.smoke and args.tuning == "auto" else [
                spec.tuning if args.tuning == "auto" else args.tuning]
            plan += [(spec, mode, tuning) for tuning in tunings]
    return plan


def _write(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(payload, indent=2) + "\n")
    partial.replace(path)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    preset = dict(PRESETS["smoke" if args.smoke else "quick" if args.quick else "full"])
    preset.update({key: value for key, value in (("prompts", args.prompts), ("reply_tokens", args.reply_tokens),
                                                 ("timed_steps", args.steps)) if value is not None})
    preset["warmup_reply_tokens"] = min(preset["warmup_reply_tokens"], preset["reply_tokens"])
    settings = Settings(**preset)
    device = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    if device.type == "cpu" and not args.smoke:
        print("no CUDA device: running on CPU (use --smoke for a quick check)", flush=True)
    budget = args.budget_s if args.budget_s is not None else (420.0 if args.quick else None)
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else Path("reports")) / "bench_gpu_step.json"
    peak = _peak_tflops(device, args.peak_tflops)
    have = {name: importlib.util.find_spec(name) is not None for name in ("vllm", "bitsandbytes")}
    payload = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "gpus": 1, "dtype": str(dtype).removeprefix("torch."), "peak_tflops": peak,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "vllm": "installed, not used (rollouts by HF generate)" if have["vllm"] else "not installed, skipped",
        "reference_precision": str(dtype).removeprefix("torch.") + (
            "" if have["bitsandbytes"] else ": bitsandbytes not installed, no int8 reference"),
        "settings": asdict(settings), "easyr1_published": EASYR1, "runs": [],
    }
    print(f"bench_gpu_step: {payload['device']}, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"peak {peak} TFLOP/s; vLLM: {payload['vllm']}; reference in {payload['reference_precision']}; "
          f"{settings.prompts} prompts x {settings.replies} replies, prompt {settings.prompt_tokens} tokens "
          f"({settings.image_tokens} image), replies {settings.reply_tokens}", flush=True)
    plan = _plan(args)
    threads = torch.get_num_threads()
    if args.smoke:
        torch.set_num_threads(1)  # tiny ops: threads only contend (30x slower on 2 busy cores)
    try:
        _run_plan(plan, settings, device, dtype, peak, budget, out, payload, started)
    finally:
        torch.set_num_threads(threads)
    print(f"\nwrote {out} ({time.perf_counter() - started:.0f} s)", flush=True)
    return payload


def _run_plan(plan: list[tuple[ModelSpec, str, str]], settings: Settings, device: torch.device, dtype: torch.dtype,
              peak: float | None, budget: float | None, out: Path, payload: dict, started: float) -> None:
    longest = 0.0
    with process_group(device, any(mode == "fsdp2" for _, mode, _ in plan)):
        for spec, mode, tuning in plan:
            elapsed = time.perf_counter() - started
            if budget is not None and elapsed + longest > budget:
                print(f"\n== {spec.name}, {mode}: skipped, {elapsed:.0f} s + {longest:.0f} s > budget {budget:.0f} s",
                      flush=True)
                payload["runs"].append(asdict(RunResult(spec.name, mode, tuning, error="skipped: time budget")))
                continue
            result = run(spec, mode, tuning, settings, device, dtype, peak * 1e12 if peak else None)
            longest = max(longest, time.perf_counter() - started - elapsed)
            report(result)
            payload["runs"].append(asdict(result))
            _write(out, payload)
    _write(out, payload)


if __name__ == "__main__":
    main()
