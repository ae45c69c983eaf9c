"""PPO's critic: a scalar value head on the policy's last hidden state (mixtrain's actor-critic).

``V_t = w · h_t + b``, where ``h_t`` is the decoder's final hidden state at the position that
predicts response token t (the state in which that token is chosen; the same rows the LM head
scores, see ``sequences.completion_tokens``). Actor and critic share the decoder: the value loss
reaches it through ``h_t``.

The head is zero-initialised: every value starts at 0, a neutral baseline for rewards in [0, 1],
and the value loss reaches the shared decoder only as ``w`` moves away from 0 (dV/dh = w), so
the first updates cannot disturb the policy through the critic. It computes in float32 whatever
the policy's dtype, and is saved beside the policy in a checkpoint (``checkpoint.VALUE_HEAD``).
"""

from __future__ import annotations

import torch
from torch import nn


class ValueHead(nn.Module):
    """``Linear(hidden_size, 1)`` applied to hidden states: [N, H] -> [N] values."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    @classmethod
    def for_model(cls, model: nn.Module) -> ValueHead:
        """A head sized for ``model``'s LM-head input, on that head's device."""
        weight = model.get_output_embeddings().weight  # [V, H]
        return cls(weight.shape[1]).to(weight.device)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.float()).squeeze(-1)  # [N, H] -> [N]
