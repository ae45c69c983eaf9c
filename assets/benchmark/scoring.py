"""``reward_scores``: the reward stack and standard metrics over one partition's cached generations.

Changing reward settings re-scores the cached generations; nothing is regenerated.
"""


import dagster as dg
import pyarrow as pa

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.scoring.partition_scores import score_generations
from assets.metadata import markdown_preview
from assets.settings_config import reward_config_class, reward_settings


def dataset_kinds(bench: BenchmarkConfig) -> dict[str, str]:
    """Each configured dataset's environment kind, by name: which grader's accuracy test its rows get."""
    return {dataset.name: dataset.kind for dataset in bench.datasets}


def build_reward_scores(bench: BenchmarkConfig, partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The ``reward_scores`` asset; its run config defaults to the reward settings in ``bench``."""
    RewardConfig = reward_config_class(bench.rewards)  # a Config class, made per config file

    @dg.asset(group_name="benchmark", partitions_def=partitions, kinds={"parquet"})
    def reward_scores(context: dg.AssetExecutionContext, config: RewardConfig,
                      generations: pa.Table) -> dg.Output[pa.Table]:
        """Verifier, grounding, format and cost rewards, their weighted total, ANLS and relaxed accuracy, and
        each answer's task accuracy (``correct``, as its dataset's environment grades it)."""
        settings = reward_settings(config, "run config: reward_scores")
        scores = score_generations(generations, settings, dataset_kinds(bench))
        frame = scores.to_pandas()
        return dg.Output(scores, metadata={
            "dagster/row_count": scores.num_rows,
            "pass_rate": float(frame["passed"].mean()) if len(frame) else 0.0,
            "accuracy": float(frame["correct"].mean()) if len(frame) else 0.0,
            "manual_pass_rate": float(frame["manual_pass"].mean()) if len(frame) else 0.0,
            "average_reward": float(frame["total_reward"].mean()) if len(frame) else 0.0,
            "preview": markdown_preview(frame.drop(columns=["reward_config"])),
        })

    return reward_scores
