"""Sampling settings and MAYE's defaults."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aerorl_ops.eval_metrics.sampling import MAYE_SAMPLING_SETTINGS, SamplingSetting


def test_maye_defaults():
    # GAIR-NLP/MAYE recipes/full_ppo_vllm_distributed.py, eval(): high / medium / low strategies.
    assert [(s.name, s.temperature, s.top_p, s.n, s.k, s.greedy) for s in MAYE_SAMPLING_SETTINGS] == [
        ("high_temp_pass8", 1.0, 1.0, 8, 8, False),
        ("medium_temp_pass1", 0.6, 1.0, 1, 1, False),
        ("low_temp_pass1", 0.01, 0.001, 1, 1, False),
    ]
    assert MAYE_SAMPLING_SETTINGS[2].label == "pass@1 (temperature=0.01, top_p=0.001)"


def test_n_and_k_are_configurable():
    wider = replace(MAYE_SAMPLING_SETTINGS[0], n=16, k=4)
    assert (wider.n, wider.k) == (16, 4)
    assert wider.label == "pass@4 (n=16, temperature=1.0, top_p=1.0)"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n": 4, "k": 8}, ValueError, "1 <= k <= n"),
        ({"n": 4, "k": 0}, ValueError, "1 <= k <= n"),
        ({"n": 2.0}, TypeError, "n must be an integer"),
        ({"temperature": 0.0}, ValueError, "temperature must be > 0"),
        ({"top_p": 0.0}, ValueError, "top_p must lie in"),
        ({"greedy": True, "n": 2, "k": 1}, ValueError, "greedy decoding repeats one response"),
    ],
)
def test_invalid_settings_are_named(kwargs, error, message):
    with pytest.raises(error, match=f"sampling setting 'custom'.*{message}"):
        SamplingSetting("custom", **kwargs)


def test_names_are_slugs_and_greedy_ignores_temperature():
    with pytest.raises(ValueError, match="slug"):
        SamplingSetting("pass@8 T=1")
    greedy = SamplingSetting("greedy_pass1", temperature=0.0, greedy=True)
    assert greedy.label == "pass@1 (greedy)"
