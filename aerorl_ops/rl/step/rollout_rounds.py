"""An RL step's rollout: ``group_size`` sampled replies per prompt over this rank's micro-batches,
graded, gathered into the global batch, shaped (DAPO's soft overlong punishment: of each reply, or on a
multi-turn environment of each turn's reply, at that turn's reward: ``turn_overlong_penalties``) and, with
DAPO's dynamic sampling, filtered to informative groups.

Dynamic sampling (Yu et al., 2025, section 3.2; verl's ``filter_groups``): a group whose rewards are
all equal has zero group-relative advantage and teaches nothing, so it is dropped and more prompts
are drawn (``more_prompts(round)``) and sampled, round after round, until ``prompts_per_step`` groups
are informative or ``max_sampling_rounds`` rounds ran. The step trains on the first
``prompts_per_step`` informative groups in sampling order; when the rounds run out, it goes ahead
with them plus the earliest dropped groups up to ``prompts_per_step`` (their advantages are 0; a
token-mean loss counts their tokens, as plain GRPO would) and logs a warning. The decision is taken
on the gathered global rewards, so every rank takes the same one, and a batch of several rounds is
rebuilt on every rank from the gathered reply token ids (``rollout.reply_batches``): W ranks train
on what one process would.

Round r samples global micro-batch ``part`` with seed ``seed_of(part + r * ROUND_PARTS)``; round 0 is
exactly the rollout without dynamic sampling. Each round turns the environment indices it drew into
prompts once (``rl.step.prompts``): every row carries its task item from then on, so the groups kept,
a token budget's cut and the rollout log take the item from the batch, never from the environment.

With ``micro_batch_tokens`` (verl's dynamic batch size), the sampled batch is cut again for the scoring
and update passes: each rank keeps its rows of every minibatch, cut by ``rl.step.token_budget`` into
micro-batches of at most that many padded tokens (similar lengths together), rebuilt from the replies.
Which rows form each minibatch, and so the gradient, does not change (``RLLoss.shares``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from aerorl_ops.config.training import Recipe
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.eval_runner.episodes import Sampling
from aerorl_ops.generation.generator_sampling import PrivateRng
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.core.policy_losses import overlong_penalty
from aerorl_ops.rl.runtime.distributed import BatchShards, DataParallel, RolloutShare
from aerorl_ops.rl.step.prompts import Prompt, drawn_prompts, prompt_items
from aerorl_ops.rl.step.rollout import ReplySampler, reply_batches, sample_parts
from aerorl_ops.rl.step.sequences import SequenceBatch
from aerorl_ops.rl.step.step_parts import Outcomes
from aerorl_ops.rl.step.token_budget import token_budget_parts
from aerorl_ops.rows.task_item import TaskItem

logger = logging.getLogger(__name__)

ROUND_PARTS = 2**20
"""Round r's micro-batch seeds are those of parts ``part + r * ROUND_PARTS``: no two rounds share one."""
NO_TOKEN = -1
"""Pads reply token ids to ``max_new_tokens`` for gathering."""


def sample_seed(seed: int, step: int, part: int) -> int:
    """The torch seed of global micro-batch ``part``'s sampling at trainer step ``step`` of a run seeded
    ``seed``, whatever the world size."""
    return ((seed * 1_000_003 + step) * 1_000_003 + part) % 2**63


@dataclass(frozen=True)
class GroupCounts:
    """What dynamic sampling did in one step (without it: one round, every group kept)."""

    sampled: int  # groups sampled over every round
    kept: int  # informative groups trained on
    dropped: int  # groups whose rewards were all equal, left out
    rounds: int  # sampling rounds
    filled: int  # dropped groups trained on because the rounds ran out


@dataclass(frozen=True)
class StepRollout:
    """The batch an RL step trains on."""

    prompts: list[Prompt]  # [B] each row's task item and group, each prompt's group contiguous
    share: RolloutShare  # this rank's micro-batches of it
    batches: list[SequenceBatch]  # this rank's micro-batches, with the sampled replies
    lengths: torch.Tensor  # [B] reply tokens (up to and including EOS)
    outcomes: Outcomes  # [B] rewards (overlong-shaped), correct, truncated
    groups: GroupCounts
    generation_s: float
    token_ids: torch.Tensor  # [B, W] the replies (multi-turn: with the environment's tokens), NO_TOKEN after each
    action_mask: torch.Tensor | None = None  # multi-turn: [B, W] bool, the model's own completion tokens
    turn_rewards: torch.Tensor | None = None  # multi-turn: [B, W] each turn's reward at its last reply token

    @property
    def items(self) -> list[TaskItem]:
        """[B] each row's task item."""
        return prompt_items(self.prompts)

    @property
    def group_ids(self) -> list[int]:
        """[B] each row's group for group-relative advantages."""
        return [prompt.group for prompt in self.prompts]

    def token_rewards(self, mask: torch.Tensor) -> torch.Tensor | None:
        """Multi-turn: each turn's reward at its position, over ``mask``'s width [B, L]; None for single-turn
        rollouts (their reward sits at the last counted token: ``rl.core.algorithms.token_rewards``)."""
        if self.turn_rewards is None:
            return None
        return self.turn_rewards[:, :mask.shape[1]].to(mask.dtype) * mask


@dataclass(frozen=True)
class _Round:
    """One sampling round, gathered: every rank's rows in global order."""

    prompts: list[Prompt]  # [B_r]
    share: RolloutShare
    batches: list[SequenceBatch]  # this rank's
    token_ids: torch.Tensor  # [B_r, W], NO_TOKEN after each reply
    lengths: torch.Tensor  # [B_r]
    outcomes: Outcomes  # [B_r]
    generation_s: float
    action_mask: torch.Tensor | None  # [B_r, W] multi-turn
    turn_rewards: torch.Tensor | None  # [B_r, W] multi-turn


def shaped_rewards(rewards: torch.Tensor, lengths: torch.Tensor, settings: Recipe) -> torch.Tensor:
    """``rewards`` [B] plus DAPO's overlong penalty of replies ``lengths`` [B] long (none when
    ``overlong_buffer`` is 0)."""
    if not settings.overlong_buffer:
        return rewards
    penalty = overlong_penalty(lengths, settings.max_new_tokens, settings.overlong_buffer,
                               settings.overlong_penalty_factor)  # [B]
    return rewards + penalty.to(rewards.dtype)


def turn_overlong_penalties(actions: torch.Tensor, settings: Recipe) -> torch.Tensor:
    """A multi-turn rollout's DAPO overlong penalty, per reply: each run of the model's own tokens in a row of
    ``actions`` [B, W] (a turn's reply) punished by its own length, the penalty at the reply's last token
    [B, W] (where its turn reward sits), 0 elsewhere; all 0 when ``overlong_buffer`` is 0. The environment's
    tokens between the replies are never counted.

    >>> from aerorl_ops.config.training import TrainingSettings
    >>> recipe = TrainingSettings(algorithm="dapo", max_new_tokens=4, overlong_buffer=2).resolve()
    >>> turn_overlong_penalties(torch.tensor([[True, True, True, False, True, True, True, True]]), recipe)
    tensor([[ 0.0000,  0.0000, -0.5000,  0.0000,  0.0000,  0.0000,  0.0000, -1.0000]])
    """
    penalties = torch.zeros(actions.shape, dtype=torch.float32)  # [B, W]
    if not settings.overlong_buffer:
        return penalties
    for row, own in enumerate(actions.tolist()):
        ends = [k for k, token in enumerate(own) if token and (k + 1 == len(own) or not own[k + 1])]
        starts = [k for k, token in enumerate(own) if token and (k == 0 or not own[k - 1])]
        lengths = torch.tensor([end - start + 1 for start, end in zip(starts, ends, strict=True)])  # [turns]
        if len(lengths):
            penalties[row, ends] = overlong_penalty(lengths, settings.max_new_tokens, settings.overlong_buffer,
                                                    settings.overlong_penalty_factor).float()
    return penalties


def informative_groups(rewards: torch.Tensor, group_size: int) -> list[bool]:
    """Per group of ``group_size`` contiguous rewards [B]: not all equal (so a group baseline is not every reward)."""
    groups = rewards.view(-1, group_size)  # [G, n]
    return (groups.max(dim=1).values != groups.min(dim=1).values).tolist()


def _sample_round(loaded: LoadedVLM, env: TaskEnv, prompts: Sequence[Prompt], round_index: int,
                  settings: Recipe, dp: DataParallel, seed_of: Callable[[int], int],
                  sampler: ReplySampler | None, rng: PrivateRng | None) -> _Round:
    rows = [prompt for prompt in prompts for _ in range(settings.group_size)]  # [B] groups contiguous
    share = dp.share_rollout(len(rows), settings.grad_accumulation * settings.ppo_mini_batches,
                             settings.ppo_mini_batches)
    rollout = sample_parts(loaded, env, share.items(rows), settings.max_new_tokens,
                           Sampling(settings.temperature, settings.top_k, settings.top_p),
                           [seed_of(part + round_index * ROUND_PARTS) for part in share.parts], sampler, rng)
    device = loaded.device
    replies = rollout.replies.token_ids
    width = dp.max(max([settings.max_new_tokens, *(len(ids) for ids in replies)]))  # [B, W] on every rank
    token_ids = torch.full((len(replies), width), NO_TOKEN, dtype=torch.long)
    for row, ids in enumerate(replies):
        token_ids[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    actions = turn_rewards = None
    if rollout.actions is not None:
        actions = torch.zeros((len(replies), width), dtype=torch.bool)
        turn_rewards = torch.zeros((len(replies), width), dtype=torch.float32)
        for row, (action, rewards) in enumerate(zip(rollout.actions, rollout.turn_rewards, strict=True)):
            actions[row, :len(action)] = torch.tensor(action, dtype=torch.bool)
            for position, reward in rewards:
                turn_rewards[row, position] = reward
    lengths, token_ids, actions, turn_rewards = share.gather_rollout(
        torch.tensor([len(ids) for ids in replies]), token_ids, actions, turn_rewards, device=device)  # [B], [B, W]
    rewards, correct, truncated = share.gather_rollout(
        rollout.graded.rewards, rollout.graded.correct, torch.tensor(rollout.replies.truncated, dtype=torch.bool),
        device=device)  # [B] each
    if actions is None:
        outcomes = Outcomes(shaped_rewards(rewards, lengths, settings), correct, truncated)
    else:  # each reply punished for its own length, where its turn's reward sits; the episode's sum
        penalties = turn_overlong_penalties(actions, settings).to(turn_rewards.device)  # [B, W]
        turn_rewards = turn_rewards + penalties
        outcomes = Outcomes(rewards + penalties.sum(dim=1).to(rewards.dtype), correct, truncated)
    return _Round(rows, share, rollout.batches, token_ids, lengths, outcomes, rollout.generation_s, actions,
                  turn_rewards)


def step_rollout(loaded: LoadedVLM, env: TaskEnv, prompts: Sequence[int], settings: Recipe,
                 dp: DataParallel, seed_of: Callable[[int], int], sampler: ReplySampler | None = None,
                 more_prompts: Callable[[int], Sequence[int]] | None = None,
                 rng: PrivateRng | None = None) -> StepRollout:
    """The batch of an RL step on ``prompts`` (environment indices; module docstring); ``settings``: the
    run's ``Recipe`` (``overlong_buffer``, ``dynamic_sampling`` filled in); ``more_prompts(r)``: round r's
    prompts (r >= 1; None: one round only); ``rng``: sample from its generators, not torch's global RNG (a
    worker thread's rollout: the same replies)."""
    rollout = _sampled(loaded, env, prompts, settings, dp, seed_of, sampler, more_prompts, rng)
    if settings.micro_batch_tokens:
        return _cut_by_tokens(loaded, env, rollout, settings.micro_batch_tokens, dp)
    return rollout


def _sampled(loaded: LoadedVLM, env: TaskEnv, prompts: Sequence[int], settings: Recipe,
             dp: DataParallel, seed_of: Callable[[int], int], sampler: ReplySampler | None,
             more_prompts: Callable[[int], Sequence[int]] | None, rng: PrivateRng | None) -> StepRollout:
    first = _sample_round(loaded, env, drawn_prompts(env, prompts), 0, settings, dp, seed_of, sampler, rng)
    groups = len(prompts)
    if not settings.dynamic_sampling:
        return StepRollout(first.prompts, first.share, first.batches, first.lengths, first.outcomes,
                           GroupCounts(groups, groups, 0, 1, 0), first.generation_s, first.token_ids,
                           first.action_mask, first.turn_rewards)
    rounds, kept, dropped = [first], [], []
    while True:
        current = len(rounds) - 1
        for group, useful in enumerate(informative_groups(rounds[-1].outcomes.rewards, settings.group_size)):
            (kept if useful else dropped).append((current, group))
        if len(kept) >= groups or len(rounds) >= settings.max_sampling_rounds or more_prompts is None:
            break
        rounds.append(_sample_round(loaded, env, drawn_prompts(env, more_prompts(len(rounds))), len(rounds),
                                    settings, dp, seed_of, sampler, rng))
    filled = dropped[:max(groups - len(kept), 0)]
    if filled and dp.is_main:
        logger.warning("dynamic sampling: %d of %d groups informative after %d sampling rounds "
                       "(max_sampling_rounds=%d); the step goes ahead with %d uninformative groups",
                       len(kept), groups, len(rounds), settings.max_sampling_rounds, len(filled))
    chosen = sorted(kept[:groups] + filled)  # sampling order
    counts = GroupCounts(sum(len(r.prompts) for r in rounds) // settings.group_size, len(kept[:groups]),
                         len(dropped) - len(filled), len(rounds), len(filled))
    generation_s = sum(r.generation_s for r in rounds)
    if chosen == [(0, group) for group in range(groups)]:  # the first round as sampled
        return StepRollout(first.prompts, first.share, first.batches, first.lengths, first.outcomes, counts,
                           generation_s, first.token_ids, first.action_mask, first.turn_rewards)
    return _rebuilt(loaded, env, rounds, chosen, settings, dp, counts, generation_s)


def _rebuilt(loaded: LoadedVLM, env: TaskEnv, rounds: Sequence[_Round], chosen: Sequence[tuple[int, int]],
             settings: Recipe, dp: DataParallel, counts: GroupCounts, generation_s: float) -> StepRollout:
    """The batch of the ``chosen`` (round, group) groups, from the gathered replies, on every rank."""
    n = settings.group_size
    rows = [(r, group * n + k) for r, group in chosen for k in range(n)]  # [B] (round, its global row)

    width = max(r.token_ids.shape[1] for r in rounds)  # rounds may differ in reply width

    def pick(field: Callable[[_Round], torch.Tensor], fill: float = 0) -> torch.Tensor:
        values = [field(rounds[r])[row] for r, row in rows]
        return torch.stack([torch.nn.functional.pad(v, (0, width - v.shape[0]), value=fill) if v.dim() else v
                            for v in values])

    prompts = [rounds[r].prompts[row] for r, row in rows]  # [B] each row's own, carried from its round
    lengths = pick(lambda r: r.lengths)  # [B]
    outcomes = Outcomes(pick(lambda r: r.outcomes.rewards), pick(lambda r: r.outcomes.correct),
                        pick(lambda r: r.outcomes.truncated))  # [B] each
    token_ids = pick(lambda r: r.token_ids, NO_TOKEN)  # [B, W]
    multi_turn = rounds[0].action_mask is not None
    actions = pick(lambda r: r.action_mask) if multi_turn else None  # [B, W]
    turn_rewards = pick(lambda r: r.turn_rewards) if multi_turn else None  # [B, W]
    share = dp.share_rollout(len(prompts), settings.grad_accumulation * settings.ppo_mini_batches,
                             settings.ppo_mini_batches)
    batches = _batches_of(loaded, env, share, prompt_items(prompts), token_ids, lengths)
    return StepRollout(prompts, share, batches, lengths, outcomes, counts, generation_s, token_ids, actions,
                       turn_rewards)


def _batches_of(loaded: LoadedVLM, env: TaskEnv, share: RolloutShare, items: Sequence[TaskItem],
                token_ids: torch.Tensor, lengths: torch.Tensor) -> list[SequenceBatch]:
    """This rank's micro-batches of ``share``, rebuilt from the global replies ``token_ids`` [B, W] and the
    rows' own ``items`` [B]."""
    parts = [list(share.shards.parts[part]) for part in share.parts]
    replies = [[token_ids[row, :int(lengths[row])].tolist() for row in part] for part in parts]
    return reply_batches(loaded, env, [[items[row] for row in part] for part in parts], replies)


def _cut_by_tokens(loaded: LoadedVLM, env: TaskEnv, rollout: StepRollout, budget: int,
                   dp: DataParallel) -> StepRollout:
    """``rollout`` with each rank's rows of every minibatch cut into micro-batches of at most ``budget``
    padded tokens (module docstring); the rows of each minibatch and of each rank stay as they were."""
    share = rollout.share
    prompt_tokens = torch.cat([batch.inputs["attention_mask"].sum(dim=1) for batch in rollout.batches]).to(
        rollout.lengths.device) - rollout.lengths[share.rows(rollout.lengths.device)]  # [b] this rank's rows
    (prompt_tokens,) = share.gather_rollout(prompt_tokens, device=rollout.lengths.device)  # [B]
    total = (prompt_tokens + rollout.lengths).tolist()  # [B] attended tokens per row
    shards = share.shards
    parts, owners, minibatches = [], [], []
    for m in range(len(shards.minibatches)):
        group = []
        for rank in range(dp.world_size):
            rows = [row for part in shards.owned(rank)[m] for row in shards.parts[part]]
            for cut in token_budget_parts([total[row] for row in rows], budget):
                group.append(len(parts))
                parts.append(tuple(rows[k] for k in cut))
                owners.append(rank)
        minibatches.append(tuple(group))
    cut_share = RolloutShare(BatchShards(tuple(parts), tuple(minibatches), dp.world_size, tuple(owners)), dp)
    batches = _batches_of(loaded, env, cut_share, rollout.items, rollout.token_ids, rollout.lengths)
    return replace(rollout, share=cut_share, batches=batches)
