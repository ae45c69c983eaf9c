"""Each row of an RL step carries its own task item (``rl.step.prompts``): the groups dynamic sampling keeps,
the micro-batches a token budget cuts and the rollout log's rows hold the item each reply answered,
never one looked up again by position."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import StepInfo
from aerorl_ops.eval_runner.episodes import observe_all
from aerorl_ops.eval_runner.replies import encode_observations
from aerorl_ops.rl.runtime.distributed import SINGLE
from aerorl_ops.rl.step.rollout_rounds import step_rollout
from aerorl_ops.rows.load_result import LoadResult

QUESTIONS = {"q-0": "q-0: " + "look closely at the whole picture, " * 6 + "what is it?",  # long prompts
             "q-1": "q-1: what colour?",
             "q-2": "q-2: " + "look closely at the whole picture, " * 6 + "which shape?",
             "q-3": "q-3: what shape?"}
UNIFORM = {"q-0", "q-2"}
"""Items every reply to which earns 1 (their groups are uninformative); the others earn 0, 1, 0, 1 in turn."""


class ByItemGrader:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, item, completion):
        if item.item_id in UNIFORM:
            return 1.0, StepInfo({}, True, completion.text)
        self.calls += 1
        return float(self.calls % 2 == 0), StepInfo({}, self.calls % 2 == 0, completion.text)


@pytest.fixture
def env() -> SingleTurnEnv:
    """Four hand-made items: two long prompts and two short ones, each naming its id."""
    shown = make_env("easy_vqa", split="train", limit=4, seed=1).items
    items = [dataclasses.replace(item, item_id=item_id, question=text, messages=(
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]},))
             for item, (item_id, text) in zip(shown, QUESTIONS.items(), strict=True)]
    return SingleTurnEnv("by_item", LoadResult(items), ByItemGrader())


def settings(**changes):
    return TrainingSettings(algorithm="dapo", group_size=2, prompts_per_step=2, max_new_tokens=3, overlong_buffer=0,
                            **changes).resolve()


def seed_of(part: int) -> int:
    return 2000 + part


def shown_ids(loaded, batch) -> list[str]:
    """The item id each row of ``batch`` was prompted with (its prompt names it)."""
    texts = loaded.tokenizer.batch_decode(batch.input_ids, skip_special_tokens=True)
    return [next(item_id for item_id in QUESTIONS if item_id in text) for text in texts]


def prompt_tokens(loaded, env) -> dict[str, int]:
    observations = observe_all(env, env.items)
    lengths = encode_observations(loaded, observations)["attention_mask"].sum(dim=1).tolist()
    return {item.item_id: int(n) for item, n in zip(env.items, lengths, strict=True)}


def test_dynamic_sampling_keeps_each_rows_own_item(tiny_vlm, env):
    # round 0 draws q-0 (uniform: dropped) and q-1 (kept); round 1 draws q-2 (dropped) and q-3 (kept)
    rollout = step_rollout(tiny_vlm, env, [0, 1], settings(), SINGLE, seed_of, None, {1: [2, 3]}.__getitem__)

    assert [item.item_id for item in rollout.items] == ["q-1", "q-1", "q-3", "q-3"]
    assert rollout.group_ids == [1, 1, 3, 3]
    assert rollout.outcomes.rewards.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert [item_id for batch in rollout.batches for item_id in shown_ids(tiny_vlm, batch)] == [
        "q-1", "q-1", "q-3", "q-3"]


def test_a_token_budget_cut_keeps_each_rows_own_item(tiny_vlm, env):
    lengths = prompt_tokens(tiny_vlm, env)
    short = max(lengths["q-1"], lengths["q-3"]) + 3  # + at most max_new_tokens reply tokens
    assert min(lengths["q-0"], lengths["q-2"]) + 1 > short  # a long row never joins the short ones
    rollout = step_rollout(tiny_vlm, env, [0, 1, 2, 3], settings(dynamic_sampling=False, micro_batch_tokens=4 * short),
                           SINGLE, seed_of)

    assert [item.item_id for item in rollout.items] == ["q-0", "q-0", "q-1", "q-1", "q-2", "q-2", "q-3", "q-3"]
    parts = [rollout.share.shards.parts[part] for part in rollout.share.parts]
    assert parts[0] == (2, 3, 6, 7)  # the four short rows together: not contiguous
    for part, batch in zip(parts, rollout.batches, strict=True):
        assert shown_ids(tiny_vlm, batch) == [rollout.items[row].item_id for row in part]


def test_the_rollout_log_names_each_rows_item_after_a_token_budget_cut(tiny_model_dir, tiny_vlm, env):
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer
    from aerorl_ops.rows.task_item import image_sha256

    torch.set_num_threads(1)
    lengths = prompt_tokens(tiny_vlm, env)
    budget = 4 * (max(lengths["q-1"], lengths["q-3"]) + 3)
    config = TrainingSettings(group_size=2, prompts_per_step=4, max_new_tokens=3, kl_coef=0.0, seed=4,
                              micro_batch_tokens=budget, rollout_log_rate=1.0)
    policy, _ = policy_and_reference(str(tiny_model_dir), config, device="cpu")
    trainer = RLTrainer(config.resolve(), policy)
    cut = []
    score = trainer._score_rollout
    trainer._score_rollout = lambda batches, mask: (cut.extend(shown_ids(tiny_vlm, b) for b in batches),
                                                    score(batches, mask))[1]
    trainer.rl_step(env, [0, 1, 2, 3])

    assert cut[0] == ["q-1", "q-1", "q-3", "q-3"]  # the batches were cut out of row order
    by_id = {item.item_id: item for item in env.items}
    logged = [(sample.row, sample.prompt_id) for sample in trainer.rollout_samples]
    assert logged == [(row, f"q-{row // 2}") for row in range(8)]
    for sample in trainer.rollout_samples:
        item = by_id[sample.prompt_id]
        assert (sample.question, sample.image_sha256s) == (item.question, [image_sha256(i) for i in item.images])
    # q-0 and q-2 earn 1; q-1's and q-3's replies, graded in row order, 0, 1, 0, 1
    assert [sample.reward for sample in trainer.rollout_samples] == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
