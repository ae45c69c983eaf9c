"""A command's failure as one line and an exit code, whether it was raised here or inside a Dagster step.

The cause is what the project or a library raised, under the error a Dagster step wraps it in: a
user's input (``ConfigError`` and kin: exit 2, the message as it is), a stop asked for by a signal
(``aerorl_ops.stop.StopRequested``: 128 + the signal), or a fault (exit 1, its type and message; a
full disk reads ``no space left on <path>``). The traceback is kept for ``--debug`` and
in the run's Dagster log.

>>> one_line("OSError", "[Errno 28] No space left on device: '/data/cache/rows.parquet'")
'no space left on /data/cache/rows.parquet'
>>> one_line("ValueError", "ValueError: bad\\n  shape"), one_line("Boom", "pkg.mod.Boom: it broke")
('ValueError: bad shape', 'Boom: it broke')
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aerorl_ops.stop import StopRequested, stop_requested
from aerorl_pipeline.settings_flags import input_error_in, input_error_types

if TYPE_CHECKING:
    import dagster as dg

INPUT_ERROR = 2
FAULT = 1
NO_SPACE = re.compile(r"No space left on device(?:: '?([^']+)'?)?")


@dataclass(frozen=True)
class CommandFailure:
    """What a command prints (``message``, one line) and exits with; ``detail``: the traceback."""

    message: str
    exit_code: int
    detail: str


class CommandFailed(Exception):
    """Raised by a command whose job failed: ``main`` prints ``failure`` and exits with its code."""

    def __init__(self, failure: CommandFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def one_line(cls_name: str, message: str) -> str:
    """A fault's message on one line, its type in front (a full disk names the path instead)."""
    text = _without_type(cls_name, message)
    space = NO_SPACE.search(text)
    if space:
        return f"no space left on {space.group(1) or 'the device'}"
    return f"{cls_name}: {text}"


def failure_from_error(error: BaseException) -> CommandFailure:
    """The failure of a command that raised ``error``."""
    if isinstance(error, CommandFailed):
        return error.failure
    detail = "".join(traceback.format_exception(error))
    problem = input_error_in(error)
    if problem is not None:
        return CommandFailure(" ".join(str(problem).split()), INPUT_ERROR, detail)
    root = _root(error)
    if isinstance(root, StopRequested):
        return CommandFailure(str(root), root.exit_code, detail)
    return CommandFailure(one_line(type(root).__name__, str(root)), FAULT, detail)


def failure_from_results(results: Sequence[dg.ExecuteInProcessResult]) -> CommandFailure | None:
    """The failure of the first failed step among ``results`` (jobs run with ``raise_on_error=False``),
    else None."""
    for result in results:
        for event in result.get_step_failure_events():
            error = event.step_failure_data.error
            if error is not None:
                return _failure_from_info(error)
    return None


def _failure_from_info(info: dg.SerializableErrorInfo) -> CommandFailure:
    chain = [info]
    while chain[-1].cause is not None:
        chain.append(chain[-1].cause)
    detail = info.to_string()
    inputs = _input_error_names()
    for link in chain:  # the step error wraps what the asset raised
        if link.cls_name in inputs:
            return CommandFailure(_message(link), INPUT_ERROR, detail)
        if link.cls_name == StopRequested.__name__:
            return CommandFailure(_message(link), 128 + (stop_requested() or 2), detail)
    cause = next((link for link in chain if not (link.cls_name or "").startswith("Dagster")), chain[-1])
    return CommandFailure(one_line(cause.cls_name or "Error", cause.message), FAULT, detail)


def _message(info: dg.SerializableErrorInfo) -> str:
    return _without_type(info.cls_name or "", info.message)


def _without_type(cls_name: str, message: str) -> str:
    """``message`` on one line, less the ``[module.]ClassName: `` a traceback puts before it."""
    text = " ".join(message.strip().split())
    head, found, rest = text.partition(f"{cls_name}: ")
    return rest if found and (not head or head.endswith(".")) and " " not in head else text


def _input_error_names() -> set[str]:
    kinds, names = list(input_error_types()), set()
    while kinds:
        kind = kinds.pop()
        names.add(kind.__name__)
        kinds += kind.__subclasses__()
    return names


def _root(error: BaseException) -> BaseException:
    """What the project or a library raised: the first error of the chain that is not Dagster's wrapper
    (an error raised ``from`` another names more than its cause)."""
    seen: set[int] = set()
    while id(error) not in seen and type(error).__module__.startswith("dagster"):
        seen.add(id(error))
        cause = error.__cause__ or error.__context__
        if cause is None:
            break
        error = cause
    return error
