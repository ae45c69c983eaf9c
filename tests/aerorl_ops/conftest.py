"""Seeded replay records full of the strings that break naive scorers."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

TRICKY_TEXTS = [
    "Paris", "paris.", "  PARIS ", "the Paris", "Paris, France", "42", "42%", "0.42", "+5", "007", "5-6", "-3",
    "1,234", "1234", "1234567", "12.50%", "0.00001%", "1e5", "about 42", "within the next 2-3 weeks",
    "next 2-3 weeks", "Mr. Alm", "Mr. Alm.", "Café", "İstanbul", "ΣΑΣ", "naïve\u00a0text", "a\tb  c", "x\x1cy",
    "", "   ", "...", "!!", "emoji 😀", "{\"answer\": \"Paris\"}", "A-b c's", "the", "a1b2", "50%%",
]


def random_record(rng: random.Random, index: int) -> dict[str, Any]:
    """One record with random shapes: missing fields, list or string references, odd text."""

    def text() -> str:
        pieces = rng.sample(TRICKY_TEXTS, rng.randint(1, 2))
        return " ".join(pieces) if rng.random() < 0.3 else pieces[0]

    record: dict[str, Any] = {"id": f"r{index}", "response": text()}
    if rng.random() < 0.3:
        record["response"] = json.dumps({"answer": record["response"]})
    roll = rng.random()
    if roll < 0.4:
        record["reference"] = text()
    elif roll < 0.8:
        record["reference"] = [text() for _ in range(rng.randint(0, 3))]
    elif roll < 0.9:
        record["reference"] = None
    if rng.random() < 0.8:
        record["prompt"] = text()
    if rng.random() < 0.9:
        metadata: dict[str, Any] = {}
        for name in ("evidence_entities", "claimed_entities"):
            if rng.random() < 0.9:
                metadata[name] = [text() for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.8:
            metadata["latency_ms"] = rng.choice([0, 12, 499.999, 500, 750.5, 1500, 12345.678, rng.uniform(0, 2000)])
        if rng.random() < 0.5:
            metadata["dataset"] = rng.choice(["docvqa", "chartqa", "other"])
        if rng.random() < 0.5:
            metadata["raw_response"] = text()
        record["metadata"] = metadata
    return record


def random_records(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [random_record(rng, index) for index in range(count)]


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    """Write records (dicts, dumped as JSON) or raw lines (str/bytes) one per line."""
    with path.open("wb") as handle:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            handle.write((line.encode("utf-8") if isinstance(line, str) else line) + b"\n")
    return path


@pytest.fixture(scope="session")
def make_records():
    """``make_records(seed, count)``: seeded random records (see ``random_record``)."""
    return random_records


@pytest.fixture(scope="session")
def jsonl_writer():
    """``jsonl_writer(path, lines)``: write records or raw lines as a JSONL file."""
    return write_jsonl
