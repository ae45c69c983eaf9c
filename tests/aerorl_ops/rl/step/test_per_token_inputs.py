"""Per-token processor outputs extended over a completion as the model's ``generate`` extends them
(``rl.step.per_token_inputs``), on hand-written tensors and stand-ins for a model's generation update and its
``generate``."""

from __future__ import annotations

import doctest

import pytest
import torch

from aerorl_ops.rl.step import per_token_inputs
from aerorl_ops.rl.step.per_token_inputs import UnknownPerTokenInputError, extend_per_token_inputs, per_token_names


class PrefixLM(torch.nn.Module):
    """Generates as PaliGemma does: a new token's ``token_type_ids`` is 1 (suffix), its
    ``cross_attention_mask`` row the last one's; nothing else is extended. Its ``generate`` runs two forwards,
    the second with only the new token and ``drops`` (names) left out."""

    def __init__(self, drops: tuple[str, ...] = ()):
        super().__init__()
        self.drops = drops

    def forward(self, input_ids, **kwargs):
        return input_ids

    def generate(self, input_ids, max_new_tokens, min_new_tokens, do_sample, **kwargs):
        self(input_ids, **kwargs)
        self(input_ids[:, -1:], **{name: None if name in self.drops else value for name, value in kwargs.items()})

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, is_encoder_decoder=False,
                                            num_new_tokens=1):
        if "token_type_ids" in model_kwargs:
            types = model_kwargs["token_type_ids"]
            model_kwargs["token_type_ids"] = torch.cat([types, types.new_ones(types.shape[0], num_new_tokens)], 1)
        if "cross_attention_mask" in model_kwargs:
            mask = model_kwargs["cross_attention_mask"]
            model_kwargs["cross_attention_mask"] = torch.cat([mask, mask[:, -1:]], 1)
        return model_kwargs


def test_the_docstring_examples():
    result = doctest.testmod(per_token_inputs)
    assert result.failed == 0 and result.attempted > 0


def test_each_per_token_input_is_extended_as_generate_extends_it():
    ids = torch.tensor([[0, 7, 8, 9], [7, 8, 9, 9]])  # [2, 4]: row 0 left-padded
    cross = torch.tensor([[[0, 0], [1, 0], [1, 0], [1, 1]],
                          [[1, 0], [1, 0], [1, 1], [1, 1]]]).unsqueeze(2)  # [2, 4, images 1, tiles 2]
    prompt = {"input_ids": ids, "attention_mask": torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]),
              "token_type_ids": torch.zeros(2, 4, dtype=torch.long), "cross_attention_mask": cross,
              "pixel_values": torch.zeros(2, 3, 8, 8), "labels": torch.full((2, 4), -100)}
    assert per_token_names(prompt) == ["token_type_ids", "cross_attention_mask", "labels"]
    extended = extend_per_token_inputs(PrefixLM(), prompt, torch.tensor([[5, 6], [5, 0]]))
    assert set(extended) == {"token_type_ids", "cross_attention_mask"}  # labels is a target: left out
    assert extended["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1]] * 2  # the causal suffix
    assert extended["cross_attention_mask"][:, 4:].squeeze(2).tolist() == [[[1, 1], [1, 1]]] * 2  # the last row's
    assert torch.equal(extended["cross_attention_mask"][:, :4], cross)


def test_a_per_token_input_generate_neither_extends_nor_leaves_out_is_named_with_the_model():
    ids = torch.tensor([[7, 8, 9]])
    prompt = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
              "box_ids": torch.zeros(1, 3, 4)}
    with pytest.raises(UnknownPerTokenInputError, match=r"^the processor of PrefixLM returned per-token input\(s\) "
                                                        r"\['box_ids'\] \(dimension 1 is the prompt length 3\) that "
                                                        r"the model's generate neither extends nor leaves out"):
        extend_per_token_inputs(PrefixLM(), prompt, torch.tensor([[5]]))


def test_a_per_token_input_generate_leaves_out_after_the_prompt_is_zero_over_the_completion_but_typed_tokens():
    """ERNIE 4.5-VL's ``moe_mm_token_type_ids``: only the prompt's forward gets it; a generated token is text
    (0), and a completion token the prompt types (its image token 7) keeps its type."""
    ids = torch.tensor([[3, 7, 7, 9], [0, 3, 7, 9]])  # [2, 4]
    moe_types = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 0]])  # the image start (3) and image (7) tokens: 1
    prompt = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "moe_mm_token_type_ids": moe_types}
    extended = extend_per_token_inputs(PrefixLM(drops=("moe_mm_token_type_ids",)), prompt,
                                       torch.tensor([[5, 7, 6], [6, 5, 5]]))
    assert extended["moe_mm_token_type_ids"].tolist() == [[1, 1, 1, 0, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0]]
    assert per_token_inputs.token_typed_names(prompt) == ["moe_mm_token_type_ids"]
