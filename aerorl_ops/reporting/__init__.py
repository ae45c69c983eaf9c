"""Report figures for benchmark and reward results."""

from aerorl_ops.reporting.plots import (
    latency_distribution_png,
    reward_distribution_png,
    throughput_vs_batch_size_png,
)

__all__ = ["latency_distribution_png", "reward_distribution_png", "throughput_vs_batch_size_png"]
