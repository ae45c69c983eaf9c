"""Every input of `aerorl train`, `bench` and `eval` is checked before any model loads or any job starts:
a flag by its setting's own check (as the same key in the file), the rules across settings, the named
things (environment, curriculum question types) and a model folder; each error is one line naming the
flag or the folder, exit 2. An input error raised inside a job is one line too, unless --debug."""

from __future__ import annotations

import dagster as dg
import pytest

from aerorl_ops.config.fields import ConfigError
from aerorl_pipeline import cli
from aerorl_pipeline.failures import failure_from_results
from aerorl_pipeline.settings_flags import input_error_in
from assets.project import DATA_DIR


@pytest.fixture(autouse=True)
def no_model_loads(monkeypatch, tmp_path):
    """Loading or building a model, or opening the Dagster instance, fails the test: these inputs are
    refused before any of that."""
    import transformers

    import aerorl_ops.models.sources as sources
    import aerorl_ops.rl.run.embedded_builds as embedded

    def refuse(*args, **kwargs):
        raise AssertionError("a model load happened before the input was refused")

    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", refuse)
    for registry in (sources.BASE_BUILDERS, embedded.EMBEDDED_BUILDERS):
        for name in registry:
            monkeypatch.setitem(registry, name, refuse)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "never_created"))
    yield
    assert not (tmp_path / "never_created").exists()


def refused(capsys, argv: list[str]) -> str:
    """The one line ``aerorl <argv>`` prints, after asserting it exits 2."""
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("aerorl: configuration error: ")
    return lines[0]


@pytest.mark.parametrize(("argv", "expected"), [
    (["train", "--learning-rate", "-0.001"], "aerorl train: setting '--learning-rate' must be > 0, got -0.001"),
    (["train", "--algorithm", "foo"], "aerorl train: setting '--algorithm' must be one of ('grpo', 'dr_grpo', "
     "'rloo', 'reinforce_pp', 'ppo', 'dapo', 'gspo'), got 'foo'"),
    (["train", "--quant-bits", "3"], "aerorl train: setting '--quant-bits' must be 4 (nf4), 8 (int8) or 16, got 3"),
    (["train", "--lr-schedule", "cosin"],
     "aerorl train: setting '--lr-schedule' must be one of ('constant', 'cosine'), got 'cosin'"),
    (["bench", "--max-new-tokens", "-5"], "aerorl bench: setting '--max-new-tokens' must be a positive integer, "
     "got -5"),
    (["bench", "--pass-threshold", "nan"], "aerorl bench: setting '--pass-threshold' must be a finite number, "
     "got nan"),
    (["eval", "--n", "0"], "aerorl eval: setting '--n' must be a positive integer, got 0"),
])
def test_a_bad_flag_is_one_line_naming_the_flag_and_the_rule(capsys, argv, expected):
    assert refused(capsys, argv) == f"aerorl: configuration error: {expected}"


@pytest.mark.parametrize(("flags", "expected"), [
    (["--group-size", "1"], "aerorl train: group_size must be >= 2 for grpo/dr_grpo/rloo/dapo/gspo (advantages are "
     "relative within a group), >= 1 otherwise, got 1"),
    (["--reference", "lora_base"], "aerorl train: reference must be 'quantized' when lora_rank = 0"),
    (["--vllm-sleep-mode"], "aerorl train: vllm_sleep_mode = true puts the vLLM rollout engine to sleep during the "
     "update, but rollout_backend = 'hf' has none"),
    (["--nproc-per-node", "2", "--grad-accumulation", "3"],
     "aerorl train: grad_accumulation (3) must be a multiple of nproc_per_node x nnodes (2)"),
    (["--nnodes", "2", "--grad-accumulation", "3"],  # ranks in all: 2 nodes of 1
     "aerorl train: grad_accumulation (3) must be a multiple of nproc_per_node x nnodes (2)"),
])
def test_a_rule_across_settings_broken_by_flags_is_one_line(capsys, flags, expected):
    assert refused(capsys, ["train", *flags]).startswith(f"aerorl: configuration error: {expected}")


def test_a_group_of_one_is_fine_for_an_algorithm_without_groups(capsys):
    line = refused(capsys, ["train", "--algorithm", "reinforce_pp", "--group-size", "1", "--env", "nope"])
    assert "training environment 'nope'" in line  # got past the group rule to the next input


def test_an_unknown_environment_lists_the_known_ones(capsys):
    line = refused(capsys, ["train", "--env", "nope"])
    assert line == ("aerorl: configuration error: aerorl train: training environment 'nope' is neither an "
                    "environment kind (arc, chartqa, docvqa, easy_vqa, easy_vqa_combinations, easy_vqa_pairs, "
                    "easy_vqa_two_tries, gymnasium, jsonl, mixture, parquet) nor a configured dataset (arc, chartqa, "
                    "docvqa, easy_vqa)")


def test_a_misspelt_schedule_stops_before_training_and_leaves_no_checkpoint_folder(capsys):
    checkpoints = DATA_DIR / "checkpoints"
    before = sorted(checkpoints.iterdir()) if checkpoints.exists() else []
    assert "'--lr-schedule'" in refused(capsys, ["train", "--lr-schedule", "cosin", "--run-name", "h3-cosin"])
    assert (sorted(checkpoints.iterdir()) if checkpoints.exists() else []) == before
    assert not (checkpoints / "h3-cosin").exists()


def test_a_curriculum_typo_is_refused_listing_the_environments_types(capsys):
    line = refused(capsys, ["train", "--curriculum", "50: colour,shap @ 0.75", "--train-limit", "64",
                            "--eval-size", "8", "--sampled-eval-size", "0"])
    assert line == ("aerorl: configuration error: aerorl train: training curriculum stage 1 (until step 50) names "
                    "question types ['shap'] that environment 'easy_vqa' does not have; its types: colour, shape, "
                    "yes_no")


@pytest.fixture
def empty_folder(tmp_path):
    folder = tmp_path / "not-a-checkpoint"
    folder.mkdir()
    return folder


def config_with_model(tmp_path, source) -> str:
    path = tmp_path / "bench.toml"
    path.write_text(f'[benchmark]\nbatch_sizes = [1]\n\n[models.broken]\nsource = "{source}"\n\n'
                    '[eval]\nmodel = "broken"\nbaseline = "broken"\n')
    return str(path)


@pytest.mark.parametrize("command", ["train", "bench", "eval"])
def test_a_model_folder_without_config_json_is_one_line_naming_the_folder(capsys, tmp_path, empty_folder, command):
    argv = {"train": ["train", "--base-model", str(empty_folder)],
            "bench": ["bench", "--config", config_with_model(tmp_path, empty_folder)],
            "eval": ["eval", "--config", config_with_model(tmp_path, empty_folder),
                     "--database", str(tmp_path / "r.duckdb")]}[command]
    line = refused(capsys, argv)
    assert line.endswith(f"cannot load model '{empty_folder}': the directory '{empty_folder}' exists but is not a "
                         "loadable checkpoint (no config.json in it)")


def test_debug_shows_the_traceback_too(capsys):
    assert cli.main(["train", "--learning-rate", "-0.001", "--debug"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("\naerorl: configuration error: aerorl train: setting '--learning-rate' must be > 0, "
                        "got -0.001\n")


# --- an input error raised inside a job's step ------------------------------------------------------

@dg.asset
def refuses_its_input() -> None:
    raise ConfigError("model folder '/x': no config.json in it")


JOB = dg.Definitions(assets=[refuses_its_input]).resolve_implicit_global_asset_job_def()


def test_an_input_error_is_found_in_what_it_caused():
    with pytest.raises(ConfigError) as raised:  # execute_in_process re-raises what the step raised
        JOB.execute_in_process()
    try:
        raise RuntimeError("the step failed") from raised.value
    except RuntimeError as wrapped:
        assert input_error_in(wrapped) is raised.value
    assert input_error_in(RuntimeError("a bug")) is None


def test_an_input_error_in_a_step_is_found_in_a_failed_result():
    result = JOB.execute_in_process(raise_on_error=False)
    failure = failure_from_results([result])
    assert (failure.message, failure.exit_code) == ("model folder '/x': no config.json in it", 2)
    assert "ConfigError: model folder '/x': no config.json in it" in failure.detail  # the trace, for --debug


def test_the_command_prints_an_input_error_from_a_step_as_one_line(capsys, monkeypatch):
    def run_the_job(args) -> int:
        JOB.execute_in_process()
        return 0

    monkeypatch.setattr(cli, "_train", run_the_job)
    assert cli.main(["train"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == "aerorl: configuration error: model folder '/x': no config.json in it"
    assert cli.main(["train", "--debug"]) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err
