"""``TrainingSettings.resolve()``: the frozen ``Recipe`` a run trains with, every algorithm default filled in
from the one table (``config.algorithms``); set settings win."""

from __future__ import annotations

import dataclasses
import json

import pytest

from aerorl_ops.config.algorithms import ALGORITHM_SETTINGS, ALGORITHMS, POLICY_LOSSES, algorithm_values
from aerorl_ops.config.training import TRAINING_DEFAULTS, Recipe, TrainingSettings

# kl_coef, kl_kind, kl_placement, loss_agg_mode, policy_loss, ppo_epochs, clip_low, clip_high, entropy_coef, gamma,
# dynamic_sampling, overlong_buffer (ALGORITHM_SETTINGS' order), with max_new_tokens = 100
GRPO = (0.04, "k3", "loss", "token-mean", "ppo", 1, 0.2, 0.2, 0.0, 1.0, False, 0)
IN_THE_REWARD = (0.04, "k1", "reward", "token-mean", "ppo", 1, 0.2, 0.2, 0.0, 1.0, False, 0)
EXPECTED = {
    "grpo": GRPO,
    "dr_grpo": GRPO,
    "rloo": GRPO,
    "reinforce_pp": IN_THE_REWARD,
    "ppo": (0.04, "k1", "reward", "token-mean", "ppo", 4, 0.2, 0.2, 0.01, 0.99, False, 0),
    # DAPO: clip-higher, dynamic sampling, no KL, the overlong buffer a fifth of the reply (20 of 100)
    "dapo": (0.0, "k3", "loss", "token-mean", "ppo", 1, 0.2, 0.28, 0.0, 1.0, True, 20),
    # GSPO: the sequence-ratio loss with the paper's clips, seq-mean-token-mean, no KL
    "gspo": (0.0, "k3", "loss", "seq-mean-token-mean", "gspo", 1, 3e-4, 4e-4, 0.0, 1.0, False, 0),
}


def algorithm_fields(recipe: Recipe) -> tuple:
    return tuple(getattr(recipe, name) for name in ALGORITHM_SETTINGS)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_resolves_to_its_own_defaults(algorithm):
    recipe = TrainingSettings(algorithm=algorithm, max_new_tokens=100).resolve()
    assert type(recipe) is Recipe
    assert algorithm_fields(recipe) == EXPECTED[algorithm]


def test_every_algorithm_is_hand_checked_and_defaults_to_a_declared_policy_loss():
    assert tuple(EXPECTED) == ALGORITHMS
    assert {TrainingSettings(algorithm=name).resolve().policy_loss for name in ALGORITHMS} <= set(POLICY_LOSSES)


def test_set_settings_win_and_the_kl_kind_follows_the_resolved_placement():
    mine = TrainingSettings(algorithm="dapo", clip_high=0.3, kl_coef=0.01, dynamic_sampling=False,
                            overlong_buffer=0, policy_loss="cispo", max_new_tokens=100).resolve()
    assert algorithm_fields(mine) == (0.01, "k3", "loss", "token-mean", "cispo", 1, 0.2, 0.3, 0.0, 1.0, False, 0)
    assert TrainingSettings(kl_placement="reward").resolve().kl_kind == "k1"  # grpo's KL moved into the reward
    assert TrainingSettings(algorithm="ppo", kl_placement="loss").resolve().kl_kind == "k3"
    assert TrainingSettings(algorithm="ppo", kl_kind="k2").resolve().kl_kind == "k2"


def test_dapos_overlong_buffer_is_a_fifth_of_the_reply_and_at_least_one_token():
    assert [TrainingSettings(algorithm="dapo", max_new_tokens=n).resolve().overlong_buffer
            for n in (3, 4, 10, 12)] == [1, 1, 2, 2]  # round(0.6) = 1, round(0.8) = 1, 2, round(2.4) = 2
    assert TrainingSettings(algorithm="grpo", max_new_tokens=10).resolve().overlong_buffer == 0


def test_a_recipe_keeps_every_other_setting_in_its_order_and_is_frozen():
    settings = TrainingSettings(algorithm="ppo", steps=7, lora_rank=4, seed=3)
    recipe = settings.resolve()
    given, resolved = dataclasses.asdict(settings), dataclasses.asdict(recipe)
    assert list(resolved) == list(given)  # the recorded config's keys, in the settings' order
    assert {k: v for k, v in resolved.items() if k not in ALGORITHM_SETTINGS} == {
        k: v for k, v in given.items() if k not in ALGORITHM_SETTINGS}
    assert (recipe.total_steps, recipe.world_size) == (settings.total_steps, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.kl_coef = 0.5  # type: ignore[misc]
    assert recipe.resolve() == recipe  # resolving again changes nothing
    assert Recipe(**json.loads(json.dumps(resolved))) == recipe  # a recorded config is a Recipe again


def test_only_the_algorithm_settings_are_unset_and_none_of_them_in_a_recipe():
    unset = tuple(f.name for f in dataclasses.fields(TrainingSettings) if getattr(TRAINING_DEFAULTS, f.name) is None)
    assert sorted(unset) == sorted(ALGORITHM_SETTINGS)
    recipe_types = {f.name: f.type for f in dataclasses.fields(Recipe)}
    assert all("None" not in recipe_types[name] for name in ALGORITHM_SETTINGS), recipe_types
    values = dataclasses.asdict(TrainingSettings().resolve())
    with pytest.raises(ValueError, match=r"^a Recipe has every algorithm setting filled in, but kl_coef, gamma are "
                                         r"None: make it with TrainingSettings.resolve\(\)$"):
        Recipe(**{**values, "kl_coef": None, "gamma": None})


def test_an_unknown_algorithm_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown RL algorithm 'ppo2'; known: grpo, dr_grpo, rloo, reinforce_pp, "
                                         r"ppo, dapo, gspo$"):
        algorithm_values("ppo2", {}, max_new_tokens=4)


def test_docstring_examples():
    import doctest

    from aerorl_ops.config import algorithms, training

    for module in (algorithms, training):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
