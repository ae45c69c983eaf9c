"""A tiny run with a held-out distribution (issue 41): every evaluation, the control's too, scores it beside the
held-out sample, and its rows are its own in ``training_evals`` and ``training_eval_types``
(``distribution`` = its name) while the run's summary reads the held-out sample alone."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import duckdb
import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.rl.record.recorder import RunRecorder
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.phases import run_training

SETTINGS = TrainingSettings(group_size=2, prompts_per_step=2, max_new_tokens=2, kl_coef=0.0, seed=0, warmup_steps=1,
                            warmup_batch_size=2, steps=1, eval_interval=100, checkpoint_interval=100,
                            sampled_eval_size=0, swap_check_type="")


@pytest.mark.slow
def test_every_evaluation_scores_the_distribution_in_rows_of_its_own(tiny_model_dir, tmp_path):
    torch.set_num_threads(1)
    train = make_env("easy_vqa_combinations", split="train", limit=8, seed=0, name="seen_pairs")
    held_out = make_env("easy_vqa_combinations", split="test", limit=4, seed=0, name="seen_test")
    unseen = make_env("easy_vqa_combinations", split="test", limit=3, seed=0, name="unseen",
                      combinations="held_out")
    result = run_training(str(tiny_model_dir), tmp_path / "run", SETTINGS, train, held_out, range(4), device="cpu",
                          resume=False, distributions={"unseen": unseen})
    shown = [(e.phase, e.distribution, e.n) for e in result.evals]
    assert shown == [("no_image_prior", None, 4), ("base", None, 4), ("base", "unseen", 3), ("warmup", None, 4),
                     ("warmup", "unseen", 3), ("final", None, 4), ("final", "unseen", 3), ("control", None, 4),
                     ("control", "unseen", 3)]
    assert result.eval_of("final", "unseen").n == 3 and result.eval_of("final").n == 4
    path = tmp_path / "runs.duckdb"
    recorder = RunRecorder(partial(duckdb.connect, str(path)), "run")
    recorder.start(TrainingRunRecord.started("run", str(tiny_model_dir), SETTINGS.resolve(), datetime.now(UTC)),
                   fresh=True)
    for evaluation in result.evals:
        recorder.evaluation(evaluation)
    with duckdb.connect(str(path)) as conn:
        rows = conn.execute("SELECT phase, distribution, n, mean_turns FROM training_evals ORDER BY step, phase, "
                            "distribution NULLS FIRST").fetchall()
        types = conn.execute("SELECT DISTINCT distribution FROM training_eval_types ORDER BY 1 NULLS FIRST").fetchall()
    assert len(rows) == 9 and sum(d == "unseen" for _, d, _, _ in rows) == 4
    assert {n for _, d, n, _ in rows if d == "unseen"} == {3} and {t for *_, t in rows} == {None}  # single-turn
    assert types == [(None,), ("unseen",)]
    stored = recorder.stored().evaluations
    assert list(stored["phase"]) == ["no_image_prior", "base", "warmup", "final", "control"]
    assert set(stored["n"]) == {4}
