"""A dataset source's fingerprint changes with what its rows are built from, and only with that."""

from __future__ import annotations

import hashlib
import os

import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.configured import dataset_fingerprint
from aerorl_ops.rows import source_fingerprint
from aerorl_ops.rows.source_fingerprint import FileFingerprint, SourceChange, SourceFingerprint, source_change

SETTINGS = {"split": "test", "limit": 12, "seed": 0}


def of(path, settings=SETTINGS) -> SourceFingerprint:
    return SourceFingerprint.of_paths(str(path), [path], settings)


def test_a_file_is_recorded_with_its_size_time_and_content_hash(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"abc\n")
    os.utime(path, ns=(1_000, 2_000))
    assert FileFingerprint.of(path) == FileFingerprint(str(path), 4, 2_000, hashlib.sha256(b"abc\n").hexdigest())


def test_the_fingerprint_changes_with_the_content_and_size_and_not_with_an_unrelated_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"abc\n")
    cached = of(path)
    (tmp_path / "other.jsonl").write_bytes(b"unrelated\n")
    assert of(path).version == cached.version and source_change(cached, of(path)) is None
    path.write_bytes(b"abd\n")
    assert source_change(cached, of(path)) == SourceChange(str(path), "content changed (same size)")
    path.write_bytes(b"ab\n")
    assert source_change(cached, of(path)) == SourceChange(str(path), "size 4 -> 3 bytes")


def test_touching_a_hashed_file_changes_nothing_but_an_unhashed_one_is_compared_by_time(tmp_path, monkeypatch):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"abc\n")
    os.utime(path, ns=(1_000, 2_000))
    cached = of(path)
    os.utime(path, ns=(1_000, 3_000))
    assert source_change(cached, of(path)) is None
    monkeypatch.setattr(source_fingerprint, "HASH_LIMIT_BYTES", 4)
    os.utime(path, ns=(1_000, 2_000))
    big = of(path)
    assert big.files[0].sha256 == ""
    os.utime(path, ns=(1_000, 3_000))
    assert source_change(big, of(path)) == SourceChange(str(path), "modified (too large to hash; same size)")


def test_a_folder_stands_for_every_file_under_it(tmp_path):
    (tmp_path / "shards" / "more").mkdir(parents=True)
    (tmp_path / "shards" / "a.parquet").write_bytes(b"a")
    (tmp_path / "shards" / "more" / "b.parquet").write_bytes(b"b")
    folder = tmp_path / "shards"
    cached = of(folder)
    assert [file.path for file in cached.files] == [str(folder / "a.parquet"), str(folder / "more" / "b.parquet")]
    (folder / "a.parquet").unlink()
    (folder / "c.parquet").write_bytes(b"cc")
    (folder / "more" / "b.parquet").write_bytes(b"bb")
    assert source_change(cached, of(folder)) == SourceChange(
        str(folder), "a.parquet: removed; c.parquet: new file; more/b.parquet: size 1 -> 2 bytes")


def test_settings_and_package_changes_are_named(tmp_path):
    cached = SourceFingerprint.generated("synthetic docvqa rows", SETTINGS)
    changed = SourceFingerprint.generated("synthetic docvqa rows", {**SETTINGS, "limit": 6, "split": "validation"})
    assert source_change(cached, changed) == SourceChange("its settings",
                                                          'limit 12 -> 6; split "test" -> "validation"')
    old = SourceFingerprint("package easy-vqa", (), "easy-vqa 1.0", ())
    assert source_change(old, SourceFingerprint("package easy-vqa", (), "easy-vqa 1.1", ())) == SourceChange(
        "package easy-vqa", "easy-vqa 1.0 -> easy-vqa 1.1")


def test_the_json_form_is_stable_and_reads_back(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"abc\n")
    os.utime(path, ns=(1_000, 2_000))
    fingerprint = of(path, {"seed": 0, "limit": 2})
    digest = hashlib.sha256(b"abc\n").hexdigest()
    assert fingerprint.to_json() == (
        f'{{"files":[{{"mtime_ns":2000,"path":"{path}","sha256":"{digest}","size":4}}],"location":"{path}",'
        '"package":"","settings":[["limit","2"],["seed","0"]]}')
    assert SourceFingerprint.from_json(fingerprint.to_json()) == fingerprint
    assert SourceFingerprint.from_dict(fingerprint.as_dict()) == fingerprint
    with pytest.raises(ValueError, match=r"not a source fingerprint \(KeyError: 'files'\)"):
        SourceFingerprint.from_dict({"location": "x"})


def test_a_configured_dataset_fingerprints_its_file_package_or_settings(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"{}\n")
    jsonl = dataset_fingerprint(DatasetSettings("mine", kind="jsonl", split="test", limit=5, path=str(path)))
    assert (jsonl.location, [file.path for file in jsonl.files], jsonl.package) == (str(path), [str(path)], "")
    assert dict(jsonl.settings) == {"limit": "5", "name": '"mine"', "seed": "0", "split": '"test"'}
    easy = dataset_fingerprint(DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=5))
    assert (easy.location, easy.files, easy.package.split()[0]) == ("package easy-vqa", (), "easy-vqa")
    docvqa = dataset_fingerprint(DatasetSettings("docvqa", kind="docvqa", split="validation", limit=5))
    assert (docvqa.location, docvqa.files, docvqa.package) == ("synthetic docvqa rows", (), "")
