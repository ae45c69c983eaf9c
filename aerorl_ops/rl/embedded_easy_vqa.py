"""The second embedded model: the embedded default after a short supervised run on easy-VQA's train split.

The embedded default is random, so on its own a benchmark of it reads 0.0 everywhere and a
regression check has nothing to catch. ``tiny-qwen2-vl-easy-vqa`` is that model after
:class:`EasyVQAWarmStart`'s supervised steps (the trainer's masked NLL on each item's answer + EOS):
500 steps of 16 questions at lr 1e-3 (linear warm-up for 50 steps, then cosine to 10%), with 75%
colour questions in each batch until step 350, then the natural mix. The colour questions are
the ones a model can answer only by reading the image (yes/no questions follow from the text, and
shapes come later), so the curriculum is what makes it look within a few hundred steps.

It takes about 40 s of training on 2 idle CPU cores (``benchmarks/bench_embedded_easy_vqa.py``
measures the build) and reads colour on held-out questions far above the no-image prior; the build
scores a fixed held-out sample and writes it beside the weights (``HELD_OUT_FILE``).

Like the base it is built on first use and cached: the folder's build marker holds the recipe, the
base model's spec and the easy-VQA package version, and a folder built from the same record is
used as it is. The build is deterministic on a machine: fixed seeds, a fixed number of torch
threads (``threads``), the data order a function of the seed. Processes that build it at once
(benchmark partitions) take turns on a lock file, so it trains once.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.models.build_progress import build_lock, say, step_bar
from aerorl_ops.models.embedded_default import TinyQwen2VLSpec, build_tiny_qwen2vl, holds_build, write_build_marker
from aerorl_ops.models.entry import EMBEDDED_DEFAULT, EMBEDDED_EASY_VQA
from aerorl_ops.models.sources import BASE_BUILDERS, EmbeddedBuilder

if TYPE_CHECKING:
    from aerorl_ops.eval_runner.held_out import EvalResult

HELD_OUT_FILE = "held_out.json"
BUILD_VERSION = 1  # bump when the build changes without a recipe change
HELD_OUT_QUESTIONS = 600  # the fixed held-out sample the build scores: easy-VQA test, seed 0
READS_COLOUR_BY = 0.20  # the colour accuracy the build should reach above the no-image prior
BUILD_TIME = "about 45 s on 2 idle cores"  # benchmarks/bench_embedded_easy_vqa.py measures it


@dataclass(frozen=True)
class EasyVQAWarmStart:
    """The supervised recipe. ``threads``: torch threads during the build (the result depends on it)."""

    steps: int = 500
    batch_size: int = 16
    learning_rate: float = 1e-3
    lr_warmup_steps: int = 50
    lr_min_ratio: float = 0.1
    curriculum: str = "350: colour @ 0.75"
    seed: int = 0
    threads: int = 2
    base: TinyQwen2VLSpec = TinyQwen2VLSpec()

    def training_settings(self) -> TrainingSettings:
        return TrainingSettings(warmup_steps=self.steps, steps=0, warmup_batch_size=self.batch_size,
                                warmup_learning_rate=self.learning_rate, warmup_lr_schedule="cosine",
                                warmup_lr_warmup_steps=self.lr_warmup_steps, lr_min_ratio=self.lr_min_ratio,
                                curriculum=self.curriculum, seed=self.seed, control=False)


@dataclass(frozen=True)
class HeldOutScore:
    """What the build scored on the fixed held-out sample: accuracy by question type, and the prior's."""

    n: int
    accuracy: float
    by_type: dict[str, float]
    prior_accuracy: float
    prior_by_type: dict[str, float]

    @classmethod
    def of(cls, model: EvalResult, prior: EvalResult) -> HeldOutScore:
        def by_type(result: EvalResult) -> dict[str, float]:
            return {kind: score.accuracy for kind, score in sorted(result.report.by_type.items())}
        return cls(model.n, model.accuracy, by_type(model), prior.accuracy, by_type(prior))

    @property
    def colour_gain(self) -> float:
        """Colour accuracy above the no-image prior's: how far the model reads the image."""
        return self.by_type["colour"] - self.prior_by_type["colour"]


def build_tiny_qwen2vl_easy_vqa(output_dir: Path, recipe: EasyVQAWarmStart = EasyVQAWarmStart()) -> Path:
    """Build the trained model into ``output_dir`` (skipped when it already holds this build) and
    return the directory. The base is the embedded default in ``output_dir``'s sibling folder
    ``tiny-qwen2-vl`` (built there if missing); a non-default ``recipe.base`` is built in a
    temporary folder instead, so the shared default is never replaced."""
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    if _is_built(output_dir, recipe):
        return output_dir
    with build_lock(output_dir.parent / f".{output_dir.name}.lock", EMBEDDED_EASY_VQA):
        if _is_built(output_dir, recipe):  # another process built it while this one waited
            say(f"{EMBEDDED_EASY_VQA}: built by the other process, {output_dir}")
            return output_dir
        say(f"building {EMBEDDED_EASY_VQA} (one time, {BUILD_TIME}) into {output_dir}")
        with _base_model(output_dir.parent, recipe.base) as base:
            staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
            try:
                score = _train(base, staging, recipe)
                (staging / HELD_OUT_FILE).write_text(json.dumps(asdict(score), indent=2, sort_keys=True))
                write_build_marker(staging, _build_record(recipe))
                if output_dir.exists():  # an older build: replaced (the lock keeps other builders out)
                    shutil.rmtree(output_dir)
                os.replace(staging, output_dir)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        say(f"built {EMBEDDED_EASY_VQA}: held-out accuracy {score.accuracy:.1%} on {score.n} questions "
            f"(no-image prior {score.prior_accuracy:.1%})")
    if score.colour_gain < READS_COLOUR_BY:
        warnings.warn(f"embedded model {EMBEDDED_EASY_VQA!r} reads colour {score.colour_gain:+.1%} against the "
                      f"no-image prior on {score.n} held-out questions (expected {READS_COLOUR_BY:+.1%} or more): "
                      f"{output_dir / HELD_OUT_FILE}", stacklevel=2)
    return output_dir


def held_out_score(model_dir: Path) -> HeldOutScore:
    """The held-out score a build wrote beside its weights."""
    return HeldOutScore(**json.loads((Path(model_dir) / HELD_OUT_FILE).read_text()))


@contextmanager
def _base_model(models_dir: Path, spec: TinyQwen2VLSpec) -> Iterator[Path]:
    if spec == TinyQwen2VLSpec():
        yield build_tiny_qwen2vl(models_dir / EMBEDDED_DEFAULT)
        return
    folder = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_DEFAULT}.", dir=models_dir))
    try:
        yield build_tiny_qwen2vl(folder / EMBEDDED_DEFAULT, spec)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _train(base: Path, output_dir: Path, recipe: EasyVQAWarmStart) -> HeldOutScore:
    """``recipe``'s supervised steps from ``base``, saved into ``output_dir``; the held-out score. The
    trainer's modules (peft, bitsandbytes) load here, not with this module: every benchmark partition
    imports the registry, few build."""
    from aerorl_ops.envs.easy_vqa import easy_vqa_env
    from aerorl_ops.eval_runner.held_out import evaluate_policy, prior_evaluation
    from aerorl_ops.models.image_only_processor import save_processor
    from aerorl_ops.rl.lora import save_policy
    from aerorl_ops.rl.runtimes import policy_and_reference
    from aerorl_ops.rl.schedule import ItemSampler, warmup_learning_rate
    from aerorl_ops.rl.trainer import RLTrainer

    settings = recipe.training_settings()
    threads, rng_state = torch.get_num_threads(), torch.random.get_rng_state()
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    try:
        train = easy_vqa_env("train", seed=recipe.seed)
        policy, _ = policy_and_reference(str(base), settings, device="cpu")
        trainer = RLTrainer(settings, policy)
        sampler = ItemSampler(train, settings.seed, settings.curriculum_stages)
        with step_bar(settings.warmup_steps, f"building {EMBEDDED_EASY_VQA}") as advance:
            for step in range(settings.warmup_steps):  # as a training run's warm-up steps (rl.training_run)
                trainer.set_learning_rate(warmup_learning_rate(settings, step))
                trainer.supervised_step(train, sampler.batch(step, settings.warmup_batch_size))
                advance()
        say(f"{EMBEDDED_EASY_VQA}: scoring {HELD_OUT_QUESTIONS} held-out questions")
        loaded = policy.loaded
        save_policy(loaded.model, output_dir)
        save_processor(loaded.processor, output_dir)
        held_out = easy_vqa_env("test", limit=HELD_OUT_QUESTIONS, seed=0)
        indices = list(range(len(held_out)))
        loaded.model.eval()
        with torch.no_grad():
            model = evaluate_policy(loaded, held_out, indices, settings.max_new_tokens, recipe.steps, "final")
        return HeldOutScore.of(model, prior_evaluation(train, held_out, indices))
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng_state)


def _build_record(recipe: EasyVQAWarmStart) -> dict[str, object]:
    return {**asdict(recipe), "build_version": BUILD_VERSION,
            "easy_vqa_version": importlib.metadata.version("easy-vqa")}


def _is_built(output_dir: Path, recipe: EasyVQAWarmStart) -> bool:
    return holds_build(output_dir, _build_record(recipe))


EMBEDDED_BUILDERS: dict[str, EmbeddedBuilder] = {**BASE_BUILDERS, EMBEDDED_EASY_VQA: build_tiny_qwen2vl_easy_vqa}
"""Every embedded model by name: what ``models.sources.model_source`` takes from the layers above ``rl``."""
