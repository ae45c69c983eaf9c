"""Token-budget micro-batches vs fixed ones: tokens/s of the log-prob pass on a mixed batch.

The batch mixes synthetic DocVQA pages (``make_env("docvqa")``: a long prompt, the page's image
tokens, and a long reply of ``--long-reply`` tokens) with easy-VQA questions (``make_env("easy_vqa")``:
a short prompt and a ``--short-reply``-token reply), interleaved page, question, page, ... as a
shuffled mixed rollout would hold them. Real lengths through the embedded tiny Qwen2-VL (its
processor and chat template; replies are fixed token ids, not sampled).

Two cuts of the same rows, both built as the trainer builds a micro-batch (``SequenceBatch``:
prompt left-padded, reply right-padded, ``append_completions``):

* fixed: ``--rows`` rows per micro-batch, contiguous (``eval_runner.episodes.micro_batches``, as the
  trainer cuts a step today);
* budget: ``rl.step.token_budget.token_budget_parts`` with the smallest budget that gives as many
  micro-batches as the fixed cut, or fewer.

Per cut and pass, the median over ``--repeats`` of the time over all its micro-batches, repeats
alternating the two cuts (and which goes first) in the same run, after one warm-up of each:

* ``logprob``: ``completion_tokens`` under ``torch.no_grad`` (the rollout scoring pass);
* ``update``: ``completion_tokens`` then backward of the summed log-probs (the update pass).

Tokens/s counts real tokens (the attention mask's ones, the same for both cuts), never padding.
The padded fraction is padding / all positions of the built micro-batches. The figures printed are
measured, nothing else; ``--threads`` (default 1) fixes torch's threads for stable numbers.

    python benchmarks/bench_token_budget.py --quick     # seconds
    python benchmarks/bench_token_budget.py             # 8 pages + 8 questions, 4 rows per micro-batch
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from quiet_logs import quiet_model_logs  # noqa: E402

from aerorl_ops.envs.registry import make_env  # noqa: E402
from aerorl_ops.eval_runner.episodes import micro_batches, observe_all  # noqa: E402
from aerorl_ops.eval_runner.replies import encode_observations  # noqa: E402
from aerorl_ops.generation.batched import eos_token_ids  # noqa: E402
from aerorl_ops.models.embedded_default import build_tiny_qwen2vl  # noqa: E402
from aerorl_ops.models.loading import ModelSource, load_vlm  # noqa: E402
from aerorl_ops.rl.step.sequences import SequenceBatch, append_completions, completion_tokens  # noqa: E402
from aerorl_ops.rl.step.token_budget import padded_fraction, token_budget_parts  # noqa: E402

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models" / "tiny-qwen2-vl"


def mixed_rows(loaded, pages: int, questions: int, long_reply: int, short_reply: int):
    """(observations, replies) interleaved page, question, ...: pages get ``long_reply`` tokens, questions
    ``short_reply`` (each ending in EOS)."""
    docs = make_env("docvqa", split="validation", limit=pages, seed=0)
    easy = make_env("easy_vqa", split="train", limit=questions, seed=1)
    filler = loaded.tokenizer.encode(" the", add_special_tokens=False)[0]
    eos = eos_token_ids(loaded)[0]

    def reply(n: int) -> list[int]:
        return [filler] * (n - 1) + [eos]

    long_rows = [(o, reply(long_reply)) for o in observe_all(docs, docs.items[:pages])]
    short_rows = [(o, reply(short_reply)) for o in observe_all(easy, easy.items[:questions])]
    rows = [row for pair in zip(long_rows, short_rows, strict=False) for row in pair]
    rows += long_rows[len(short_rows):] + short_rows[len(long_rows):]
    return [o for o, _ in rows], [r for _, r in rows]


def build(loaded, observations, replies, parts) -> list[SequenceBatch]:
    return [append_completions(encode_observations(loaded, [observations[r] for r in part]),
                               [replies[r] for r in part], loaded)
            for part in parts]


def smallest_budget(lengths: list[int], count: int) -> int:
    """The smallest budget whose token-budget parts are at most ``count``."""
    candidates = sorted({k * length for length in lengths for k in range(1, len(lengths) + 1)})
    return next(b for b in candidates if len(token_budget_parts(lengths, b)) <= count)


def timed(step: Callable[[], None]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=8, help="DocVQA-like rows (long)")
    parser.add_argument("--questions", type=int, default=8, help="easy-VQA rows (short)")
    parser.add_argument("--rows", type=int, default=4, help="rows per fixed micro-batch")
    parser.add_argument("--long-reply", type=int, default=192, help="reply tokens of a page row")
    parser.add_argument("--short-reply", type=int, default=4, help="reply tokens of a question row")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: stable numbers)")
    parser.add_argument("--quick", action="store_true", help="4 pages + 4 questions, 2 repeats, 64-token replies")
    args = parser.parse_args()
    if args.quick:
        args.pages, args.questions, args.repeats, args.long_reply = 4, 4, 2, 64
    quiet_model_logs(args.threads)
    torch.manual_seed(0)
    loaded = load_vlm(ModelSource(str(build_tiny_qwen2vl(MODEL_DIR))), torch.device("cpu"))
    model = loaded.model

    observations, replies = mixed_rows(loaded, args.pages, args.questions, args.long_reply, args.short_reply)
    (whole,) = build(loaded, observations, replies, [list(range(len(replies)))])
    lengths = [int(n) for n in whole.inputs["attention_mask"].sum(1)]  # [B] prompt + reply
    fixed_parts = micro_batches(list(range(len(lengths))), -(-len(lengths) // args.rows))
    budget = smallest_budget(lengths, len(fixed_parts))
    cuts = {"fixed": fixed_parts, "budget": token_budget_parts(lengths, budget)}
    batches = {name: build(loaded, observations, replies, parts) for name, parts in cuts.items()}

    def logprob_pass(name: str) -> None:
        with torch.no_grad():
            for batch in batches[name]:
                completion_tokens(model, batch)

    def update_pass(name: str) -> None:
        model.zero_grad(set_to_none=True)
        for batch in batches[name]:
            completion_tokens(model, batch).logprobs.sum().backward()

    passes = {"logprob": logprob_pass, "update": update_pass}
    times = {(cut, p): [] for cut in cuts for p in passes}
    for run in passes.values():  # warm-up
        for cut in cuts:
            run(cut)
    for repeat in range(args.repeats):
        order = list(cuts) if repeat % 2 == 0 else list(reversed(cuts))
        for p, run in passes.items():
            for cut in order:
                times[cut, p].append(timed(lambda cut=cut, run=run: run(cut)))

    real = sum(lengths)
    print(f"== {args.pages} DocVQA-like pages (reply {args.long_reply} tokens) + {args.questions} easy-VQA "
          f"questions (reply {args.short_reply}); {len(lengths)} rows, {real} real tokens, row lengths "
          f"{min(lengths)}..{max(lengths)}; torch threads {args.threads}; median of {args.repeats} repeats")
    for cut, parts in cuts.items():
        built = batches[cut]
        positions = sum(b.input_ids.numel() for b in built)
        shapes = " ".join(f"{b.input_ids.shape[0]}x{b.input_ids.shape[1]}" for b in built)
        label = f"{args.rows} rows each" if cut == "fixed" else f"budget {budget} tokens"
        print(f"{cut:>6} ({label}): {len(parts)} micro-batches [{shapes}], padded fraction "
              f"{(positions - real) / positions:.3f} built ({padded_fraction(lengths, parts):.3f} by row lengths)")
    for p in passes:
        rate = {cut: real / statistics.median(times[cut, p]) for cut in cuts}
        print(f"{p:>8}: fixed {rate['fixed']:9.0f} tokens/s, budget {rate['budget']:9.0f} tokens/s, "
              f"ratio {rate['budget'] / rate['fixed']:.2f}x  (median s: fixed "
              f"{statistics.median(times['fixed', p]):.3f}, budget {statistics.median(times['budget', p]):.3f})")


if __name__ == "__main__":
    main()
