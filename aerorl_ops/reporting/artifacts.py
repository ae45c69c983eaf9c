"""Dated JSON artifacts of a benchmark partition: ``<reports_dir>/<YYYY-MM-DD>/<run>__<model>__bs<N>.json``.

The payload follows AeroRL's ``reports/benchmark-*.json``: the summary row, the manual
baseline, the reward stack's pass rate, average reward and component averages, and the false
passes the stack caught. Run ids can come from users, so every path component is sanitized:
only ``[A-Za-z0-9_.-]``, no ``..``, no leading dot; a component that had to change gets a hash
of the original, so two different run ids never share a file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path

from aerorl_ops.config.rewards import REWARD_COMPONENT_NAMES

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_DOTS = re.compile(r"\.{2,}")
MAX_COMPONENT_CHARS = 80


def safe_path_component(value: str) -> str:
    """``value`` as one safe file-name component.

    >>> safe_path_component("nightly-2026-03-04")
    'nightly-2026-03-04'
    >>> safe_path_component("../../etc/passwd")
    '____etc_passwd-3754d6cb'
    """
    if not value:
        raise ValueError("a path component must not be empty (got an empty run id, model key or date)")
    cleaned = _DOTS.sub("_", _UNSAFE.sub("_", value)).lstrip(".")
    if cleaned != value or len(cleaned) > MAX_COMPONENT_CHARS:
        digest = hashlib.sha256(value.encode()).hexdigest()[:8]
        cleaned = f"{cleaned[:MAX_COMPONENT_CHARS]}-{digest}"
    return cleaned


def artifact_path(reports_dir: Path, day: date, run_id: str, model_key: str, batch_size: int) -> Path:
    """Where a partition's artifact goes; always inside ``reports_dir``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    name = f"{safe_path_component(run_id)}__{safe_path_component(model_key)}__bs{batch_size}.json"
    base = Path(reports_dir).resolve()
    path = (base / day.isoformat() / name).resolve()
    if base not in path.parents:
        raise ValueError(f"refusing to write artifact {path} outside {base}")
    return path


def _json_safe(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def benchmark_artifact(run_id: str, model_key: str, batch_size: int, summary: Mapping[str, object],
                       reward_config: Mapping[str, object] | None = None,
                       datasets: Sequence[Mapping[str, object]] = ()) -> dict[str, object]:
    """The artifact payload of one partition from its summary over every row (``summary``) and its
    ``benchmark_summary`` rows, one per dataset (``datasets``).

    ``reward_config`` is the reward settings the scores were computed with (weights, threshold).
    """
    samples = summary.get("samples") or 0
    manual_rate = summary.get("manual_pass_rate")
    manual_passes = round(manual_rate * samples) if manual_rate is not None else None
    false_passes = summary.get("manual_false_passes")
    config = dict(reward_config or {})
    return _json_safe({
        "run_id": run_id,
        "model_key": model_key,
        "batch_size": batch_size,
        "summary": dict(summary),
        "datasets": {str(row["dataset"]): {name: row.get(name)
                                           for name in ("samples", "accuracy", "pass_rate", "average_reward")}
                     for row in datasets},
        "manual_baseline": {"method": "manual_contains_reference", "pass_rate": manual_rate},
        "aerorl_stack": {
            "pass_rate": summary.get("pass_rate"),
            "average_reward": summary.get("average_reward"),
            "component_averages": {name: summary.get(f"{name}_avg") for name in REWARD_COMPONENT_NAMES},
            "weights": config.get("weights"),
            "pass_threshold": config.get("pass_threshold"),
        },
        "standard_metrics": {name: summary.get(name)
                             for name in ("anls_avg", "relaxed_accuracy_avg", "verifier_metric_agreement")},
        "improvement": {
            "manual_false_passes_caught_count": false_passes,
            "manual_false_pass_rate_among_manual_passes":
                false_passes / manual_passes if false_passes is not None and manual_passes else None,
        },
    })


def write_benchmark_artifact(reports_dir: Path, day: date, payload: Mapping[str, object]) -> Path:
    """Write ``payload`` (from :func:`benchmark_artifact`) atomically; rewriting replaces the file."""
    path = artifact_path(reports_dir, day, str(payload["run_id"]), str(payload["model_key"]),
                         int(payload["batch_size"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    os.replace(temporary, path)
    return path
