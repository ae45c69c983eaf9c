import io

import matplotlib
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from aerorl_ops.reporting import latency_distribution_png, reward_distribution_png, throughput_vs_batch_size_png

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def throughput_summary():
    return pd.DataFrame(
        {
            "model_key": ["smolvlm", "smolvlm", "smolvlm", "qwen2vl", "qwen2vl", "qwen2vl"],
            "batch_size": [1, 2, 4, 1, 2, 4],
            "samples_per_s": [1.5, 2.8, 5.0, 0.9, 1.7, 3.1],
        }
    )


def reward_scores():
    rewards = np.random.default_rng(0).random(40)
    return pd.DataFrame({"total_reward": rewards, "model_key": ["smolvlm", "qwen2vl"] * 20})


def latency_generations():
    latency = np.random.default_rng(1).gamma(4.0, 50.0, 48)
    return pd.DataFrame(
        {"latency_ms": latency, "model_key": ["smolvlm", "qwen2vl"] * 24, "batch_size": [1, 2, 4, 8] * 12}
    )


CASES = [
    pytest.param(throughput_vs_batch_size_png, throughput_summary, id="throughput"),
    pytest.param(reward_distribution_png, reward_scores, id="reward"),
    pytest.param(reward_distribution_png, lambda: reward_scores()[["total_reward"]], id="reward-no-model"),
    pytest.param(latency_distribution_png, latency_generations, id="latency-boxplot"),
    pytest.param(latency_distribution_png, lambda: latency_generations()[["latency_ms"]], id="latency-histogram"),
]


@pytest.mark.parametrize(("plot", "make_frame"), CASES)
def test_plot_is_a_600x400_png(plot, make_frame):
    png = plot(make_frame())
    assert png.startswith(PNG_SIGNATURE)
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.format == "PNG"
    assert image.size == (600, 400)
    assert b"Software" not in png and b"matplotlib" not in png


@pytest.mark.parametrize(("plot", "make_frame"), CASES)
def test_same_data_gives_identical_bytes_whatever_the_row_order(plot, make_frame):
    frame = make_frame()
    first = plot(frame)
    assert plot(frame.copy()) == first
    assert plot(frame.iloc[::-1].reset_index(drop=True)) == first


def test_different_data_gives_different_bytes():
    summary = throughput_summary()
    faster = summary.assign(samples_per_s=summary["samples_per_s"] * 2)
    assert throughput_vs_batch_size_png(summary) != throughput_vs_batch_size_png(faster)


def test_duplicate_throughput_rows_are_averaged():
    summary = throughput_summary()
    slower = summary.assign(samples_per_s=summary["samples_per_s"] - 1)
    faster = summary.assign(samples_per_s=summary["samples_per_s"] + 1)
    repeated = pd.concat([slower, faster])
    assert throughput_vs_batch_size_png(repeated) == throughput_vs_batch_size_png(summary)


@pytest.mark.parametrize(
    ("plot", "columns", "message"),
    [
        (
            throughput_vs_batch_size_png,
            ["model_key", "batch_size", "samples_per_s"],
            "summary has no rows with model_key, batch_size, samples_per_s",
        ),
        (reward_distribution_png, ["total_reward", "model_key"], "scores has no rows with total_reward"),
        (latency_distribution_png, ["latency_ms"], "generations has no rows with latency_ms"),
    ],
)
def test_empty_frame_is_a_clear_error(plot, columns, message):
    with pytest.raises(ValueError, match=message):
        plot(pd.DataFrame(columns=columns))


def test_all_null_values_count_as_empty():
    with pytest.raises(ValueError, match="scores has no rows with total_reward"):
        reward_distribution_png(pd.DataFrame({"total_reward": [None, np.nan]}))


def test_missing_column_is_named():
    with pytest.raises(ValueError, match=r"summary is missing column\(s\) \['samples_per_s'\]"):
        throughput_vs_batch_size_png(throughput_summary().drop(columns="samples_per_s"))
    with pytest.raises(ValueError, match=r"generations is missing column\(s\) \['latency_ms'\]"):
        latency_distribution_png(pd.DataFrame({"latency": [1.0]}))


def test_non_positive_batch_size_is_rejected():
    with pytest.raises(ValueError, match="batch_size <= 0"):
        throughput_vs_batch_size_png(throughput_summary().assign(batch_size=0))


def test_plots_leave_the_global_backend_alone():
    before = matplotlib.rcParams["backend"]
    throughput_vs_batch_size_png(throughput_summary())
    assert matplotlib.rcParams["backend"] == before
