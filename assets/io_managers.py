"""Arrow tables between assets, cached as Parquet files under a configured folder or object-store URL."""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]")
_LOCAL_PROTOCOLS = ("", "file", "local")


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

    ``base_dir`` is a local folder or an fsspec URL (``file://…``, ``s3://bucket/prefix``,
    ``gs://…``); ``storage_options`` go to that URL's filesystem (for S3-compatible servers, e.g.
    ``{"endpoint_url": "http://minio:9000", "key": "…", "secret": "…"}``; without them s3fs uses
    the usual AWS credential chain).

    Partition keys become file names with every character outside ``[A-Za-z0-9_.=-]``
    replaced, so no key can address a path outside ``base_dir``; a key that had to change
    gets a hash of the original, so two keys never share a file. Writes are atomic, so a
    crashed step never leaves a half-written cache: on a local folder a temporary file
    ``<name>.<pid>.tmp`` is renamed over the target (a failed write removes its temporary file;
    one left by a killed process is removed, with a warning, when the same file is next written,
    once no process has that pid on this machine); on an object store,
    which has no rename, the whole Parquet file is serialized in memory first and uploaded as
    one object, which the store makes visible only once complete.
    """

    base_dir: str
    storage_options: dict[str, Any] = {}

    def _base(self) -> UPath:
        base = UPath(self.base_dir)
        if base.protocol in _LOCAL_PROTOCOLS:
            return UPath(base.path).resolve()  # a plain local path (a pathlib.Path), symlinks resolved
        return UPath(self.base_dir, **self.storage_options)

    def _path(self, asset_key: dg.AssetKey, partition_key: str | None) -> UPath:
        base = self._base()
        name = _safe_name(partition_key.split("|")) if partition_key else "all"
        path = base / _safe_name(asset_key.path) / f"{name}.parquet"
        if isinstance(path, Path):
            path = path.resolve()
        if base not in path.parents:
            raise ValueError(f"refusing to write {path} outside {base}")
        return path

    def handle_output(self, context: dg.OutputContext, obj: pa.Table) -> None:
        if not isinstance(obj, pa.Table):
            raise TypeError(f"{context.asset_key.to_user_string()} returned {type(obj).__name__}, "
                            "expected a pyarrow.Table")
        path = self._path(context.asset_key, context.partition_key if context.has_partition_key else None)
        if isinstance(path, Path):
            for leftover, pid in remove_dead_leftovers(path):
                context.log.warning(f"removed {leftover}: a temporary file left by process {pid}, which is gone")
            _write_local(obj, path)
        else:
            _write_object(obj, path)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pa.Table:
        partition_key = context.asset_partition_key if context.has_asset_partitions else None
        table = self.stored_table(context.asset_key, partition_key)
        if table is None:
            path = self._path(context.asset_key, partition_key)
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()} (partition {partition_key or '-'}) has not been materialized: "
                f"{path} is missing. Materialize it first (e.g. `aerorl bench`)."
            )
        return table

    def stored_table(self, asset_key: dg.AssetKey, partition_key: str | None = None) -> pa.Table | None:
        """The table stored for ``asset_key`` (``partition_key``), schema metadata included; None when there is
        none. An asset that reads another one only when it needs it (``assets.run_rows``) reads it here."""
        path = self._path(asset_key, partition_key)
        if not path.exists():
            return None
        with path.open("rb") as handle:
            return pq.read_table(handle)


def _temporary(path: Path, pid: int) -> Path:
    """Where process ``pid`` writes ``path`` before renaming it: ``<name>.<pid>.tmp`` beside it."""
    return path.with_suffix(f".{pid}.tmp")


def remove_dead_leftovers(path: Path) -> list[tuple[Path, int]]:
    """Remove the temporary files of ``path`` whose writer is gone (no process ``pid`` on this machine);
    each one removed with its pid. A live process's (another writer's) are left alone."""
    pattern = re.compile(re.escape(path.stem) + r"\.(\d+)\.tmp")
    removed = []
    for candidate in path.parent.glob(f"{glob.escape(path.stem)}.*.tmp"):
        match = pattern.fullmatch(candidate.name)
        if match is None or psutil.pid_exists(pid := int(match.group(1))):
            continue
        candidate.unlink(missing_ok=True)
        removed.append((candidate, pid))
    return removed


def _write_local(table: pa.Table, path: Path) -> None:
    """Temporary file next to ``path``, then an atomic rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary(path, os.getpid())
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    except OSError as error:  # pyarrow's message names no file: a full disk is named by the file it stopped
        if error.errno == errno.ENOSPC:
            raise OSError(errno.ENOSPC, "No space left on device", str(path)) from error
        raise
    finally:
        temporary.unlink(missing_ok=True)


def _write_object(table: pa.Table, path: UPath) -> None:
    """Serialize in memory, then upload once: a failed serialization uploads nothing, and the
    store never shows a partly written object."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    try:
        path.fs.pipe_file(path.path, buffer.getvalue().to_pybytes())
    except Exception as error:  # botocore / gcsfs errors name the endpoint, not the configured URL
        raise OSError(f"could not upload {path}: {error}. Check base_dir, its bucket and storage_options "
                      "(endpoint_url, credentials), and that the store is reachable.") from error
