"""Issue 11's two training targets on easy-VQA, 3 seeds each: curves, gains, control and prior.

Each run is the pipeline's own training (``rl.run.inputs`` + ``rl.run.phases.run_training``,
what ``aerorl train`` runs) on the embedded tiny Qwen2-VL, on CPU:

* ``rl``  (``aerorl train``, the defaults): a short supervised warm-up, then GRPO against the int8
  reference. Target: GRPO raises held-out accuracy by >= 10 points over the warm-up checkpoint,
  as a mean over the seeds, in about 5 minutes.
* ``see`` (``aerorl train --preset see``): curriculum + cosine supervised training, then GRPO at
  lr 1e-4. Targets, in every seed: colour accuracy >= the no-image prior's colour + 20 points,
  overall accuracy above the prior's, swapping images changes the colour answers (at least 10% of
  them), and RL does not lose colour accuracy beyond noise (final colour >= warm-up colour - 2 SE
  of the difference).

Printed per run: the accuracy curve (global step, training seconds, accuracy ± SE (n), per type);
then per target the prior, warm-up, final, control and gains, and the checks. Every evaluation
is also appended to ``--log`` (JSON lines), and runs already in the log are not run again, so
an interrupted benchmark resumes.

    python benchmarks/bench_easy_vqa_training.py                       # both targets, seeds 0 1 2
    python benchmarks/bench_easy_vqa_training.py --targets rl --seeds 0 --threads 2
    python benchmarks/bench_easy_vqa_training.py --smoke               # 2+2 steps, 32 questions
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

from quiet_logs import quiet_model_logs

from aerorl_ops.config.presets import preset_overrides
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.eval_runner.held_out import EvalResult
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl
from aerorl_ops.rl.run.inputs import training_environments
from aerorl_ops.rl.run.phases import run_training

TARGETS = {"rl": None, "see": "see"}
TYPES = ("yes_no", "colour", "shape")
SWAP_CHANGED_AT_LEAST = 0.10
"""The image-swap check passes when at least this share of colour answers change (a model that ignores
the image changes none: 0.0 in every run of the ``rl`` target)."""


def settings_of(target: str, seed: int, smoke: bool) -> TrainingSettings:
    overrides = preset_overrides(TARGETS[target]) if TARGETS[target] else {}
    # MAYE's sampled evaluations (on by default in aerorl train) change no training step; off here
    settings = dataclasses.replace(TRAINING_DEFAULTS, seed=seed, **overrides, sampled_eval_size=0)
    if smoke:
        settings = dataclasses.replace(settings, warmup_steps=2, steps=2, eval_size=32, eval_interval=1)
    return settings


def eval_record(target: str, seed: int, evaluation: EvalResult) -> dict[str, object]:
    report = evaluation.report
    record: dict[str, object] = {"target": target, "seed": seed, "phase": evaluation.phase, "step": evaluation.step,
                                 "train_s": round(evaluation.wall_s, 2), "accuracy": report.overall.accuracy,
                                 "se": report.overall.standard_error, "n": report.overall.n}
    for kind, value in report.by_type.items():
        record[kind] = value.accuracy
        record[f"{kind}_se"] = value.standard_error
        record[f"{kind}_n"] = value.n
    return record


def run_one(target: str, seed: int, base: str, work: Path, log: Path, smoke: bool, device: str) -> list[dict]:
    settings = settings_of(target, seed, smoke)
    settings.check_rules("bench_easy_vqa_training")
    train_env, held_out = training_environments(settings, seed)
    records: list[dict] = []

    def on_eval(evaluation: EvalResult) -> None:
        record = eval_record(target, seed, evaluation)
        records.append(record)
        with log.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print_curve_row(record)

    print(f"\n== target {target}, seed {seed}: {settings.warmup_steps} supervised + {settings.steps} "
          f"{settings.algorithm} steps, curriculum {settings.curriculum or 'none'}, held-out {len(held_out)}")
    print(f"{'phase':>15} {'step':>5} {'train_s':>8} {'accuracy':>18} " + " ".join(f"{t:>8}" for t in TYPES))
    started = time.perf_counter()
    result = run_training(base, work / f"{target}-s{seed}", settings, train_env, held_out,
                          list(range(len(held_out))), device=device, on_eval=on_eval, resume=False)
    summary = {"target": target, "seed": seed, "phase": "run", "wall_s": round(time.perf_counter() - started, 1),
               "rl_train_s": round(sum(s.step_s for s in result.steps if s.phase != "warmup"), 1),
               "warmup_train_s": round(sum(s.step_s for s in result.steps if s.phase == "warmup"), 1),
               "swap_changed": result.swap.changed if result.swap else None,
               "swap_questions": result.swap.questions if result.swap else None}
    with log.open("a") as handle:
        handle.write(json.dumps(summary) + "\n")
    print(f"   wall {summary['wall_s']} s (supervised {summary['warmup_train_s']} s, RL {summary['rl_train_s']} s "
          f"of training); image swap changes {summary['swap_changed']} of {summary['swap_questions']} colour answers")
    return records + [summary]


def print_curve_row(record: dict) -> None:
    types = " ".join(f"{record[t]:8.3f}" if t in record else f"{'-':>8}" for t in TYPES)
    print(f"{record['phase']:>15} {record['step']:5d} {record['train_s']:8.1f} "
          f"{record['accuracy']:.3f}±{record['se']:.3f} ({record['n']:4d}) {types}")


def last(records: list[dict], phase: str) -> dict | None:
    return next((r for r in reversed(records) if r.get("phase") == phase), None)


def diff_se(a: dict, b: dict, key: str = "") -> float:
    """SE of a difference of two accuracies (independent-sample bound; paired is smaller)."""
    se = f"{key}_se" if key else "se"
    return math.sqrt(a[se] ** 2 + b[se] ** 2)


def summarize_rl(runs: dict[int, list[dict]]) -> None:
    print("\n== target rl (aerorl train): GRPO gain over the warm-up checkpoint")
    print(f"{'seed':>4} {'prior':>13} {'warm-up':>13} {'final':>13} {'gain':>14} {'control':>13} {'wall_s':>7}")
    gains = []
    for seed, records in sorted(runs.items()):
        prior, warm, final, control, run = (last(records, p) for p in ("no_image_prior", "warmup", "final",
                                                                           "control", "run"))
        gain = final["accuracy"] - warm["accuracy"]
        gains.append(gain)
        print(f"{seed:4d} {cell(prior)} {cell(warm)} {cell(final)} {gain:+.3f}±{diff_se(final, warm):.3f} "
              f"{cell(control)} {run['wall_s']:7.0f}")
    mean = sum(gains) / len(gains)
    spread = (math.sqrt(sum((g - mean) ** 2 for g in gains) / (len(gains) - 1) / len(gains))
              if len(gains) > 1 else float("nan"))
    print(f"mean gain {mean * 100:+.1f} points over {len(gains)} seeds (SE across seeds {spread * 100:.1f}); "
          f"target >= +10: {'PASS' if mean >= 0.10 else 'FAIL'}")


def summarize_see(runs: dict[int, list[dict]]) -> None:
    print("\n== target see (aerorl train --preset see): reading the image")
    print(f"{'seed':>4} {'prior':>13} {'prior col':>9} {'final':>13} {'colour':>13} {'colour-prior':>12} "
          f"{'swap':>6} {'RL col Δ':>14} {'control':>13} {'wall_s':>7}  checks")
    for seed, records in sorted(runs.items()):
        prior, warm, final, control, run = (last(records, p) for p in ("no_image_prior", "warmup", "final",
                                                                           "control", "run"))
        lift = final["colour"] - prior["colour"]
        rl_delta = final["colour"] - warm["colour"]
        checks = {"colour>=prior+20": lift >= 0.20, "overall>prior": final["accuracy"] > prior["accuracy"],
                  "swap changes": (run["swap_changed"] or 0) >= SWAP_CHANGED_AT_LEAST,
                  "RL keeps colour": rl_delta >= -2 * diff_se(final, warm, "colour")}
        print(f"{seed:4d} {cell(prior)} {prior['colour']:9.3f} {cell(final)} "
              f"{final['colour']:.3f}±{final['colour_se']:.3f} {lift * 100:+11.1f}p {run['swap_changed']:6.3f} "
              f"{rl_delta * 100:+6.1f}±{diff_se(final, warm, 'colour') * 100:.1f}p {cell(control)} "
              f"{run['wall_s']:7.0f}  " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in checks.items()))


def cell(record: dict | None) -> str:
    return f"{record['accuracy']:.3f}±{record['se']:.3f}" if record else f"{'-':>13}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--log", type=Path, default=Path("reports/bench_easy_vqa_training.jsonl"))
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--smoke", action="store_true", help="2 + 2 steps on 32 questions (checks the script)")
    args = parser.parse_args()
    quiet_model_logs(args.threads)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, int], list[dict]] = {}
    if args.log.exists():
        for line in args.log.read_text().splitlines():
            record = json.loads(line)
            done.setdefault((record["target"], record["seed"]), []).append(record)
        done = {key: records for key, records in done.items() if last(records, "run")}  # finished runs only
    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-easy-vqa-"))
    base = str(build_tiny_qwen2vl(work / "tiny-qwen2-vl"))
    for target in args.targets:
        runs = {}
        for seed in args.seeds:
            if (target, seed) in done:
                print(f"\n== target {target}, seed {seed}: from {args.log}")
                for record in done[(target, seed)]:
                    if record["phase"] != "run":
                        print_curve_row(record)
                runs[seed] = done[(target, seed)]
            else:
                runs[seed] = run_one(target, seed, base, work, args.log, args.smoke, args.device)
        (summarize_rl if target == "rl" else summarize_see)(runs)


if __name__ == "__main__":
    main()
