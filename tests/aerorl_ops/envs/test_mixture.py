"""``kind = "mixture"``: a dataset drawn from other ``[datasets.<name>]`` tables by weight (``envs.mixture``),
checked when the config loads (``config.mixtures``), built by ``envs.configured``: exact counts, a seeded
interleave, every item keeping its source, graded by its own part (multi-turn too), a text-only part."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.config.dataset_kinds import check_datasets
from aerorl_ops.config.evaluation import EvalSettings
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.cached import env_table
from aerorl_ops.envs.configured import dataset_env, dataset_fingerprint, dataset_rows, named_dataset, row_kinds
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.mixture import MixtureEnv, MixtureState, mixture_counts, mixture_env, mixture_sources
from aerorl_ops.envs.registry import dataset_kinds, env_settings, make_env
from aerorl_ops.envs.two_tries import TwoTriesEnv
from aerorl_ops.envs.types import Completion, EpisodeState, observe
from aerorl_ops.eval_runner.model_vs_baseline import eval_id_of
from aerorl_ops.rl.run.inputs import cached_stages, run_datasets, run_environments
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.task_item import TaskItem

MINIMAL = {"benchmark": {"batch_sizes": [1]}, "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}}}


def parts(tiny_files) -> dict:
    """Two tiny parts: ``shapes`` (s0..s9, each showing a 2x2 image) and ``text`` (t0..t9, text only)."""
    tiny_files.image("pics/red.png")
    shapes = tiny_files.jsonl("shapes.jsonl", [{"id": f"s{n}", "question": f"Colour {n}?", "answer": "red",
                                                "image": "pics/red.png"} for n in range(10)])
    text = tiny_files.jsonl("text.jsonl", [{"id": f"t{n}", "question": f"What is {n} + 1?", "answer": str(n + 1)}
                                           for n in range(10)])
    return {"shapes": {"kind": "jsonl", "path": str(shapes), "split": "train"},
            "text": {"kind": "jsonl", "path": str(text), "split": "train", "allow_no_image": True}}


def config(tiny_files, mixture: dict, **more: dict):
    data = {**MINIMAL, "datasets": {**parts(tiny_files), **more, "mix": {"kind": "mixture", **mixture}}}
    return check_datasets(parse_benchmark_config(data, path="bench.toml", root=tiny_files.folder), dataset_kinds())


def mixture_table(tiny_files, **mixture):
    chosen = config(tiny_files, {"parts": ["shapes", "text"], "weights": [0.7, 0.3], "limit": 10, **mixture})
    return chosen.datasets[-1]


def test_counts_are_exact_quotas_by_largest_remainder():
    assert mixture_counts(10, (0.7, 0.3)) == (7, 3)
    assert mixture_counts(10, (0.1, 0.2, 0.7)) == (1, 2, 7)  # 0.1 + 0.2 is not 0.3 in floats: the quotas are exact
    assert mixture_counts(10, (1, 1, 1)) == (4, 3, 3)  # remainders 1/3 each: the earlier part first
    assert mixture_counts(7, (2, 1)) == (5, 2)  # quotas 14/3, 7/3: remainders 2/3 and 1/3
    assert mixture_counts(4, (0.5, 0.0, 0.5)) == (2, 0, 2)
    assert mixture_counts(0, (1, 1)) == (0, 0)
    with pytest.raises(ValueError, match="summing to more than 0"):
        mixture_counts(4, (0, 0))
    with pytest.raises(ValueError, match="finite"):
        mixture_counts(4, (float("inf"), 1.0))


def test_ten_items_at_seven_to_three_are_drawn_as_written_and_another_seed_orders_them_otherwise(tiny_files):
    env = dataset_env(mixture_table(tiny_files))
    # shapes: 7 of 10 lines by random.Random(0) -> lines 0, 2, 3, 4, 5, 6, 9; text: 3 -> 0, 6, 9;
    # positions: [text, text, shapes x 6, text, shapes], random.Random(0)'s shuffle of 7 shapes and 3 texts
    assert [item.item_id for item in env.items] == [
        "text/t0", "text/t6", "shapes/s0", "shapes/s2", "shapes/s3", "shapes/s4", "shapes/s5", "shapes/s6",
        "text/t9", "shapes/s9"]
    other = dataset_env(mixture_table(tiny_files, seed=1))
    assert [item.item_id for item in other.items] == [
        "shapes/s0", "text/t1", "text/t2", "text/t4", "shapes/s1", "shapes/s2", "shapes/s3", "shapes/s4",
        "shapes/s5", "shapes/s7"]
    assert [item.item_id for item in dataset_env(mixture_table(tiny_files)).items] == [
        item.item_id for item in env.items]  # the same seed, the same draw


def test_every_item_keeps_its_source_and_is_otherwise_its_part_s(tiny_files):
    table = mixture_table(tiny_files)
    env = dataset_env(table)
    assert isinstance(env, MixtureEnv) and env.name == "mix" and env.sources == ("shapes", "text")
    shapes = {item.item_id: item for item in dataset_env(table.parts[0]).items}
    for item in env.items:
        source, own_id = item.item_id.split("/")
        assert item.dataset == source
        if source == "shapes":  # everything but the id and the dataset is the part's own item
            original = shapes[own_id]
            assert (item.question, item.answers, item.images, item.messages, item.split, item.source) == (
                original.question, original.answers, original.images, original.messages, original.split,
                original.source)
    assert [len(item.images) for item in env.items if item.dataset == "text"] == [0, 0, 0]
    assert [len(item.images) for item in env.items if item.dataset == "shapes"] == [1] * 7
    assert mixture_sources(env) == ("shapes", "text") and mixture_sources(dataset_env(table.parts[0])) == ()


def test_a_text_only_part_shows_no_image_and_is_graded(tiny_files):
    env = dataset_env(mixture_table(tiny_files))
    item = next(item for item in env.items if item.dataset == "text")
    assert item.item_id == "text/t0" and item.question == "What is 0 + 1?"
    state, observation = env.reset(item)
    assert observation.images == () and observation.messages == [
        {"role": "user", "content": [{"type": "text", "text": "What is 0 + 1?"}]}]
    assert env.step(state, Completion("1")).info.correct and not env.step(state, Completion("2")).info.correct


def test_text_only_lines_are_rejected_unless_the_dataset_allows_them(tiny_files):
    path = tiny_files.jsonl("plain.jsonl", [{"id": "t0", "question": "What is 0 + 1?", "answer": "1"}])
    with pytest.raises(ConfigError, match=r"missing image path"):
        make_env("jsonl", path=str(path))
    (item,) = make_env("jsonl", path=str(path), allow_no_image=True).items
    assert (item.item_id, item.images, item.answers) == ("t0", (), ("1",))


def test_each_item_is_graded_by_its_part_as_the_part_gave_it():
    """A grader that reads the item's own id and dataset (a docvqa metric, a Gymnasium episode) sees the
    part's item, not the mixture's; a two-try part's episode keeps its second turn inside the mixture."""
    seen = []

    def grader(item, completion):
        seen.append((item.item_id, item.dataset))
        return ExactMatchGrader()(item, completion)

    one = TaskItem("q1", "plain_ds", "test", "p.jsonl", "2+2?", ("4",), ())
    two = TaskItem("q1", "tries_ds", "test", "t.jsonl", "3+3?", ("6",), ())
    plain = SingleTurnEnv("plain_ds", LoadResult([one]), grader)
    tries = TwoTriesEnv(SingleTurnEnv("tries_ds", LoadResult([two]), grader))
    env = MixtureEnv("mix", {"plain": plain, "tries": tries}, seed=0)
    assert sorted(item.item_id for item in env.items) == ["plain/q1", "tries/q1"] and env.max_turns == 2
    item = next(item for item in env.items if item.dataset == "tries")
    state, _ = env.reset(item)
    first = env.step(state, Completion("5"))
    assert (first.done, first.reward) == (False, 0.0) and isinstance(first.state, MixtureState)
    assert (first.state.item, first.state.turn, first.state.part) == (item, 1, "tries")
    second = env.step(first.state, Completion("6"))
    assert (second.done, second.reward, second.info.correct) == (True, 0.5, True)
    plain_item = next(item for item in env.items if item.dataset == "plain")
    assert env.step(EpisodeState(plain_item), Completion("4")).reward == 1.0  # a state the caller made
    assert seen == [("q1", "tries_ds"), ("q1", "tries_ds"), ("q1", "plain_ds")]
    assert observe(item).messages == observe(two).messages


def test_a_part_s_rejections_are_the_mixture_s_and_a_short_part_leaves_it_shorter(tiny_files):
    few = tiny_files.jsonl("few.jsonl", [{"id": "s0", "question": "Colour?", "answer": "red", "image": "gone.png"},
                                         {"id": "s1", "question": "Colour?", "answer": "red",
                                          "image": str(tiny_files.image("pics/red.png"))}])
    text = tiny_files.jsonl("t.jsonl", [{"id": f"t{n}", "question": f"{n}?", "answer": str(n)} for n in range(4)])
    env = mixture_env({"few": lambda limit, seed: make_env("jsonl", path=str(few), limit=limit, seed=seed),
                       "text": lambda limit, seed: make_env("jsonl", path=str(text), limit=limit, seed=seed,
                                                            allow_no_image=True)},
                      weights=(0.5, 0.5), limit=4, seed=0, name="mix")
    assert [item.item_id for item in env.items if item.dataset == "few"] == ["few/s1"]  # 2 drawn, 1 usable
    assert len(env) == 3 and [row.sample_id for row in env.rejected] == ["s0"]
    assert env.counts == (4, 3, 1)


@pytest.mark.parametrize(("mixture", "more", "message"), [
    ({"parts": ["shapes", "nope"], "weights": [1, 1]}, {},
     "'datasets.mix.parts' names 'nope', which is not a [datasets.<name>] table of this file; its tables: shapes, "
     "text"),
    ({"parts": ["shapes", "text"], "weights": [1]}, {},
     "'datasets.mix.weights' must hold one weight per part (2 parts: shapes, text), got 1"),
    ({"parts": ["shapes", "text"], "weights": [1, -0.5]}, {},
     "'datasets.mix.weights' must be finite numbers >= 0, got [1, -0.5]"),
    ({"parts": ["shapes", "text"], "weights": [0, 0.0]}, {},
     "'datasets.mix.weights' must sum to more than 0, got [0, 0.0]"),
    ({"parts": ["shapes", "inner"], "weights": [1, 1]},
     {"inner": {"kind": "mixture", "parts": ["shapes"], "weights": [1]}},
     "'datasets.mix.parts' names 'inner', itself a mixture; a mixture's parts are plain datasets"),
    ({"parts": ["shapes", "mix"], "weights": [1, 1]}, {}, "'datasets.mix.parts' names the mixture itself ('mix')"),
    ({"parts": ["shapes", "shapes"], "weights": [1, 1]}, {}, "'datasets.mix.parts' names shapes more than once"),
    ({"weights": [1]}, {}, "'datasets.mix.parts' is required for kind 'mixture'"),
    ({"parts": ["shapes"]}, {}, "'datasets.mix.weights' is required for kind 'mixture': one weight per part (shapes)"),
    ({"parts": "shapes", "weights": [1]}, {}, "'datasets.mix.parts' must be a non-empty list of [datasets.<name>] "
     "names, got 'shapes'"),
    ({"parts": ["shapes"], "weights": ["1"]}, {}, "'datasets.mix.weights' must be a list of numbers, one per part, "
     "got ['1']"),
    ({"parts": ["shapes"], "weights": [1], "instruction": "Say it."}, {},
     "'datasets.mix.instruction' is not a setting of kind 'mixture'"),
])
def test_a_bad_mixture_is_refused_in_one_line_naming_the_setting(tiny_files, mixture, more, message):
    with pytest.raises(ConfigError) as refused:
        config(tiny_files, mixture, **more)
    assert str(refused.value).startswith("bench.toml: setting " + message), str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_mixture_draws_its_parts_at_their_counts_and_is_told_stale_when_one_changes(tiny_files):
    table = mixture_table(tiny_files)
    fingerprint = dataset_fingerprint(table)
    assert dict(fingerprint.settings)["shapes.limit"] == "7" and dict(fingerprint.settings)["text.limit"] == "3"
    assert sorted(file.path.rsplit("/", 1)[1] for file in fingerprint.files) == ["shapes.jsonl", "text.jsonl"]
    assert dataset_fingerprint(mixture_table(tiny_files, weights=[0.5, 0.5])).version != fingerprint.version
    (tiny_files.folder / "text.jsonl").write_text('{"id": "t0", "question": "1?", "answer": "1"}\n')
    assert dataset_fingerprint(table).version != fingerprint.version
    with pytest.raises(ConfigError, match="is a mixture of shapes, text: it reads its parts' sources"):
        dataset_rows(table, ["other.jsonl"])


def test_benchmark_rows_of_a_mixture_name_their_source_and_its_text_only_rows_are_rows_too(tiny_files):
    table = mixture_table(tiny_files)
    rows = dataset_rows(table)
    shapes = [(f"shapes/s{n}", "mix/shapes", 1) for n in (0, 2, 3, 4, 5, 6, 9)]
    text = [(f"text/t{n}", "mix/text", 0) for n in (0, 6, 9)]
    assert [(row.item_id, row.dataset, len(row.images)) for row in rows.items] == [  # interleave((7, 3), seed=0)
        text[0], text[1], *shapes[:6], text[2], shapes[6]]
    assert rows.rejected == []
    assert row_kinds([table]) == {"mix": "mixture", "mix/shapes": "jsonl", "mix/text": "jsonl"}


def test_a_run_names_a_mixture_as_its_environment(tiny_files):
    bench = config(tiny_files, {"parts": ["shapes", "text"], "weights": [0.7, 0.3], "limit": 10})
    settings = TrainingSettings(env="mix", train_limit=20, eval_size=5, sampled_eval_size=0)
    chosen = named_dataset("mix", bench.datasets, "train", 20, 1003, "training environment")
    assert (chosen.limit, chosen.seed, [part.name for part in chosen.parts]) == (20, 1003, ["shapes", "text"])
    envs = run_environments(settings, 3, bench.datasets)
    assert len(envs.train) == 16 and len(envs.held_out) == 5  # 20 at 0.7 / 0.3: 14 shapes (of 10 lines) + 6 texts
    assert [item.dataset for item in envs.held_out.items].count("shapes") == 4  # 5 at 0.7 / 0.3: 3.5 -> 4, 1.5 -> 1
    assert envs.inputs["training"].why_source == ("part shapes: its rows are not cached; "
                                                  "part text: its rows are not cached")


def test_a_run_s_mixture_is_drawn_over_each_part_s_cached_rows_with_the_same_items(tiny_files, monkeypatch):
    bench = config(tiny_files, {"parts": ["shapes", "text"], "weights": [0.7, 0.3], "limit": 10})
    settings = TrainingSettings(env="mix", train_limit=20, eval_size=5, sampled_eval_size=0)
    from_sources = run_environments(settings, 3, bench.datasets)
    stages = cached_stages(run_datasets(settings, 3, bench.datasets))
    assert {stage: (part.name, part.limit, part.seed) for stage, part in stages.items()} == {
        "training/shapes": ("shapes", 14, 1003), "training/text": ("text", 6, 1003),  # 20 at 0.7 / 0.3
        "held_out/shapes": ("shapes", 4, 0), "held_out/text": ("text", 1, 0)}
    cached = {stage: env_table(part) for stage, part in stages.items()}

    def no_source(dataset):
        raise AssertionError(f"part {dataset.name} was read from its source")

    monkeypatch.setattr("aerorl_ops.envs.cached.dataset_env", no_source)
    again = run_environments(settings, 3, bench.datasets, cached)
    for stage in ("training", "held_out"):
        assert again.inputs[stage].cached
        assert again.inputs[stage].content_sha256 == from_sources.inputs[stage].content_sha256  # the same items
    assert [item.item_id for item in again.train.items] == [item.item_id for item in from_sources.train.items]
    assert mixture_sources(again.train) == ("shapes", "text")
    monkeypatch.undo()
    stale = {**cached, "training/text": env_table(replace(stages["training/text"], limit=5))}  # another draw
    partly = run_environments(settings, 3, bench.datasets, stale)
    assert partly.inputs["training"].why_source.startswith("part text: the cached rows were drawn from another "
                                                          "source")
    assert partly.inputs["training"].content_sha256 == from_sources.inputs["training"].content_sha256


def test_the_mixture_kind_is_registered_with_its_settings():
    assert env_settings("mixture") == ("parts", "weights", "split", "limit", "seed", "name")
    with pytest.raises(ValueError, match="needs the setting 'parts'"):
        make_env("mixture", weights=(1,), limit=2)


def test_an_evaluation_of_a_mixture_is_told_apart_by_its_parts_tables(tiny_files):
    table = mixture_table(tiny_files)
    other_split = replace(table, parts=(replace(table.parts[0], split="test"), table.parts[1]))
    assert eval_id_of(EvalSettings(), table) != eval_id_of(EvalSettings(), other_split)
    assert eval_id_of(EvalSettings(), table) == eval_id_of(EvalSettings(), mixture_table(tiny_files))


def test_a_part_drawn_no_item_is_still_a_source(tiny_files):
    env = dataset_env(mixture_table(tiny_files, weights=[1, 0]))
    assert [item.dataset for item in env.items] == ["shapes"] * 10 and env.sources == ("shapes", "text")
    assert list(env.parts) == ["shapes"]  # the text part is not read


def test_a_part_drawn_zero_times_between_two_others_leaves_the_later_part_s_items_named_as_its_own(tiny_files):
    """Weights 0.5 / 0 / 0.5 of 4: the middle part is not built; the third part's items keep its name (they
    were once labelled with the second's, and then could not be reset)."""
    more = {"other": {"kind": "jsonl", "path": str(tiny_files.folder / "text.jsonl"), "split": "train",
                      "allow_no_image": True}}
    chosen = config(tiny_files, {"parts": ["shapes", "other", "text"], "weights": [0.5, 0.0, 0.5], "limit": 4},
                    **more).datasets[-1]
    env = dataset_env(chosen)
    assert sorted((item.dataset, item.item_id.split("/")[0]) for item in env.items) == [
        ("shapes", "shapes"), ("shapes", "shapes"), ("text", "text"), ("text", "text")]
    assert mixture_sources(env) == ("shapes", "other", "text")
    for item in env.items:
        state, _ = env.reset(item)
        assert env.step(state, Completion(item.answers[0])).info.correct
