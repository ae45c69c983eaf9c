"""What a training rank or node that failed leaves behind, and the one line that names it.

A rank that fails writes a record ``{"rank", "node", "time", "error"}`` (``torchrun_worker``): into a
folder as ``rank-<r>.json`` on this machine, or as a line of its pod's termination log on Kubernetes.
A torchrun agent (a node) that exits with an error before any of its ranks wrote one is recorded as
``{"node", "time", "error"}`` by whatever launched it. The root cause is the earliest rank record
(the ranks that fail because a peer left fail later); a node's record only where no rank wrote one.

>>> failure_line({"rank": 1, "node": 1, "error": "RuntimeError: boom"}, world_size=2, nnodes=2)
'training rank 1 of 2 (node 1 of 2) failed: RuntimeError: boom'
>>> failure_line({"rank": 1, "node": 0, "error": "RuntimeError: boom"}, world_size=2, nnodes=1)
'training rank 1 of 2 failed: RuntimeError: boom'
>>> failure_line({"node": 2, "error": "its torchrun agent exited with code 1"}, world_size=6, nnodes=3)
'training node 2 of 3 failed: its torchrun agent exited with code 1'
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LOGGED_ERROR_CHARS = 400
"""A termination log holds 4096 bytes for every rank of its pod: each rank's error is cut to this."""


def failure_path(folder: Path, rank: int) -> Path:
    return Path(folder) / f"rank-{rank}.json"


def record_failure(extras: dict[str, Any], error: Exception) -> None:
    """This rank's ``error``, its global rank and its node (torchrun's ``RANK`` and ``GROUP_RANK``), into
    the failures folder (``extras["failures"]``, with the traceback) and appended as one line to the
    termination log (``extras["failure_log"]``), where they are set. Call it where ``error`` was caught."""
    record = {"rank": int(os.environ.get("RANK", "0")), "node": int(os.environ.get("GROUP_RANK", "0")),
              "time": time.time(), "error": f"{type(error).__name__}: {error}"}
    if extras.get("failures"):
        failure_path(Path(extras["failures"]), record["rank"]).write_text(json.dumps(
            {**record, "traceback": traceback.format_exc()}))
    if extras.get("failure_log"):
        with open(extras["failure_log"], "a", encoding="utf-8") as log:
            log.write(json.dumps({**record, "error": record["error"][:LOGGED_ERROR_CHARS]}) + "\n")


def root_cause(records: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The earliest rank record of ``records``, else the earliest node record, else None."""
    records = list(records)
    ranks = [record for record in records if "rank" in record]
    candidates = ranks or records
    return min(candidates, key=lambda record: record["time"]) if candidates else None


def first_failure(folder: Path) -> dict[str, Any] | None:
    """The root cause among the records written into ``folder`` (``rank-*.json``, ``node-*.json``), or None."""
    return root_cause(json.loads(path.read_text()) for path in sorted(Path(folder).glob("*.json")))


def failure_line(failure: dict[str, Any], world_size: int, nnodes: int) -> str:
    """One line naming the rank (and its node, with several) or the node that failed, and its error."""
    if "rank" in failure:
        where = f"rank {failure['rank']} of {world_size}"
        if nnodes > 1:
            where += f" (node {failure['node']} of {nnodes})"
    else:
        where = f"node {failure['node']} of {nnodes}"
    return f"training {where} failed: {failure['error']}"
