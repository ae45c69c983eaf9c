"""The shipped benchmark's second model, ``tiny-qwen2-vl-easy-vqa``, gives the nightly report something to
compare: real accuracy on easy-VQA, a batch-size invariance check over answers that are not all the
same empty guess, a rerun of the same code that changes no row, and a night on perturbed weights
(Gaussian noise, 0.7 of each tensor's spread) whose changed rows the regression check and view list.

The real definitions (the shipped config's partitions) run with isolated resources: 24 easy-VQA test
questions, one DocVQA and one ChartQA row, and two ARC rows (generated in their own batch, at ARC's 128 new
tokens: the invariance check then covers two multi-image prompts padded together; the model answers them with
a word, so ARC accuracy is 0); the model is the session's build of the shipped recipe.
"""

from __future__ import annotations

import math
import shutil

import dagster as dg
import duckdb
import pytest
import torch
from safetensors.torch import load_file, save_file

from aerorl_ops.models.entry import EMBEDDED_EASY_VQA
from aerorl_pipeline.definitions import build_definitions
from assets.resources import ModelRuntime
from assets.runs import BENCHMARK_RUN_TAG

ROWS_LIMITS = {"docvqa_rows": 1, "chartqa_rows": 1, "easy_vqa_rows": 24, "arc_rows": 2}  # the shipped [datasets]
ROWS_RUN_CONFIG = {"ops": {name: {"config": {"limit": limit}} for name, limit in ROWS_LIMITS.items()}}
NIGHT_1, NIGHT_2, NIGHT_3 = "night-1", "night-2", "night-3"
NOISE = 0.7  # of each weight tensor's standard deviation: changes several of the 28 answers


def partition(batch_size: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": EMBEDDED_EASY_VQA, "batch_size": str(batch_size)})


def checks_of(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.asset_check_key.name: e for e in result.get_asset_check_evaluations()}


def perturbed_copy(model_dir, models_dir):
    """The build copied into ``models_dir`` (its marker too, so it counts as built) with noisy weights."""
    copy = shutil.copytree(model_dir, models_dir / EMBEDDED_EASY_VQA)
    weights = load_file(copy / "model.safetensors")
    generator = torch.Generator().manual_seed(0)
    save_file({name: tensor + NOISE * tensor.std() * torch.randn(tensor.shape, generator=generator)
               if tensor.is_floating_point() and tensor.numel() > 1 else tensor for name, tensor in weights.items()},
              copy / "model.safetensors", metadata={"format": "pt"})
    return models_dir


@pytest.fixture(scope="module")
def nights(tmp_path_factory, dagster_env_factory, easy_vqa_model_dir):
    """Night 1: batch sizes 1 and 4; night 2: batch size 1 again, same code; night 3: batch size 1 on
    perturbed weights under the same model key."""
    env = dagster_env_factory(tmp_path_factory.mktemp("trained_partitions"))
    defs = build_definitions(resources=env.resources)
    rows = [defs.get_assets_def(name) for name in ROWS_LIMITS]
    assert dg.materialize(rows, resources=env.resources, instance=env.instance, run_config=ROWS_RUN_CONFIG,
                          tags={BENCHMARK_RUN_TAG: NIGHT_1}).success
    job = defs.resolve_job_def("benchmark")
    results = {(night, size): job.execute_in_process(partition_key=partition(size), instance=env.instance,
                                                     tags={BENCHMARK_RUN_TAG: night}, raise_on_error=False)
               for night, size in ((NIGHT_1, 1), (NIGHT_1, 4), (NIGHT_2, 1))}
    noisy = perturbed_copy(easy_vqa_model_dir, tmp_path_factory.mktemp("perturbed_models"))
    resources = {**env.resources, "model_runtime": ModelRuntime(models_dir=str(noisy), device="cpu", torch_threads=1)}
    results[NIGHT_3, 1] = build_definitions(resources=resources).resolve_job_def("benchmark").execute_in_process(
        partition_key=partition(1), instance=env.instance, tags={BENCHMARK_RUN_TAG: NIGHT_3}, raise_on_error=False)
    yield env, results
    env.instance.dispose()


def test_the_trained_model_scores_real_accuracy_on_easy_vqa(nights):
    env, results = nights
    assert all(results[night, size].success for night, size in ((NIGHT_1, 1), (NIGHT_1, 4), (NIGHT_2, 1)))
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        summary = conn.execute("SELECT run_id, batch_size, samples, accuracy FROM benchmark_summary "
                               "WHERE model_key = ? AND dataset = 'easy_vqa' ORDER BY ALL",
                               [EMBEDDED_EASY_VQA]).fetchall()
        answers = conn.execute("SELECT count(DISTINCT response) FROM generations WHERE run_id = ? AND batch_size = 1 "
                               "AND dataset = 'easy_vqa'", [NIGHT_1]).fetchone()[0]
    assert [(run, size, n) for run, size, n, _ in summary] == [(NIGHT_1, 1, 24), (NIGHT_1, 4, 24), (NIGHT_2, 1, 24),
                                                               (NIGHT_3, 1, 24)]
    assert all(accuracy >= 0.6 for run, *_, accuracy in summary if run != NIGHT_3)  # the untrained model: 0.0
    assert answers >= 3  # yes/no and colours, not one guess for every question


def test_every_shipped_dataset_is_summarised_and_arc_rows_score_a_word_as_no_grid(nights):
    env, _ = nights
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        samples = dict(conn.execute("SELECT dataset, samples FROM benchmark_summary WHERE run_id = ? "
                                    "AND batch_size = 1", [NIGHT_1]).fetchall())
        arc = conn.execute("SELECT g.response, g.generated_tokens, s.correct, s.cell_accuracy FROM generations g "
                           "JOIN reward_scores s USING (run_id, model_key, batch_size, sample_id) WHERE g.run_id = ? "
                           "AND g.batch_size = 1 AND g.dataset = 'arc' ORDER BY g.sample_id", [NIGHT_1]).fetchall()
        others = conn.execute("SELECT count(*), count(cell_accuracy) FROM reward_scores WHERE run_id = ? "
                              "AND batch_size = 1 AND dataset <> 'arc'", [NIGHT_1]).fetchone()
    assert samples == {name.removesuffix("_rows"): limit for name, limit in ROWS_LIMITS.items()}
    assert [(correct, cells) for *_, correct, cells in arc] == [(False, 0.0), (False, 0.0)]
    assert all(not any(c.isdigit() for c in response) and tokens < 128 for response, tokens, *_ in arc)  # a word
    assert others == (26, 0)  # cell_accuracy is NULL outside ARC


def test_batch_size_4_answers_as_batch_size_1_does(nights):
    _, results = nights
    invariance = checks_of(results[(NIGHT_1, 4)])["batch_invariant"]
    assert invariance.passed
    # every row, ARC's two (padded together in a batch of their own) included: 1 + 1 + 24 + 2
    assert (invariance.metadata["compared"].value, invariance.metadata["mismatches"].value) == (28, 0)


def test_a_rerun_of_the_same_code_changes_no_row(nights):
    env, results = nights
    rows = checks_of(results[(NIGHT_2, 1)])["no_row_drop"]
    assert rows.passed
    assert (rows.metadata["rows_lost"].value, rows.metadata["rows_gained"].value,
            rows.metadata["rows_changed_text"].value) == (0, 0, 0)
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM benchmark_regressions WHERE run_id = ?", [NIGHT_2]).fetchone() == (0,)


def test_a_night_on_perturbed_weights_lists_the_rows_it_changed(nights):
    env, results = nights
    rows = checks_of(results[(NIGHT_3, 1)])["no_row_drop"]
    lost, gained, changed = (rows.metadata[key].value for key in ("rows_lost", "rows_gained", "rows_changed_text"))
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        listed = conn.execute("SELECT dataset, sample_id, change, previous_run_id, previous_response, response "
                              "FROM benchmark_regressions WHERE run_id = ? ORDER BY ALL", [NIGHT_3]).fetchall()
        answers = dict(conn.execute("SELECT run_id || '/' || sample_id, response FROM generations WHERE batch_size = 1 "
                                    "AND run_id IN (?, ?)", [NIGHT_2, NIGHT_3]).fetchall())
    assert changed >= 3 and len(listed) == changed  # every changed row is listed, once
    assert sum(change == "lost" for _, _, change, *_ in listed) == lost
    assert sum(change == "gained" for _, _, change, *_ in listed) == gained
    for _, sample_id, _, previous_run, before, after in listed:  # against the night before, with both answers
        assert previous_run == NIGHT_2 and before != after
        assert (answers[f"{NIGHT_2}/{sample_id}"], answers[f"{NIGHT_3}/{sample_id}"]) == (before, after)
    # the check blocks only on a significant drop: exact two-sided McNemar on the discordant rows
    p_value = min(1.0, 2 * sum(math.comb(lost + gained, k) for k in range(gained + 1)) / 2 ** (lost + gained)) \
        if lost > gained else 1.0
    assert rows.passed == (p_value >= 0.05) and results[NIGHT_3, 1].success == rows.passed
