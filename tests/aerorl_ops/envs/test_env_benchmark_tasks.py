"""docvqa / chartqa environments: synthetic rows, lmms-lab files, the reward stack and the metric's ``correct``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.reward_stack_grader import RewardStackGrader
from aerorl_ops.envs.types import Completion
from aerorl_ops.generation.prompts import ANSWER_INSTRUCTION
from aerorl_ops.rewards.stack import build_reward_stack
from aerorl_ops.rows.task_item import TaskItem


def test_synthetic_docvqa_items_carry_rows_and_the_json_prompt():
    env = make_env("docvqa", limit=3, seed=0)

    assert len(env) == 3 and env.rejected == []
    item = env.items[0]
    assert (item.item_id, item.question, item.answers, item.question_type) == (
        "synthetic_docvqa-validation-s0-00000", "What is the phone number?",
        ("(212) 555-0116", "212-555-0116", "2125550116"), None)
    assert item.evidence_entities == ("(212) 555-0116", "Phone:")
    _, observation = env.reset(env.items[0])
    assert observation.messages == [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": f"What is the phone number?\n{ANSWER_INSTRUCTION}"}]}]
    assert observation.images[0].size == (448, 448)


def test_docvqa_reward_is_the_stack_total_and_correct_is_anls():
    env = make_env("docvqa", limit=1, seed=0)
    state, _ = env.reset(env.items[0])

    exact = env.step(state, Completion('{"answer": "(212) 555-0116"}', (4, 5)))
    close = env.step(state, Completion('{"answer": "(212) 555-011x"}'))
    wrong = env.step(state, Completion('{"answer": "zzzz"}'))

    # verifier 0.5 (the answer is contained in the JSON reply), grounding 1, format 1, cost 1:
    # 0.4 * 0.5 + 0.3 + 0.2 + 0.1 = 0.8
    assert exact.reward == 0.8
    assert dict(exact.info.components) == {"verifier": 0.5, "grounding": 1.0, "format": 1.0, "cost": 1.0, "anls": 1.0}
    assert (exact.info.correct, exact.info.prediction) == (True, "(212) 555-0116")
    assert close.info.components["anls"] == pytest.approx(13 / 14) and close.info.correct
    assert (wrong.reward, wrong.info.components["anls"], wrong.info.correct) == (-0.2, 0.0, False)


@pytest.mark.parametrize(("reply", "anls_value", "correct"), [("abef", 0.5, True), ("axyz", 0.0, False)])
def test_anls_threshold_decides_correct(reply, anls_value, correct):
    item = TaskItem("d-1", "docvqa", "validation", "mem", "Code?", ("abcd",), (), ())

    _, info = RewardStackGrader(build_reward_stack())(item, Completion(reply))

    assert (info.components["anls"], info.correct) == (anls_value, correct)


@pytest.fixture
def lmms_chartqa(tiny_files):
    image = {"bytes": tiny_files.png(), "path": None}
    return tiny_files.lmms_chartqa("test-00000-of-00001.parquet", [
        {"type": "human_test", "question": "How many pets?", "answer": "47", "image": image},
        {"type": "augmented_test", "question": "Which is largest?", "answer": "Kenya", "image": image},
        {"type": "human_test", "question": "No image?", "answer": "1", "image": {"bytes": None, "path": "x.png"}},
        {"type": "augmented_test", "question": "Blank answer?", "answer": "  ", "image": image},
        {"type": "human_test", "question": "Corrupt?", "answer": "2", "image": {"bytes": b"GIF89a..", "path": None}},
    ])


def test_chartqa_from_lmms_lab_file_with_types_and_rejections(lmms_chartqa):
    env = make_env("chartqa", files=[str(lmms_chartqa)], split="test")

    assert env.counts == (5, 2, 3)
    assert [(item.item_id, item.answers, item.question_type) for item in env.items] == [
        ("chartqa-test-0", ("47",), "human_test"), ("chartqa-test-1", ("Kenya",), "augmented_test")]
    assert [(row.locator, row.sample_id, row.reason[:20]) for row in env.rejected] == [
        (f"{lmms_chartqa}#row=2", "chartqa-test-2", "missing image bytes"),
        (f"{lmms_chartqa}#row=3", "chartqa-test-3", "no answers"),
        (f"{lmms_chartqa}#row=4", "chartqa-test-4", "corrupt image: 8 byt"),
    ]


def test_chartqa_correct_is_relaxed_accuracy(lmms_chartqa):
    env = make_env("chartqa", files=[str(lmms_chartqa)], split="test", limit=2)
    state, _ = env.reset(env.items[0])

    within = env.step(state, Completion('{"answer": "48"}'))
    outside = env.step(state, Completion('{"answer": "50"}'))
    text_state, _ = env.reset(env.items[1])
    text = env.step(text_state, Completion('{"answer": "kenya"}'))

    assert (within.info.components["relaxed_accuracy"], within.info.correct) == (1.0, True)  # 2.1% off
    assert (outside.info.components["relaxed_accuracy"], outside.info.correct) == (0.0, False)  # 6.4% off
    assert text.info.correct is True
    assert env.counts == (2, 2, 0)


def test_docvqa_from_lmms_lab_file(tiny_files):
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.Table.from_pylist([
        {"questionId": "337", "question": "What is the date?", "question_types": ["form"],
         "image": {"bytes": tiny_files.png(), "path": None}, "docId": 279, "ucsf_document_id": "xnbl0037",
         "ucsf_document_page_no": "1", "answers": ["1/8/93", "January 8, 1993"], "data_split": "val"},
    ], schema=pa.schema([("questionId", pa.string()), ("question", pa.string()),
                         ("question_types", pa.list_(pa.string())), ("image", image_type), ("docId", pa.int64()),
                         ("ucsf_document_id", pa.string()), ("ucsf_document_page_no", pa.string()),
                         ("answers", pa.list_(pa.string())), ("data_split", pa.string())]))
    path = tiny_files.folder / "validation-00000-of-00006.parquet"
    pq.write_table(table, path)

    env = make_env("docvqa", files=[str(path)])

    assert [(item.item_id, item.answers, item.question_type) for item in env.items] == [
        ("docvqa-337", ("1/8/93", "January 8, 1993"), None)]


def test_missing_file_is_named_and_synthetic_needs_a_count(tmp_path):
    missing = tmp_path / "val.parquet"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        make_env("chartqa", files=[str(missing)])
    with pytest.raises(ValueError, match="docvqa: synthetic rows need a count; pass limit="):
        make_env("docvqa")

