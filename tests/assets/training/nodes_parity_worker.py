"""A torchrun rank of the several-nodes parity test (``test_local_nodes``): a supervised step, then
``RL_STEPS`` GRPO steps of the embedded tiny model on the rank's share of every update, as
``tests/aerorl_ops/rl/runtime/test_distributed.py`` trains it. Rank 0 saves the parameters it started
from and ended with, and every step's statistics, to OUT.

    python -m torch.distributed.run ... -m tests.assets.training.nodes_parity_worker MODEL_DIR OUT
"""

from __future__ import annotations

import sys
from functools import partial

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.registry import make_env
from aerorl_ops.envs.types import StepInfo
from aerorl_ops.rl.runtime.distributed import from_environment
from aerorl_ops.rl.runtime.policy import policy_and_reference
from aerorl_ops.rl.step.schedule import ItemSampler
from aerorl_ops.rl.step.trainer import RLTrainer
from aerorl_ops.rows.load_result import LoadResult

RL_STEPS = 2
PROMPTS, WARMUP_BATCH = 2, 4
SETTINGS = dict(  # GRPO, the KL to an unquantized reference as a loss term, two updates a step
    algorithm="grpo", group_size=4, kl_coef=0.05, quant_bits=16, loss_agg_mode="seq-mean-token-sum-norm",
    grad_accumulation=2, ppo_mini_batches=2, max_new_tokens=3, seed=2)


def parity_grader(item, completion):
    """Reward 1 when the reply's first token id is even: rewards vary even for an untrained model."""
    even = bool(completion.token_ids) and completion.token_ids[0] % 2 == 0
    return float(even), StepInfo({}, even, completion.text)


def main(model_dir: str, out: str) -> None:
    dp = from_environment(60, torch.device("cpu"))
    torch.manual_seed(0)
    settings = TrainingSettings(**SETTINGS)
    policy, reference = policy_and_reference(model_dir, settings, device="cpu")
    trainer = RLTrainer(settings.resolve(), policy, reference, dp=dp)
    env = SingleTurnEnv("parity", LoadResult(items=list(make_env("easy_vqa", split="train", limit=8, seed=1).items)),
                        parity_grader)
    sampler = ItemSampler(env, 0)

    def parameters() -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in policy.loaded.model.named_parameters()}

    start = parameters()
    steps = [trainer.supervised_step(env, sampler.batch(0, WARMUP_BATCH))]
    steps += [trainer.rl_step(env, sampler.batch(step, PROMPTS), partial(sampler.batch, step, PROMPTS))
              for step in range(1, RL_STEPS + 1)]
    if dp.is_main:
        torch.save({"start": start, "end": parameters(), "steps": steps, "world_size": dp.world_size}, out)
    dp.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
