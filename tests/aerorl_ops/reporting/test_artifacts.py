"""Dated JSON artifacts: safe paths for any run id, and AeroRL's report layout."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import numpy as np
import pytest

from aerorl_ops.reporting.artifacts import (
    artifact_path,
    benchmark_artifact,
    safe_path_component,
    write_benchmark_artifact,
)

DAY = date(2026, 3, 4)
SUMMARY = {
    "samples": 10, "samples_per_s": np.float64(2.5), "pass_rate": 0.3, "manual_pass_rate": 0.5,
    "manual_false_passes": 2, "average_reward": 0.25, "verifier_avg": 0.1, "grounding_avg": -0.4,
    "format_avg": 1.0, "cost_avg": 0.9, "anls_avg": 0.6, "relaxed_accuracy_avg": None,
    "verifier_metric_agreement": 0.8, "gpu_util_avg": float("nan"),
    "created_at": datetime(2026, 3, 4, 2, 30, tzinfo=UTC),
}
REWARD_CONFIG = {"weights": {"verifier": 0.4, "grounding": 0.3, "format": 0.2, "cost": 0.1}, "pass_threshold": 0.3}


@pytest.mark.parametrize("value", ["nightly-2026-03-04", "bench-20260304T020000Z-ab12cd", "tiny_qwen2.v1"])
def test_safe_components_are_kept(value):
    assert safe_path_component(value) == value


@pytest.mark.parametrize("value", ["../../etc/passwd", "..", ".", ".hidden", "a/b", "a\\b", "x y", "run\x00id",
                                   "ünïcode", "a" * 200])
def test_unsafe_components_are_cleaned_and_stay_distinct(value):
    cleaned = safe_path_component(value)
    assert set(cleaned) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    assert ".." not in cleaned and not cleaned.startswith(".") and len(cleaned) <= 89
    assert cleaned != safe_path_component(value + "!")


def test_cleaned_run_ids_never_collide_with_ones_already_safe():
    assert safe_path_component("a/b") != safe_path_component("a_b")
    with pytest.raises(ValueError, match="empty"):
        safe_path_component("")


def test_artifact_path_is_dated_and_inside_the_reports_dir(tmp_path):
    path = artifact_path(tmp_path, DAY, "nightly-2026-03-04", "tiny-qwen2-vl", 8)
    assert path == tmp_path.resolve() / "2026-03-04" / "nightly-2026-03-04__tiny-qwen2-vl__bs8.json"
    escaped = artifact_path(tmp_path, DAY, "../../../tmp/evil", "m", 1)
    assert escaped.parent == tmp_path.resolve() / "2026-03-04"
    with pytest.raises(ValueError, match="batch_size"):
        artifact_path(tmp_path, DAY, "r", "m", 0)


def test_payload_follows_aerorls_report_layout():
    payload = benchmark_artifact("r1", "tiny", 4, SUMMARY, REWARD_CONFIG)
    assert payload["manual_baseline"] == {"method": "manual_contains_reference", "pass_rate": 0.5}
    assert payload["aerorl_stack"] == {
        "pass_rate": 0.3, "average_reward": 0.25,
        "component_averages": {"verifier": 0.1, "grounding": -0.4, "format": 1.0, "cost": 0.9},
        "weights": REWARD_CONFIG["weights"], "pass_threshold": 0.3,
    }
    assert payload["improvement"] == {"manual_false_passes_caught_count": 2,
                                      "manual_false_pass_rate_among_manual_passes": 0.4}  # 2 of 5 manual passes
    assert payload["standard_metrics"] == {"anls_avg": 0.6, "relaxed_accuracy_avg": None,
                                           "verifier_metric_agreement": 0.8}
    summary = payload["summary"]
    assert summary["created_at"] == "2026-03-04T02:30:00+00:00"
    assert summary["gpu_util_avg"] is None  # NaN is not JSON
    assert type(summary["samples_per_s"]) is float


def test_write_creates_the_dated_file_and_rewrites_it_in_place(tmp_path):
    first = write_benchmark_artifact(tmp_path, DAY, benchmark_artifact("r1", "tiny", 4, SUMMARY))
    assert first == tmp_path.resolve() / "2026-03-04" / "r1__tiny__bs4.json"
    assert json.loads(first.read_text())["aerorl_stack"]["weights"] is None
    again = write_benchmark_artifact(tmp_path, DAY, benchmark_artifact("r1", "tiny", 4, SUMMARY, REWARD_CONFIG))
    assert again == first
    assert json.loads(first.read_text())["aerorl_stack"]["pass_threshold"] == 0.3
    assert [p.name for p in first.parent.iterdir()] == ["r1__tiny__bs4.json"]  # no temporary files left
