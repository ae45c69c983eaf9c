"""Rollouts in SQL (``rl.step.rollout_samples``, ``training_rollouts``): a sampled share of each RL step's
replies with what the policy said, what it earned, its advantage and log-probability, and every image
saved once under its hash."""

from __future__ import annotations

import hashlib
from functools import partial

import duckdb
import pytest
import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import Completion
from aerorl_ops.rl.record.recorder import RunRecorder
from aerorl_ops.rl.record.rows import TrainingRunRecord
from aerorl_ops.rl.run.phases import TrainingRun
from aerorl_ops.rl.run.train_and_record import RecorderReporter
from aerorl_ops.rl.step.rollout_samples import rollout_samples, sampled_rows


class Letters:
    """A tokenizer stand-in: token k is the k-th letter; 0 is special."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(ord("a") + t - 1) for t in ids if t or not skip_special_tokens)


def test_a_sample_holds_its_items_question_image_hash_and_its_own_tokens_advantage_and_logprob():
    env = make_env("easy_vqa", split="train", limit=4, seed=1)
    token_ids = torch.tensor([[1, 2, 0, -1], [3, 0, -1, -1]])  # [B, W] "ab" + EOS, "c" + EOS
    own = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # [B, L] the reply's own tokens
    advantages = torch.tensor([[0.5, 0.5, 0.5], [-1.0, -1.0, 9.0]])
    logprob = torch.tensor([[-0.25, -0.5, -1.0], [-2.0, -0.125, -7.0]])
    (sample,) = rollout_samples(Letters(), 7, [1], env.items[2:4], token_ids, torch.tensor([3, 2]), own,
                                torch.tensor([0.0, 1.0]), torch.tensor([False, True]), advantages, logprob)
    item = env.items[3]
    assert (sample.step, sample.row, sample.prompt_id, sample.question) == (7, 1, item.item_id, item.question)
    assert sample.image_sha256s == [hashlib.sha256(item.images[0]).hexdigest()] and sample.images == item.images
    assert (sample.completion, sample.reward, sample.correct, sample.length) == ("c", 1.0, True, 2)
    assert sample.advantage == -1.0 and sample.logprob_sum == -2.125  # the padding's 9.0 and -7.0 left out


def test_the_kept_rows_are_a_seeded_share():
    kept = [len(sampled_rows(1000, 0.05, 0, step)) for step in range(1, 21)]
    assert 30 < sum(kept) / len(kept) < 70  # about 5 % of 1000
    with pytest.raises(ValueError, match="rate must be in"):
        sampled_rows(4, 1.5, 0, 1)


def test_an_rl_run_stores_its_sampled_replies_and_each_image_once(tiny_model_dir, tmp_path):
    torch.set_num_threads(1)
    env = make_env("easy_vqa", split="train", limit=16, seed=1)
    settings = TrainingSettings(group_size=2, prompts_per_step=4, max_new_tokens=3, kl_coef=0.0, seed=4,
                                warmup_steps=0, steps=2, checkpoint_interval=100, eval_interval=100, control=False,
                                swap_check_type="", sampled_eval_size=0, rollout_log_rate=0.5)
    connect = partial(duckdb.connect, str(tmp_path / "r.duckdb"))
    recorder = RunRecorder(connect, "run", tmp_path / "rollout_images")
    recorder.start(TrainingRunRecord.started("run", str(tiny_model_dir), settings.resolve(), None), fresh=True)
    TrainingRun(str(tiny_model_dir), tmp_path / "run", settings.resolve(), env, env, [0, 1], device="cpu",
                reporter=RecorderReporter(recorder, "run", log=None)).run()
    with connect() as conn:
        rows = conn.execute("SELECT step, row, prompt_id, question, image_sha256s, completion, reward, correct, "
                            "advantage, length, logprob_sum FROM training_rollouts WHERE run_id = 'run' "
                            "ORDER BY step, row").fetchall()
    assert [(step, row) for step, row, *_ in rows] == [(step, row) for step in (1, 2)
                                                       for row in sampled_rows(8, 0.5, 4, step)]
    items = {item.item_id: item for item in env.items}
    for _, _, prompt_id, question, digests, completion, reward, correct, advantage, length, logprob_sum in rows:
        item = items[prompt_id]
        assert question == item.question and 0 < length <= 4 and logprob_sum < 0
        (digest,) = digests  # easy-VQA: one image a question
        image = tmp_path / "rollout_images" / digest
        assert hashlib.sha256(image.read_bytes()).hexdigest() == digest and image.read_bytes() == item.images[0]
        graded = env.step(env.reset(item)[0], Completion(completion))
        assert (graded.reward, graded.info.correct) == (reward, correct)  # what the policy said earned that
        assert advantage is not None
    assert len(list((tmp_path / "rollout_images").iterdir())) == len({row[4][0] for row in rows})  # once each
