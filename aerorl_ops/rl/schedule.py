"""Learning-rate schedules and the order in which training items are drawn.

>>> [round(learning_rate_at(s, 1.0, 5, "cosine", warmup_steps=2), 4) for s in range(5)]
[0.5, 1.0, 1.0, 0.5, 0.0]
>>> learning_rate_at(3, 0.1, 4, "constant")
0.1
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from aerorl_ops.envs.base import TaskEnv


def learning_rate_at(step: int, base: float, total_steps: int, schedule: str, warmup_steps: int = 0) -> float:
    """The learning rate of 0-based ``step`` of a phase of ``total_steps``.

    ``constant``: ``base``. ``cosine``: ``base * (step + 1) / warmup_steps`` during the linear
    warm-up, then ``base * (1 + cos(pi * p)) / 2`` with ``p = (step - warmup) / (total - warmup - 1)``
    (so the last step's rate is 0 when the phase is longer than its warm-up).
    """
    if schedule == "constant":
        return base
    if schedule != "cosine":
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; use constant or cosine")
    if step < warmup_steps:
        return base * (step + 1) / warmup_steps
    decay_steps = total_steps - warmup_steps - 1
    progress = min(1.0, (step - warmup_steps) / decay_steps) if decay_steps > 0 else 0.0
    return base * 0.5 * (1.0 + math.cos(math.pi * progress))


class ItemSampler:
    """Training batches of environment indices, drawn with replacement; batch ``step`` depends
    only on ``(seed, step)``, so a resumed run draws what an uninterrupted one would.

    ``focus_types`` (a curriculum): a share ``focus_share`` of each batch is drawn from items of
    those question types and the rest from the other items, until ``focus_until`` supervised
    steps; otherwise the natural mix.
    """

    def __init__(self, env: TaskEnv, seed: int, focus_types: Sequence[str] = (), focus_share: float = 0.75) -> None:
        self.seed = seed
        self.size = len(env)
        if self.size == 0:
            raise ValueError(f"environment {env.name!r} holds no items to train on")
        self.focus_share = focus_share
        focus = set(focus_types)
        types = [env.question_type(i) for i in range(self.size)] if focus else []
        self.focus = [i for i, kind in enumerate(types) if kind in focus]
        self.rest = [i for i, kind in enumerate(types) if kind not in focus]
        if focus and not self.focus:
            raise ValueError(f"curriculum focus_types {sorted(focus)}: environment {env.name!r} has no such "
                             f"question types (it has {sorted({t for t in types if t})})")

    def batch(self, step: int, size: int, focused: bool = False) -> list[int]:
        rng = random.Random(self.seed * 1_000_003 + step)
        if not focused or not self.focus:
            return [rng.randrange(self.size) for _ in range(size)]
        count = round(size * self.focus_share)
        rest = self.rest or self.focus
        return [rng.choice(self.focus) for _ in range(count)] + [rng.choice(rest) for _ in range(size - count)]
