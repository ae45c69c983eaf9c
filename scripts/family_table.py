"""The table of docs/models.md, generated from the family tests' results: one row per tiny family
(``aerorl_ops.models.tiny_families.FAMILIES``), one column per thing the tests check.

Run the family tests with a JUnit report (or several runs, a report each), then write the table between the
markers of docs/models.md:

    .venv/bin/python -m pytest -q --junitxml=reports/family-tests.xml \
        $(.venv/bin/python scripts/family_table.py --tests)
    .venv/bin/python scripts/family_table.py reports/family-tests.xml --write docs/models.md

A cell is ✓ when every test of its column passed for the family, ✗ when one failed, ✗ᵗ when one failed as
expected (a transformers bug the test names: ``tests/aerorl_ops/models/family_params.py``), – when its tests
were skipped (a package the family needs is missing) and blank when none ran. The vLLM column is the
families the vLLM tests check (``tiny_families.VLLM_CHECKED``, ``make test-vllm``): they run in another venv.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aerorl_ops.models.tiny_families import FAMILIES, VLLM_CHECKED  # noqa: E402

BEGIN, END = "<!-- family-table: begin (scripts/family_table.py) -->", "<!-- family-table: end -->"
TRAINING = "tests/aerorl_ops/rl/run/test_family_training.py"


@dataclass(frozen=True)
class Column:
    """A column of the table: the tests (``file::function`` prefixes, optionally with a parameter prefix after
    ``[``) whose results for a family make its cell."""

    title: str
    tests: tuple[str, ...]


COLUMNS = (
    Column("load", ("tests/aerorl_ops/models/test_tiny_families.py::test_each_family_loads",)),
    Column("vision tokens", ("tests/aerorl_ops/models/test_vision_trace.py::test_each_family",
                             f"{TRAINING}::test_the_training_mask_counts")),
    Column("vision parts", (f"{TRAINING}::test_each_family_s_encoder_and_projector",)),
    Column("generate", ("tests/aerorl_ops/generation/test_family_generation.py::test_",
                        "tests/aerorl_ops/models/test_tiny_families.py::test_each_familys_image_reaches")),
    Column("partition", ("tests/assets/benchmark/test_family_partitions.py::test_",)),
    Column("eval", ("tests/aerorl_pipeline/test_family_eval.py::test_",)),
    Column("training", (f"{TRAINING}::test_the_trainer_scores_replies",
                        f"{TRAINING}::test_a_two_plus_two_step_run[plain",
                        f"{TRAINING}::test_an_rl_step_of_every_algorithm", f"{TRAINING}::test_the_supervised_target")),
    Column("causal", (f"{TRAINING}::test_an_earlier_token_never_sees_a_later_one",)),
    Column("frozen tower + LoRA", (f"{TRAINING}::test_a_frozen_encoder",
                                   f"{TRAINING}::test_a_two_plus_two_step_run[frozen")),
)
MARKS = {"passed": "✓", "failed": "✗", "xfailed": "✗ᵗ", "skipped": "–"}
WORST_FIRST = ("failed", "xfailed", "skipped", "passed")


@dataclass(frozen=True)
class Result:
    """One test case of the report: ``file::function[parameters]`` and its outcome."""

    test: str
    outcome: str  # passed, failed, xfailed, skipped


def read_report(path: Path) -> list[Result]:
    """The test cases of a pytest JUnit report."""
    results = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        results.append(Result(f"{file}::{case.get('name', '')}", _outcome(case)))
    return results


def _outcome(case: ElementTree.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def family_of(test: str, families: Iterable[str]) -> str | None:
    """The family whose name is one of ``test``'s parameters (the longest that matches).

    >>> family_of("t.py::test_run[plain-llava-next]", ["llava", "llava-next"]), family_of("t.py::test_x", ["a"])
    ('llava-next', None)
    """
    if "[" not in test:
        return None
    ids = test[test.index("[") + 1:].rstrip("]")
    found = [name for name in families if f"-{ids}-".find(f"-{name}-") >= 0]
    return max(found, key=len) if found else None


def cell(results: Sequence[Result]) -> str:
    """The cell of a family's results in one column: its worst outcome's mark, blank when none ran.

    >>> cell([Result("a", "passed"), Result("b", "xfailed")]), cell([])
    ('✗ᵗ', '')
    """
    outcomes = {result.outcome for result in results}
    return next((MARKS[outcome] for outcome in WORST_FIRST if outcome in outcomes), "")


def table(results: Sequence[Result], families: Sequence[str] = tuple(FAMILIES)) -> str:
    """The markdown table: a row per family, a column per :data:`COLUMNS` and the vLLM column."""
    by_family: dict[str, list[Result]] = {name: [] for name in families}
    for result in results:
        name = family_of(result.test, families)
        if name is not None:
            by_family[name].append(result)
    lines = ["| family | transformers `model_type` | " + " | ".join(c.title for c in COLUMNS) + " | vLLM |",
             "| --- | --- |" + " --- |" * (len(COLUMNS) + 1)]
    for name in families:
        cells = [cell([r for r in by_family[name] if r.test.startswith(c.tests)]) for c in COLUMNS]
        vllm = "✓" if name in VLLM_CHECKED else ""
        lines.append(f"| `{name}` | `{FAMILIES[name].model_type}` | " + " | ".join(cells) + f" | {vllm} |")
    return "\n".join(lines)


def write(doc: Path, generated: str) -> None:
    """Replace the table between the markers of ``doc`` with ``generated``."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no {BEGIN!r} ... {END!r} markers to write the table between")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{generated}\n{END}{tail}")


def test_files() -> list[str]:
    """The test files the columns read (what to run for the report)."""
    return sorted({test.split("::")[0] for column in COLUMNS for test in column.tests})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path,
                        help="the pytest JUnit reports (--junitxml) of the family tests")
    parser.add_argument("--write", type=Path, help="the markdown file whose marked table to replace")
    parser.add_argument("--tests", action="store_true", help="print the test files to run, and exit")
    args = parser.parse_args(argv)
    if args.tests:
        print(" ".join(test_files()))
        return 0
    if not args.reports:
        parser.error("a report is needed (or --tests)")
    generated = table([result for report in args.reports for result in read_report(report)])
    if args.write:
        write(args.write, generated)
    else:
        print(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
