"""Crash-safe checkpoints: written beside their folder then renamed into place, and a torn one skipped
on resume for the next older complete one."""

from __future__ import annotations

import logging

import pytest
import torch

import aerorl_ops.rl.runtime.checkpoint_files as checkpoint
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.run.phases import run_training
from aerorl_ops.rl.runtime.checkpoint_files import (
    TRAINER_STATE,
    load_checkpoint_state,
    newest_complete_checkpoint,
    save_checkpoint,
)


def test_a_checkpoint_replaces_an_older_folder_of_its_name_and_leaves_no_temporary_folder(tiny_vlm, tmp_path):
    save_checkpoint(tmp_path / "step-2", tiny_vlm, None, 2, "old")
    (tmp_path / "step-2" / "stale.txt").write_text("from the older folder")
    save_checkpoint(tmp_path / "step-2", tiny_vlm, None, 2, "new")
    assert load_checkpoint_state(tmp_path / "step-2").reference_source == "new"
    assert not (tmp_path / "step-2" / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["step-2"]


def test_a_write_that_fails_leaves_the_older_checkpoint_whole(tiny_vlm, tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "step-2", tiny_vlm, None, 2, "old")

    def killed_mid_write(obj, path, *args, **kwargs):
        with open(path, "wb") as handle:
            handle.write(b"torn")
        raise KeyboardInterrupt  # as a process stopped while it writes

    monkeypatch.setattr(checkpoint.torch, "save", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "step-2", tiny_vlm, None, 2, "new")
    monkeypatch.undo()
    assert load_checkpoint_state(tmp_path / "step-2").reference_source == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["step-2"]


def test_a_torn_checkpoint_is_named_and_skipped_for_the_next_older_one(tiny_model_dir, tmp_path, caplog):
    torch.set_num_threads(1)
    env = make_env("easy_vqa", split="train", limit=16, seed=1)
    settings = TrainingSettings(group_size=2, max_new_tokens=2, kl_coef=0.0, seed=2, warmup_steps=3,
                                warmup_batch_size=2, steps=0, checkpoint_interval=1, eval_interval=10, control=False,
                                swap_check_type="")

    def run(resume: bool):
        return run_training(str(tiny_model_dir), tmp_path / "run", settings, env, env, [0, 1], device="cpu",
                            resume=resume)

    whole = run(resume=False)
    torn = tmp_path / "run" / "step-3"
    state = (torn / TRAINER_STATE).read_bytes()
    (torn / TRAINER_STATE).write_bytes(state[: len(state) // 2])  # truncated, as by a crash mid-write
    found = newest_complete_checkpoint(tmp_path / "run")
    assert (found.checkpoint, found.step) == (tmp_path / "run" / "step-2", 2)
    assert [s.path for s in found.skipped] == [torn] and TRAINER_STATE in found.skipped[0].reason
    with caplog.at_level(logging.WARNING, logger="aerorl_ops.rl.record.reporters"):
        resumed = run(resume=True)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [f"skipped the torn checkpoint {torn}"]
    assert (resumed.resumed_from, resumed.resumed_from_step) == (tmp_path / "run" / "step-2", 2)
    assert [(s.step, s.loss) for s in resumed.steps] == [(3, whole.steps[2].loss)]  # step 3 again, the same
    assert load_checkpoint_state(torn).step == 3  # rewritten whole
