"""A failure inside a Dagster step is one line from the command, in a real process (issue 31, items 1, 2, 9).

`aerorl bench` on a dataset with no row, and on a Parquet cache whose disk is full: the rows step fails,
no partition runs on it (so no "materialize it first" advice follows), and the command prints the
step's own cause once: exit 2 for bad input, 1 for a fault. A fresh Dagster home gets the project's
instance file, so Dagster's missing-configuration notice never shows either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("command_driver.py")


def bench_config(folder: Path, rows: int) -> Path:
    (folder / "shapes.jsonl").write_text("".join(
        f'{{"id": "q{n}", "question": "Is it red?", "answer": "yes", "image": "red.png"}}\n' for n in range(rows)))
    from PIL import Image

    Image.new("RGB", (32, 32), (255, 0, 0)).save(folder / "red.png")
    config = folder / "bench.toml"
    config.write_text('[benchmark]\nbatch_sizes = [1]\n\n[datasets.shapes]\nkind = "jsonl"\npath = "shapes.jsonl"\n\n'
                      '[models.tiny-qwen2-vl]\nsource = "embedded:tiny-qwen2-vl"\n')
    return config


def aerorl(root: Path, models_dir: Path, home: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DRIVER), "--root", str(root), "--models-dir", str(models_dir), "--",
                           *argv], env={**os.environ, "DAGSTER_HOME": str(home)}, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_an_empty_dataset_is_one_line_and_no_partition_runs(tmp_path, models_dir, tiny_model_dir):
    config = bench_config(tmp_path, rows=0)
    home = tmp_path / "fresh_home"
    done = aerorl(tmp_path / "root", models_dir, home, "bench", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr == (f"aerorl: configuration error: dataset 'shapes' (file {tmp_path / 'shapes.jsonl'}) has "
                           "no usable row: no row was read (the file holds no record, or the limit is 0); point it "
                           "at a file with rows\n")  # once, and nothing else: no trace, no Dagster notice
    assert done.stdout.startswith("benchmark run bench-") and done.stdout.count("\n") == 1
    assert (home / "dagster.yaml").read_text() == (Path(__file__).parents[2] / ".dagster_home" /
                                                   "dagster.yaml").read_text()


@pytest.mark.slow
def test_a_full_disk_under_the_parquet_cache_is_one_line_naming_it(tmp_path, models_dir, tiny_model_dir):
    root = tmp_path / "root"
    cache = root / "cache"
    cache.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(cache)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        (cache / "filler").write_bytes(b"\0" * 12 * 1024)
        done = aerorl(root, models_dir, tmp_path / "home", "bench", "--config", str(bench_config(tmp_path, rows=40)))
    finally:
        subprocess.run(["umount", str(cache)], check=True)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"aerorl: no space left on {cache}/"), done.stderr
    assert lines[0].endswith(" (--debug shows the traceback)")
    assert "materialize it first" not in done.stderr
