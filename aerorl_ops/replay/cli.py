"""``aerorl replay``: score an offline replay file with the reward stack.

Flags follow AeroRL's ``reward_replay_evaluator.py`` (``--input --output --weight
--require-json --regex-pattern --target-tokens --latency-budget-ms --pass-threshold
--top-k --quiet``), and the JSON summary it prints is AeroRL's. Additions:

- ``--metrics``: each DocVQA record's ANLS and each ChartQA record's relaxed accuracy,
  reported per record and averaged under ``metrics`` (not added into the reward).
- ``--results-parquet PATH``: for large inputs. Scores column by column and writes the
  per-record results (``id``, ``total``, one column per component, and the metric
  columns with ``--metrics``) to Parquet; the JSON summary then names that file under
  ``results_parquet`` instead of listing every record under ``results``.
- ``--skip-invalid`` / ``--rejected-output``: by default a bad line stops the run
  (exit 1, the file, line and reason on stderr); with ``--skip-invalid`` the other lines
  are scored and the rejected ones written with their reasons to the side file
  (default ``<output>.rejected.jsonl``, or ``<input>.rejected.jsonl`` without
  ``--output``). The summary's ``rejected_count`` plus ``count`` is the number of
  non-blank lines read.
- A progress bar on stderr for inputs over ``PROGRESS_MIN_BYTES`` (off with ``--quiet``).

Exit status: 0 scored, 1 unreadable or invalid input, 2 bad command-line arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from aerorl_ops.replay.reader import iter_replay_records
from aerorl_ops.rewards.dataset_metrics import METRIC_NAMES, dataset_metric, summarize_metrics
from aerorl_ops.rewards.evaluate import context_from_record, evaluate_records
from aerorl_ops.rewards.registry import validate_weights
from aerorl_ops.rewards.replay_lines import RejectedLine, ReplayFormatError
from aerorl_ops.rewards.stack import WeightedRewardStack, build_reward_stack

PROGRESS_MIN_BYTES = 8 * 1024 * 1024


def parse_weights(entries: list[str]) -> dict[str, float]:
    """``["verifier=0.5", ...]`` as checked weights; ``ValueError`` names a bad entry.

    >>> parse_weights(["verifier=0.5", " cost =0"])
    {'verifier': 0.5, 'cost': 0.0}
    """
    parsed: dict[str, float] = {}
    for entry in entries:
        name, separator, raw = entry.partition("=")
        if not separator:
            raise ValueError(f"--weight {entry!r}: expected name=value, e.g. --weight verifier=0.5")
        try:
            parsed[name.strip()] = float(raw)
        except ValueError:
            raise ValueError(f"--weight {entry!r}: {raw!r} is not a number") from None
    return validate_weights(parsed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aerorl replay", description="Evaluate offline replay data (JSONL) with the AeroRL reward stack"
    )
    parser.add_argument("--input", required=True, help="JSONL file with prompt/response/reference/metadata")
    parser.add_argument("--output", default="", help="also write the JSON summary here")
    parser.add_argument("--weight", action="append", default=[], help="name=value weight override (repeatable)")
    parser.add_argument("--require-json", action="store_true", help="the format reward requires JSON responses")
    parser.add_argument("--regex-pattern", default="", help="the format reward requires re.search to match")
    # Unset numeric flags keep the library's defaults (build_reward_stack, evaluate_records).
    parser.add_argument("--target-tokens", type=int, help="word budget of the cost reward")
    parser.add_argument("--latency-budget-ms", type=float, help="latency budget of the cost reward")
    parser.add_argument("--pass-threshold", type=float, help="total reward counted as a pass")
    parser.add_argument("--top-k", type=int, help="how many best/worst examples to list")
    parser.add_argument("--quiet", action="store_true", help="print the JSON only: no brief, no progress bar")
    parser.add_argument("--metrics", action="store_true", help="add ANLS (docvqa) and relaxed accuracy (chartqa)")
    parser.add_argument("--results-parquet", default="", metavar="PATH", help="write per-record results to Parquet")
    parser.add_argument("--skip-invalid", action="store_true", help="skip bad lines instead of failing")
    parser.add_argument("--rejected-output", default="", metavar="PATH", help="where --skip-invalid writes bad lines")
    return parser


def _progress(args: argparse.Namespace, input_path: Path, unit: str, total: int) -> tqdm:
    large = input_path.stat().st_size >= PROGRESS_MIN_BYTES
    return tqdm(total=total, unit=unit, unit_scale=True, file=sys.stderr, disable=args.quiet or not large)


def _given(**settings: Any) -> dict[str, Any]:
    """The settings the command line set (the others keep the library's defaults)."""
    return {name: value for name, value in settings.items() if value is not None}


def _summary_settings(args: argparse.Namespace) -> dict[str, Any]:
    return _given(pass_threshold=args.pass_threshold, top_k=args.top_k)


def _score_by_record(
    args: argparse.Namespace, input_path: Path, stack: WeightedRewardStack, rejected: list[RejectedLine]
) -> dict[str, Any]:
    with _progress(args, input_path, "B", input_path.stat().st_size) as bar:
        records = list(
            iter_replay_records(
                input_path, skip_invalid=args.skip_invalid, on_reject=rejected.append, progress=bar.update
            )
        )
    summary = evaluate_records(records, stack, **_summary_settings(args))
    if args.metrics:
        values = [dataset_metric(context_from_record(record)) for record in records]
        for result, value in zip(summary["results"], values, strict=True):
            result["metrics"] = {} if value is None else {value.name: value.value}
        summary["metrics"] = summarize_metrics(values)
    return summary


def _score_by_columns(
    args: argparse.Namespace, input_path: Path, stack: WeightedRewardStack, rejected: list[RejectedLine]
) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aerorl_ops.replay.reader import read_replay
    from aerorl_ops.rewards.columnar import evaluate_table
    from aerorl_ops.rewards.columnar.columns import ReplayColumns

    with _progress(args, input_path, "step", 3) as bar:
        bar.set_description("reading")
        table = read_replay(input_path, skip_invalid=args.skip_invalid, on_reject=rejected.append)
        bar.update()
        bar.set_description("scoring")
        summary = evaluate_table(table, stack, **_summary_settings(args))
        results = summary.pop("results")
        if not isinstance(results, pa.Table):
            results = pa.table({"id": pa.array([], pa.string()), "total": pa.array([], pa.float64())})
        if args.metrics:
            values = [dataset_metric(context) for context in ReplayColumns(table).contexts()] if table.num_rows else []
            for name in METRIC_NAMES:
                column = [None if value is None or value.name != name else value.value for value in values]
                results = results.append_column(name, pa.array(column, pa.float64()))
            summary["metrics"] = summarize_metrics(values)
        bar.update()
        bar.set_description("writing")
        pq.write_table(results, args.results_parquet)
        bar.update()
    summary["results_parquet"] = args.results_parquet
    return summary


def _write_rejected(path: Path, rejected: list[RejectedLine]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for line in rejected:
            handle.write(json.dumps({"line": line.line_number, "reason": line.reason, "text": line.text}) + "\n")


def _print_brief(summary: dict[str, Any]) -> None:
    print("\n=== Reward Summary ===")
    print(f"count: {summary['count']}")
    print(f"average_reward: {summary['average_reward']}")
    print(f"pass_rate: {summary['pass_rate']} (threshold={summary['pass_threshold']})")
    print("component_averages:")
    for name, value in summary["component_averages"].items():
        print(f"  - {name}: {value}")
    if summary.get("rejected_count"):
        print(f"rejected_count: {summary['rejected_count']}")
    for name, metric in summary.get("metrics", {}).items():
        print(f"{name}: {metric['mean']} over {metric['count']} records")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        weights = parse_weights(args.weight)
        if args.regex_pattern:
            re.compile(args.regex_pattern)
    except (ValueError, re.error) as error:
        parser.print_usage(sys.stderr)
        message = f"--regex-pattern: {error}" if isinstance(error, re.error) else str(error)
        print(f"aerorl replay: error: {message}", file=sys.stderr)
        return 2
    stack = build_reward_stack(
        weights=weights,
        require_json=args.require_json,
        regex_pattern=args.regex_pattern or None,
        **_given(target_tokens=args.target_tokens, latency_budget_ms=args.latency_budget_ms),
    )
    input_path = Path(args.input)
    if not input_path.is_file():
        print(f"aerorl replay: error: {input_path}: no such file", file=sys.stderr)
        return 1
    rejected: list[RejectedLine] = []
    score = _score_by_columns if args.results_parquet else _score_by_record
    try:
        summary = score(args, input_path, stack, rejected)
    except ReplayFormatError as error:
        print(f"aerorl replay: error: {error} (rerun with --skip-invalid to score the other lines)", file=sys.stderr)
        return 1
    summary["rejected_count"] = len(rejected)
    if args.skip_invalid:
        default_side = f"{args.output or args.input}.rejected.jsonl"
        _write_rejected(Path(args.rejected_output or default_side), rejected)
    rendered = json.dumps(summary, indent=2)
    if args.output:
        Path(args.output).write_text(rendered + "\n", encoding="utf-8")
    if not args.quiet:
        _print_brief(summary)
    print(rendered)
    return 0

