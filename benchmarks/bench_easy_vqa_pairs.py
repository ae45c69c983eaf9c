"""Issue 34, item 2: the embedded model trained on two-image true/false statements (``easy_vqa_pairs``).

One run of the pipeline's own training (``rl.run.inputs`` + ``rl.run.phases.run_training``, what
``aerorl train --env easy_vqa_pairs`` runs) on CPU, from ``tiny-qwen2-vl-easy-vqa`` (which reads the colour
of a single easy-VQA image, not yet a pair or a true/false statement):

* warm-up: ``--warmup-steps`` supervised steps of 32 training pairs (``train`` split, seed + 1000),
  lr 1e-3, linear warm-up then cosine to 10 % (the ``see`` preset's schedule), 75 % colour statements in
  each batch for the first two thirds (the model already reads colour), then the natural mix;
* RL: ``--rl-steps`` GRPO steps of 8 pairs x 8 replies at lr 1e-4 (the ``see`` preset's RL rate) against
  the int8 reference;
* control: supervised training from the warm-up checkpoint for the RL phase's training seconds.

Held-out: the first ``--eval-size`` pairs of the ``test`` split (seed 0), the same items for every phase.
Printed, each as accuracy ± SE (n) overall and per question type (colour, shape, mixed): the no-image
prior (the run's own: the majority answer per statement text on the training pairs), the majority label
per statement template, the base model, after the warm-up, after RL and the control; then the one-image
swap check (``eval_runner.one_image_swap``: the right image replaced, chosen to change the truth where it
can) of the base model and of the model after RL. Every line is also appended to ``--log`` (JSON lines).

    python benchmarks/bench_easy_vqa_pairs.py --threads 2          # the figures of docs/measured.md
    python benchmarks/bench_easy_vqa_pairs.py --smoke              # 2 + 2 steps, 32 held-out pairs
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from quiet_logs import quiet_model_logs

from aerorl_ops.config.presets import PRESETS
from aerorl_ops.config.training import TRAINING_DEFAULTS, TrainingSettings
from aerorl_ops.envs.easy_vqa_pairs import (
    NAME,
    load_easy_vqa_pairs,
    swapped_items,
    template_prior,
    template_prior_accuracy,
)
from aerorl_ops.envs.pair_statements import QUESTION_TYPES, reply_truth
from aerorl_ops.eval_metrics.accuracy import AccuracyReport
from aerorl_ops.eval_runner.one_image_swap import OneImageSwap, one_image_swap_check, policy_replies
from aerorl_ops.models.loading import ModelSource, load_vlm, resolve_device
from aerorl_ops.rl.run.embedded_builds import build_tiny_qwen2vl_easy_vqa
from aerorl_ops.rl.run.inputs import TRAIN_SEED_OFFSET, training_environments
from aerorl_ops.rl.run.phases import run_training


def settings_of(args: argparse.Namespace) -> TrainingSettings:
    see = PRESETS["see"]
    return dataclasses.replace(
        TRAINING_DEFAULTS, env=NAME, seed=args.seed, eval_size=args.eval_size, warmup_steps=args.warmup_steps,
        steps=args.rl_steps, warmup_batch_size=32, warmup_learning_rate=see["warmup_learning_rate"],
        warmup_lr_schedule="cosine", warmup_lr_warmup_steps=min(see["warmup_lr_warmup_steps"], args.warmup_steps),
        lr_min_ratio=see["lr_min_ratio"], learning_rate=see["learning_rate"], prompts_per_step=8, group_size=8,
        curriculum=f"{args.warmup_steps * 2 // 3}: colour @ 0.75" if args.warmup_steps >= 3 else "",
        eval_interval=10_000, sampled_eval_size=0, swap_check_type="", checkpoint_interval=10_000, control=True)


def row(name: str, report: AccuracyReport) -> dict[str, object]:
    record: dict[str, object] = {"phase": name, "accuracy": report.overall.accuracy,
                                 "se": report.overall.standard_error, "n": report.overall.n}
    for kind, value in report.by_type.items():
        record[kind], record[f"{kind}_se"] = value.accuracy, value.standard_error
    return record


def show(record: dict[str, object]) -> None:
    types = "  ".join(f"{kind} {record[kind]:.3f}±{record[f'{kind}_se']:.3f}" if kind in record else f"{kind} -"
                      for kind in QUESTION_TYPES)
    print(f"{record['phase']:>16}  {record['accuracy']:.3f}±{record['se']:.3f} (n={record['n']})  {types}")


def swap_row(name: str, check: OneImageSwap) -> dict[str, object]:
    return {"phase": f"swap {name}", "questions": check.questions, "changed": check.changed,
            "labels_changed": check.labels_changed, "changed_when_label_changed": check.changed_when_label_changed,
            "changed_when_label_kept": check.changed_when_label_kept,
            "accuracy_before": check.correct_before / check.questions,
            "accuracy_after": check.correct_after / check.questions}


def show_swap(record: dict[str, object]) -> None:
    print(f"{record['phase']:>16}  answers changed {record['changed']:.3f} of {record['questions']}; where the "
          f"new image changes the truth ({record['labels_changed']}) {record['changed_when_label_changed']:.3f}, "
          f"elsewhere {record['changed_when_label_kept']:.3f}; accuracy {record['accuracy_before']:.3f} before, "
          f"{record['accuracy_after']:.3f} after the swap")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--rl-steps", type=int, default=15)
    parser.add_argument("--eval-size", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models-dir", type=Path, default=Path("data/models"))
    parser.add_argument("--log", type=Path, default=Path("reports/bench_easy_vqa_pairs.jsonl"))
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--smoke", action="store_true", help="2 + 2 steps on 32 held-out pairs (checks the script)")
    args = parser.parse_args()
    if args.smoke:
        args.warmup_steps, args.rl_steps, args.eval_size = 2, 2, 32
    quiet_model_logs(args.threads)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load = os.getloadavg()
    base = str(build_tiny_qwen2vl_easy_vqa(args.models_dir / "tiny-qwen2-vl-easy-vqa"))
    settings = settings_of(args)
    settings.check_rules("bench_easy_vqa_pairs")
    train_env, held_out = training_environments(settings, args.seed)
    indices = list(range(len(held_out)))
    pairs_held_out = load_easy_vqa_pairs("test", args.eval_size, 0)  # what the held-out env holds, with its pairs
    assert [i.item_id for i in pairs_held_out.data.items] == [i.item_id for i in held_out.items]
    train_pairs = load_easy_vqa_pairs("train", None, args.seed + TRAIN_SEED_OFFSET).pairs
    records: list[dict[str, object]] = []

    def keep(record: dict[str, object]) -> None:
        records.append({**record, "seed": args.seed})
        (show_swap if "changed" in record else show)(record)

    print(f"== easy_vqa_pairs from {base}: {settings.warmup_steps} supervised + {settings.steps} GRPO steps, "
          f"{len(train_env)} training pairs, {len(held_out)} held-out pairs, torch threads {torch.get_num_threads()}, "
          f"load average {load[0]:.2f}")
    keep(row("template prior", template_prior_accuracy(template_prior(train_pairs), pairs_held_out.pairs)))
    device = resolve_device("cpu")
    base_model = load_vlm(ModelSource(base), device)
    cases = swapped_items(pairs_held_out, held_out.items)
    base_swap = one_image_swap_check(policy_replies(base_model, held_out, settings.max_new_tokens), cases, reply_truth)
    del base_model
    work = Path(tempfile.mkdtemp(prefix="aerorl-bench-pairs-"))
    result = run_training(base, work / "run", settings, train_env, held_out, indices, device="cpu",
                          on_eval=lambda evaluation: keep(row(evaluation.phase, evaluation.report)), resume=False)
    keep(swap_row("base", base_swap))
    final = load_vlm(ModelSource(str(result.final_checkpoint)), device)
    keep(swap_row("after RL", one_image_swap_check(policy_replies(final, held_out, settings.max_new_tokens), cases,
                                                   reply_truth)))
    summary = {"phase": "run", "seed": args.seed, "wall_s": round(time.perf_counter() - started, 1),
               "warmup_train_s": round(sum(s.step_s for s in result.steps if s.phase == "warmup"), 1),
               "rl_train_s": round(sum(s.step_s for s in result.steps if s.phase != "warmup"), 1),
               "load_start": round(load[0], 2), "load_end": round(os.getloadavg()[0], 2),
               "threads": torch.get_num_threads(), "warmup_steps": settings.warmup_steps, "rl_steps": settings.steps}
    records.append(summary)
    print(f"   wall {summary['wall_s']} s (supervised {summary['warmup_train_s']} s, RL {summary['rl_train_s']} s of "
          f"training); load average {summary['load_start']} at the start, {summary['load_end']} at the end")
    with args.log.open("a") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


if __name__ == "__main__":
    main()
