"""Sampling from a private ``torch.Generator`` (``generation.generator_sampling``): the draw by hand, the same
tokens and the same global RNG state afterwards as ``torch.manual_seed`` and ``do_sample=True``, the stop, and
what is refused."""

from __future__ import annotations

import math

import pytest
import torch

from aerorl_ops.generation.generator_sampling import (
    GeneratorSampling,
    PrivateDraws,
    PrivateRng,
    SamplingStopped,
    generator_decoding,
)

INF = math.inf


def draws(seed: int, stop=lambda: False) -> PrivateDraws:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return PrivateDraws(generator, stop)


def test_the_draw_is_the_only_finite_score_and_follows_the_warped_distribution():
    ids = torch.zeros(2, 1, dtype=torch.long)
    scores = torch.tensor([[0.0, -INF, -INF, -INF], [-INF, -INF, 3.0, -INF]])  # one allowed token per row
    out = GeneratorSampling(0.7, 0, 1.0, draws(0))(ids, scores.clone())
    assert out.tolist() == [[0.0, -INF, -INF, -INF], [-INF, -INF, 0.0, -INF]]
    # top_k = 1 keeps the largest score only, whatever the generator draws
    out = GeneratorSampling(1.0, 1, 1.0, draws(5))(ids, torch.tensor([[0.1, 0.3, 0.2, 0.0]] * 2))
    assert out.argmax(dim=1).tolist() == [1, 1]
    # top_p = 0.5 over probabilities [0.6, 0.3, 0.1]: the first token alone holds the mass
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]] * 2))
    assert GeneratorSampling(1.0, 0, 0.5, draws(9))(ids, logits).argmax(dim=1).tolist() == [0, 0]


def test_the_draw_is_multinomial_from_the_generator_at_the_temperature():
    ids = torch.zeros(3, 1, dtype=torch.long)
    logits = torch.tensor([[1.0, 0.0, -1.0, 0.5]] * 3)
    drawn = GeneratorSampling(2.0, 0, 1.0, draws(17))(ids, logits.clone()).argmax(dim=1)
    expected = torch.multinomial(torch.softmax(logits / 2.0, dim=-1), 1, generator=draws(17).generator)[:, 0]
    assert drawn.tolist() == expected.tolist()


def test_a_stop_raises_before_the_next_token():
    with pytest.raises(SamplingStopped):
        GeneratorSampling(1.0, 0, 1.0, draws(0, stop=lambda: True))(torch.zeros(1, 1, dtype=torch.long),
                                                                  torch.zeros(1, 3))


def test_a_generation_config_warper_it_does_not_apply_is_refused_by_name():
    class Model(torch.nn.Module):
        class generation_config:  # noqa: N801 - stands in for transformers' GenerationConfig
            min_p, typical_p, epsilon_cutoff, eta_cutoff, top_h = 0.05, 1.0, 0.0, None, None

    with pytest.raises(ValueError, match="generation config sets min_p,"):
        generator_decoding(Model(), 1.0, 0, 1.0, draws(0))


@pytest.fixture(scope="module")
def loaded(tiny_model_dir):
    from aerorl_ops.models.loading import ModelSource, load_vlm

    torch.set_num_threads(1)
    return load_vlm(ModelSource(str(tiny_model_dir)), torch.device("cpu"))


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.7, 5, 0.9), (1.3, 0, 0.5)])
def test_generate_draws_the_tokens_of_the_global_rng_and_leaves_it_as_they_would(loaded, temperature, top_k, top_p):
    from aerorl_ops.eval_runner.replies import generate_new_tokens

    inputs = loaded.on_device(loaded.processor(text=["a b c", "d e", "f"], return_tensors="pt", padding=True))
    torch.manual_seed(11)
    expected, _ = generate_new_tokens(loaded, inputs, 6, dict(do_sample=True, temperature=temperature, top_k=top_k,
                                                               top_p=top_p))
    expected_state = torch.get_rng_state()
    torch.manual_seed(999)  # the global RNG elsewhere: not drawn from
    before = torch.get_rng_state()
    rng = PrivateRng("cpu")
    tokens, _ = generate_new_tokens(loaded, inputs, 6, generator_decoding(loaded.model, temperature, top_k, top_p,
                                                                          rng.part(11)))
    assert tokens == expected
    assert torch.equal(torch.get_rng_state(), before)
    rng.leave_global_rng()
    assert torch.equal(torch.get_rng_state(), expected_state)
