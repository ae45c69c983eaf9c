"""Packed sequences score as padded ones (``rl.step.packing``, ``rl.step.token_scoring``): on the embedded tiny
Qwen2-VL, rows of very different prompt and completion lengths with one, two and three images give the padded
log-probs, entropies and predicting states within 1e-5 in float32, and gradients within 1e-5 of each
gradient's largest entry; the packed row holds only real
tokens, and each sequence's 3-D rope positions are those the model gives that row alone. Another family packs
(LLaVA: 1-D positions; Qwen2.5-VL: its own rope index), Llama 3.2 Vision (per-row cross-attention masks) falls
back to the padded path by its check, and a packing that leaks across sequences fails the check."""

from __future__ import annotations

import doctest
import io

import pytest
import torch
from PIL import Image

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.generation.batched import encode_prompts
from aerorl_ops.models.loading import ModelSource, load_vlm
from aerorl_ops.rl.step import packing, varlen_attention
from aerorl_ops.rl.step.packing import pack_sequences, rope_index_owner
from aerorl_ops.rl.step.sequences import append_completions, fused_completion_tokens
from aerorl_ops.rl.step.token_scoring import PACKING_CHECK, TokenScoring, scoring_path
from aerorl_ops.rl.step.varlen_attention import VARLEN_ATTENTION, text_attention
from aerorl_ops.rows.task_item import TaskItem

TOLERANCE = dict(rtol=0.0, atol=1e-5)


def png(size: tuple[int, int], colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


SQUARE, WIDE, TALL = png((112, 112), "red"), png((224, 112), "blue"), png((112, 168), "green")


def item(item_id: str, question: str, images: tuple[bytes, ...]) -> TaskItem:
    content = [{"type": "image"} for _ in images] + [{"type": "text", "text": question}]
    return TaskItem(item_id, "packing", "test", "packing.jsonl", question, ("red",), images,
                    ({"role": "user", "content": content},))


ROWS = [item("three", "Which of the three pictures is the widest?", (SQUARE, WIDE, TALL)),
        item("one", "Colour?", (SQUARE,)),
        item("two", "Do these two pictures show the same colour, and if they do not, which colours do they show, "
                    "from left to right?", (WIDE, SQUARE))]
"""Prompts of very different lengths (16 + 32 + 24, 16 and 32 + 16 vision tokens; short and long questions)."""
REPLY_LENGTHS = (23, 1, 6)


def ragged_batch(loaded, rows=ROWS, lengths=REPLY_LENGTHS):
    """``rows``' prompts followed by replies of ``lengths`` words (left-padded prompts, right-padded replies)."""
    words = loaded.tokenizer.encode(" one two three four five six seven eight nine ten" * 3, add_special_tokens=False)
    return append_completions(encode_prompts(loaded, rows), [words[:n] for n in lengths], loaded)


def small_loss(tokens) -> torch.Tensor:
    """A loss that reaches every output: weighted log-probs and entropies, and the predicting states."""
    n = tokens.logprobs.shape[0]
    weights = torch.linspace(-1.0, 2.0, n)  # [N]
    return ((weights * tokens.logprobs).sum() + (weights.flip(0) * tokens.entropy).sum()
            + 0.1 * tokens.hidden.sum(dim=1).square().mean())


def gradients(model, score, batch) -> tuple[object, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    tokens = score(model, batch)
    small_loss(tokens).backward()
    return tokens, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_the_docstring_examples():
    for module in (packing, varlen_attention):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_packed_qwen2_vl_scores_and_gradients_equal_the_padded_ones(fresh_tiny_vlm):
    model, batch = fresh_tiny_vlm.model, ragged_batch(fresh_tiny_vlm)
    real = batch.inputs["attention_mask"].bool()
    assert int(real.sum()) < real.numel() * 0.8  # a fifth or more of the padded batch is padding
    padded, padded_grads = gradients(model, fused_completion_tokens, batch)
    packed, packed_grads = gradients(model, TokenScoring("on"), batch)
    assert packed.logprobs.shape == (sum(REPLY_LENGTHS),)
    torch.testing.assert_close(packed.logprobs, padded.logprobs, **TOLERANCE)
    torch.testing.assert_close(packed.entropy, padded.entropy, **TOLERANCE)
    torch.testing.assert_close(packed.hidden, padded.hidden, **TOLERANCE)
    assert padded_grads.keys() == packed_grads.keys() and any("visual" in name for name in padded_grads)
    for name, gradient in padded_grads.items():
        scale = float(gradient.abs().max())  # up to ~200 here: fp32 sums of that size round at ~1e-5
        assert scale > 0, name
        torch.testing.assert_close(packed_grads[name], gradient, rtol=0.0, atol=1e-5 * scale, msg=name)
    assert scoring_path(model, TokenScoring("on")) == "packed (sdpa attention)"


def test_the_packed_row_holds_only_real_tokens_and_each_sequence_its_own_rope_positions(tiny_vlm):
    batch = ragged_batch(tiny_vlm)
    packed = pack_sequences(tiny_vlm.model, batch)
    real = batch.inputs["attention_mask"].bool()
    assert packed.inputs["input_ids"].shape == (1, int(real.sum()))
    assert "attention_mask" not in packed.inputs
    assert torch.equal(packed.inputs["pixel_values"], batch.inputs["pixel_values"])  # per image, as they are
    positions = packed.inputs["position_ids"]  # [4, 1, M]: text positions, then the model's 3-D ones
    owner = rope_index_owner(tiny_vlm.model)
    for row, task_item in enumerate(ROWS):
        alone = append_completions(encode_prompts(tiny_vlm, [task_item]), [[0] * REPLY_LENGTHS[row]], tiny_vlm)
        own = owner.compute_3d_position_ids(
            input_ids=alone.input_ids, inputs_embeds=None, image_grid_thw=alone.inputs["image_grid_thw"],
            attention_mask=alone.inputs["attention_mask"], mm_token_type_ids=alone.inputs["mm_token_type_ids"])
        places = packed.index[row][real[row]]  # this sequence's tokens in the packed row
        assert positions[0, 0, places].tolist() == list(range(alone.input_ids.shape[1]))
        assert torch.equal(positions[1:, 0, places], own[:, 0])


def test_the_varlen_attention_gives_the_padded_scores(fresh_tiny_vlm):
    """``rl.step.varlen_attention`` (on CPU: sdpa with the block-diagonal mask it builds) packs as sdpa does."""
    model, batch = fresh_tiny_vlm.model, ragged_batch(fresh_tiny_vlm)
    padded = fused_completion_tokens(model, batch)
    scoring = TokenScoring("on", attention=VARLEN_ATTENTION)
    packed = scoring(model, batch)
    assert text_attention(model) == VARLEN_ATTENTION and model.config.vision_config._attn_implementation == "sdpa"
    assert scoring_path(model, scoring) == f"packed ({VARLEN_ATTENTION} attention)"
    torch.testing.assert_close(packed.logprobs, padded.logprobs, **TOLERANCE)
    torch.testing.assert_close(fused_completion_tokens(model, batch).logprobs, padded.logprobs, **TOLERANCE)


def test_bf16_autocast_keeps_float32_weights_gradients_and_log_probs(fresh_tiny_vlm):
    model, batch = fresh_tiny_vlm.model, ragged_batch(fresh_tiny_vlm)
    full = fused_completion_tokens(model, batch).logprobs.detach()
    tokens, grads = gradients(model, TokenScoring("on", autocast=torch.bfloat16), batch)
    assert tokens.logprobs.dtype == tokens.entropy.dtype == torch.float32
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {g.dtype for g in grads.values()} == {torch.float32}
    gap = (tokens.logprobs.detach() - full).abs()
    assert 0 < float(gap.max()) < 0.05  # bfloat16 compute: close, not equal


def family_model(tiny_family_dir, name: str):
    """A private copy of a family's tiny checkpoint (the check leaves its answer on the model)."""
    torch.set_num_threads(1)
    return load_vlm(ModelSource(str(tiny_family_dir(name))), torch.device("cpu"))


@pytest.mark.parametrize("family", ["llava", "qwen2.5-vl"])
def test_another_family_packs_and_gives_the_padded_scores(tiny_family_dir, family):
    loaded = family_model(tiny_family_dir, family)
    batch = ragged_batch(loaded, [ROWS[1], ROWS[1], ROWS[2]] if family == "llava" else ROWS)
    padded = fused_completion_tokens(loaded.model, batch)
    scoring = TokenScoring("auto")
    packed = scoring(loaded.model, batch)
    assert scoring_path(loaded.model, scoring) == "packed (sdpa attention)"
    torch.testing.assert_close(packed.logprobs, padded.logprobs, **TOLERANCE)
    torch.testing.assert_close(packed.entropy, padded.entropy, **TOLERANCE)


def test_a_family_that_cannot_pack_falls_back_to_the_padded_path(tiny_family_dir):
    """Llama 3.2 Vision's cross-attention mask is per row: its check fails, and it scores padded (auto) or
    refuses (on)."""
    loaded = family_model(tiny_family_dir, "mllama")
    batch = ragged_batch(loaded, [ROWS[1], ROWS[1], ROWS[1]])
    padded = fused_completion_tokens(loaded.model, batch)
    scoring = TokenScoring("auto")
    scored = scoring(loaded.model, batch)
    assert scoring_path(loaded.model, scoring).startswith("padded: packed inputs fail")
    assert torch.equal(scored.logprobs, padded.logprobs)
    with pytest.raises(ConfigError, match='packed_sequences = "on", but MllamaForConditionalGeneration cannot'):
        TokenScoring("on")(loaded.model, batch)


def test_a_packing_that_leaks_across_sequences_fails_the_check(fresh_tiny_vlm, monkeypatch):
    """Positions that do not restart make the packed row one sequence: attention then crosses rows, and the
    check sees it."""
    model, batch = fresh_tiny_vlm.model, ragged_batch(fresh_tiny_vlm)
    one_sequence = lambda model, batch, real: torch.arange(int(real.sum()))[None]  # noqa: E731
    monkeypatch.setattr(packing, "packed_positions", one_sequence)
    scoring = TokenScoring("auto")
    scored = scoring(model, batch)
    assert scoring_path(model, scoring).startswith("padded: packed log-probs differ from padded ones by")
    assert torch.equal(scored.logprobs, fused_completion_tokens(model, batch).logprobs)


def test_one_row_and_off_score_padded_and_decide_nothing(fresh_tiny_vlm):
    model = fresh_tiny_vlm.model
    one = ragged_batch(fresh_tiny_vlm, ROWS[:1], REPLY_LENGTHS[:1])
    TokenScoring("auto")(model, one)
    TokenScoring("off")(model, ragged_batch(fresh_tiny_vlm))
    assert not hasattr(model, PACKING_CHECK)
    assert scoring_path(model, TokenScoring("auto")) == scoring_path(model, TokenScoring("off")) == "padded"


def test_generation_is_unchanged_by_the_switch_to_the_varlen_attention(fresh_tiny_vlm):
    """The switch outlives the check (rollouts then generate with it): padded prompts and the cache keep sdpa's
    masks, so greedy replies and their scores are sdpa's."""
    loaded = fresh_tiny_vlm
    inputs = encode_prompts(loaded, ROWS)

    def greedy():
        with torch.inference_mode():
            out = loaded.model.generate(**inputs, max_new_tokens=6, do_sample=False, output_logits=True,
                                        return_dict_in_generate=True, pad_token_id=loaded.tokenizer.pad_token_id)
        return out.sequences, torch.stack(out.logits, dim=1)

    sequences, logits = greedy()
    assert varlen_attention.set_text_attention(loaded.model, VARLEN_ATTENTION)
    switched_sequences, switched_logits = greedy()
    assert torch.equal(switched_sequences, sequences)
    torch.testing.assert_close(switched_logits, logits, **TOLERANCE)


def test_an_rl_step_packs_every_pass_and_matches_the_padded_step(tiny_model_dir):
    """The trainer's own scoring (its ``TokenScoring``, through the policy it prepares, and the reference it
    passes it to): a GRPO step with a KL-loss reference packs (recorded per step) and gives the padded step's
    loss, KL, entropy and gradient norm (the entropy bonus gives a gradient whatever the rewards)."""
    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    torch.set_num_threads(1)
    env = make_env("easy_vqa", split="train", limit=8, seed=1)
    stats = {}
    for mode in ("auto", "off"):
        settings = TrainingSettings(group_size=3, prompts_per_step=2, max_new_tokens=5, kl_coef=0.05, quant_bits=16,
                                    entropy_coef=0.01, learning_rate=1e-3, seed=2, packed_sequences=mode)
        policy, reference = policy_and_reference(str(tiny_model_dir), settings, device="cpu")
        trainer = RLTrainer(settings.resolve(), policy, reference)
        stats[mode] = trainer.rl_step(env, [0, 1])
        if mode == "auto":
            assert getattr(reference.loaded.model, PACKING_CHECK).packs  # the reference packs too
    assert stats["auto"].scoring_path == f"packed ({VARLEN_ATTENTION} attention)"
    assert stats["off"].scoring_path == "padded"
    assert stats["off"].grad_norm > 0 and stats["off"].loss != 0
    for name in ("loss", "kl", "entropy", "grad_norm", "response_length"):
        assert getattr(stats["auto"], name) == pytest.approx(getattr(stats["off"], name), rel=1e-5, abs=1e-7), name
