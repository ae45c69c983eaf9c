"""The project's one masking convention and the one helper that averages under it.

Convention: a boolean mask is ``True`` where a position is **counted** (in a loss, a
statistic, an average) and ``False`` where it is excluded. Vision tokens, padding,
prompt tokens and ``ignore_index`` labels are all ``False`` in a loss mask.
"""

from __future__ import annotations

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` over positions where ``mask`` is True.

    values: [...] any float tensor; mask: same shape, bool (True = counted).
    With ``dim=None`` returns a scalar; otherwise reduces over ``dim``.
    An all-False mask gives 0 (not NaN), so empty groups do not poison a batch.

    >>> masked_mean(torch.tensor([1.0, 2.0, 9.0]), torch.tensor([True, True, False]))
    tensor(1.5000)
    """
    mask = mask.to(values.dtype)
    total = (values * mask).sum() if dim is None else (values * mask).sum(dim=dim)
    count = mask.sum() if dim is None else mask.sum(dim=dim)
    return total / count.clamp(min=1.0)
