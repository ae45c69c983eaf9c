"""Hypothesis strategies for fuzzed rows files: ``jsonl`` (MAYE's layout) and ``parquet`` (verl's), issue 38 item 5.

A case is a dataset folder: the rows file, a few image files whose bytes are drawn (valid images of several
formats and modes, truncated ones, random bytes, empty files, PNG headers claiming up to 2**31 - 1 pixels a
side), a link pointing out of the folder, and an image outside it (``../outside/secret.png``) that no row
may read; plus the dataset table's settings (``limit``, ``type_field`` / ``type_column``, ``allow_no_image``).

* JSONL lines are MAYE records with fields deleted, set to junk (null, huge numbers, nan, lone surrogates,
  long strings, nested lists and objects), image paths that are missing, escaping, absolute, empty or
  too long, and junk ``video`` fields; or lines that are no record (invalid UTF-8 or JSON, nesting 100,000
  deep, a 5,000-digit number, a JSON array) and blank lines.
* Parquet files have each column absent or of another Arrow type (a prompt as a string, images as a
  string or an int, ground truths as numbers, lists or nested structs), null cells and broken image
  bytes; or the file itself is garbage (random bytes, a cut or bit-flipped Parquet file, an empty file).

:func:`write_rows_case` lays a case out and returns its ``[datasets.<name>]`` table.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from PIL import Image

from aerorl_ops.config.datasets import DatasetSettings

DATASET = "fuzzed"
OUTSIDE_SHADE = 1
"""The grey of the one image outside the dataset folder (its bytes are in no other image file)."""


def encoded_image(fmt: str, mode: str, width: int, height: int, shade: int = 90) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), shade if mode in ("1", "L", "P", "I;16") else (shade,) * len(mode)).save(
        buffer, format=fmt)
    return buffer.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG signature and IHDR claiming ``width`` x ``height`` pixels, then IEND: no pixel data at all."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + chunk(
        b"IEND", b"")


FORMATS = (("PNG", "RGB"), ("PNG", "RGBA"), ("PNG", "L"), ("PNG", "1"), ("PNG", "P"), ("PNG", "I;16"),
           ("JPEG", "RGB"), ("JPEG", "L"), ("GIF", "P"), ("BMP", "RGB"), ("TIFF", "RGB"), ("WEBP", "RGB"))
valid_images = st.builds(lambda spec, width, height: encoded_image(*spec, width, height),
                         st.sampled_from(FORMATS), st.integers(1, 12), st.integers(1, 12))
image_contents = st.one_of(
    valid_images, valid_images,
    st.tuples(valid_images, st.integers(1, 200)).map(lambda spec: spec[0][:-spec[1]]),  # truncated
    st.binary(max_size=64), st.just(b""), st.just(b"not an image\n"),
    st.builds(png_header, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
    st.builds(png_header, st.integers(5_000, 70_000), st.integers(5_000, 70_000)),
)
"""Bytes of an image file or cell: valid in a dozen formats and modes, truncated, random, empty, text, or a
header alone claiming up to 2**31 - 1 pixels a side."""

IMAGE_NAMES = ("a.png", "b.jpg", "c.gif", "sub/d.png")
image_refs = st.one_of(
    st.sampled_from(IMAGE_NAMES), st.sampled_from(IMAGE_NAMES),
    st.sampled_from(("missing.png", "sub", "link-out.png", "link-in.png", "../outside/secret.png",
                     "../../../../etc/passwd", "/etc/hostname", "/dev/zero", "", " ", "./a.png", "sub/../a.png",
                     "a\x00b.png", "x" * 5000, "a.png/", "~/a.png", "\u202ea.png", "\ud800.png")),
    st.text(max_size=12),
)
"""What a row names as an image: files of the folder, and paths that are missing, escape it or are no path."""

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
json_text = st.one_of(
    st.text(max_size=20), st.text(st.characters(codec=None) | surrogates, max_size=6),
    st.builds(lambda char, count: char * count, st.characters(), st.integers(1_000, 200_000)),
    st.sampled_from(("", " ", "<image>", "<image><image>", "<video>", "\\boxed{4}", "\x00", "𝔘𝔫𝔦")),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from((2**64, -(2**63) - 1, 10**300)),
    st.floats(), json_text,
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)

FIELDS = ("id", "question", "answer", "solution", "image", "video", "video_fps", "category")


@st.composite
def jsonl_records(draw, number: int) -> dict:
    """A MAYE record (valid to start with) with up to three fields changed."""
    record = {"id": f"q{number}", "question": "<image>What colour is it?", "answer": "red", "image": "a.png"}
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(FIELDS) | st.text(max_size=6))
        change = draw(st.sampled_from(("delete", "junk", "image", "images", "video")))
        if change == "delete":
            record.pop(name, None)
        elif change == "image":
            record["image"] = draw(image_refs | json_values)
        elif change == "images":
            record["image"] = draw(st.lists(image_refs, max_size=4))
        elif change == "video":
            record["video"] = draw(image_refs | st.lists(image_refs, max_size=3) | json_values)
        else:
            record[name] = draw(json_values)
    return record


def _no_line_breaks(data: bytes) -> bytes:
    return data.replace(b"\n", b" ").replace(b"\r", b" ")


junk_lines = st.one_of(
    st.binary(max_size=40).map(_no_line_breaks),
    st.integers(1, 100_000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(1, 100_000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    st.integers(4_000, 6_000).map(lambda digits: b'{"id": ' + b"7" * digits + b', "question": "q", "answer": 1}'),
    st.sampled_from((b"NaN", b"null", b"[]", b'"text"', b"{", b'{"question": "\xff\xfe"}', b"\xef\xbb\xbf{}",
                     b'{"question": "q", "answer": "a", "image": "a.png"', b"   ", b"\t", b"\x0b\x0c")),
)
"""Lines that are no MAYE record (and blank ones, which are not records)."""


@dataclass(frozen=True)
class RowsCase:
    """One fuzzed dataset folder: the rows file's bytes (``kind`` "jsonl" or "parquet"), the image files, the
    dataset table's settings, and how many records it holds (None: the file may be unreadable as a whole)."""

    kind: str
    data: bytes
    images: tuple[tuple[str, bytes], ...]
    records: int | None
    limit: int | None = None
    settings: tuple[tuple[str, object], ...] = ()
    story: tuple[str, ...] = field(default=())

    @property
    def expected_records(self) -> int | None:
        """The records a load reads: every record, or ``limit`` of them."""
        if self.records is None or self.limit is None:
            return self.records
        return min(self.records, self.limit)

    def __repr__(self) -> str:
        head = self.data[:300] + (b"..." if len(self.data) > 300 else b"")
        images = [(name, content[:24] + (b"..." if len(content) > 24 else b"")) for name, content in self.images]
        return (f"RowsCase(kind={self.kind!r}, records={self.records}, limit={self.limit}, settings="
                f"{dict(self.settings)}, story={list(self.story)}, images={images}, data[:300]={head!r})")


image_files = st.tuples(*(image_contents for _ in IMAGE_NAMES)).map(lambda contents: tuple(zip(IMAGE_NAMES, contents,
                                                                                                strict=True)))
limits = st.none() | st.integers(1, 6)


@st.composite
def jsonl_cases(draw) -> RowsCase:
    lines: list[bytes] = []
    for number in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 3)):
            lines.append(json.dumps(draw(jsonl_records(number))).encode())
        else:
            lines.append(draw(junk_lines))
    settings = draw(st.fixed_dictionaries({}, optional={
        "type_field": st.sampled_from(("category", "id", "image", "nothing")),
        "allow_no_image": st.booleans()}))
    return RowsCase("jsonl", b"".join(line + b"\n" for line in lines), draw(image_files),
                    sum(1 for line in lines if line.strip()), draw(limits), tuple(sorted(settings.items())))


# --- Parquet ---------------------------------------------------------------------------------------------

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
arrow_text = st.text(max_size=20) | st.sampled_from(("", "<image>", "<image> and <image>?", "x" * 100_000))
int64s = st.integers(-(2**63), 2**63 - 1)
messages = st.fixed_dictionaries({"role": st.none() | st.sampled_from(("user", "system", "assistant")) | arrow_text,
                                  "content": st.none() | st.sampled_from(("<image>What colour?", "What colour?",
                                                                          "<image><image>Same?")) | arrow_text})
image_cells = st.fixed_dictionaries({"bytes": st.none() | image_contents, "path": st.none() | image_refs.filter(
    lambda ref: "\ud800" not in ref)})
arrow_refs = image_refs.filter(lambda ref: "\ud800" not in ref)

COLUMN_KINDS: dict[str, dict[str, tuple[pa.DataType, st.SearchStrategy]]] = {
    "prompt": {"messages": (pa.list_(MESSAGE), st.lists(messages, max_size=3)),
               "string": (pa.string(), arrow_text), "int": (pa.int64(), int64s),
               "strings": (pa.list_(pa.string()), st.lists(arrow_text, max_size=3)),
               "binary contents": (pa.list_(pa.struct([("role", pa.string()), ("content", pa.binary())])),
                                   st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.binary(
                                       max_size=20)}), max_size=2))},
    "images": {"structs": (pa.list_(IMAGE), st.lists(image_cells, max_size=3)),
               "paths": (pa.list_(pa.string()), st.lists(arrow_refs, max_size=3)),
               "bytes": (pa.list_(pa.binary()), st.lists(image_contents, max_size=3)),
               "one path": (pa.string(), arrow_refs), "int": (pa.int64(), int64s),
               "one image": (pa.binary(), image_contents)},
    "reward_model": {"string truth": (pa.struct([("ground_truth", pa.string()), ("style", pa.string())]),
                                      st.fixed_dictionaries({"ground_truth": st.none() | arrow_text,
                                                             "style": st.just("rule")})),
                     "int truth": (pa.struct([("ground_truth", pa.int64())]),
                                   st.fixed_dictionaries({"ground_truth": st.none() | int64s})),
                     "float truth": (pa.struct([("ground_truth", pa.float64())]),
                                     st.fixed_dictionaries({"ground_truth": st.floats()})),
                     "list truth": (pa.struct([("ground_truth", pa.list_(pa.string()))]),
                                    st.fixed_dictionaries({"ground_truth": st.none() | st.lists(
                                        st.none() | arrow_text, max_size=3)})),
                     "nested truth": (pa.struct([("ground_truth", pa.struct([("a", pa.string())]))]),
                                      st.fixed_dictionaries({"ground_truth": st.fixed_dictionaries(
                                          {"a": arrow_text})})),
                     "string": (pa.string(), arrow_text)},
    "data_source": {"string": (pa.string(), arrow_text), "int": (pa.int64(), int64s)},
    "extra_info": {"int index": (pa.struct([("index", pa.int64())]), st.fixed_dictionaries({"index": int64s})),
                   "string index": (pa.struct([("index", pa.string())]), st.fixed_dictionaries({"index": arrow_text})),
                   "float index": (pa.struct([("index", pa.float64())]), st.fixed_dictionaries(
                       {"index": st.floats()})),
                   "string": (pa.string(), arrow_text)},
}
"""For each verl column, the Arrow types it may come as and the cell values of each."""
VALID_CELLS = {
    "prompt": ("messages", st.just([{"role": "user", "content": "<image>What colour is it?"}])),
    "images": ("structs", valid_images.map(lambda image: [{"bytes": image, "path": None}])
               | st.sampled_from(IMAGE_NAMES).map(lambda name: [{"bytes": None, "path": name}])),
    "reward_model": ("string truth", st.just({"ground_truth": "red", "style": "rule"})),
}
"""A valid row's cells, by column: its kind, and the cell (half the cells of a column of that kind)."""


def _arrow_bytes(table: pa.Table, how: str) -> bytes:
    buffer = io.BytesIO()
    if how == "parquet":
        pq.write_table(table, buffer)
    else:
        writer = pa.ipc.new_file if how == "arrow file" else pa.ipc.new_stream
        with writer(buffer, table.schema) as out:
            out.write_table(table)
    return buffer.getvalue()


@st.composite
def parquet_tables(draw) -> tuple[pa.Table, list[str]]:
    """A table of verl's columns, each absent or of a drawn kind, with null cells; and the kinds drawn."""
    rows = draw(st.integers(0, 5))
    columns, story = {}, []
    for name, kinds in COLUMN_KINDS.items():
        valid_kind, valid_cell = VALID_CELLS.get(name, (None, st.nothing()))
        choice = draw(st.sampled_from((None, *kinds)) | st.just(valid_kind))  # the valid kind half the time
        if choice is None:
            story.append(f"no {name}")
            continue
        arrow_type, cells = kinds[choice]
        cells = valid_cell | cells if choice == valid_kind else cells
        story.append(f"{name}: {choice}")
        columns[name] = pa.array([draw(st.none() | cells if draw(st.integers(0, 5)) == 0 else cells)
                                  for _ in range(rows)], arrow_type)
    return pa.table(columns) if columns else pa.table({"unrelated": pa.array([1] * rows)}), story


@st.composite
def parquet_cases(draw) -> RowsCase:
    table, story = draw(parquet_tables())
    how = draw(st.sampled_from(("parquet", "parquet", "parquet", "arrow file", "arrow stream")))
    data, records = _arrow_bytes(table, how), table.num_rows
    damage = draw(st.sampled_from(("none",) * 9 + ("cut", "flip", "garbage", "empty")))
    if damage == "cut":
        data, records = data[:draw(st.integers(0, len(data) - 1))], None
    elif damage == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data, records = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:], None
    elif damage == "garbage":
        data, records = draw(st.binary(max_size=200)), None
    elif damage == "empty":
        data, records = b"", None
    settings = draw(st.fixed_dictionaries({}, optional={
        "type_column": st.sampled_from(("data_source", "data_source", "prompt", "nothing"))}))
    return RowsCase("parquet", data, draw(image_files), records, draw(limits), tuple(sorted(settings.items())),
                    (f"written as {how}", f"damage: {damage}", *story))


rows_cases = st.one_of(jsonl_cases(), parquet_cases())


# --- laying a case out -------------------------------------------------------------------------------------

def write_rows_case(case: RowsCase, root: Path) -> DatasetSettings:
    """``case`` under ``root``: ``root/data`` holds the rows file and images, ``root/outside`` an image no row
    may read; the ``[datasets.fuzzed]`` table reading it (as ``DatasetSettings``)."""
    folder, outside = root / "data", root / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.png").write_bytes(encoded_image("PNG", "RGB", 4, 4, shade=OUTSIDE_SHADE))
    for name, content in case.images:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    (folder / "link-out.png").symlink_to(outside / "secret.png")
    (folder / "link-in.png").symlink_to(folder / "a.png")
    path = folder / f"rows.{case.kind}"
    path.write_bytes(case.data)
    return DatasetSettings(DATASET, kind=case.kind, split="test", limit=case.limit, path=str(path),
                           settings=dict(case.settings))


def outside_image(root: Path) -> bytes:
    """The bytes of the image outside the dataset folder (:func:`write_rows_case`)."""
    return (root / "outside" / "secret.png").read_bytes()
