"""What a training run (``rl.run.phases.TrainingRun``) hands back: its statistics, evaluations and
checkpoints, and MAYE's sampled evaluations as they happen."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aerorl_ops.eval_runner.held_out import EvalResult, SwapCheck
from aerorl_ops.eval_runner.runner import EvalOutcome
from aerorl_ops.rl.step.stats import StepStats


@dataclass(frozen=True)
class SampledEval:
    """MAYE's evaluation of the policy at a global step: ``split`` is the environment's split label."""

    step: int
    phase: str
    env: str
    split: str
    outcome: EvalOutcome


@dataclass
class TrainingResult:
    run_dir: Path
    final_checkpoint: Path
    reference_source: str
    steps: list[StepStats] = field(default_factory=list)
    evals: list[EvalResult] = field(default_factory=list)
    sampled: list[SampledEval] = field(default_factory=list)
    swap: SwapCheck | None = None
    resumed_from_step: int = 0
    resumed_from: Path | None = None  # the checkpoint the run resumed from
    reference_loaded: bool = False
    reference_unquantized: tuple[str, ...] | None = None  # a quantized reference's full-precision linear layers
    state_bytes_per_rank: int | None = None  # the most parameter, gradient and optimizer-state bytes a rank held

    def eval_of(self, phase: str, distribution: str | None = None) -> EvalResult | None:
        """The last evaluation of ``phase`` on the run's held-out sample, or on held-out ``distribution``."""
        return next((e for e in reversed(self.evals) if e.phase == phase and e.distribution == distribution), None)
