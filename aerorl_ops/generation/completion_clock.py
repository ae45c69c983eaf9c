"""Per-sample completion times inside one batched ``generate`` call."""

from __future__ import annotations

import time

import torch
from transformers import StoppingCriteria


class CompletionClock(StoppingCriteria):
    """Records, for each row of a batch, when it first produced an end-of-sequence token.

    It never stops generation itself (``generate``'s own EOS handling does); it only watches.
    Rows that never finish keep the time of the last step. Times are seconds since ``start()``.
    """

    def __init__(self, eos_token_ids: list[int], batch_size: int) -> None:
        self.eos_token_ids = torch.tensor(eos_token_ids)
        self.finished_at: list[float | None] = [None] * batch_size
        self.last_step_at = 0.0
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        now = time.perf_counter() - self._started
        self.last_step_at = now
        just_emitted = torch.isin(input_ids[:, -1].cpu(), self.eos_token_ids)  # [B]
        for row, done in enumerate(just_emitted.tolist()):
            if done and self.finished_at[row] is None:
                self.finished_at[row] = now
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    def seconds_per_row(self) -> list[float]:
        return [self.last_step_at if t is None else t for t in self.finished_at]
