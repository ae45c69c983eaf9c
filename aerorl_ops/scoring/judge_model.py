"""A loaded model as a judge: text-only prompts through its chat template, one greedy ``generate`` per batch.

The judge is a text grader, so its prompts carry no image. ``max_time_s`` becomes ``generate``'s
``max_time``: generation stops at the deadline, and a reply that had neither reached EOS nor
``max_new_tokens`` by then is marked unfinished (the scorer counts it as timed out).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import torch

from aerorl_ops.generation.batched import eos_token_ids, trim_after_eos
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rewards.judge import JudgeReply


def checkpoint_identity(location: str) -> str:
    """``location``, plus for a local folder a digest of its files' names, sizes and modification times
    (a checkpoint retrained into the same folder is a new judge); a hub id is itself."""
    folder = Path(location).expanduser()
    if not folder.is_dir():
        return location
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return f"{location}#{digest.hexdigest()[:16]}"


def judge_messages(prompt: str) -> list[dict]:
    """One user turn holding the judge prompt, text only."""
    return [{"role": "user", "content": [{"type": "text", "text": prompt}]}]


class TransformersJudge:
    """``loaded`` (configured as ``[models.<key>]``) grading through transformers' ``generate``, greedy."""

    def __init__(self, loaded: LoadedVLM, key: str) -> None:
        self.loaded = loaded
        self.key = key
        self.identity = checkpoint_identity(loaded.source.location)

    def generate(self, prompts: Sequence[str], max_new_tokens: int, max_time_s: float) -> list[JudgeReply]:
        loaded = self.loaded
        texts = [loaded.processor.apply_chat_template(judge_messages(prompt), add_generation_prompt=True,
                                                      tokenize=False) for prompt in prompts]
        inputs = loaded.processor(text=texts, return_tensors="pt", padding=True).to(loaded.device)
        prompt_length = inputs["input_ids"].shape[1]
        eos = eos_token_ids(loaded)
        with torch.inference_mode():
            output = loaded.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                           temperature=None, top_p=None, top_k=None, max_time=max_time_s,
                                           pad_token_id=loaded.tokenizer.pad_token_id, eos_token_id=eos)
        replies = []
        for row in output[:, prompt_length:].cpu().tolist():  # [B, N] new tokens
            tokens = trim_after_eos(row, eos)
            finished = len(tokens) >= max_new_tokens or bool(tokens and tokens[-1] in eos)
            replies.append(JudgeReply(loaded.tokenizer.decode(tokens, skip_special_tokens=True).strip(), finished))
        return replies
