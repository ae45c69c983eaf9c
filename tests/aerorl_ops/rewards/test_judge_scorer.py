"""The judge reward with a fake judge: the grade grammar, batching, failure counting, the timeout, the
DuckDB cache (a second scoring makes no judge call), and the judge's weight in the partition totals."""

from __future__ import annotations

import json
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pytest

from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.config.rewards import RewardSettings
from aerorl_ops.generation.generations_table import GENERATION_SCHEMA
from aerorl_ops.rewards.judge import JudgeReply, JudgeScorer, JudgeTriple
from aerorl_ops.rewards.judge_parse import parse_grade
from aerorl_ops.rewards.judge_table import with_judge
from aerorl_ops.scoring.judge_cache import DuckDBGradeCache
from aerorl_ops.scoring.partition_scores import score_generations

ECHO = "{response}"  # the prompt is the response itself, so the fake judge can answer per response


class FakeJudge:
    """The judge interface: replies looked up by prompt, every generate call recorded."""

    key = "fake-judge"
    identity = "fake@1"

    def __init__(self, replies: dict[str, str], unfinished: Sequence[str] = ()) -> None:
        self.replies = replies
        self.unfinished = set(unfinished)
        self.calls: list[list[str]] = []

    def generate(self, prompts: Sequence[str], max_new_tokens: int, max_time_s: float) -> list[JudgeReply]:
        self.calls.append(list(prompts))
        return [JudgeReply(self.replies[p], finished=p not in self.unfinished) for p in prompts]


def triple(response: str, reference: tuple[str, ...] = ("red",)) -> JudgeTriple:
    return JudgeTriple("Colour?", reference, response)


def settings(**overrides) -> JudgeSettings:
    return JudgeSettings(model="fake-judge", template=ECHO, **overrides)


@pytest.mark.parametrize(("reply", "score"), [
    ("8", 0.8), ("Grade: 7/10", 0.7), ("10", 1.0), ("0 - wrong", 0.0), ("2.5", 0.25), ("I'd say 9, maybe 3", 0.9),
    ("yes", None), ("", None), ("11", None), ("-2", None), ("ten", None)])
def test_the_grade_is_the_first_number_in_0_to_10_over_10(reply, score):
    assert parse_grade(reply) == score


def test_scores_batch_by_batch_size_and_count_unparsable_replies_as_failures():
    judge = FakeJudge({"red": "10", "blue": "0", "rouge": "maybe", "crimson": "7/10", "pink": "2"})
    scorer = JudgeScorer(judge, settings(batch_size=2, failure_score=-0.5))
    judged = scorer.scores([triple(r) for r in ("red", "blue", "rouge", "crimson", "pink", "red")])
    assert judged.scores == (1.0, 0.0, -0.5, 0.7, 0.2, 1.0)
    assert judged.statuses == ("ok", "ok", "unparsable", "ok", "ok", "ok")
    assert (judged.failures, judged.timeouts, judged.cached, judged.calls) == (1, 0, 0, 3)
    assert judge.calls == [["red", "blue"], ["rouge", "crimson"], ["pink"]]  # the repeated triple is asked once


def test_the_prompt_fills_the_template_with_question_references_and_response():
    judge = FakeJudge({"Q: Colour? A: red | scarlet R: Red": "9"})
    template = "Q: {question} A: {reference} R: {response}"
    judged = JudgeScorer(judge, JudgeSettings(model="fake-judge", template=template)).scores(
        [triple("Red", ("red", "scarlet"))])
    assert judged.scores == (0.9,)


class StepClock:
    """A clock that moves ``step`` seconds each time the judge generates (no real time involved)."""

    def __init__(self, judge: FakeJudge, step: float) -> None:
        self.now = 0.0
        original = judge.generate

        def generate(*args):
            self.now += step
            return original(*args)
        judge.generate = generate

    def __call__(self) -> float:
        return self.now


def test_a_batch_past_the_timeout_times_out_its_unfinished_triples_and_later_batches():
    judge = FakeJudge({"a": "9", "b": "8", "c": "2", "d": "1"}, unfinished=["c"])
    clock = StepClock(judge, step=10.0)  # batch 1 ends at 10 s, batch 2 at 20 s: past 15 s
    scorer = JudgeScorer(judge, settings(batch_size=1, timeout_s=15.0, failure_score=0.0), clock=clock)
    # one batch per triple: a (0-10 s), c (10-20 s, cut off at the deadline), b never started, nor d
    judged = scorer.scores([triple(r) for r in ("a", "c", "b", "d")])
    assert judged.statuses == ("ok", "timeout", "timeout", "timeout")
    assert judged.scores == (0.9, 0.0, 0.0, 0.0)
    assert (judged.failures, judged.timeouts, judged.calls) == (3, 3, 2)


def test_a_finished_reply_in_a_late_batch_still_counts():
    judge = FakeJudge({"a": "9", "b": "8"})
    clock = StepClock(judge, step=20.0)
    judged = JudgeScorer(judge, settings(batch_size=2, timeout_s=15.0), clock=clock).scores([triple("a"), triple("b")])
    assert judged.statuses == ("ok", "ok") and judged.failures == 0


def test_the_duckdb_cache_answers_a_second_scoring_without_a_judge_call():
    conn = duckdb.connect()
    judge = FakeJudge({"red": "10", "rouge": "hmm"})
    triples = [triple("red"), triple("rouge")]
    first = JudgeScorer(judge, settings(), DuckDBGradeCache(conn)).scores(triples)
    assert (first.calls, first.cached, first.failures) == (1, 0, 1)
    second = JudgeScorer(judge, settings(), DuckDBGradeCache(conn)).scores(triples)
    assert len(judge.calls) == 1
    assert (second.calls, second.cached, second.failures, second.scores) == (0, 2, 1, first.scores)
    rows = conn.execute("SELECT judge_key, judge_identity, question, reference, response, score, raw_reply, status "
                        "FROM judge_grades ORDER BY response").fetchall()
    assert rows == [("fake-judge", "fake@1", "Colour?", '["red"]', "red", 1.0, "10", "ok"),
                    ("fake-judge", "fake@1", "Colour?", '["red"]', "rouge", None, "hmm", "unparsable")]


def test_another_template_or_reference_is_not_a_cache_hit():
    conn = duckdb.connect()
    judge = FakeJudge({"red": "10", "Grade red": "9"})
    JudgeScorer(judge, settings(), DuckDBGradeCache(conn)).scores([triple("red")])
    other = JudgeScorer(judge, JudgeSettings(model="fake-judge", template="Grade {response}"),
                        DuckDBGradeCache(conn)).scores([triple("red")])
    other_reference = JudgeScorer(judge, settings(), DuckDBGradeCache(conn)).scores([triple("red", ("blue",))])
    assert (other.cached, other.scores, other_reference.cached) == (0, (0.9,), 0)
    assert len(judge.calls) == 3
    assert conn.execute("SELECT count(*) FROM judge_grades").fetchone()[0] == 3


def test_a_timed_out_grade_is_stored_but_asked_again():
    conn = duckdb.connect()
    judge = FakeJudge({"a": "9", "b": "8"})
    clock = StepClock(judge, step=10.0)
    timed = JudgeScorer(judge, settings(batch_size=1, timeout_s=5.0), DuckDBGradeCache(conn), clock=clock)
    assert timed.scores([triple("a"), triple("b")]).statuses == ("ok", "timeout")
    assert conn.execute("SELECT response, status, raw_reply FROM judge_grades ORDER BY response").fetchall() == [
        ("a", "ok", "9"), ("b", "timeout", "")]
    again = JudgeScorer(judge, settings(), DuckDBGradeCache(conn)).scores([triple("a"), triple("b")])
    assert (again.statuses, again.cached, again.calls) == (("ok", "ok"), 1, 1)
    assert conn.execute("SELECT status FROM judge_grades WHERE response = 'b'").fetchall() == [("ok",)]


def generation(sample_id: str, response: str, reference: list[str], evidence: list[str], latency_ms: float) -> dict:
    from aerorl_ops.generation.generations_table import claimed_entities

    return {"sample_id": sample_id, "dataset": "chartqa", "prompt": "Q?", "response": response,
            "raw_response": response, "reference": reference, "evidence_entities": evidence,
            "claimed_entities": claimed_entities(response), "latency_ms": latency_ms, "batch_latency_ms": 900.0,
            "generated_tokens": 5, "prompt_text_tokens": 40, "vision_tokens": 121, "batch_index": 0,
            "batch_size": 3}


# The rule totals of tests/aerorl_ops/scoring/test_partition_scoring.py (default weights): 0.8, -0.21, 0.4.
GENERATIONS = pa.Table.from_pylist([
    generation("doc-1", '{"answer": "42"}', ["42", "forty-two"], ["42", "Total:"], 100.0),
    generation("chart-1", "The answer is 7", ["12%", "12"], ["12%"], 3000.0),
    generation("chart-2", '{"answer": "0.12"}', ["12%"], ["12%", "2020"], 500.0),
], schema=GENERATION_SCHEMA)


def test_the_judge_enters_the_partition_total_with_its_weight():
    judge = FakeJudge({'{"answer": "42"}': "10", "The answer is 7": "0", '{"answer": "0.12"}': "no idea"})
    judge_settings = settings(weight=0.5, failure_score=0.2)
    rewards = RewardSettings(judge=judge_settings)
    rule_scores = score_generations(GENERATIONS, rewards)
    assert rule_scores.column("judge").to_pylist() == [None, None, None]
    scores, judged = with_judge(rule_scores, GENERATIONS, judge_settings, rewards.pass_threshold,
                                JudgeScorer(judge, judge_settings))
    rows = scores.to_pylist()
    assert [r["judge"] for r in rows] == [1.0, 0.0, 0.2]
    # 0.8 + .5 * 1 = 1.3; -0.21 + .5 * 0 = -0.21; 0.4 + .5 * 0.2 (the failure score) = 0.5
    assert [r["total_reward"] for r in rows] == pytest.approx([1.3, -0.21, 0.5], abs=1e-9)
    assert [r["passed"] for r in rows] == [True, False, True]
    assert [r["verifier"] for r in rows] == [0.5, -0.5, -0.5]  # the rule components are untouched
    assert (judged.failures, judged.calls) == (1, 1)
    assert json.loads(rows[0]["reward_config"])["judge"]["weight"] == 0.5


def test_without_a_judge_the_scores_and_their_config_are_as_before():
    scores = score_generations(GENERATIONS, RewardSettings()).to_pylist()
    assert [s["total_reward"] for s in scores] == pytest.approx([0.8, -0.21, 0.4], abs=1e-9)
    assert [s["judge"] for s in scores] == [None, None, None]
    assert scores[0]["reward_config"] == (
        '{"latency_budget_ms": 2000.0, "pass_threshold": 0.3, "regex_pattern": null, "require_json": true, '
        '"target_tokens": 24, "weights": {"cost": 0.1, "format": 0.2, "grounding": 0.3, "verifier": 0.4}}')
