"""Has a training run finished? Read from the report database before anything else of the run starts.

A finished run is left as it is when its command is run again (``rl.run.train_and_record``); the command asks
here first, so that it says so at once instead of loading a model and starting a job.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb

from aerorl_ops.storage.database_check import IN_USE
from aerorl_ops.storage.training_schema import TRAINING_RUNS


def finished_at(database: Path, run_id: str, steps: int) -> datetime | None:
    """When run ``run_id`` finished, trained for ``steps`` steps in all; None when it has not (or there is no
    database or no such table yet, or another process holds it open for writing: a run it trains has not).

    >>> finished_at(Path("/no/such/aerorl.duckdb"), "r", 8) is None
    True
    """
    if not Path(database).is_file():
        return None
    try:
        with duckdb.connect(str(database), read_only=True) as conn:
            row = conn.execute(f'SELECT finished_at FROM "{TRAINING_RUNS.name}" WHERE run_id = ? AND steps = ? '
                               "AND finished_at IS NOT NULL", [run_id, steps]).fetchone()
    except duckdb.CatalogException:  # no run was ever recorded in this database
        return None
    except duckdb.Error as error:  # another process is writing it: not known here (the run's lock decides)
        if any(sign in str(error) for sign in IN_USE):
            return None
        raise
    return None if row is None else row[0]
