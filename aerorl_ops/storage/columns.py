"""A dataclass as a table's columns, so that a stored row's shape is written once: the dataclass says what
a row holds, and the table's Arrow schema (hence its DDL) derives from it.

Each field is a column, in field order, named as the field and typed by its annotation:

======================  ======================
annotation              Arrow type
======================  ======================
str                     string
int                     int32
float                   float64
bool                    bool
datetime                timestamp[us, tz=UTC]
X | None                X's (None is stored as NULL)
======================  ======================

:func:`column` on a field says what its annotation cannot: another Arrow type (``pa.int64()``; ``pa.json_()``
for JSON held as a string) and ``required`` (``NOT NULL``). Every other column is nullable, whatever its
annotation, as the tables have always been.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

_ARROW_TYPES: dict[type, pa.DataType] = {
    str: pa.string(), int: pa.int32(), float: pa.float64(), bool: pa.bool_(), datetime: TIMESTAMP,
}
_COLUMN = "aerorl_ops.storage.columns"
"""The key of a field's metadata that holds its :class:`_Column`."""


@dataclass(frozen=True)
class _Column:
    data_type: pa.DataType | None
    required: bool


def column(data_type: pa.DataType | None = None, *, required: bool = False,
           default: object = dataclasses.MISSING) -> Any:
    """A dataclass field whose column has Arrow type ``data_type`` (None: the annotation's) and is ``NOT NULL``
    when ``required``; ``default`` is the field's default, as in ``dataclasses.field``."""
    return dataclasses.field(default=default, metadata={_COLUMN: _Column(data_type, required)})


def record_columns(record: type) -> tuple[pa.Field, ...]:
    """The columns of dataclass ``record``: one per field, in order (see the module docstring).

    >>> @dataclass
    ... class Row:
    ...     step: int = column(required=True)
    ...     config: str | None = column(pa.json_(), default=None)
    >>> [(f.name, str(f.type), f.nullable) for f in record_columns(Row)]
    [('step', 'int32', False), ('config', 'extension<arrow.json>', True)]
    """
    hints = typing.get_type_hints(record)
    return tuple(_field(record, field, hints[field.name]) for field in dataclasses.fields(record))


def _field(record: type, field: dataclasses.Field, annotation: object) -> pa.Field:
    where = f"{record.__module__}.{record.__qualname__}.{field.name}"
    declared = field.metadata.get(_COLUMN, _Column(None, False))
    base, optional = _without_none(annotation, where)
    if declared.required and optional:
        raise ValueError(f"{where}: a required (NOT NULL) column is annotated {_name(annotation)}; drop '| None' "
                         "or the column's required=True")
    data_type = declared.data_type or _ARROW_TYPES.get(base)
    if data_type is None:
        raise ValueError(f"{where}: no Arrow type for the annotation {_name(annotation)}; name one with "
                         "column(<pyarrow type>) or add it to aerorl_ops.storage.columns._ARROW_TYPES")
    return pa.field(field.name, data_type, nullable=not declared.required)


def _without_none(annotation: object, where: str) -> tuple[object, bool]:
    """``annotation`` less ``| None``, and whether it had it."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation, False
    kept = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if len(kept) != 1:
        raise ValueError(f"{where}: a column holds one type (or None), not {_name(annotation)}")
    return kept[0], True


def _name(annotation: object) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)
