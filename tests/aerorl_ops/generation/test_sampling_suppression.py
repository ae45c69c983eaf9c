"""Sampling never emits special tokens, even from a policy whose logits favour ``<|image_pad|>``."""

import torch

from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.rl.config import AeroRLConfig
from aerorl_ops.rl.rollout import sample_completions


class _FavourToken(torch.nn.Module):
    """The model's LM head plus +100 on one token id: greedy and sampling would pick it every time."""

    def __init__(self, head: torch.nn.Linear, token_id: int) -> None:
        super().__init__()
        self.head = head
        self.weight = head.weight
        self.token_id = token_id

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)  # [B, T, V]
        logits[..., self.token_id] += 100.0
        return logits


def test_suppressed_ids_are_the_special_tokens_except_eos(tiny_vlm):
    tokenizer = tiny_vlm.tokenizer
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ids = suppressed_token_ids(tokenizer, [eos], vocab_size=len(tokenizer) + 64)
    assert eos not in ids
    for token in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|im_start|>", "<|endoftext|>"):
        assert tokenizer.convert_tokens_to_ids(token) in ids
    assert set(range(len(tokenizer), len(tokenizer) + 64)) <= set(ids)


def test_a_policy_that_favours_image_pad_never_samples_it(fresh_tiny_vlm, few_rows):
    tokenizer = fresh_tiny_vlm.tokenizer
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    model = fresh_tiny_vlm.model
    model.lm_head = _FavourToken(model.lm_head, image_pad)
    torch.manual_seed(0)

    batch, texts, _ = sample_completions(fresh_tiny_vlm, few_rows[:2], AeroRLConfig(max_new_tokens=6))

    completion_ids = batch.input_ids[batch.completion_mask]
    assert completion_ids.numel() > 0
    special = set(suppressed_token_ids(tokenizer, [tokenizer.convert_tokens_to_ids("<|im_end|>")]))
    assert not special & set(completion_ids.tolist())
    assert int(batch.vision_mask.sum()) == int((batch.input_ids == image_pad).sum())  # no extra placeholders
