"""Dagster run config generated from the settings dataclasses (``aerorl_ops.config``).

A generated ``Config`` class has one field per setting, with the setting's type, its help as the
field's description and, as its default, the value in the config file the definitions were built
from. The launchpad shows the values a run will use, and no default is written here.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pydantic

from aerorl_ops.config.fields import setting_fields, setting_types
from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES, RewardSettings, parse_rewards

RunField = tuple[Any, Any, str]
"""A run-config field that is not a setting: ``(type, default, description)``."""


def config_class(name: str, settings: object, doc: str, *, base: type[dg.Config] = dg.Config,
                 exclude: tuple[str, ...] = (), extra: dict[str, RunField] | None = None) -> type[dg.Config]:
    """A ``Config`` class named ``name``: the settings of ``type(settings)`` (less ``exclude``),
    defaulting to the values of ``settings``, then the ``extra`` run-only fields."""
    types = setting_types(type(settings))
    fields: dict[str, Any] = {
        f.name: (types[f.name], pydantic.Field(default=getattr(settings, f.name), description=f.metadata["help"]))
        for f in setting_fields(type(settings)) if f.name not in exclude
    }
    for field_name, (kind, default, description) in (extra or {}).items():
        fields[field_name] = (kind, pydantic.Field(default=default, description=description))
    return pydantic.create_model(name, __base__=base, __doc__=doc, __module__=__name__, **fields)


def settings_values(config: dg.Config, settings_type: type) -> dict[str, Any]:
    """The settings fields of a generated ``config``, as a dict for the settings dataclass."""
    run_fields = type(config).model_fields
    return {f.name: getattr(config, f.name) for f in setting_fields(settings_type) if f.name in run_fields}


def reward_weights_class(weights: dict[str, float]) -> type[dg.Config]:
    """One field per reward component, so Dagster rejects an unknown component name when the run is
    launched, before any step (or model) runs. A component the file gives no weight defaults to
    unset (it keeps AeroRL's weight, as in the file)."""
    fields: dict[str, Any] = {
        name: (float | None, pydantic.Field(default=weights.get(name), description=f"weight of the {name} reward"))
        for name in REWARD_COMPONENT_NAMES
    }
    return pydantic.create_model("RewardWeights", __base__=dg.Config, __module__=__name__, **fields)


def reward_config_class(rewards: RewardSettings) -> type[dg.Config]:
    """``reward_scores`` run config: the ``[rewards]`` settings, defaulting to the file's values."""
    weights = reward_weights_class(rewards.weights)
    return config_class(
        "RewardConfig", rewards, "Reward settings of this run; the defaults are the config file's [rewards].",
        exclude=("weights",), extra={"weights": (weights, weights(), "weight of each reward component")})


def reward_settings(config: dg.Config, where: str) -> RewardSettings:
    """The ``RewardSettings`` a ``reward_config_class`` config describes, checked as in the file."""
    values = settings_values(config, RewardSettings)
    values["weights"] = {name: value for name, value in config.weights.model_dump().items() if value is not None}
    return parse_rewards(where, values)
