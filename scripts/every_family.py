"""Every image-text-to-text model type transformers ships: which build offline as a tiny random-init checkpoint,
and which pass the checks the family tests run. Writes docs/models.md's "Every image-text-to-text model type"
table (generated, between its markers).

    .venv/bin/python scripts/every_family.py                       # every model type, the table printed
    .venv/bin/python scripts/every_family.py --write docs/models.md
    .venv/bin/python scripts/every_family.py --types llava qwen2_vl --jobs 2

A model type is built from ``tiny_families``' hand-written table where it has a family there, else from its own
config class's defaults shrunk (``models.shrunk_family``); it builds offline when its checkpoint is written and
loads through the project's loader (the vision path traced from the model: ``models.vision_trace``). Each built
one then runs, on CPU, in a process of its own (a crash or a hang marks that model type only):

- partition: a benchmark partition's generation (``generation.partition_run.run_generation``) of three synthetic
  rows in batches of two: a record per row, each with vision tokens and a generated token;
- training: a supervised step (a finite, positive loss that changes the weights) and an RL step (a finite loss);
- frozen tower + LoRA: a supervised step with ``freeze_vision_tower`` leaves the vision encoder as it was and
  trains the rest; one with LoRA (rank 2) changes LoRA weights only;
- causal: two completions of one prompt that differ only in their last token give every earlier token the same
  log-prob (to 1e-6), and the last a different one.

A cell is ✓ (passed), ✗ with the first line of what failed, or – (not run: the model type did not build).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BEGIN, END = "<!-- every-family-table: begin (scripts/every_family.py) -->", "<!-- every-family-table: end -->"
CHECKS = ("partition", "training", "frozen tower + LoRA", "causal")
PASSED = "✓"
TIMEOUT_S = 600
"""The most seconds one model type's build and checks may take."""
STEPS = dict(group_size=2, max_new_tokens=3, kl_coef=0.0, learning_rate=1e-2, seed=3)


@dataclass(frozen=True)
class Outcome:
    """One model type's row: ``builds`` and why not (``why``), and each check's cell."""

    model_type: str
    family: str  # the tiny_families name that built it, or "" (shrunk from its config's defaults)
    builds: bool
    why: str
    checks: dict[str, str]


SCRATCH = re.compile(r"[^\s'\"]*every-family-[^/\s]+/")
"""A checkpoint's throw-away folder in a message, left out of the table (it differs on every run)."""


def first_line(error: BaseException) -> str:
    """``error`` on one line, at most 140 characters, its checkpoint named by its model type alone.

    >>> first_line(ValueError("model '/tmp/every-family-blip-x1/blip' has\\nno chat template"))
    "ValueError: model 'blip' has no chat template"
    """
    text = SCRATCH.sub("", " ".join(f"{type(error).__name__}: {error}".split()))
    return text if len(text) <= 140 else text[:137] + "..."


def built_checkpoint(model_type: str, folder: Path) -> tuple[Path, str]:
    """The model type's tiny checkpoint in ``folder``, and the tiny family that built it ("" when shrunk)."""
    from aerorl_ops.models.shrunk_family import build_shrunk_family
    from aerorl_ops.models.tiny_families import FAMILIES
    from aerorl_ops.models.tiny_family_build import build_tiny_family

    family = next((name for name, spec in FAMILIES.items() if spec.model_type == model_type), "")
    if family:
        return build_tiny_family(family, folder), family
    return build_shrunk_family(model_type, folder), ""


def check_partition(model_dir: Path, env) -> None:
    import torch

    from aerorl_ops.config.generation import GenerationSettings
    from aerorl_ops.generation.partition_run import run_generation
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from aerorl_ops.rows import synthetic_chartqa_rows, synthetic_docvqa_rows

    loaded = load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))
    rows = synthetic_docvqa_rows(2, seed=0) + synthetic_chartqa_rows(1, seed=0)
    table = run_generation(loaded, rows, 2, GenerationSettings(max_new_tokens=3))
    assert table.column("sample_id").to_pylist() == [row.item_id for row in rows], "a row has no record"
    assert min(table.column("vision_tokens").to_pylist()) > 0, "a row has no vision token"
    assert min(table.column("generated_tokens").to_pylist()) > 0, "a row has no generated token"


def check_training(model_dir: Path, env) -> None:
    import torch

    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    settings = TrainingSettings(**STEPS)
    policy, _ = policy_and_reference(str(model_dir), settings, device="cpu")
    before = {name: p.detach().clone() for name, p in policy.loaded.model.named_parameters()}
    trainer = RLTrainer(settings.resolve(), policy)
    supervised = trainer.supervised_step(env, [0, 1])
    assert torch.isfinite(torch.tensor(supervised.loss)) and supervised.loss > 0, f"loss {supervised.loss}"
    after = dict(policy.loaded.model.named_parameters())
    assert any(not torch.equal(after[name], before[name]) for name in before), "no weight changed"
    rl = trainer.rl_step(env, [2, 3])
    assert torch.isfinite(torch.tensor(rl.loss)), f"RL loss {rl.loss}"


def check_frozen_tower_and_lora(model_dir: Path, env) -> None:
    import torch

    from aerorl_ops.config.training import TrainingSettings
    from aerorl_ops.models.family_parts import part_parameters
    from aerorl_ops.rl.runtime.policy import policy_and_reference
    from aerorl_ops.rl.step.trainer import RLTrainer

    for settings in (TrainingSettings(**STEPS, freeze_vision_tower=True), TrainingSettings(**STEPS, lora_rank=2)):
        policy, _ = policy_and_reference(str(model_dir), settings, device="cpu")
        model = policy.loaded.model
        encoder = set(part_parameters(model, policy.loaded.vision.parts, "encoder"))
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        RLTrainer(settings.resolve(), policy).supervised_step(env, [0, 1])
        after = dict(model.named_parameters())
        changed = {name for name in after if not torch.equal(after[name], before[name])}
        if settings.lora_rank:
            assert changed and all("lora_" in name for name in changed), "LoRA changed a base weight"
        else:
            assert encoder and not changed & encoder, "the frozen encoder changed"
            assert changed - encoder, "nothing but the encoder trained"


def check_causal(model_dir: Path, env) -> None:
    import torch

    from aerorl_ops.envs.base import items_at
    from aerorl_ops.eval_runner.episodes import observe_all
    from aerorl_ops.eval_runner.replies import encode_observations
    from aerorl_ops.models.loading import ModelSource, load_vlm
    from aerorl_ops.rl.step.sequences import append_completions, completion_logprobs

    loaded = load_vlm(ModelSource(str(model_dir)), torch.device("cpu"))
    words = loaded.tokenizer.encode(" the red circle is", add_special_tokens=False)[:4]
    other = loaded.tokenizer.encode(" blue", add_special_tokens=False)[0]
    batch = append_completions(encode_observations(loaded, observe_all(env, items_at(env, [0, 0]))),
                               [words, words[:-1] + [other]], loaded)
    with torch.no_grad():
        scored = completion_logprobs(loaded.model, batch).logprobs.view(2, len(words))  # [2, 4]
    assert float((scored[0, :-1] - scored[1, :-1]).abs().max()) <= 1e-6, "an earlier token sees a later one"
    assert float((scored[0, -1] - scored[1, -1]).abs()) > 1e-6, "the last token's log-prob ignores it"


CHECK_FUNCTIONS: dict[str, Callable[[Path, object], None]] = dict(zip(
    CHECKS, (check_partition, check_training, check_frozen_tower_and_lora, check_causal), strict=True))


def evaluate(model_type: str) -> Outcome:
    """Build ``model_type`` and run every check on it, in this process."""
    import torch

    from aerorl_ops.envs.registry import make_env
    from aerorl_ops.models.loading import ModelSource, load_vlm

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix=f"every-family-{model_type}-") as scratch:
        try:
            model_dir, family = built_checkpoint(model_type, Path(scratch) / model_type)
            load_vlm(ModelSource(str(model_dir)), torch.device("cpu")).vision  # noqa: B018  (traced when first read)
        except Exception as error:  # any build or load failure is this model type's "why not"
            return Outcome(model_type, "", False, first_line(error), dict.fromkeys(CHECKS, "–"))
        env = make_env("easy_vqa", split="train", limit=8, seed=1)
        checks = {}
        for name, check in CHECK_FUNCTIONS.items():
            try:
                check(model_dir, env)
                checks[name] = PASSED
            except Exception as error:  # a failed check is this cell's text
                checks[name] = f"✗ {first_line(error)}"
        return Outcome(model_type, family, True, "", checks)


def _evaluate_into(model_type: str, results) -> None:
    results.put(asdict(evaluate(model_type)))


def evaluate_isolated(model_type: str, timeout_s: float = TIMEOUT_S) -> Outcome:
    """:func:`evaluate` in a spawned process: a crash or a hang becomes this model type's outcome."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_evaluate_into, args=(model_type, results), daemon=True)
    process.start()
    process.join(timeout_s)
    if process.is_alive():
        process.kill()
        process.join()
        return Outcome(model_type, "", False, f"build and checks did not end within {timeout_s:.0f} s",
                       dict.fromkeys(CHECKS, "–"))
    if results.empty():
        killed = " (SIGKILL: most likely out of memory)" if process.exitcode == -signal.SIGKILL else ""
        return Outcome(model_type, "", False, f"the process died, exit code {process.exitcode}{killed}",
                       dict.fromkeys(CHECKS, "–"))
    return Outcome(**results.get())


def table(outcomes: Sequence[Outcome]) -> str:
    """The markdown table, with a count line above it."""
    built = [o for o in outcomes if o.builds]
    passing = [o for o in built if all(o.checks[name] == PASSED for name in CHECKS)]
    lines = [f"{len(built)} of {len(outcomes)} model types build offline; {len(passing)} pass every check.", "",
             f"| model type | builds offline | why not | {' | '.join(CHECKS)} |",
             f"| --- | --- | --- |{' --- |' * len(CHECKS)}"]
    for o in outcomes:
        source = f"✓ ({o.family})" if o.family else ("✓ (shrunk)" if o.builds else "✗")
        cells = [SCRATCH.sub("", o.checks[name]).replace("|", "\\|") for name in CHECKS]
        why = SCRATCH.sub("", o.why).replace("|", "\\|")
        lines.append(f"| `{o.model_type}` | {source} | {why} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def write_between_markers(path: Path, text: str) -> None:
    document = path.read_text()
    if BEGIN not in document or END not in document:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} markers to write the table between")
    head, rest = document.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{rest.split(END, 1)[1]}")


def run_all(model_types: Sequence[str], jobs: int, timeout_s: float, saved: Path | None) -> list[Outcome]:
    """Every model type's outcome (``jobs`` at a time), in the order given; each saved to ``saved`` (JSON) as it
    comes, so an interrupted run keeps what it found."""
    from concurrent.futures import ThreadPoolExecutor

    done: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for outcome in pool.map(lambda model_type: reported(evaluate_isolated(model_type, timeout_s)), model_types):
            done[outcome.model_type] = outcome
            if saved is not None:
                saved.write_text(json.dumps([asdict(o) for o in done.values()], indent=1, ensure_ascii=False))
    return [done[model_type] for model_type in model_types]


def reported(outcome: Outcome) -> Outcome:
    """``outcome``, printed on one line as it comes."""
    cells = " ".join(f"{name}={cell[:60]}" for name, cell in outcome.checks.items())
    print(f"{outcome.model_type}: {'builds' if outcome.builds else 'not built: ' + outcome.why} {cells}", flush=True)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    from aerorl_ops.models.shrunk_family import image_text_to_text_types

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="*", help="model types to try (default: every image-text-to-text one)")
    parser.add_argument("--write", type=Path, help="write the table between the markers of this file")
    parser.add_argument("--json", type=Path, help="also save the outcomes as JSON")
    parser.add_argument("--from-json", type=Path, help="the table of outcomes saved with --json (nothing runs)")
    parser.add_argument("--timeout-s", type=float, default=TIMEOUT_S)
    parser.add_argument("--jobs", type=int, default=1, help="model types tried at once, a process each")
    args = parser.parse_args(argv)
    if args.from_json:
        outcomes = [Outcome(**record) for record in json.loads(args.from_json.read_text())]
    else:
        outcomes = run_all(args.types or image_text_to_text_types(), args.jobs, args.timeout_s, args.json)
    text = table(outcomes)
    if args.write:
        write_between_markers(args.write, text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
