"""Builders for tiny files in the on-disk layouts of lmms-lab/DocVQA and HuggingFaceM4/ChartQA."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from PIL import Image

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
DOCVQA_SCHEMA = pa.schema(
    [
        ("questionId", pa.string()),
        ("question", pa.string()),
        ("question_types", pa.list_(pa.string())),
        ("image", IMAGE_TYPE),
        ("docId", pa.int64()),
        ("ucsf_document_id", pa.string()),
        ("ucsf_document_page_no", pa.string()),
        ("answers", pa.list_(pa.string())),
        ("data_split", pa.string()),
    ]
)
CHARTQA_SCHEMA = pa.schema(
    [("image", IMAGE_TYPE), ("query", pa.string()), ("label", pa.list_(pa.string())), ("human_or_machine", pa.int64())]
)


class HubFiles:
    """Writes small DocVQA / ChartQA files into one temporary folder."""

    docvqa_schema = DOCVQA_SCHEMA
    chartqa_schema = CHARTQA_SCHEMA

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def png(width: int = 8, height: int = 6, shade: int = 200) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (width, height), (shade, shade, shade)).save(buffer, format="PNG")
        return buffer.getvalue()

    def docvqa_record(self, question_id, question, answers, image: bytes | None = None) -> dict:
        return {
            "questionId": question_id,
            "question": question,
            "question_types": ["form"],
            "image": {"bytes": self.png() if image is None else image, "path": f"{question_id}.png"},
            "docId": 7,
            "ucsf_document_id": "abc123",
            "ucsf_document_page_no": "1",
            "answers": answers,
            "data_split": "val",
        }

    def chartqa_record(self, query, label, image: bytes | None = None) -> dict:
        image_bytes = self.png() if image is None else image
        return {"image": {"bytes": image_bytes, "path": None}, "query": query, "label": label, "human_or_machine": 0}

    def write(self, table: pa.Table, name: str, fmt: str = "parquet") -> Path:
        """Write ``table`` as ``parquet``, ``arrow-stream`` (datasets cache layout) or ``arrow-file``."""
        path = self.folder / name
        if fmt == "parquet":
            pq.write_table(table, path)
        elif fmt == "arrow-stream":
            with pa.OSFile(str(path), "wb") as sink, ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
        elif fmt == "arrow-file":
            with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
        else:
            raise ValueError(f"unknown format {fmt}")
        return path

    def docvqa(self, records: list[dict], name: str = "validation-00000.parquet", fmt: str = "parquet") -> Path:
        return self.write(pa.Table.from_pylist(records, schema=DOCVQA_SCHEMA), name, fmt)

    def chartqa(self, records: list[dict], name: str = "val-00000.parquet", fmt: str = "parquet") -> Path:
        return self.write(pa.Table.from_pylist(records, schema=CHARTQA_SCHEMA), name, fmt)


@pytest.fixture
def hub_files(tmp_path: Path) -> HubFiles:
    return HubFiles(tmp_path)


@pytest.fixture(params=["parquet", "arrow-stream", "arrow-file"])
def file_format(request) -> str:
    return request.param
