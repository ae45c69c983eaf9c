"""The cost ledger views (``storage.cost_views``) on hand-made rows, every figure checked by hand.

Prices: a CPU core-hour 0.36 (0.0001 a core-second), a GPU-hour 3.6 (0.001 a GPU-second)."""

from __future__ import annotations

import json

import duckdb
import pytest

from aerorl_ops.config.costs import CostSettings
from aerorl_ops.storage.cost_views import create_cost_views

PRICES = CostSettings(cpu_core_hour=0.36, gpu_hour=3.6)


@pytest.fixture
def conn():
    with duckdb.connect() as conn:
        create_cost_views(conn, PRICES)  # creates the tables it reads
        conn.execute("""INSERT INTO benchmark_summary (run_id, model_key, batch_size, dataset, device, samples, wall_s,
                        model_load_s, cpu_percent_avg) VALUES
                        ('night', 'tiny', 4, 'docvqa', 'cpu', 40, 10.0, 6.0, 50.0),
                        ('night', 'tiny', 4, 'chartqa', 'cpu', 60, 20.0, 6.0, 50.0),
                        ('night', 'big', 8, 'docvqa', 'cuda:0', 100, 5.0, 1.0, 90.0)""")
        conn.execute("INSERT INTO training_runs (run_id, env, base_model, config, telemetry) VALUES (?, ?, ?, ?, ?)",
                     ["rl-1", "easy_vqa", "tiny", json.dumps({"nproc_per_node": 2}),
                      json.dumps({"sampling_duration_s": 100.0, "cpu_avg_pct": 150.0,
                                  "peak_memory_source": "process_rss"})])
        conn.execute("""INSERT INTO training_evals (run_id, step, phase, accuracy) VALUES
                        ('rl-1', 0, 'base', 0.30), ('rl-1', 60, 'final', 0.55)""")
        conn.execute("""INSERT INTO eval_runs (eval_id, role, model, dataset, device, wall_s, cpu_s) VALUES
                        ('e1', 'model', 'rl-1@60', 'easy_vqa', 'cpu', 25.0, 40.0),
                        ('e1', 'baseline', 'tiny', 'easy_vqa', 'cuda:0', 30.0, 2.0)""")
        conn.execute("""INSERT INTO eval_samples (eval_id, role, setting, item_index, sample_no)
                        SELECT 'e1', role, 'greedy', i, 0
                        FROM range(4) t(i), (VALUES ('model'), ('baseline')) r(role)""")
        yield conn


def test_every_partition_run_and_eval_role_is_priced_by_its_device_seconds(conn):
    rows = conn.execute("SELECT kind, part, device_kind, device_seconds, samples, cost FROM cost_ledger "
                        "ORDER BY kind, part").fetchall()
    expected = [
        ("benchmark", "big bs8 / docvqa", "gpu", 6.0, 100, 0.006),  # (5 + 1) GPU-seconds
        ("benchmark", "tiny bs4 / chartqa", "cpu", 11.5, 60, 0.00115),  # (20 + 6 / 2) s x 0.5 busy cores
        ("benchmark", "tiny bs4 / docvqa", "cpu", 6.5, 40, 0.00065),  # (10 + 6 / 2) s x 0.5
        ("eval", "baseline", "gpu", 30.0, 4, 0.03),  # wall time on one GPU
        ("eval", "model", "cpu", 40.0, 4, 0.004),  # the measured process CPU time
        ("training", "easy_vqa", "cpu", 300.0, None, 0.03),  # 100 s x 2 ranks x 1.5 busy cores
    ]
    assert [row[:3] + (pytest.approx(row[3], rel=1e-12), row[4], pytest.approx(row[5], rel=1e-12))
            for row in rows] == expected


def test_cost_per_1k_samples_and_per_accuracy_point(conn):
    per_1k = dict(((model, batch), cost) for model, batch, cost in conn.execute(
        "SELECT model_key, batch_size, cost_per_1k_samples FROM cost_per_1k_samples WHERE kind = 'benchmark'"
    ).fetchall())
    assert per_1k["tiny", 4] == pytest.approx(1000 * (0.00115 + 0.00065) / 100, rel=1e-12)
    assert per_1k["big", 8] == pytest.approx(1000 * 0.006 / 100, rel=1e-12)
    (training,) = conn.execute("SELECT cost, points_gained, cost_per_point FROM training_cost").fetchall()
    assert training == (pytest.approx(0.03), pytest.approx(25.0), pytest.approx(0.03 / 25))


def test_other_prices_reprice_the_whole_ledger_and_a_bad_price_is_refused(conn):
    create_cost_views(conn, CostSettings(cpu_core_hour=0.72, gpu_hour=0.0))
    assert conn.execute("SELECT sum(cost) FROM cost_ledger WHERE device_kind = 'cpu'").fetchone()[0] == \
        pytest.approx(2 * (0.00115 + 0.00065 + 0.004 + 0.03))
    assert conn.execute("SELECT sum(cost) FROM cost_ledger WHERE device_kind = 'gpu'").fetchone()[0] == 0.0
    with pytest.raises(ValueError, match="a price must be a finite number >= 0"):
        create_cost_views(conn, CostSettings(cpu_core_hour=float("nan")))


def test_a_run_on_several_nodes_counts_every_node_s_ranks(conn):
    conn.execute("INSERT INTO training_runs (run_id, env, base_model, config, telemetry) VALUES (?, ?, ?, ?, ?)",
                 ["rl-2", "easy_vqa", "tiny", json.dumps({"nproc_per_node": 2, "nnodes": 3}),
                  json.dumps({"sampling_duration_s": 10.0, "peak_memory_source": "torch_cuda"})])
    assert conn.execute("SELECT device_kind, device_seconds FROM cost_ledger WHERE run_id = 'rl-2'").fetchall() == [
        ("gpu", 60.0)]  # 10 s x 2 ranks x 3 nodes, one GPU each
