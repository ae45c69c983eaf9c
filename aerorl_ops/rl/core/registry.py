"""The policy losses by name, in one registry that a decorator on each loss fills (verl's
``register_policy_loss``, ``verl/trainer/ppo/core_algos.py``): a new loss is added where it is written.

A registered loss takes ``old_logprob, logprob, advantages, response_mask`` (each [B, T]), then its
settings, each a parameter named as the ``rl.step.loss.RLLoss`` field it takes (``clip_low``,
``clip_high``, ``dual_clip_c``, ``agg_mode``, ``tau_pos``, ``tau_neg``), and, if it weighs each token's
loss by an importance weight, ``is_weight``; it returns ``functional.PolicyLoss``. Its ``aggregation``
says how it reduces over tokens: None for the run's ``loss_agg_mode``, else its own (an
``aggregate_loss`` mode, or ``ROWS``: a plain mean over rows), which ``RLLoss.shares`` weighs
micro-batches by.

The losses register as their modules load: ``rl.core.functional`` (ppo) and ``rl.core.policy_losses``
(the others; it imports functional), so look one up after importing ``rl.core.policy_losses``. The
names a run may choose are declared in ``config.algorithms.POLICY_LOSSES`` (the config layer cannot
import torch); a test holds the registry to them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LossFunction = Callable[..., Any]
"""A policy loss: the four tensors, then its settings by name -> ``functional.PolicyLoss``."""

TENSOR_PARAMETERS = ("old_logprob", "logprob", "advantages", "response_mask")
"""The first four parameters of every registered loss, in this order."""
IS_WEIGHT = "is_weight"
ROWS = "rows"
"""The aggregation of a loss that is a plain mean over rows, empty rows included (GMPO's, as verl's)."""


@dataclass(frozen=True)
class RegisteredLoss:
    """A policy loss as registered: ``loss`` (returns ``functional.PolicyLoss``), its own ``aggregation``
    (None: the run's ``loss_agg_mode``) and ``settings``, the names of its parameters after the four tensors."""

    name: str
    loss: LossFunction
    aggregation: str | None
    settings: tuple[str, ...]

    @property
    def takes_is_weight(self) -> bool:
        return IS_WEIGHT in self.settings


POLICY_LOSS_REGISTRY: dict[str, RegisteredLoss] = {}
"""Every registered policy loss by name, in the order they registered."""


def register_policy_loss(name: str, aggregation: str | None = None) -> Callable[[LossFunction], LossFunction]:
    """A decorator registering its loss function as policy loss ``name`` (the function itself is unchanged).
    A second loss under one name, or a function whose first parameters are not ``TENSOR_PARAMETERS``, is a
    ValueError naming it."""

    def register(loss: LossFunction) -> LossFunction:
        where = f"{loss.__module__}.{loss.__qualname__}"
        if name in POLICY_LOSS_REGISTRY:
            held = POLICY_LOSS_REGISTRY[name].loss
            raise ValueError(f"policy loss {name!r} of {where} is registered already, by "
                             f"{held.__module__}.{held.__qualname__}: choose another name")
        parameters = tuple(inspect.signature(loss).parameters)
        if parameters[:len(TENSOR_PARAMETERS)] != TENSOR_PARAMETERS:
            raise ValueError(f"policy loss {name!r} ({where}) must take {', '.join(TENSOR_PARAMETERS)} first, "
                             f"then its settings; it takes {', '.join(parameters)}")
        POLICY_LOSS_REGISTRY[name] = RegisteredLoss(name, loss, aggregation, parameters[len(TENSOR_PARAMETERS):])
        return loss

    return register


def registered_policy_loss(name: str) -> RegisteredLoss:
    """The policy loss registered as ``name``; an unknown name is a ValueError listing the registered ones."""
    try:
        return POLICY_LOSS_REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown policy_loss {name!r}; registered: {', '.join(POLICY_LOSS_REGISTRY)}") from None
