"""``reward_scores``: the reward stack and standard metrics over one partition's cached generations.

Changing reward settings re-scores the cached generations; nothing is regenerated. With a judge
(``[rewards.judge]``) the step loads the judge model, grades through the ``judge_grades`` cache in
the report database (so it holds the ``duckdb_writer`` pool) and reports the judge's failures.
"""

from dataclasses import replace

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.rewards import RewardSettings
from aerorl_ops.envs.configured import row_kinds
from aerorl_ops.rewards.judge import JudgedScores, JudgeScorer
from aerorl_ops.rewards.judge_table import with_judge
from aerorl_ops.scoring.judge_cache import DuckDBGradeCache
from aerorl_ops.scoring.judge_model import TransformersJudge
from aerorl_ops.scoring.partition_scores import score_generations
from assets.metadata import markdown_preview, readable
from assets.resources import ModelRuntime
from assets.settings_config import reward_config_class, reward_settings
from assets.step_placement import DUCKDB_WRITER_POOL, DUCKDB_WRITER_TAGS


def judged_scores(bench: BenchmarkConfig, settings: RewardSettings, scores: pa.Table, generations: pa.Table,
                  model_runtime: ModelRuntime, duckdb: DuckDBResource) -> tuple[pa.Table, JudgedScores]:
    """``scores`` with the configured judge's column and judged totals, graded through the DuckDB cache."""
    judge = settings.judge
    loaded = model_runtime.load(bench.model(judge.model))
    with duckdb.get_connection() as conn:
        scorer = JudgeScorer(TransformersJudge(loaded, judge.model), judge, DuckDBGradeCache(conn))
        return with_judge(scores, generations, judge, settings.pass_threshold, scorer)


JUDGE_RESOURCES = {"model_runtime", "duckdb"}
"""What the step needs only with a judge: the judge model's runtime and the report database (its cache)."""


def build_reward_scores(bench: BenchmarkConfig, partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """The ``reward_scores`` asset; its run config defaults to the reward settings in ``bench``."""
    RewardConfig = reward_config_class(bench.rewards)  # a Config class, made per config file
    judged = bench.rewards.judge is not None

    @dg.asset(group_name="benchmark", partitions_def=partitions, kinds={"parquet"},
              pool=DUCKDB_WRITER_POOL if judged else None, op_tags=DUCKDB_WRITER_TAGS if judged else None,
              required_resource_keys=JUDGE_RESOURCES if judged else set())
    def reward_scores(context: dg.AssetExecutionContext, config: RewardConfig,
                      generations: pa.Table) -> dg.Output[pa.Table]:
        """Verifier, grounding, format and cost rewards (and the judge's, when configured), their weighted
        total, ANLS and relaxed accuracy, and each answer's task accuracy (``correct``, as its dataset's
        environment grades it)."""
        settings = replace(reward_settings(config, "run config: reward_scores"), judge=bench.rewards.judge)
        scores = score_generations(generations, settings, row_kinds(bench.datasets))
        judge_metadata = {}
        if judged:
            scores, counts = judged_scores(bench, settings, scores, generations, context.resources.model_runtime,
                                           context.resources.duckdb)
            judge_metadata = {"judge_failures": counts.failures, "judge_timeouts": counts.timeouts,
                              "judge_cached": counts.cached, "judge_calls": counts.calls}
            if counts.failures:
                context.log.warning(f"judge {settings.judge.model!r}: {counts.failures} of {scores.num_rows} "
                                    f"grades failed ({counts.timeouts} timed out), scored "
                                    f"{settings.judge.failure_score}")
        frame = scores.to_pandas()
        return dg.Output(scores, metadata=readable({
            "dagster/row_count": scores.num_rows,
            "pass_rate": float(frame["passed"].mean()) if len(frame) else 0.0,
            "accuracy": float(frame["correct"].mean()) if len(frame) else 0.0,
            "manual_pass_rate": float(frame["manual_pass"].mean()) if len(frame) else 0.0,
            "average_reward": float(frame["total_reward"].mean()) if len(frame) else 0.0,
            **judge_metadata,
            "preview": markdown_preview(frame.drop(columns=["reward_config"] + ([] if judged else ["judge"]))),
        }))

    return reward_scores
