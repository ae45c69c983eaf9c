"""The fuzzing property (issue 38, item 5): what one fuzzed config or rows case gives, judged.

A case is run in-process through what ``aerorl bench`` calls on it, with model loading refused
(``model_loads.refuse_model_loads``):

* a config file: ``assets.project.load_config`` (the file's settings, then its datasets against the
  environment kinds), then, when it is accepted, the command line's parser built on it and ``plan_bench``;
* a rows file: the rows asset's steps, ``dataset_fingerprint`` then ``dataset_rows``, the accepted rows as
  the Parquet table the asset caches (``items_to_table``) and every rejection as a ``rejected_rows`` table.

The verdict is ``accepted`` (rows: processed rows and rejections), ``rejected`` (one of the project's input
errors, ``input_error_types``: what the command prints in one line and exits 2 with) or ``failure``: any
other exception, an input error whose message has more than :data:`MAX_LINES` lines or does not name the
input (the config file, the rows file), a rejection without a one-line reason, records unaccounted for
(accepted + rejected != records read), a row holding the image outside the dataset folder, a warning (the
command would print it on stderr), or a case still running after :data:`CASE_TIMEOUT_S` (a hang).
"""

from __future__ import annotations

import io
import signal
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from fuzz_configs import ConfigCase, write_config_case
from fuzz_rows import RowsCase, outside_image, write_rows_case

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.envs.configured import dataset_fingerprint, dataset_rows
from aerorl_ops.envs.rejections import NoUsableRowsError
from aerorl_ops.models.checkpoint_refs import CheckpointRef
from aerorl_ops.rows import LoadResult, items_to_table
from aerorl_ops.storage.duckdb_store import rejected_rows_table
from aerorl_pipeline.settings_flags import input_error_types

ACCEPTED, REJECTED, FAILURE = "accepted", "rejected", "failure"
MAX_LINES = 3
CASE_TIMEOUT_S = 30.0
PROJECT_PACKAGES = ("aerorl_ops", "assets", "aerorl_pipeline")


@dataclass(frozen=True)
class Outcome:
    """What one case gave: its verdict, the message (rejected) or what went wrong (failure), the message's
    lines, the bug's ``signature`` (failure: what went wrong and where), and for rows the counts."""

    verdict: str
    detail: str = ""
    lines: int = 0
    signature: str = ""
    items: int = 0
    rejected: int = 0


class CaseTimeout(BaseException):
    """A case ran past its time (a BaseException, so no ``except Exception`` in the code under test hides it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the main thread after ``seconds``."""
    def expire(signum, frame):
        raise CaseTimeout(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def origin(error: BaseException) -> str:
    """Where ``error`` was raised: the innermost frame in this project's packages (else the innermost)."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [frame for frame in frames if any(f"/{package}/" in frame.filename for package in PROJECT_PACKAGES)]
    frame = (ours or frames or [None])[-1]
    return "?" if frame is None else f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}"


def failure(what: str, detail: str) -> Outcome:
    return Outcome(FAILURE, detail, signature=what)


def crashed(error: BaseException) -> Outcome:
    kind = "hang" if isinstance(error, CaseTimeout) else type(error).__name__
    return failure(f"{kind} at {origin(error)}", f"{type(error).__name__}: {str(error)[:500]}")


def judged_message(error: Exception, names: Sequence[str]) -> Outcome:
    """An input error's outcome: rejected when its message has at most :data:`MAX_LINES` lines and names the
    input (one of ``names``), else a failure saying which."""
    message = str(error)
    lines = len(message.splitlines()) or 1
    if lines > MAX_LINES:
        return failure(f"{type(error).__name__} of {lines} lines at {origin(error)}", message[:500])
    if not any(name in message for name in names):
        return failure(f"{type(error).__name__} not naming the input at {origin(error)}", message[:500])
    return Outcome(REJECTED, message, lines)


def run_case(work: Callable[[Path], Outcome]) -> Outcome:
    """``work`` in a fresh folder, under :func:`time_limit`; any exception it lets out is a failure, and so is a
    warning (the command would print it, its source line too, beside or instead of its one line)."""
    with tempfile.TemporaryDirectory(prefix="aerorl-fuzz-") as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit(CASE_TIMEOUT_S):
                outcome = work(Path(folder))
        except (Exception, CaseTimeout) as error:
            return crashed(error)
    if caught:
        first = caught[0]
        return failure(f"{first.category.__name__} at {Path(first.filename).parent.name}/{Path(first.filename).name}:"
                       f"{first.lineno}", f"{first.category.__name__}: {first.message}")
    return outcome


# --- config files ---------------------------------------------------------------------------------------

def config_outcome(case: ConfigCase) -> Outcome:
    """What ``aerorl bench --config <case>`` checks before it starts anything, judged."""
    return run_case(lambda folder: _config_outcome(write_config_case(case, folder)))


def _config_outcome(path: Path) -> Outcome:
    from aerorl_pipeline.bench import plan_bench
    from aerorl_pipeline.cli import build_parser
    from assets.project import load_config

    try:
        config = load_config(path)
    except input_error_types() as error:
        return judged_message(error, [str(path)])
    try:
        build_parser(config)
        plan_bench(config=config)  # checks each model's folder or checkpoint: an error names it
    except input_error_types() as error:
        return judged_message(error, [str(path), *model_names(config)])
    return Outcome(ACCEPTED)


def model_names(config: BenchmarkConfig) -> list[str]:
    """How an error may name a model of ``config``: its source, or the checkpoint reference it spells."""
    refs = [CheckpointRef.parse(model.source) for model in config.models]
    return [*(model.source for model in config.models), *(str(ref) for ref in refs if ref is not None)]


# --- rows files -----------------------------------------------------------------------------------------

def rows_outcome(case: RowsCase) -> Outcome:
    """What a ``[datasets.fuzzed]`` rows asset does with ``case``, judged."""
    return run_case(lambda root: _rows_outcome(case, root))


def _stored(result: LoadResult, dataset: str) -> None:
    """``result`` as the rows asset stores it: the rows' Parquet table, the rejections' DuckDB rows."""
    pq.write_table(items_to_table(result.items), io.BytesIO())
    rejected_rows_table("fuzz-run", f"{dataset}_rows", dataset, result.rejected)


def _rows_outcome(case: RowsCase, root: Path) -> Outcome:
    dataset = write_rows_case(case, root)
    try:
        dataset_fingerprint(dataset)
        result = dataset_rows(dataset)
    except NoUsableRowsError as error:  # every record rejected (the asset records them, then fails)
        _stored(LoadResult(rejected=error.rejected), dataset.name)
        outcome = judged_message(error, [dataset.path])
        result = LoadResult(rejected=error.rejected)
    except input_error_types() as error:  # the file as a whole: unreadable, a column missing
        return judged_message(error, [dataset.path])
    else:
        _stored(result, dataset.name)
        outcome = Outcome(ACCEPTED)
    return _accounted(case, root, result, outcome)


def _accounted(case: RowsCase, root: Path, result: LoadResult, outcome: Outcome) -> Outcome:
    """``outcome`` with the counts, when every record is a row or a rejection with a one-line reason and no
    row holds the image outside the dataset folder; else the failure saying what is wrong."""
    if outcome.verdict == FAILURE:
        return outcome
    if case.expected_records is not None and result.records_read != case.expected_records:
        return failure("records unaccounted for", f"{len(result.items)} rows + {len(result.rejected)} rejections "
                       f"for {case.expected_records} records")
    unclear = [row for row in result.rejected if not row.reason.strip() or len(row.reason.splitlines()) > 1]
    if unclear:
        return failure("a rejection without a one-line reason", repr(unclear[0])[:500])
    secret = outside_image(root)
    if any(secret in item.images for item in result.items):
        return failure("a row read the image outside the dataset folder", repr(result.items[0].images)[:200])
    return Outcome(outcome.verdict, outcome.detail, outcome.lines, items=len(result.items),
                   rejected=len(result.rejected))
