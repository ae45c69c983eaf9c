"""``reward_scores``: the reward stack and standard metrics over one partition's cached generations.

Changing reward settings re-scores the cached generations; nothing is regenerated.
"""


import dagster as dg
import pyarrow as pa

from aerorl_ops.config.benchmark import parse_rewards
from aerorl_ops.scoring.partition_scores import score_generations
from assets.metadata import markdown_preview
from assets.partitions import benchmark_config, benchmark_partitions


class RewardWeights(dg.Config):
    """Weight overrides, one field per reward component: Dagster rejects an unknown component
    name when the run is launched, before any step (or model) runs. Unset: the file's weight."""

    verifier: float | None = None
    grounding: float | None = None
    format: float | None = None
    cost: float | None = None


class RewardConfig(dg.Config):
    """Overrides of the benchmark config's [rewards] table; unset fields keep the file's values."""

    weights: RewardWeights = RewardWeights()
    require_json: bool | None = None
    regex_pattern: str | None = None
    target_tokens: int | None = None
    latency_budget_ms: float | None = None
    pass_threshold: float | None = None


def effective_reward_settings(config: RewardConfig):
    base = benchmark_config().rewards
    overrides = {name: value for name, value in config.model_dump().items()
                 if value is not None and name != "weights"}
    weights = dict(base.weights)
    weights.update({name: value for name, value in config.weights.model_dump().items() if value is not None})
    merged = {"weights": weights, "require_json": base.require_json, "regex_pattern": base.regex_pattern,
              "target_tokens": base.target_tokens, "latency_budget_ms": base.latency_budget_ms,
              "pass_threshold": base.pass_threshold, **overrides}
    return parse_rewards("run config: reward_scores", merged)


@dg.asset(group_name="benchmark", partitions_def=benchmark_partitions, kinds={"parquet"})
def reward_scores(context: dg.AssetExecutionContext, config: RewardConfig,
                  generations: pa.Table) -> dg.Output[pa.Table]:
    """Verifier, grounding, format and cost rewards, their weighted total, ANLS and relaxed accuracy."""
    settings = effective_reward_settings(config)
    scores = score_generations(generations, settings)
    frame = scores.to_pandas()
    return dg.Output(scores, metadata={
        "dagster/row_count": scores.num_rows,
        "pass_rate": float(frame["passed"].mean()) if len(frame) else 0.0,
        "manual_pass_rate": float(frame["manual_pass"].mean()) if len(frame) else 0.0,
        "average_reward": float(frame["total_reward"].mean()) if len(frame) else 0.0,
        "preview": markdown_preview(frame.drop(columns=["reward_config"])),
    })
