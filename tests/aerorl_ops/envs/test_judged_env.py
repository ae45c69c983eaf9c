"""Training's grading with a judge: ``grade`` asks a ``JudgedEnv``'s judge once per batch and adds
weight x score to each environment reward; a dataset's ``judge`` setting builds it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.envs.base import SingleTurnEnv, items_at
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.judged import JudgedEnv, dataset_judge, judged_env
from aerorl_ops.eval_runner.episodes import Replies, grade
from aerorl_ops.rewards.judge import JudgeReply
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.task_item import TaskItem

MESSAGES = ({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour?"}]},)


class FakeJudge:
    key = "fake-judge"
    identity = "fake@1"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.calls = 0

    def generate(self, prompts: Sequence[str], max_new_tokens: int, max_time_s: float) -> list[JudgeReply]:
        self.calls += 1
        return [JudgeReply(self.replies[p]) for p in prompts]


def env() -> SingleTurnEnv:
    items = [TaskItem(f"q{i}", "demo", "train", "demo.jsonl", "What colour?", (answer,), (), MESSAGES)
             for i, answer in enumerate(("red", "blue", "green"))]
    return SingleTurnEnv("demo", LoadResult(items), ExactMatchGrader())


def replies(texts: list[str]) -> Replies:
    return Replies([[1, 2]] * len(texts), texts, [False] * len(texts))


def judged(judge: FakeJudge, weight: float = 0.5) -> JudgedEnv:
    settings = JudgeSettings(model="fake-judge", template="{question}|{reference}|{response}", weight=weight,
                             failure_score=0.1)
    return judged_env(env(), DatasetSettings("demo", "easy_vqa", "train", 3, judge="fake-judge"), settings,
                      lambda key: judge)


def test_grade_adds_the_weighted_judge_score_to_each_reward_in_one_judge_call():
    judge = FakeJudge({"What colour?|red|red": "10", "What colour?|blue|navy": "6", "What colour?|green|???": "?"})
    environment = judged(judge)
    graded = grade(environment, environment.items, replies(["red", "navy", "???"]), eos=[2])
    # exact match 1, 0, 0 plus .5 x (1.0, 0.6, failure score 0.1)
    assert graded.rewards.tolist() == pytest.approx([1.5, 0.3, 0.05])
    assert graded.correct.tolist() == [True, False, False]  # accuracy is the environment's alone
    assert graded.components["judge"].tolist() == pytest.approx([1.0, 0.6, 0.1])
    assert graded.components["judge_failed"].tolist() == [0.0, 0.0, 1.0]
    assert judge.calls == 1


def test_the_tally_counts_failures_and_cache_hits_across_batches():
    judge = FakeJudge({"What colour?|red|red": "10", "What colour?|green|???": "?"})
    environment = judged(judge)
    grade(environment, items_at(environment, [0, 2]), replies(["red", "???"]), eos=[2])
    grade(environment, items_at(environment, [0, 2]), replies(["red", "???"]), eos=[2])
    tally = environment.tally
    assert (tally.graded, tally.failures, tally.timeouts, tally.cached, tally.calls) == (4, 2, 0, 2, 1)


def test_without_a_judge_the_environment_and_its_rewards_are_unchanged():
    plain = env()
    dataset = DatasetSettings("demo", "easy_vqa", "train", 3)
    assert judged_env(plain, dataset, JudgeSettings(model="x"), lambda key: pytest.fail("no judge loads")) is plain
    graded = grade(plain, plain.items[:2], replies(["red", "navy"]), eos=[2])
    assert graded.rewards.tolist() == [1.0, 0.0] and "judge" not in graded.components


def test_a_dataset_judge_takes_the_rewards_judge_settings_with_its_own_model_and_weight():
    rewards_judge = JudgeSettings(model="big", max_new_tokens=3, weight=0.9)
    dataset = DatasetSettings("demo", "easy_vqa", "train", 3, judge="small", judge_weight=0.25)
    assert dataset_judge(dataset, rewards_judge) == JudgeSettings(model="small", max_new_tokens=3, weight=0.25)
    unweighted = DatasetSettings("demo", "easy_vqa", "train", 3, judge="small")
    assert dataset_judge(unweighted, rewards_judge).weight == 0.9
    assert dataset_judge(unweighted, None) == JudgeSettings(model="small")


def test_a_configured_dataset_with_a_judge_is_judged_and_a_kind_is_not():
    from aerorl_ops.config.benchmark import parse_benchmark_config
    from aerorl_ops.envs.judged import named_judged_env

    bench = parse_benchmark_config({
        "benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}},
        "datasets": {"shapes": {"kind": "easy_vqa", "judge": "tiny-qwen2-vl", "judge_weight": 0.3}},
        "rewards": {"judge": {"model": "tiny-qwen2-vl", "max_new_tokens": 2}}})
    judge = FakeJudge({})
    asked: list[str] = []

    def load(key: str) -> FakeJudge:
        asked.append(key)
        return judge

    plain = env()
    wrapped = named_judged_env(plain, "shapes", bench, load)
    assert isinstance(wrapped, JudgedEnv) and wrapped.env is plain and asked == ["tiny-qwen2-vl"]
    assert (wrapped.weight, wrapped.scorer.settings.max_new_tokens) == (0.3, 2)
    assert named_judged_env(plain, "easy_vqa", bench, load) is plain
