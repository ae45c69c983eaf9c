"""The torchrun worker of the rank-failure test: rank 1 raises at its first RL step, the other ranks
run ``assets.training.torchrun_worker`` unchanged. Launched as ``-m tests.assets.training.crashing_worker``."""

from __future__ import annotations

from aerorl_ops.rl.step.trainer import RLTrainer
from assets.training import torchrun_worker

CRASH = "rank 1 failed on purpose at its first RL step"
real_rl_step = RLTrainer.rl_step


def crashing_rl_step(self, *args, **kwargs):
    if self.dp.rank == 1:
        raise RuntimeError(CRASH)
    return real_rl_step(self, *args, **kwargs)


if __name__ == "__main__":
    RLTrainer.rl_step = crashing_rl_step
    torchrun_worker.main()
