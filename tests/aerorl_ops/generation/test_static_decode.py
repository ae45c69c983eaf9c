"""The static-cache decode paths (``generation.decode``, ``generation.static_decode``) against ``generate``.

- on every tiny family, greedy replies of the ``static`` path equal ``generate``'s token for token, or the
  family is checked out of it (its decode step or cache differs) and ``generate`` decodes it, saying why;
- the ``compiled`` step gives the eager step's replies, and after an optimizer step changes the weights in place
  it decodes with the new weights without compiling again;
- rows that finish leave the batch (a smaller bucket), and a sampled decode is the same with or without that;
- sampled replies follow the caller's seeded generator;
- a model whose generation config asks for a processor the static path does not apply keeps ``generate``.
"""

from __future__ import annotations

import doctest
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import aerorl_ops.generation.static_decode as static_decode
import aerorl_ops.generation.token_choice as token_choice
from aerorl_ops.generation.batched import encode_prompts, eos_token_ids
from aerorl_ops.generation.decode import DECODER_ATTRIBUTE, decode_new_tokens, decode_path
from aerorl_ops.generation.generator_sampling import PrivateDraws
from aerorl_ops.generation.suppression import suppressed_token_ids
from aerorl_ops.models.entry import DECODE_AUTO, DECODE_COMPILED, DECODE_GENERATE, DECODE_STATIC
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rows import synthetic_chartqa_rows, synthetic_docvqa_rows
from tests.aerorl_ops.models.family_params import family_params
from tests.conftest import load_tiny

GREEDY = {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
SAMPLED = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
SLIDING, LINEAR = "its cache has StaticSlidingWindowLayer layers", "its cache has LinearAttentionLayer layers"
STATIC_REFUSED = {
    "gemma3": SLIDING, "aya-vision": SLIDING, "idefics2": SLIDING, "llava-next": SLIDING, "mistral3": SLIDING,
    "qwen3.5": LINEAR, "lfm2-vl": LINEAR,  # hybrid linear-attention layers: a cache of another kind
    "mllama": "must match the size of tensor b",  # a decode step needs the images' cross-attention mask
    "paligemma": "index out of range", "gemma4": "index out of range",  # their decode steps need more inputs
}
"""Families the check keeps on ``generate``, and the reason it gives (their tiny configs: a sliding window shorter
than the cache, linear-attention layers, a decode step that needs more than tokens, mask and positions)."""


def test_the_docstring_examples_hold():
    for module in (static_decode, token_choice):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def on_path(loaded: LoadedVLM, path: str) -> LoadedVLM:
    """``loaded`` (the same model) with its model table's ``decode`` set to ``path``."""
    return replace(loaded, source=replace(loaded.source, backend=replace(loaded.source.backend, decode=path)))


def decoded(loaded: LoadedVLM, inputs, new_tokens: int, decoding=GREEDY, copies: int = 1, draws=None,
            suppress_eos: bool = False) -> list[list[int]]:
    eos = eos_token_ids(loaded)
    suppressed = suppressed_token_ids(loaded.tokenizer, eos, loaded.model.get_output_embeddings().weight.shape[0])
    if suppress_eos:
        suppressed = sorted(set(suppressed) | set(eos))
    return decode_new_tokens(loaded, inputs, new_tokens, decoding, eos, suppressed, copies, draws).token_ids


@pytest.fixture(scope="module")
def varied_model_dir(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """The tiny Qwen2-VL with its language model's weights redrawn at unit scale, so its greedy replies vary
    with the prompt and end after a few tokens (the random-init one repeats one token)."""
    folder = tmp_path_factory.mktemp("varied") / "tiny-varied"
    shutil.copytree(tiny_model_dir, folder)
    loaded = load_tiny(folder)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if parameter.dim() >= 2 and ("language_model" in name or "lm_head" in name or "embed" in name):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) / parameter.shape[-1] ** 0.5)
    loaded.model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def rows():
    return synthetic_docvqa_rows(4, seed=0) + synthetic_chartqa_rows(3, seed=1)


def test_auto_is_generate_on_a_cpu_and_compiled_for_long_replies_on_a_gpu(tiny_vlm):
    assert decode_path(on_path(tiny_vlm, DECODE_AUTO), 512) == DECODE_GENERATE
    on_gpu = replace(on_path(tiny_vlm, DECODE_AUTO), device=torch.device("cuda"))
    assert (decode_path(on_gpu, 512), decode_path(on_gpu, 16)) == (DECODE_COMPILED, DECODE_STATIC)
    assert decode_path(on_path(tiny_vlm, DECODE_STATIC), 512) == DECODE_STATIC


def test_static_greedy_replies_equal_generates_and_vary(varied_model_dir, rows):
    loaded = load_tiny(varied_model_dir)
    inputs = encode_prompts(loaded, rows)
    expected = decoded(loaded, inputs, 24)
    assert len({tuple(reply) for reply in expected}) > 2  # the replies differ by prompt
    assert decoded(on_path(loaded, DECODE_STATIC), inputs, 24) == expected
    assert getattr(loaded.model, DECODER_ATTRIBUTE).detail == "static cache"


def test_copies_share_one_prefill_each_copy_the_prompts_reply(varied_model_dir, rows):
    loaded = load_tiny(varied_model_dir)
    inputs = encode_prompts(loaded, rows[:3])
    once = decoded(loaded, inputs, 12)  # generate refuses greedy copies: each copy must be the prompt's one reply
    assert decoded(on_path(loaded, DECODE_STATIC), inputs, 12, copies=2) == [reply for reply in once for _ in (0, 1)]


@pytest.mark.slow
def test_the_compiled_step_equals_the_eager_one_and_sees_weights_changed_in_place(varied_model_dir, rows):
    loaded = on_path(load_tiny(varied_model_dir), DECODE_COMPILED)
    inputs = encode_prompts(loaded, rows)
    assert decoded(loaded, inputs, 16) == decoded(on_path(loaded, DECODE_GENERATE), inputs, 16)
    decoder = getattr(loaded.model, DECODER_ATTRIBUTE).decoder
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert compiled > 0  # the decode step was compiled
    optimizer = torch.optim.SGD(loaded.model.parameters(), lr=0.5)
    loaded.model.train()
    loss = loaded.model(**inputs).logits[:, -1].float().logsumexp(-1).mean()
    loss.backward()
    optimizer.step()  # every weight changed in place
    loaded.model.eval()
    changed = decoded(loaded, inputs, 16)
    assert changed == decoded(on_path(loaded, DECODE_GENERATE), inputs, 16)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled  # no new compile
    assert decoder.compiled_step is getattr(loaded.model, DECODER_ATTRIBUTE).decoder.compiled_step


def test_rows_that_finish_leave_the_batch_and_the_draws_do_not_change(varied_model_dir, rows, monkeypatch):
    loaded = on_path(load_tiny(varied_model_dir), DECODE_STATIC)
    inputs = encode_prompts(loaded, rows)
    moved = []
    compact = static_decode.StaticDecoder.compact

    def counted(self, state, decoding, tokens, left):  # (bucket rows, rows left) of each move
        moved.append((state.slots, left))
        return compact(self, state, decoding, tokens, left)

    monkeypatch.setattr(static_decode.StaticDecoder, "compact", counted)
    cool = {**SAMPLED, "temperature": 0.3}  # most replies end within 8 tokens, a few run past 30
    torch.manual_seed(3)
    with_moves = decoded(loaded, inputs, 40, cool, copies=2)
    assert moved == [(16, 8), (8, 4)]  # 14 rows in a bucket of 16, then 8 left, then 4
    monkeypatch.setattr(static_decode, "CHECK_EVERY", 10_000)  # nobody leaves
    torch.manual_seed(3)
    assert decoded(loaded, inputs, 40, cool, copies=2) == with_moves


def test_sampled_replies_follow_the_seeded_generator(varied_model_dir, rows):
    loaded = on_path(load_tiny(varied_model_dir), DECODE_STATIC)
    inputs = encode_prompts(loaded, rows)

    def draws(seed: int) -> PrivateDraws:
        return PrivateDraws(torch.Generator().manual_seed(seed))

    first = decoded(loaded, inputs, 16, SAMPLED, draws=draws(7))
    assert decoded(loaded, inputs, 16, SAMPLED, draws=draws(7)) == first
    assert decoded(loaded, inputs, 16, SAMPLED, draws=draws(8)) != first
    assert first != decoded(loaded, inputs, 16)  # not the greedy replies


def test_a_generation_config_the_static_path_does_not_apply_keeps_generate(varied_model_dir, rows, caplog):
    loaded = load_tiny(varied_model_dir)
    loaded.model.generation_config.repetition_penalty = 1.3
    inputs = encode_prompts(loaded, rows[:2])
    expected = decoded(loaded, inputs, 10)
    static = on_path(loaded, DECODE_STATIC)
    assert decoded(static, inputs, 10) == expected
    choice = getattr(loaded.model, DECODER_ATTRIBUTE)
    assert choice.decoder is None
    assert choice.detail == "generate: its generation config sets repetition_penalty=1.3"
    assert any("decodes with generate, not the static path" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", family_params())
def test_every_family_decodes_greedy_on_the_static_path_as_generate_does(name, tiny_family_vlm, few_rows):
    loaded = tiny_family_vlm(name)
    inputs = encode_prompts(loaded, few_rows[:3])
    expected = decoded(loaded, inputs, 6, suppress_eos=True)
    static = on_path(loaded, DECODE_STATIC)
    assert decoded(static, inputs, 6, suppress_eos=True) == expected
    choice = getattr(loaded.model.get_base_model() if hasattr(loaded.model, "get_base_model") else loaded.model,
                     DECODER_ATTRIBUTE)
    if name in STATIC_REFUSED:
        assert choice.decoder is None and STATIC_REFUSED[name] in choice.detail
    else:
        assert choice.detail == "static cache", choice.detail
