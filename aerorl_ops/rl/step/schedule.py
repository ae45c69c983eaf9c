"""Learning-rate schedules and the order in which training items are drawn.

>>> [round(learning_rate_at(s, 1.0, 5, "cosine", warmup_steps=2), 4) for s in range(5)]
[0.5, 1.0, 1.0, 0.5, 0.0]
>>> learning_rate_at(3, 0.1, 4, "constant")
0.1
>>> round(learning_rate_at(4, 1.0, 5, "cosine", warmup_steps=2, min_ratio=0.1), 4)
0.1
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from aerorl_ops.config.curriculum import CurriculumStage, stage_at
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import TaskEnv


def learning_rate_at(step: int, base: float, total_steps: int, schedule: str, warmup_steps: int = 0,
                     min_ratio: float = 0.0) -> float:
    """The learning rate of 0-based ``step`` of a phase of ``total_steps``.

    ``constant``: ``base``. ``cosine``: ``base * (step + 1) / warmup_steps`` during the linear
    warm-up, then ``base * (m + (1 - m) * (1 + cos(pi * p)) / 2)`` with ``m = min_ratio`` and
    ``p = (step - warmup) / (total - warmup - 1)`` (so the last step's rate is ``m * base`` when the
    phase is longer than its warm-up; verl's ``min_lr_ratio``).
    """
    if schedule == "constant":
        return base
    if schedule != "cosine":
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; use constant or cosine")
    if not 0 <= min_ratio <= 1:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    if step < warmup_steps:
        return base * (step + 1) / warmup_steps
    decay_steps = total_steps - warmup_steps - 1
    progress = min(1.0, (step - warmup_steps) / decay_steps) if decay_steps > 0 else 0.0
    return base * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def warmup_learning_rate(settings: TrainingSettings, step: int) -> float:
    """The supervised warm-up's learning rate at 0-based ``step`` (``warmup_*`` settings, ``lr_min_ratio``)."""
    return learning_rate_at(step, settings.warmup_learning_rate, settings.warmup_steps, settings.warmup_lr_schedule,
                            settings.warmup_lr_warmup_steps, settings.lr_min_ratio)


class ItemSampler:
    """Training batches of environment indices, drawn with replacement; batch ``step`` depends
    only on ``(seed, step)``, so a resumed run draws what an uninterrupted one would.

    With curriculum ``stages`` (``config.curriculum``), a batch at a global step inside a stage
    draws a share ``focus_share`` of its items from those of the stage's question types and the
    rest from the other items; outside every stage, the natural mix.
    """

    def __init__(self, env: TaskEnv, seed: int, stages: Sequence[CurriculumStage] = ()) -> None:
        self.seed = seed
        self.size = len(env)
        if self.size == 0:
            raise ValueError(f"environment {env.name!r} holds no items to train on")
        self.stages = tuple(stages)
        types = [env.question_type(i) for i in range(self.size)] if self.stages else []
        self._pools: list[tuple[list[int], list[int]]] = []
        for number, stage in enumerate(self.stages, start=1):
            focus = set(stage.focus_types)
            chosen = [i for i, kind in enumerate(types) if kind in focus]
            if not chosen:
                raise ValueError(f"curriculum stage {number} (until step {stage.until_step}): environment "
                                 f"{env.name!r} has no items of types {sorted(focus)} (it has "
                                 f"{sorted({t for t in types if t})})")
            self._pools.append((chosen, [i for i, kind in enumerate(types) if kind not in focus] or chosen))

    def stage(self, step: int) -> int | None:
        """The curriculum stage of global ``step`` (None = the natural mix)."""
        return stage_at(self.stages, step)

    def batch(self, step: int, size: int, draw: int = 0) -> list[int]:
        """``size`` items of global ``step``; draw r > 0: another batch of the same step (dynamic sampling's
        round r), independent of the first."""
        rng = random.Random(self.seed * 1_000_003 + step if draw == 0 else f"{self.seed}:{step}:{draw}")
        stage = self.stage(step)
        if stage is None:
            return [rng.randrange(self.size) for _ in range(size)]
        focus, rest = self._pools[stage]
        count = round(size * self.stages[stage].focus_share)
        return [rng.choice(focus) for _ in range(count)] + [rng.choice(rest) for _ in range(size - count)]
