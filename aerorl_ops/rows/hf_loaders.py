"""Loaders for Hugging Face dataset files a user already has on disk (no network).

Accepted files: Parquet shards as stored on the hub, and ``.arrow`` files from a
``datasets`` cache (Arrow IPC stream format; the IPC file format is accepted too).

Column facts, checked against the dataset cards and lmms-eval task files:

* ``lmms-lab/DocVQA``, config ``DocVQA`` (card, revision 59fed3c, ``dataset_info``):
  ``questionId`` string, ``question`` string, ``question_types`` sequence of string,
  ``image`` image (stored as struct ``{bytes, path}``), ``docId`` int64,
  ``ucsf_document_id`` string, ``ucsf_document_page_no`` string, ``answers`` sequence of
  string, ``data_split`` string; splits ``train`` / ``validation`` / ``test``. lmms-eval
  (``lmms_eval/tasks/docvqa/_default_template_docvqa_yaml``) uses
  ``dataset_name: DocVQA``, ``doc_to_target: "answers"``; its test task only writes a
  submission file, as test answers are withheld, so test rows carry null/absent answers.
  ``HuggingFaceM4/DocumentVQA`` has the same columns with ``questionId`` as int32, which
  is accepted too.
* ``HuggingFaceM4/ChartQA`` (card ``dataset_info``): ``image`` image, ``query`` string,
  ``label`` list of string, ``human_or_machine`` class label (0 human, 1 machine, int64
  in Parquet); splits ``train`` / ``val`` / ``test`` (note ``val``, not ``validation``).
* ``lmms-lab/ChartQA`` (lmms-eval's ``chartqa`` task, ``lmms_eval/tasks/chartqa``: its
  builder features and ``doc_to_target: "answer"``): ``type`` string (``human_test`` or
  ``augmented_test``), ``question`` string, ``answer`` one string, ``image`` image; one split,
  ``test`` (lmms-eval's current task files read the same layout from ``lmms-lab-encoder/ChartQA``).
  The ``chartqa`` loader reads either ChartQA layout, chosen by the first file's
  columns (``query`` means HuggingFaceM4, ``question`` lmms-lab); :meth:`question_types`
  gives each row's ``type``.

Sample ids: ``docvqa-<questionId>``; ``chartqa-<split>-<index>`` where ``index`` counts
records across the given files in sorted path order (the hub's shard names sort in
order, so the index equals the row's position in the split when all shards are given).
Every record read becomes either a task item or a :class:`RejectedRow`; a repeated sample id
is rejected as a duplicate, and an image stored only as a path (null ``bytes``; hub
files embed the bytes) is rejected as "missing image bytes". ``evidence_entities`` is
left to default to the answers, as these datasets carry no grounding annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.table_files import MissingColumnError, TableFile, TableFileError
from aerorl_ops.rows.validation import DEFAULT_CHECKS, ItemCandidate, RowChecks, validate_item

Record = Mapping[str, Any]


class HubDatasetLoader:
    """How one hub dataset's columns map onto an :class:`ItemCandidate`.

    Subclasses set the column names and say how a sample id is formed.
    """

    name: str
    hub_id: str
    question_column: str
    answers_column: str
    image_column = "image"
    id_columns: tuple[str, ...] = ()
    type_column: str | None = None
    """A column naming each question's type, reported by :meth:`question_types`."""

    def sample_id(self, record: Record, split: str, index: int) -> str | None:
        raise NotImplementedError

    def layout_for(self, paths: Sequence[Path]) -> HubDatasetLoader:
        """The loader for the column layout of ``paths``; a dataset with one layout returns itself."""
        return self

    def required_columns(self, checks: RowChecks) -> tuple[str, ...]:
        columns = (*self.id_columns, self.question_column, self.image_column)
        return columns if checks.allow_unanswered else (*columns, self.answers_column)

    def missing_column_hint(self, column: str) -> str:
        hint = f"Pass {self.hub_id} files in their original schema"
        if column == self.answers_column:
            hint += "; a split without answers (e.g. DocVQA test) loads with RowChecks(allow_unanswered=True)"
        return hint

    def load(
        self,
        paths: Sequence[Path],
        split: str,
        limit: int | None = None,
        checks: RowChecks = DEFAULT_CHECKS,
    ) -> LoadResult:
        """Read at most ``limit`` records (accepted plus rejected) from ``paths``."""
        layout = self.layout_for(paths)
        if layout is not self:
            return layout.load(paths, split, limit, checks)
        if limit is not None and limit < 0:
            raise ValueError(f"{self.name}: limit must be >= 0 or None, got {limit}")
        if not split:
            raise ValueError(f"{self.name}: split must be a non-empty name such as 'validation'")
        files = self._open_files(paths, checks)
        result = LoadResult()
        first_locator: dict[str, str] = {}
        for index, (table_file, row_in_file, record) in enumerate(self._records(files, checks)):
            if limit is not None and index >= limit:
                break
            locator = f"{table_file.path}#row={row_in_file}"
            candidate = self._candidate(record, split, str(table_file.path), locator, index)
            outcome = validate_item(candidate, checks)
            if isinstance(outcome, RejectedRow):
                result.rejected.append(outcome)
            elif outcome.item_id in first_locator:
                reason = f"duplicate sample id (first seen at {first_locator[outcome.item_id]})"
                result.rejected.append(RejectedRow(outcome.source, locator, outcome.item_id, reason))
            else:
                first_locator[outcome.item_id] = locator
                result.items.append(outcome)
        return result

    def question_types(self, paths: Sequence[Path], split: str, limit: int | None = None) -> dict[str, str]:
        """Sample id -> the ``type_column`` value of each record ``load`` would read with the same
        arguments; empty when the layout has no type column (files lacking it contribute nothing)."""
        layout = self.layout_for(paths)
        if layout is not self:
            return layout.question_types(paths, split, limit)
        if self.type_column is None:
            return {}
        types: dict[str, str] = {}
        index = 0
        for table_file in self._open_files(paths, DEFAULT_CHECKS):
            has_type = self.type_column in table_file.schema.names
            for batch in table_file.batches([*self.id_columns, self.type_column] if has_type else self.id_columns):
                for record in batch.to_pylist():
                    if limit is not None and index >= limit:
                        return types
                    sample_id = self.sample_id(record, split, index)
                    if has_type and sample_id and record[self.type_column] is not None:
                        types.setdefault(sample_id, str(record[self.type_column]))
                    index += 1
        return types

    def _open_files(self, paths: Sequence[Path], checks: RowChecks) -> list[TableFile]:
        paths = sorted(Path(path) for path in paths)
        if not paths:
            raise ValueError(f"{self.name}: no data files given; pass the .parquet or .arrow files of one split")
        for earlier, later in pairwise(paths):
            if earlier.resolve() == later.resolve():
                raise ValueError(f"{self.name}: file {later} is given twice; pass each file once")
        files = [TableFile(path) for path in paths]
        for table_file in files:
            for column in self.required_columns(checks):
                if column not in table_file.schema.names:
                    hint = self.missing_column_hint(column)
                    raise MissingColumnError(table_file.path, column, table_file.schema.names, hint)
        return files

    def _records(self, files: list[TableFile], checks: RowChecks) -> Iterator[tuple[TableFile, int, Record]]:
        for table_file in files:
            wanted = (*self.required_columns(checks), self.answers_column)
            columns = [name for name in dict.fromkeys(wanted) if name in table_file.schema.names]
            row_in_file = 0
            for batch in table_file.batches(columns):
                values = {name: self._python_values(table_file, name, batch.column(name)) for name in columns}
                for position in range(batch.num_rows):
                    yield table_file, row_in_file, {name: values[name][position] for name in columns}
                    row_in_file += 1

    def _python_values(self, table_file: TableFile, name: str, array: pa.Array) -> list[Any]:
        if name == self.image_column:
            return _image_bytes_values(table_file, name, array)
        return _text_preserving_values(array)

    def _candidate(self, record: Record, split: str, source: str, locator: str, index: int) -> ItemCandidate:
        return ItemCandidate(
            item_id=self.sample_id(record, split, index),
            dataset=self.name,
            split=split,
            source=source,
            locator=locator,
            question=record[self.question_column],
            answers=record.get(self.answers_column),
            images=[record[self.image_column]],
        )


class DocVQALoader(HubDatasetLoader):
    """``lmms-lab/DocVQA`` (config ``DocVQA``); ids ``docvqa-<questionId>``."""

    name = "docvqa"
    hub_id = "lmms-lab/DocVQA"
    question_column = "question"
    answers_column = "answers"
    id_columns = ("questionId",)

    def sample_id(self, record: Record, split: str, index: int) -> str | None:
        question_id = record["questionId"]
        if isinstance(question_id, bytes):
            question_id = question_id.decode("utf-8", errors="replace")
        if question_id is None or str(question_id).strip() == "":
            return None
        return f"docvqa-{str(question_id).strip()}"


class ChartQALoader(HubDatasetLoader):
    """``HuggingFaceM4/ChartQA``; ids ``chartqa-<split>-<index>``. Files in the lmms-lab layout
    (``question`` / ``answer`` / ``type``) are handed to :class:`LmmsChartQALoader`."""

    name = "chartqa"
    hub_id = "HuggingFaceM4/ChartQA"
    question_column = "query"
    answers_column = "label"

    def sample_id(self, record: Record, split: str, index: int) -> str | None:
        return f"chartqa-{split}-{index}"

    def layout_for(self, paths: Sequence[Path]) -> HubDatasetLoader:
        if not paths:
            return self
        names = TableFile(min(Path(path) for path in paths)).schema.names
        is_lmms = self.question_column not in names and LMMS_CHARTQA.question_column in names
        return LMMS_CHARTQA if is_lmms else self


class LmmsChartQALoader(HubDatasetLoader):
    """``lmms-lab/ChartQA``: one ``answer`` string per question and a ``type``; ids ``chartqa-<split>-<index>``."""

    name = "chartqa"
    hub_id = "lmms-lab/ChartQA"
    question_column = "question"
    answers_column = "answer"
    type_column = "type"

    def sample_id(self, record: Record, split: str, index: int) -> str | None:
        return f"chartqa-{split}-{index}"

    def _candidate(self, record: Record, split: str, source: str, locator: str, index: int) -> ItemCandidate:
        candidate = super()._candidate(record, split, source, locator, index)
        answer = record.get(self.answers_column)
        return replace(candidate, answers=None if answer is None else [answer])


def _text_preserving_values(array: pa.Array) -> list[Any]:
    """Python values with text left as ``bytes`` so bad UTF-8 is reported per row, not per file."""
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        array = array.cast(pa.large_binary())
    elif (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
    ):
        array = array.cast(pa.list_(pa.large_binary()))
    return array.to_pylist()


def _image_bytes_values(table_file: TableFile, name: str, array: pa.Array) -> list[bytes | None]:
    """Encoded image bytes from a ``datasets`` Image column (struct ``{bytes, path}``) or a binary column."""
    kind = array.type
    if pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0:
        return pc.struct_field(array, "bytes").to_pylist()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array.to_pylist()
    raise TableFileError(
        f"{table_file.path}: column '{name}' has type {kind}; expected a datasets Image struct "
        "{bytes, path} or binary image bytes"
    )


DOCVQA = DocVQALoader()
CHARTQA = ChartQALoader()
LMMS_CHARTQA = LmmsChartQALoader()
DATASET_LOADERS: dict[str, HubDatasetLoader] = {
    key.lower(): loader for loader in (DOCVQA, CHARTQA) for key in (loader.name, loader.hub_id)
}
DATASET_LOADERS[LMMS_CHARTQA.hub_id.lower()] = LMMS_CHARTQA


def loader_for(dataset: str) -> HubDatasetLoader:
    """The loader registered under ``dataset`` (short name or hub id, any case)."""
    try:
        return DATASET_LOADERS[dataset.lower()]
    except KeyError:
        raise ValueError(f"unknown dataset {dataset!r}; known: {sorted(DATASET_LOADERS)}") from None


def load_dataset_files(
    dataset: str,
    paths: Iterable[Path],
    split: str,
    limit: int | None = None,
    checks: RowChecks = DEFAULT_CHECKS,
) -> LoadResult:
    """Load files of the dataset registered as ``dataset`` (e.g. ``"docvqa"``, ``"HuggingFaceM4/ChartQA"``)."""
    return loader_for(dataset).load(list(paths), split, limit, checks)


def load_docvqa_files(
    paths: Iterable[Path], split: str, limit: int | None = None, checks: RowChecks = DEFAULT_CHECKS
) -> LoadResult:
    """Load ``lmms-lab/DocVQA`` Parquet/Arrow files of one split. Test split: pass ``allow_unanswered``."""
    return DOCVQA.load(list(paths), split, limit, checks)


def load_chartqa_files(
    paths: Iterable[Path], split: str, limit: int | None = None, checks: RowChecks = DEFAULT_CHECKS
) -> LoadResult:
    """Load ChartQA Parquet/Arrow files of one split, in the ``HuggingFaceM4/ChartQA`` layout (splits
    ``train``, ``val``, ``test``) or the ``lmms-lab/ChartQA`` one (split ``test``)."""
    return CHARTQA.load(list(paths), split, limit, checks)
