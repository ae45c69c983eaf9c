"""``eval_run`` draws each held-out distribution of its dataset at the eval's question count
(``assets.evaluation.eval_run.held_out_envs``), read from its own table."""

from __future__ import annotations

from dataclasses import replace

from aerorl_ops.config.benchmark import parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.envs.configured import dataset_settings
from aerorl_ops.envs.registry import dataset_kinds
from assets.evaluation.eval_run import held_out_envs

CONFIG = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny": {"source": "embedded:tiny-qwen2-vl"}},
          "datasets": {"seen": {"kind": "easy_vqa_combinations", "split": "test", "limit": 40, "held_out": ["unseen"]},
                       "unseen": {"kind": "easy_vqa_combinations", "split": "test", "limit": 300,
                                  "combinations": "held_out"}}}


def test_each_held_out_table_is_drawn_at_the_evals_count():
    bench = check_datasets(parse_benchmark_config(CONFIG, path="bench.toml"), dataset_kinds())
    dataset = dataset_settings("seen", bench, "", 5)
    ((held, env),) = held_out_envs(dataset, bench)
    assert (held.name, held.limit, held.settings["combinations"]) == ("unseen", 5, "held_out")
    assert len(env) == 5 and env.name == "unseen"
    assert held_out_envs(replace(dataset, held_out=()), bench) == []
