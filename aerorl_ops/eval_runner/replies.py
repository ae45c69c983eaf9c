"""Seeded responses of a VLM to task observations, at one sampling setting.

- ``observation_prompts``: each observation's messages through the model's chat template, as text
  with its image placeholders (what every generation backend is prompted with);
- ``encode_observations``: those prompts through the model's processor, with their images,
  left-padded, on the model's device (a row without image or video refused in one line for a family
  that cannot take one: ``models.text_only``); a row's video as a video where the processor has a video
  processor, else its frames as images (``generation.shown_video``);
- ``sample_responses``: ``setting.n`` responses per prompt from one decoding call (``num_return_sequences``:
  each prompt and image is encoded once), by the model's decode path (``generation.decode``): greedy, or
  sampled at the setting's temperature and top-p with top-k off. Special and added tokens other than EOS are never
  emitted (``aerorl_ops.generation.suppression``); a response is at most ``max_new_tokens`` long.

The RNG is seeded inside ``torch.random.fork_rng``: the same seed and batch give the same responses,
and the caller's random state (a trainer's) is left as it was. The model runs in eval mode under
``torch.inference_mode`` and gets its training flag back afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from aerorl_ops.envs.types import Observation
from aerorl_ops.eval_metrics.sampling import SamplingSetting
from aerorl_ops.generation.batched import eos_token_ids
from aerorl_ops.generation.decode import decode_new_tokens
from aerorl_ops.generation.generator_sampling import PrivateDraws
from aerorl_ops.generation.shown_video import media_kwargs, shown_videos
from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.models.text_only import check_text_only


class Responses(NamedTuple):
    """Responses in prompt-major order: the ``n`` responses of prompt 0, then of prompt 1, ..."""

    token_ids: list[list[int]]  # [B * n] generated ids before the first EOS (EOS and padding removed)
    texts: list[str]  # [B * n] decoded, special tokens skipped, stripped
    truncated: list[bool]  # [B * n] reached max_new_tokens without an EOS


def observation_prompts(loaded: LoadedVLM, observations: Sequence[Observation]) -> list[str]:
    """Each observation's messages, as shown (``generation.shown_video.shown_videos``), through the model's chat
    template, ready for a reply."""
    return [loaded.processor.apply_chat_template(o.messages, add_generation_prompt=True, tokenize=False)
            for o in shown_videos(loaded, observations)]


def encode_observations(loaded: LoadedVLM, observations: Sequence[Observation]):
    """Chat-templated prompts (``observation_prompts``) with their images (one list per prompt) and videos,
    left-padded, on the model's device."""
    shown = shown_videos(loaded, observations)
    check_text_only(loaded.processor, loaded.source.label, [len(o.images) + len(o.video) for o in shown])
    texts = observation_prompts(loaded, shown)
    media = media_kwargs(loaded, texts, [list(o.images) for o in shown], [o.video for o in shown],
                         [o.video_fps for o in shown])
    inputs = loaded.processor(text=texts, **media, return_tensors="pt", padding=True)
    return loaded.on_device(inputs)


def decoding_kwargs(setting: SamplingSetting) -> dict[str, object]:
    """``generate`` keyword arguments of a setting (top-k off, which ``generate`` would set to 50).

    >>> decoding_kwargs(SamplingSetting("greedy_pass1", greedy=True))["do_sample"]
    False
    >>> decoding_kwargs(SamplingSetting("t06", temperature=0.6))
    {'do_sample': True, 'temperature': 0.6, 'top_p': 1.0, 'top_k': 0}
    """
    if setting.greedy:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": setting.temperature, "top_p": setting.top_p, "top_k": 0}


def split_at_eos(tokens: Sequence[int], eos: Sequence[int]) -> tuple[list[int], bool]:
    """The tokens before the first EOS, and whether an EOS was generated.

    >>> split_at_eos([5, 6, 2, 0, 0], eos=[2]), split_at_eos([5, 6, 7], eos=[2])
    (([5, 6], True), ([5, 6, 7], False))
    """
    for position, token in enumerate(tokens):
        if token in eos:
            return list(tokens[:position]), True
    return list(tokens), False


def generate_new_tokens(loaded: LoadedVLM, inputs, max_new_tokens: int, decoding: Mapping[str, object],
                        num_return_sequences: int = 1, draws: PrivateDraws | None = None
                        ) -> tuple[list[list[int]], list[int]]:
    """The model's replies to the prompt rows of ``inputs`` with ``decoding`` (``do_sample``, ``temperature``,
    ``top_p``, ``top_k``; sampled from ``draws``' generator when given), by its decode path
    (``generation.decode``: ``generate`` or a static KV cache), in eval mode under ``torch.inference_mode`` (the
    training flag restored), every special or added token but EOS suppressed. Returns each output row's
    generated ids (prompt removed; EOS and the padding after it kept) and the EOS ids."""
    model = loaded.model
    eos = eos_token_ids(loaded)
    suppress = suppressed_token_ids(loaded.tokenizer, eos, model.get_output_embeddings().weight.shape[0])
    was_training = model.training
    model.eval()
    try:
        new = decode_new_tokens(loaded, inputs, max_new_tokens, decoding, eos, suppress, num_return_sequences, draws)
    finally:
        model.train(was_training)
    return new.token_ids, eos  # [B * n, <= max_new_tokens]


def sample_responses(loaded: LoadedVLM, inputs, setting: SamplingSetting, max_new_tokens: int,
                     seed: int) -> Responses:
    """``setting.n`` responses to each prompt row of ``inputs`` (see the module docstring)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        new_tokens, eos = generate_new_tokens(loaded, inputs, max_new_tokens, decoding_kwargs(setting), setting.n)
    token_ids, truncated = [], []
    for row in new_tokens:
        ids, ended = split_at_eos(row, eos)
        token_ids.append(ids)
        truncated.append(not ended and len(ids) >= max_new_tokens)
    texts = [loaded.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in token_ids]
    return Responses(token_ids, texts, truncated)
