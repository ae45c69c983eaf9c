"""The embedded tiny model as a judge, through the real generate path: its random-init replies hold no
grade, so each triple is a counted failure, stored with its status and raw reply; the second scoring
of the same triples is answered by the cache."""

from __future__ import annotations

import duckdb

from aerorl_ops.config.judge import JudgeSettings
from aerorl_ops.rewards.judge import JudgeScorer, JudgeTriple
from aerorl_ops.scoring.judge_cache import DuckDBGradeCache
from aerorl_ops.scoring.judge_model import TransformersJudge, checkpoint_identity

TRIPLES = [JudgeTriple("What colour is the circle?", ("red",), '{"answer": "red"}'),
           JudgeTriple("What shape is it?", ("circle", "round"), '{"answer": "square"}'),
           JudgeTriple("How many?", (), "three")]


def test_the_tiny_model_judges_through_generate_and_its_failures_are_counted_and_stored(tiny_vlm, tiny_model_dir):
    conn = duckdb.connect()
    judge = TransformersJudge(tiny_vlm, "tiny-qwen2-vl")
    settings = JudgeSettings(model="tiny-qwen2-vl", max_new_tokens=4, batch_size=2, failure_score=-0.25)
    judged = JudgeScorer(judge, settings, DuckDBGradeCache(conn)).scores(TRIPLES)
    assert judged.statuses == ("unparsable",) * 3
    assert (judged.scores, judged.failures, judged.timeouts, judged.calls) == ((-0.25,) * 3, 3, 0, 2)
    rows = conn.execute("SELECT judge_key, judge_identity, question, score, raw_reply, status FROM judge_grades "
                        "ORDER BY question").fetchall()
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows] == [
        ("tiny-qwen2-vl", checkpoint_identity(str(tiny_model_dir)), t.question, None, "unparsable")
        for t in sorted(TRIPLES, key=lambda t: t.question)]
    assert all(r[4] for r in rows), rows  # the judge wrote something, kept as it wrote it
    again = JudgeScorer(judge, settings, DuckDBGradeCache(conn)).scores(TRIPLES)
    assert (again.calls, again.cached, again.failures) == (0, 3, 3)
