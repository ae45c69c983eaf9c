"""Data parallelism over torchrun ranks: which rank owns which micro-batches, and the collectives.

Every rank holds the whole policy (and value head) and draws the same global batch; the unit of
sharding is the micro-batch. A step's rows are cut into micro-batches in a fixed global order
(``rollout.micro_batches``) and grouped into minibatches (one optimizer update each); within
every minibatch, rank r owns the r-th of W equal runs of consecutive micro-batches
(:func:`shard_batch`), so ``grad_accumulation`` must be a multiple of W.

Gradients: each rank accumulates over its own micro-batches, every loss weighted by its share of
the *global* minibatch; then, once per optimizer update and before clipping,
:meth:`DataParallel.all_reduce_gradients` sums the accumulated gradients over the ranks. That is
exactly the reduction torch's DDP performs (DDP averages; the shares here already divide by the
global count, so the sum is the one-rank gradient), done by hand because it is simpler with
gradient accumulation, a peft LoRA policy and the separate value head, whose parameters all go
through the same optimizer. Parameters start equal on every rank: the trainer broadcasts rank 0's
whenever its optimizer is (re)built, as DDP does at construction. With ``sharding = "fsdp2"`` the
micro-batches are owned the same way, but the policy, gradients and optimizer state are sharded over
the ranks instead (``rl.runtime.sharding``).

An RL step asks for its rank's share of the rollout once (:meth:`DataParallel.share_rollout`, a
:class:`RolloutShare`): the micro-batches to sample, ``gather_rollout`` for the global tensors in
global row order, and its part of every minibatch update; the trainer's step holds no bookkeeping.

The default, one process, is :data:`SINGLE`: no process group, every collective a no-op, so the
in-process path computes exactly what it did before data parallelism existed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

from aerorl_ops.eval_runner.episodes import micro_batches

BUCKET_ELEMENTS = 1 << 24
"""Gradients are all-reduced in flat buckets of at most this many elements (64 MiB of float32)."""
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
T = TypeVar("T")


@dataclass(frozen=True)
class DataParallel:
    """This process's place among ``world_size`` data-parallel ranks, and the collectives it joins.
    With ``world_size`` 1 every method returns its input unchanged and nothing is communicated."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where collectives' tensors live

    @property
    def is_main(self) -> bool:
        """Rank 0: the rank that evaluates, checkpoints and writes reports."""
        return self.rank == 0

    def sum(self, values: Sequence[float]) -> list[float]:
        """Each value summed over the ranks (float64)."""
        if self.world_size == 1:
            return list(values)
        total = torch.tensor(list(values), dtype=torch.float64, device=self.device)  # [n]
        dist.all_reduce(total)
        return total.tolist()

    def max(self, value: int) -> int:
        """The largest ``value`` over the ranks."""
        if self.world_size == 1:
            return value
        largest = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        return int(largest.item())

    def gather_rows(self, local: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
        """Every rank's rows, rank after rank: local [counts[rank], ...] -> [sum(counts), ...]. The
        trailing dimensions must agree across ranks (pad a width to the global one first)."""
        if self.world_size == 1:
            return local
        if local.shape[0] != counts[self.rank]:
            raise ValueError(f"rank {self.rank} holds {local.shape[0]} rows but counts say {counts[self.rank]}")
        wire = local.long() if local.dtype == torch.bool else local  # gloo has no bool collectives
        padded = wire.new_zeros((max(counts), *local.shape[1:]))  # [max b, ...]
        padded[:local.shape[0]] = wire
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded.contiguous())
        gathered = torch.cat([part[:count] for part, count in zip(parts, counts, strict=True)])  # [B, ...]
        return gathered.bool() if local.dtype == torch.bool else gathered

    def all_reduce_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum each parameter's ``.grad`` over the ranks, in place. A parameter without a gradient on
        some ranks counts as zero there; one without a gradient on every rank keeps ``None`` (so the
        optimizer skips it, as it would in one process)."""
        if self.world_size == 1 or not params:
            return
        present = torch.tensor([float(p.grad is not None) for p in params], device=self.device)  # [P]
        dist.all_reduce(present)
        for bucket in _buckets([p for p, seen in zip(params, present.tolist(), strict=True) if seen]):
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in bucket])
            dist.all_reduce(flat)
            offset = 0
            for p in bucket:
                p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()

    @torch.no_grad()
    def broadcast_parameters(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Overwrite every rank's ``params`` with rank 0's."""
        if self.world_size == 1:
            return
        for p in params:
            dist.broadcast(p.data, src=0)

    def from_main(self, value: T) -> T:
        """Rank 0's ``value`` (any picklable object) on every rank."""
        if self.world_size == 1:
            return value
        shared = [value]
        dist.broadcast_object_list(shared, src=0, device=self.device if self.device.type == "cuda" else None)
        return shared[0]

    def barrier(self) -> None:
        """Wait until every rank gets here (at most the process group's timeout)."""
        if self.world_size == 1:
            return
        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def local_micro_batches(self, rows: int, micro_batch_count: int, what: str = "a batch") -> list[tuple[int, ...]]:
        """The row indices of each of this rank's micro-batches of a one-minibatch batch of ``rows`` rows
        cut into ``micro_batch_count`` (:func:`shard_batch`; all of them in one process)."""
        shards = shard_batch(rows, micro_batch_count, 1, self.world_size, what)
        return [shards.parts[part] for part in shards.local_parts(self.rank)]

    def share_rollout(self, rows: int, micro_batch_count: int, minibatch_count: int) -> RolloutShare:
        """This rank's share of a rollout of ``rows`` rows cut into ``micro_batch_count`` micro-batches
        grouped into ``minibatch_count`` minibatches (:func:`shard_batch`)."""
        return RolloutShare(shard_batch(rows, micro_batch_count, minibatch_count, self.world_size, "the rollout"),
                            self)

    def close(self) -> None:
        """Leave the process group (a no-op in one process)."""
        if self.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


SINGLE = DataParallel()
"""One process: the default, in-process path."""


def from_environment(timeout_s: float, device: torch.device) -> DataParallel:
    """This rank under torchrun: RANK, WORLD_SIZE and LOCAL_RANK from its environment, and the
    default process group joined, NCCL when ``device`` is CUDA (the rank then computes on
    ``cuda:LOCAL_RANK``), gloo otherwise. A collective that waits longer than ``timeout_s`` fails."""
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not set: launch ranks with torchrun "
                           "(python -m torch.distributed.run --nproc-per-node N ...)")
    rank, world_size, local_rank = (int(os.environ[name]) for name in TORCHRUN_VARIABLES)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s))
    return DataParallel(rank, world_size, device)


@dataclass(frozen=True)
class BatchShards:
    """A step's global batch cut into micro-batches (global order), grouped into minibatches, each
    minibatch's micro-batches split evenly over ``world_size`` ranks (see the module docstring)."""

    parts: tuple[tuple[int, ...], ...]  # global micro-batch -> its rows of the global batch
    minibatches: tuple[tuple[int, ...], ...]  # minibatch -> its global micro-batch ids
    world_size: int
    owners: tuple[int, ...] | None = None  # global micro-batch -> its rank; None: an even run of each minibatch

    def owned(self, rank: int) -> list[list[int]]:
        """Per minibatch, the global micro-batch ids ``rank`` owns."""
        if self.owners is not None:
            return [[part for part in group if self.owners[part] == rank] for group in self.minibatches]
        return [list(group[rank * len(group) // self.world_size:(rank + 1) * len(group) // self.world_size])
                for group in self.minibatches]

    def local_parts(self, rank: int) -> list[int]:
        """The micro-batches ``rank`` owns, in global order."""
        return [part for group in self.owned(rank) for part in group]

    def rows_of(self, rank: int) -> list[int]:
        """The global rows of ``rank``'s micro-batches, in their order (its local row order)."""
        return [row for part in self.local_parts(rank) for row in self.parts[part]]

    def minibatch_rows(self, minibatch: int) -> list[int]:
        """The global rows of every micro-batch of ``minibatch``, on all ranks."""
        return [row for part in self.minibatches[minibatch] for row in self.parts[part]]

    def gather(self, dp: DataParallel, local: torch.Tensor) -> torch.Tensor:
        """Every rank's rows in global row order: local [b, ...] (``rows_of(dp.rank)``) -> [B, ...]."""
        ranks = range(self.world_size)
        if dp.world_size == 1:
            rows = self.rows_of(0)
            if rows == sorted(rows):
                return local
            return torch.empty_like(local).index_copy_(0, torch.tensor(rows, device=local.device), local)
        by_rank = dp.gather_rows(local, [len(self.rows_of(rank)) for rank in ranks])  # [B, ...] rank after rank
        order = torch.tensor([row for rank in ranks for row in self.rows_of(rank)], device=by_rank.device)  # [B]
        return torch.empty_like(by_rank).index_copy_(0, order, by_rank)


@dataclass(frozen=True)
class RolloutShare:
    """This rank's share of an RL step's rollout (:meth:`DataParallel.share_rollout`): which global
    micro-batches it samples and scores, how its rows gather into the global batch, and its part of
    every minibatch update. With one process it is the whole rollout and gathering is the identity."""

    shards: BatchShards
    dp: DataParallel

    @property
    def parts(self) -> list[int]:
        """The global micro-batches this rank samples, in global order (their ids seed the sampling)."""
        return self.shards.local_parts(self.dp.rank)

    def items(self, indices: Sequence[int]) -> list[list[int]]:
        """Per micro-batch of this rank, its items of the global batch ``indices``."""
        return [[indices[row] for row in self.shards.parts[part]] for part in self.parts]

    def rows(self, device: torch.device) -> torch.Tensor:
        """The global rows this rank holds, in its local order: [b]."""
        return torch.tensor(self.shards.rows_of(self.dp.rank), device=device)

    def gather_rollout(self, *local: torch.Tensor | None, device: torch.device) -> list[torch.Tensor | None]:
        """Each of this rank's per-row tensors [b, ...] as the global one [B, ...] in global row order
        (None stays None), on ``device``."""
        return [None if tensor is None else self.shards.gather(self.dp, tensor.to(device)) for tensor in local]

    def minibatches(self, batches: Sequence[T], mask: torch.Tensor) -> list[tuple[list[tuple[T, slice]], torch.Tensor]]:
        """Per minibatch update: this rank's micro-batches ``batches`` (one per :attr:`parts`), each with
        its rows of this rank's local rows, and the global minibatch's mask rows (of ``mask`` [B, L])."""
        spans, start = {}, 0
        for part in self.parts:
            spans[part] = slice(start, start + len(self.shards.parts[part]))
            start = spans[part].stop
        held = dict(zip(self.parts, batches, strict=True))
        return [([(held[part], spans[part]) for part in owned], mask[self.shards.minibatch_rows(m)])
                for m, owned in enumerate(self.shards.owned(self.dp.rank))]


def check_accumulation(grad_accumulation: int, world_size: int) -> None:
    """Every update's micro-batches split evenly over the ranks; a ValueError names both settings."""
    if grad_accumulation % world_size:
        raise ValueError(f"grad_accumulation ({grad_accumulation}) must be a multiple of nproc_per_node x nnodes "
                         f"({world_size}): each update's micro-batches are split evenly over the ranks")


def shard_batch(rows: int, micro_batch_count: int, minibatch_count: int, world_size: int,
                what: str = "a batch") -> BatchShards:
    """``rows`` cut into ``micro_batch_count`` micro-batches (fewer when there are fewer rows), grouped
    into ``minibatch_count`` minibatches, each split over ``world_size`` ranks. A ValueError naming
    ``what`` when a minibatch's micro-batches cannot be split evenly (too few rows, or
    grad_accumulation not a multiple of the ranks, nproc_per_node x nnodes)."""
    parts = tuple(tuple(part) for part in micro_batches(list(range(rows)), micro_batch_count))
    minibatches = tuple(tuple(group) for group in micro_batches(list(range(len(parts))), minibatch_count))
    uneven = [len(group) for group in minibatches if len(group) % world_size]
    if uneven:
        raise ValueError(f"{what} of {rows} rows makes minibatches of {uneven[0]} micro-batches, which cannot be "
                         f"split evenly over {world_size} ranks (nproc_per_node x nnodes): make grad_accumulation a "
                         "multiple of the ranks, and the batch at least grad_accumulation x ppo_mini_batches rows")
    return BatchShards(parts, minibatches, world_size)


def check_data_parallel(world_size: int, grad_accumulation: int, ppo_mini_batches: int, rollout_rows: int,
                        supervised_rows: int) -> None:
    """Before any rank starts: a ValueError unless every update of an RL step (``rollout_rows`` =
    prompts x group size) and of a supervised step (``supervised_rows``; 0 = none) splits evenly."""
    check_accumulation(grad_accumulation, world_size)
    shard_batch(rollout_rows, grad_accumulation * ppo_mini_batches, ppo_mini_batches, world_size,
                "an RL step's rollout (prompts_per_step x group_size)")
    if supervised_rows:
        shard_batch(supervised_rows, grad_accumulation, 1, world_size, "a supervised step (warmup_batch_size)")


def _buckets(params: Sequence[torch.nn.Parameter]) -> list[list[torch.nn.Parameter]]:
    """Consecutive runs of parameters of one dtype and device, each of at most ``BUCKET_ELEMENTS``
    elements (a larger parameter is a bucket alone)."""
    buckets: list[list[torch.nn.Parameter]] = []
    size = 0
    for p in params:
        last = buckets[-1] if buckets else None
        if last is None or (p.dtype, p.device) != (last[0].dtype, last[0].device) or size + p.numel() > BUCKET_ELEMENTS:
            buckets.append([p])
            size = p.numel()
        else:
            last.append(p)
            size += p.numel()
    return buckets
