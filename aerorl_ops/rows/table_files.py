"""Read record batches from a Parquet file or an Arrow IPC file/stream, chosen by its first bytes.

Hugging Face ``datasets`` writes its cache as Arrow *stream* files named ``*.arrow``;
``pyarrow.ipc.new_file`` writes the Arrow *file* format (``ARROW1`` magic); hub shards are
Parquet (``PAR1`` magic). The extension is not trusted: the format is sniffed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from aerorl_ops.error_line import error_line


class TableFileError(ValueError):
    """A data file cannot be read as the table a loader expects."""


class MissingColumnError(TableFileError):
    """A data file lacks a column the loader needs."""

    def __init__(self, path: Path, column: str, present: Sequence[str], hint: str = "") -> None:
        self.path = path
        self.column = column
        message = f"{path}: missing required column '{column}' (columns present: {sorted(present)})"
        super().__init__(f"{message}. {hint}" if hint else message)


class _ParquetFormat:
    name = "Parquet"

    def matches(self, header: bytes) -> bool:
        return header.startswith(b"PAR1")

    def schema(self, path: Path) -> pa.Schema:
        return pq.read_schema(path)

    def batches(self, path: Path, columns: list[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns)


class _ArrowFileFormat:
    name = "Arrow IPC file"

    def matches(self, header: bytes) -> bool:
        return header.startswith(b"ARROW1")

    def schema(self, path: Path) -> pa.Schema:
        with pa.memory_map(str(path)) as source:
            return ipc.open_file(source).schema

    def batches(self, path: Path, columns: list[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(str(path)) as source:
            reader = ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield from _rebatched(reader.get_batch(index).select(columns), batch_size)


class _ArrowStreamFormat:
    name = "Arrow IPC stream"

    def matches(self, header: bytes) -> bool:
        return True  # no magic; tried last

    def schema(self, path: Path) -> pa.Schema:
        with pa.memory_map(str(path)) as source:
            return ipc.open_stream(source).schema

    def batches(self, path: Path, columns: list[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(str(path)) as source:
            for batch in ipc.open_stream(source):
                yield from _rebatched(batch.select(columns), batch_size)


_FORMATS = (_ParquetFormat(), _ArrowFileFormat(), _ArrowStreamFormat())
UNREADABLE = (pa.ArrowException, OSError, ValueError)
"""What Arrow raises reading a damaged file: its own errors (``ArrowInvalid`` is a ValueError), an OSError
(corrupt compressed data) or a UnicodeDecodeError (damaged metadata)."""


def _rebatched(batch: pa.RecordBatch, batch_size: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, batch.num_rows, batch_size):
        yield batch.slice(start, batch_size)


class TableFile:
    """One on-disk data file, its format sniffed on construction."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: data file does not exist (check the path passed to the loader)")
        with self.path.open("rb") as handle:
            header = handle.read(8)
        self._format = next(fmt for fmt in _FORMATS if fmt.matches(header))
        try:
            self.schema = self._format.schema(self.path)
        except UNREADABLE as error:
            raise self._unreadable(error) from error

    def batches(self, columns: Sequence[str], batch_size: int = 64) -> Iterator[pa.RecordBatch]:
        """Record batches of at most ``batch_size`` rows holding only ``columns``, in file order; a file whose
        data is damaged past its header is a :class:`TableFileError` when the damage is read."""
        try:
            yield from self._format.batches(self.path, list(columns), batch_size)
        except UNREADABLE as error:
            raise self._unreadable(error) from error

    def _unreadable(self, error: Exception) -> TableFileError:
        return TableFileError(f"{self.path}: not a readable Parquet or Arrow IPC file ({error_line(error)}); "
                              "pass the .parquet shards or the .arrow files of a datasets cache")
