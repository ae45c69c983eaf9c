"""The second embedded model's build: the embedded default after a short supervised run on easy-VQA's train split.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from aerorl_ops.models.build_progress import build_lock, say
from aerorl_ops.models.embedded_default import TinyQwen2VLSpec, build_tiny_qwen2vl, holds_build, write_build_marker
from aerorl_ops.models.entry import EMBEDDED_DEFAULT, EMBEDDED_EASY_VQA

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


SHIPPED_RECIPE = EasyVQAWarmStart()


@dataclass(frozen=True)
class HeldOutScore:
    """What the build scored on the fixed held-out sample: accuracy by question type, and the prior's."""

    n: int
    accuracy: float
    by_type: dict[str, float]
    prior_accuracy: float
    prior_by_type: dict[str, float]

    @property
    def colour_gain(self) -> float:
        """Colour accuracy above the no-image prior's: how far the model reads the image."""
        return self.by_type["colour"] - self.prior_by_type["colour"]


WarmStartTraining = Callable[[Path, Path, EasyVQAWarmStart], HeldOutScore]
"""Trains ``recipe`` from the base model's folder into the output folder and scores the held-out sample."""


def build_easy_vqa_model(output_dir: Path, recipe: EasyVQAWarmStart, train: WarmStartTraining) -> Path:
    """Build the trained model into ``output_dir`` (skipped when it already holds this build) and
    return the directory. The base is the embedded default in ``output_dir``'s sibling folder
    ``tiny-qwen2-vl`` (built there if missing); a non-default ``recipe.base`` is built in a
    temporary folder instead, so the shared default is never replaced. ``train`` runs the recipe's steps
    (``rl.run.embedded_builds``: the trainer, which this layer cannot import)."""
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
                score = train(base, staging, recipe)
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


def _build_record(recipe: EasyVQAWarmStart) -> dict[str, object]:
    return {**asdict(recipe), "build_version": BUILD_VERSION,
            "easy_vqa_version": importlib.metadata.version("easy-vqa")}


def _is_built(output_dir: Path, recipe: EasyVQAWarmStart) -> bool:
    return holds_build(output_dir, _build_record(recipe))
