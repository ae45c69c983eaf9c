"""An environment cached as a rows table (through a Parquet file) and built back: the same environment as its
source gives, for every registered kind; a table that does not hold what the source gives is not used."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs import item_envs
from aerorl_ops.envs.cached import (
    NOT_KEPT_KEY,
    cache_mismatch,
    cached_env,
    env_table,
    items_sha256,
    table_rejected,
)
from aerorl_ops.envs.configured import dataset_env, env_kwargs
from aerorl_ops.envs.item_envs import ITEM_ENVS, items_env
from aerorl_ops.envs.registry import ENVIRONMENTS
from aerorl_ops.envs.types import Completion
from aerorl_ops.rows.load_result import LoadResult
from tests.aerorl_ops.envs.test_env_parquet import verl_rows


def through_parquet(table: pa.Table, folder) -> pa.Table:
    path = folder / "cached.parquet"
    pq.write_table(table, path)
    return pq.read_table(path)


def shapes(files, answers: list[str], missing: bool = True) -> DatasetSettings:
    """A MAYE JSONL dataset: one 2x2 image per answer, and a line whose image is missing (a rejection)."""
    colours = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    lines = [{"id": f"s{n}", "question": "What colour?", "answer": answer, "image": f"pics/{n}.png"}
             for n, answer in enumerate(answers)]
    for n, answer in enumerate(answers):
        files.image(f"pics/{n}.png", colours[answer])
    if missing:
        lines.append({"id": "gone", "question": "What colour?", "answer": "red", "image": "pics/gone.png"})
    return DatasetSettings("shapes", kind="jsonl", split="train", limit=None,
                           path=str(files.jsonl("shapes.jsonl", lines)), settings={"instruction": "One word."})


def every_kind(files) -> list[DatasetSettings]:
    return [
        DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=3, seed=1),
        DatasetSettings("tries", kind="easy_vqa_two_tries", split="validation", limit=2,
                        settings={"second_try_reward": 0.25, "show_images_again": True}),
        DatasetSettings("docvqa", kind="docvqa", split="validation", limit=2, seed=3),
        DatasetSettings("chartqa", kind="chartqa", split="validation", limit=2),
        shapes(files, ["red", "blue"]),
        DatasetSettings("geo", kind="parquet", split="train", limit=None,
                        path=str(files.verl_parquet("geo.parquet", [verl_rows(files)[0], verl_rows(files)[2]]))),
    ]


def behaviour(env) -> tuple:
    """What a trainer sees of ``env``: its class and name (and its wrapper's), items, rejections, and each
    item graded on its first answer and on a wrong one (reward, done, info, the next turn's messages)."""
    graded = []
    for item in env.items:
        for reply in (item.answers[0], '{"answer": "nope"}'):
            state, observation = env.reset(item)
            result = env.step(state, Completion(reply))
            graded.append((observation.messages, result.reward, result.done, result.info,
                           result.observation.messages if result.observation else None))
    return (type(env).__name__, env.name, type(getattr(env, "env", env)).__name__, getattr(env, "max_turns", 1),
            env.items, list(env.rejected), graded)


def test_every_registered_kind_has_an_environment_over_items():
    """But a mixture, which is built from its parts' sources (``envs.mixture``; test_mixture.py)."""
    assert sorted(ITEM_ENVS) == sorted(set(ENVIRONMENTS) - {"mixture"})


def test_a_cached_environment_behaves_as_its_source_for_every_kind(tiny_files):
    for dataset in every_kind(tiny_files):
        source = dataset_env(dataset)
        env, came = cached_env(dataset, through_parquet(env_table(dataset), tiny_files.folder),
                               lambda: pytest.fail("the cached rows were not used"))
        assert behaviour(env) == behaviour(source), dataset.kind
        assert (came.cached, came.items, came.content_sha256) == (True, len(source), items_sha256(source.items))


def test_the_cached_rows_keep_the_rejections_and_the_messages(tiny_files):
    dataset = shapes(tiny_files, ["blue"])
    table = through_parquet(env_table(dataset), tiny_files.folder)
    assert table.column("sample_id").to_pylist() == ["s0"]
    assert [(row.sample_id, row.reason) for row in table_rejected(table)] == [
        ("gone", f"image file not found: {tiny_files.folder / 'pics/gone.png'}")]
    (item,) = cached_env(dataset, table, lambda: None)[0].items
    assert item.messages == ({"role": "user", "content": [{"type": "image"},
                                                          {"type": "text", "text": "What colour?\nOne word."}]},)


def test_rows_drawn_with_other_settings_or_from_a_changed_file_are_not_used(tiny_files):
    dataset = shapes(tiny_files, ["red", "blue"], missing=False)
    table = through_parquet(env_table(dataset), tiny_files.folder)
    assert cache_mismatch(dataset, table) is None
    assert cache_mismatch(dataclasses.replace(dataset, limit=1), table) == (
        "the cached rows were drawn from another source: its settings changed (limit null -> 1)")
    shapes(tiny_files, ["red", "red"], missing=False)  # the same file, rewritten: "blue" -> "red"
    assert cache_mismatch(dataset, table) == (
        f"the cached rows were drawn from another source: {dataset.path} changed (size 163 -> 162 bytes)")
    env, came = cached_env(dataset, table, lambda: dataset_env(dataset))
    assert [item.answers for item in env.items] == [("red",), ("red",)] and not came.cached
    assert came.why_source == cache_mismatch(dataset, table)


def test_missing_rows_or_a_table_without_its_source_are_not_used(tiny_files):
    dataset = DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=2)
    assert cache_mismatch(dataset, None) == "its rows are not cached"
    bare = env_table(dataset).replace_schema_metadata({})
    assert cache_mismatch(dataset, bare) == "the cached rows do not say what they were drawn from"


def test_an_item_with_two_images_is_cached_and_the_table_is_used(tiny_files):
    path = tiny_files.verl_parquet("two.parquet", verl_rows(tiny_files)[:2])  # the second item has two images
    dataset = DatasetSettings("two", kind="parquet", split="train", limit=None, path=str(path))
    table = through_parquet(env_table(dataset), tiny_files.folder)
    source = dataset_env(dataset)
    assert table.column("sample_id").to_pylist() == ["two-10", "two-11"]
    assert [len(images) for images in table.column("images").to_pylist()] == [1, 2]
    env, came = cached_env(dataset, table, lambda: pytest.fail("the source is read again"))
    assert came.cached and behaviour(env) == behaviour(source)
    assert came.content_sha256 == items_sha256(source.items)


def test_a_table_cached_when_rows_held_one_image_and_left_items_out_is_not_used(tiny_files):
    """Cached before a rows file held several images: the item with two was left out, and the table says so."""
    path = tiny_files.verl_parquet("two.parquet", verl_rows(tiny_files)[:2])
    dataset = DatasetSettings("two", kind="parquet", split="train", limit=None, path=str(path))
    table = env_table(dataset)
    old = table.filter(pa.array([True, False])).replace_schema_metadata({
        **table.schema.metadata, NOT_KEPT_KEY: b"1 items have other than one image (item 'two-11' has 2); a rows "
                                               b"file holds one image per question"})
    source = dataset_env(dataset)
    env, came = cached_env(dataset, old, lambda: source)
    assert env is source and came.why_source == (
        "the cached rows leave items out: 1 items have other than one image (item 'two-11' has 2); a rows file "
        "holds one image per question")


def test_a_kind_without_an_environment_over_items_reads_its_source(tiny_files, monkeypatch):
    dataset = DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=2)
    table = env_table(dataset)
    monkeypatch.delitem(item_envs.ITEM_ENVS, "easy_vqa")
    assert items_env("easy_vqa", env_kwargs(dataset), LoadResult()) is None
    env, came = cached_env(dataset, table, lambda: dataset_env(dataset))
    assert came.why_source == "kind 'easy_vqa' has no environment over cached items" and len(env) == 2


def test_the_content_hash_tells_items_apart_by_every_field_and_order(tiny_files):
    items = list(dataset_env(DatasetSettings("easy_vqa", kind="easy_vqa", split="test", limit=2)).items)
    other_image = [dataclasses.replace(items[0], images=(tiny_files.png((1, 2, 3)),)), items[1]]
    other_type = [dataclasses.replace(items[0], question_type="odd"), items[1]]
    hashes = {items_sha256(v) for v in (items, items[::-1], other_image, other_type, items[:1])}
    assert len(hashes) == 5 and items_sha256(list(items)) == items_sha256(tuple(items))
