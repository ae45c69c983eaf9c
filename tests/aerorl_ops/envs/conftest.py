"""Builders for tiny hand-made dataset files: 2x2 PNGs, MAYE JSONL, verl Parquet, lmms-lab ChartQA Parquet."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
VERL_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("images", pa.list_(IMAGE_TYPE)),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), ("answer", pa.string()),
                              ("question", pa.string())])),
])
LMMS_CHARTQA_SCHEMA = pa.schema([("type", pa.string()), ("question", pa.string()), ("answer", pa.string()),
                                 ("image", IMAGE_TYPE)])


class TinyFiles:
    """Writes dataset files and images into one temporary folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def png(colour: tuple[int, int, int] = (255, 0, 0), size: int = 2) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (size, size), colour).save(buffer, format="PNG")
        return buffer.getvalue()

    def image(self, name: str, colour: tuple[int, int, int] = (255, 0, 0)) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.png(colour))
        return path

    def text(self, name: str, content: bytes) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return path

    def jsonl(self, name: str, lines: list[dict | str | bytes]) -> Path:
        """Dicts become JSON lines; strings and bytes are written as they are (for malformed lines)."""
        encoded = [line if isinstance(line, bytes) else
                   (line if isinstance(line, str) else json.dumps(line)).encode("utf-8") for line in lines]
        return self.text(name, b"\n".join(encoded) + b"\n")

    def verl_parquet(self, name: str, records: list[dict]) -> Path:
        path = self.folder / name
        pq.write_table(pa.Table.from_pylist(records, schema=VERL_SCHEMA), path)
        return path

    def lmms_chartqa(self, name: str, records: list[dict]) -> Path:
        path = self.folder / name
        pq.write_table(pa.Table.from_pylist(records, schema=LMMS_CHARTQA_SCHEMA), path)
        return path

    @staticmethod
    def verl_record(index: int, content: str, truth: str | None, images: list[dict],
                    system: str | None = None) -> dict:
        prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        return {"data_source": "hiyouga/geometry3k", "prompt": prompt, "images": images, "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"split": "train", "index": index, "answer": truth, "question": content}}


@pytest.fixture
def tiny_files(tmp_path: Path) -> TinyFiles:
    return TinyFiles(tmp_path)
