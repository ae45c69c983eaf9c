"""Sampling never emits special tokens, even from a policy whose logits favour ``<|image_pad|>``."""

import torch
from PIL import Image

from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_runner.episodes import Sampling, generate_replies
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.generation.suppression import suppressed_token_ids


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


def test_a_policy_that_favours_image_pad_never_samples_it(fresh_tiny_vlm):
    tokenizer = fresh_tiny_vlm.tokenizer
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    model = fresh_tiny_vlm.model
    model.lm_head = _FavourToken(model.lm_head, image_pad)
    torch.manual_seed(0)
    observations = [Observation(images=(Image.new("RGB", (64, 64), colour),),
                                messages=[{"role": "user", "content": [{"type": "image"},
                                                                       {"type": "text", "text": "what color?"}]}])
                    for colour in ("red", "blue")]

    inputs = encode_observations(fresh_tiny_vlm, observations)
    replies = generate_replies(fresh_tiny_vlm, inputs, max_new_tokens=6, sampling=Sampling())

    sampled = [token for ids in replies.token_ids for token in ids]
    assert len(sampled) >= 2  # at least one token per reply
    special = set(suppressed_token_ids(tokenizer, [tokenizer.convert_tokens_to_ids("<|im_end|>")]))
    assert image_pad in special
    assert not special & set(sampled)
