"""A tiny recorded training run (``rl.run.train_and_record.record_training``), to run in a process of its own:

    python -m tests.aerorl_ops.rl.run.killable_run MODEL_DIR RUN_DIR DATABASE [KILL_AFTER]

With ``KILL_AFTER`` a step number, the process sends itself SIGKILL once that step's row is stored (before the
step's checkpoint, if it has one); with ``checkpoint-N``, once the ``step-N`` checkpoint is written: the kill
point is a point of the run, not a time. Used by ``test_killed_run_resumes.py``; its settings are fixed here so
every process runs the same run.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import duckdb
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.record.recorder import RunRecorder, StoredRun
from aerorl_ops.rl.record.reporters import CallbackReporter, RunReporter
from aerorl_ops.rl.record.result import TrainingResult
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.train_and_record import record_training
from aerorl_ops.rl.step.stats import StepStats

RUN_ID = "killable"
SETTINGS = TrainingSettings(group_size=2, max_new_tokens=4, learning_rate=1e-2, kl_coef=0.1, quant_bits=16,
                            entropy_coef=0.1, seed=4, warmup_steps=2, warmup_batch_size=4, steps=3,
                            prompts_per_step=2, eval_interval=2, checkpoint_interval=2, control=False,
                            swap_check_type="", sampled_eval_size=0)
"""Checkpoints after steps 2 (and warmup/) and 4, and the final one after step 5; evaluations: the prior
and the base at step 0, the warm-up's at step 2, an RL one at step 4, the final one at step 5."""
EVAL_ITEMS = 4
LOG = logging.getLogger("killable_run")


class KilledAfterCheckpoint(TrainingRun):
    """The run, which sends itself SIGKILL once its checkpoint folder ``kill_after`` is written."""

    kill_after = ""

    def _save(self, folder: Path, *args: object) -> Path:
        saved = super()._save(folder, *args)
        if Path(folder).name == self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return saved


def recorded_run(model_dir: str, run_dir: Path, database: Path, kill_after: str | None = None,
                 train: Callable[..., TrainingResult] | None = None) -> StoredRun:
    torch.set_num_threads(1)
    train_env = make_env("easy_vqa", split="train", limit=32, seed=1)
    held_out = make_env("easy_vqa", split="test", limit=EVAL_ITEMS, seed=0)
    KilledAfterCheckpoint.kill_after = kill_after.replace("checkpoint-", "step-") if kill_after else ""

    def train_run(reporter: RunReporter) -> TrainingResult:
        return KilledAfterCheckpoint(model_dir, run_dir, SETTINGS.resolve(), train_env, held_out, range(EVAL_ITEMS),
                                     device="cpu", reporter=reporter).run()

    def kill(stats: StepStats) -> None:
        if str(stats.step) == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    record = TrainingRunRecord.started(RUN_ID, model_dir, SETTINGS.resolve(), datetime.now(UTC))
    return record_training(RunRecorder(partial(duckdb.connect, str(database)), RUN_ID), record, train or train_run,
                           [], LOG, reporters=lambda: CallbackReporter(step=kill))


if __name__ == "__main__":
    model, folder, db = sys.argv[1:4]
    recorded_run(model, Path(folder), Path(db), sys.argv[4] if len(sys.argv) > 4 else None)
