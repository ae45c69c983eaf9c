"""A short run on a mixture (``[datasets.mix] kind = "mixture"``: easy-VQA and a text-only JSONL part) through
``train_and_record``: its ``training_steps`` row holds the rollout's accuracy per source (``accuracy_by_source``),
which the step's logged replies (``training_rollouts``, every one kept) add up to; its held-out evaluations a
``training_eval_sources`` row per source. The base policy is the yes-sayer (tests/conftest.py: greedy "yes" to
every prompt, image or not), so the base evaluation's accuracy per source is that source's share of "yes"
answers. A run on one dataset leaves both empty."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial

import duckdb
import pytest

from aerorl_ops.config.benchmark import load_benchmark_config
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.configured import named_env
from aerorl_ops.rl.run.train_and_record import ModelPlace, ReportPlace, RunOptions, train_and_record

CONFIG = """
[benchmark]
batch_sizes = [1]

[models.yes]
source = "{yes}"

[datasets.easy]
kind = "easy_vqa"
split = "train"

[datasets.evens]
kind = "jsonl"
path = "evens.jsonl"
split = "train"
allow_no_image = true

[datasets.mix]
kind = "mixture"
parts = ["easy", "evens"]
weights = [0.5, 0.5]
limit = 16
"""
SETTINGS = dict(base_model="yes", group_size=2, prompts_per_step=4, max_new_tokens=3, kl_coef=0.0, seed=2,
                warmup_steps=0, steps=1, eval_size=6, control=False, swap_check_type="", sampled_eval_size=0,
                rollout_log_rate=1.0)


class _Quiet:
    def info(self, msg):
        pass

    def warning(self, msg):
        pass


def run(env: str, bench, tmp_path, models_dir, database: str) -> None:
    train_and_record(bench, TrainingSettings(env=env, **SETTINGS), RunOptions(env, False, False, "", "offline"),
                     ModelPlace(models_dir, True, "cpu", 1, 1.0),
                     ReportPlace(database, partial(duckdb.connect, database), tmp_path / "checkpoints"), log=_Quiet())


@pytest.mark.slow
def test_a_mixture_run_records_accuracy_per_source_and_a_single_dataset_run_none(models_dir, yes_model_dir,
                                                                                 tmp_path):
    (tmp_path / "bench.toml").write_text(CONFIG.format(yes=yes_model_dir))
    (tmp_path / "evens.jsonl").write_text("".join(json.dumps({"id": f"n{n}", "question": f"Is {n} even?",
                                                              "answer": "yes" if n % 2 == 0 else "no"}) + "\n"
                                                  for n in range(12)))
    bench = load_benchmark_config(tmp_path / "bench.toml")
    database = str(tmp_path / "report.duckdb")
    run("mix", bench, tmp_path, models_dir, database)
    run("easy", bench, tmp_path, models_dir, database)
    with duckdb.connect(database) as conn:
        steps = dict(conn.execute("SELECT run_id, accuracy_by_source FROM training_steps").fetchall())
        replies = conn.execute("SELECT prompt_id, correct FROM training_rollouts WHERE run_id = 'mix'").fetchall()
        sources = conn.execute("SELECT run_id, step, phase, source, accuracy, n FROM training_eval_sources "
                               "ORDER BY step, phase, source").fetchall()
    assert steps["easy"] is None and all(row[0] == "mix" for row in sources)
    tally = Counter((prompt_id.split("/")[0], correct) for prompt_id, correct in replies)
    assert len(replies) == 8  # 4 prompts x 2 replies, every one logged
    assert json.loads(steps["mix"]) == {source: {"accuracy": tally[source, True] / n if (
        n := tally[source, True] + tally[source, False]) else None, "n": n} for source in ("easy", "evens")}
    held_out = named_env("mix", bench.datasets, "", 6, 0)  # the run's held-out sample: 3 of each source
    expected = {source: sum(item.answers[0] == "yes" for item in held_out.items if item.dataset == source) / 3
                for source in ("easy", "evens")}
    assert [(phase, source, n) for _, _, phase, source, _, n in sources] == [
        ("base", "easy", 3), ("base", "evens", 3), ("no_image_prior", "easy", 3), ("no_image_prior", "evens", 3),
        ("final", "easy", 3), ("final", "evens", 3)]
    assert {source: accuracy for _, _, phase, source, accuracy, _ in sources if phase == "base"} == expected
