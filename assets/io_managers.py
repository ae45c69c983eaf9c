"""Arrow tables between assets, cached as Parquet files under a configured folder."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]")


def _safe_part(part: str) -> str:
    cleaned = _UNSAFE.sub("_", part)
    if cleaned in ("", ".", ".."):
        raise ValueError(f"unsafe path component {part!r}")
    return cleaned


def _safe_name(parts: Sequence[str]) -> str:
    """``parts`` joined by ``__`` as one file name; when that is lossy (a character was replaced, or
    a part holds ``_`` where it would blur the join), a hash of the original parts is appended, so
    two different keys never share a file."""
    name = "__".join(_safe_part(part) for part in parts)
    if name.split("__") != list(parts):
        name += "-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
    return name


class ParquetTableIOManager(dg.ConfigurableIOManager):
    """Stores each asset (partition) as ``<base_dir>/<asset>/<partition>.parquet``.

    Partition keys become file names with every character outside ``[A-Za-z0-9_.=-]``
    replaced, so no key can address a path outside ``base_dir``; a key that had to change
    gets a hash of the original, so two keys never share a file. Writes are atomic
    (temporary file, then rename; a failed write removes its temporary file), so a crashed
    step never leaves a half-written cache.
    """

    base_dir: str

    def _path(self, asset_key: dg.AssetKey, partition_key: str | None) -> Path:
        base = Path(self.base_dir).resolve()
        name = _safe_name(partition_key.split("|")) if partition_key else "all"
        path = (base / _safe_name(asset_key.path) / f"{name}.parquet").resolve()
        if base not in path.parents:
            raise ValueError(f"refusing to write {path} outside {base}")
        return path

    def handle_output(self, context: dg.OutputContext, obj: pa.Table) -> None:
        if not isinstance(obj, pa.Table):
            raise TypeError(f"{context.asset_key.to_user_string()} returned {type(obj).__name__}, "
                            "expected a pyarrow.Table")
        path = self._path(context.asset_key, context.partition_key if context.has_partition_key else None)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            pq.write_table(obj, temporary)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pa.Table:
        partition_key = context.asset_partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition_key)
        if not path.exists():
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()} (partition {partition_key or '-'}) has not been materialized: "
                f"{path} is missing. Materialize it first (e.g. `aerorl bench`)."
            )
        return pq.read_table(path)
