"""One-step off-policy rollouts sampled in the background (``rollout_mode = "one_step_off"``).

While step k's update runs, a worker thread samples step k+1's rollout with the frozen behaviour copy
(``rl.step.behaviour``: the weights after step k-1, refreshed just before) on step k+1's prompts, which the
caller knows a step ahead (``ItemSampler.batch`` depends on (seed, step) alone, dynamic sampling's later
draws too). Step k+1 then takes the finished rollout instead of sampling.

- Determinism. The worker draws each micro-batch's tokens from its own ``torch.Generator``, seeded from
  (seed, step, part) as a foreground rollout seeds the global RNG (``generation.generator_sampling``: the
  same tokens, bit for bit), and when step k+1 takes the rollout the global RNG is set where that foreground
  sampling would have left it. So the rows do not depend on thread timing, and equal those of sampling step
  k+1 in the foreground after the update, as one-step-off did before it had a worker.
- Lifetime. The worker starts once step k's rollout is scored and its samples logged (the main thread then
  calls no tokenizer or environment beside it) and is waited for when step k's update ends, inside
  ``RLTrainer.rl_step``: the run's evaluations, checkpoints and reporters never run beside it, and a stop at
  the end of the step (``aerorl_ops.stop``) leaves nothing in flight. A stop request, or an exception in the
  update (Ctrl-C's KeyboardInterrupt), ends the worker within a token; a stopped rollout is dropped, and step
  k+1, if it runs, samples in the foreground (the same replies).
- Failures. An exception in the worker is raised by step k+1, in the main thread, in one line naming that
  step (:class:`BackgroundRolloutError`, with the worker's exception as its cause); step k completes.
- Threads. On a CPU the worker and the update share the cores: during the overlap torch runs
  ``max(1, threads // 2)`` intra-op threads. ``torch.set_num_threads`` is process-wide (MKL's count is too),
  so the two get that count each, not a share chosen per thread; and an update's floating-point sums may be
  ordered by its thread count, so a one-step-off run matches itself at the same ``threads``, not a sync run
  at another count. torch releases the GIL inside its kernels but not in ``generate``'s Python loop, so on a
  small model the two threads mostly take turns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch

from aerorl_ops.config.training import Recipe
from aerorl_ops.envs.base import TaskEnv
from aerorl_ops.generation.generator_sampling import PrivateRng, SamplingStopped
from aerorl_ops.models.loading import LoadedVLM
from aerorl_ops.rl.runtime.distributed import DataParallel
from aerorl_ops.rl.step.rollout_rounds import StepRollout, sample_seed, step_rollout
from aerorl_ops.stop import stop_requested


class BackgroundRolloutError(RuntimeError):
    """A step's rollout, sampled in the background during the previous step's update, failed."""


@dataclass(frozen=True)
class AheadJob:
    """The rollout of the step that starts at trainer step ``step``, to sample in the background."""

    step: int  # the trainer's ``state.step`` when it is taken (the step it trains is numbered step + 1)
    env: TaskEnv
    prompts: list[int]
    device: torch.device
    sample: Callable[[PrivateRng], StepRollout]


def ahead_job(loaded: LoadedVLM, env: TaskEnv, draws: Callable[[int], Sequence[int]], settings: Recipe,
              dp: DataParallel, step: int) -> AheadJob:
    """Trainer step ``step``'s rollout by ``loaded`` (the behaviour copy) on ``draws(0)``, dynamic sampling's
    round r on ``draws(r)``, seeded as that step's foreground rollout is."""
    prompts = list(draws(0))
    seed_of = partial(sample_seed, settings.seed, step)
    return AheadJob(step, env, prompts, torch.device(loaded.device),
                    lambda rng: step_rollout(loaded, env, prompts, settings, dp, seed_of, None, draws, rng))


@dataclass(frozen=True)
class _Sampled:
    job: AheadJob
    rng: PrivateRng
    rollout: StepRollout | None
    error: BaseException | None


class _Worker(threading.Thread):
    def __init__(self, sample: Callable[[], StepRollout]) -> None:
        super().__init__(name="rollout-ahead", daemon=True)
        self.sample, self.rollout, self.error = sample, None, None

    def run(self) -> None:
        try:
            self.rollout = self.sample()
        except BaseException as error:  # handed to the main thread by RolloutAhead.take
            self.error = error


class RolloutAhead:
    """The next step's rollout, sampled beside this step's update (module docstring)."""

    def __init__(self) -> None:
        self._sampled: _Sampled | None = None

    @contextmanager
    def beside(self, job: AheadJob | None) -> Iterator[None]:
        """Sample ``job`` (None: nothing) in a worker thread while the with-block runs; wait for it at the
        block's end, after stopping it when the block raised."""
        self._sampled = None
        if job is None:
            yield
            return
        cancelled = threading.Event()
        rng = PrivateRng(job.device, lambda: cancelled.is_set() or stop_requested() is not None)
        worker = _Worker(partial(job.sample, rng))
        with _cpu_share(job.device):
            worker.start()
            try:
                yield
            except BaseException:
                cancelled.set()
                raise
            finally:
                worker.join()
        self._sampled = _Sampled(job, rng, worker.rollout, worker.error)

    def take(self, step: int, env: TaskEnv, prompts: Sequence[int]) -> StepRollout | None:
        """The rollout sampled for trainer step ``step`` during the last update, the global RNG set as its
        foreground sampling would leave it; None when none was (or it was stopped): sample it here."""
        sampled, self._sampled = self._sampled, None
        if sampled is None or isinstance(sampled.error, SamplingStopped):
            return None
        job = sampled.job
        if sampled.error is not None:
            detail = " ".join(str(sampled.error).split())
            raise BackgroundRolloutError(
                f"step {job.step + 1}: its rollout, sampled in the background during step {job.step}'s update, "
                f"failed: {type(sampled.error).__name__}: {detail}") from sampled.error
        if (job.step, list(prompts)) != (step, job.prompts) or job.env is not env:
            raise RuntimeError(f"step {step + 1} on {env.name!r} with prompts {list(prompts)}, but its rollout was "
                               f"sampled in the background for step {job.step + 1} on {job.env.name!r} with prompts "
                               f"{job.prompts}: pass rl_step the draws it was given as next_prompts")
        sampled.rng.leave_global_rng()
        return sampled.rollout


@contextmanager
def _cpu_share(device: torch.device) -> Iterator[None]:
    """On a CPU, torch's intra-op threads halved while the worker and the update run (module docstring)."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads // 2))
    try:
        yield
    finally:
        torch.set_num_threads(threads)
