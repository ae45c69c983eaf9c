"""The benchmark config file: the shipped one parses, and every bad setting is named in its error."""

from __future__ import annotations

from pathlib import Path

import pytest

from aerorl_ops.config.benchmark import ConfigError, load_benchmark_config, parse_benchmark_config
from assets.project import BENCHMARK_CONFIG_PATH


def config_data(**overrides) -> dict:
    data = {"benchmark": {"batch_sizes": [1, 4]},
            "models": {"tiny-qwen2-vl": {"source": "embedded:tiny-qwen2-vl"}},
            "rewards": {}}
    for section, values in overrides.items():
        data[section] = values
    return data


def test_the_shipped_config_parses():
    config = load_benchmark_config(BENCHMARK_CONFIG_PATH)
    assert config.model_keys == ("tiny-qwen2-vl", "tiny-qwen2-vl-easy-vqa")
    assert config.batch_sizes == (1, 4, 8)
    assert config.model("tiny-qwen2-vl").embedded_name == "tiny-qwen2-vl"
    assert config.model("tiny-qwen2-vl-easy-vqa").embedded_name == "tiny-qwen2-vl-easy-vqa"
    assert sum(config.rewards.weights.values()) == pytest.approx(1.0)


def test_unknown_model_key():
    config = parse_benchmark_config(config_data(), path="bench.toml")
    with pytest.raises(ConfigError, match=r"bench\.toml: unknown model key 'qwen-72b'; configured keys: tiny-qwen2-vl"):
        config.model("qwen-72b")


def test_model_path_that_does_not_exist(tmp_path: Path):
    data = config_data(models={"local": {"source": "./checkpoints/missing"}})
    with pytest.raises(ConfigError, match=r"'models\.local\.source'.*checkpoints/missing.*not a directory"):
        parse_benchmark_config(data, path="bench.toml", root=tmp_path)


def test_relative_model_path_resolves_against_the_config_folder(tmp_path: Path):
    (tmp_path / "checkpoints" / "mine").mkdir(parents=True)
    config_file = tmp_path / "bench.toml"
    config_file.write_text('[benchmark]\nbatch_sizes = [2]\n[models.mine]\nsource = "./checkpoints/mine"\n')
    config = load_benchmark_config(config_file)
    assert Path(config.model("mine").source) == (tmp_path / "checkpoints" / "mine").resolve()


@pytest.mark.parametrize("sizes", [[0], [4, 0], [-1], ["4"], [True], []])
def test_batch_size_must_be_a_positive_integer(sizes):
    with pytest.raises(ConfigError, match=r"'benchmark\.batch_sizes'"):
        parse_benchmark_config(config_data(benchmark={"batch_sizes": sizes}))


@pytest.mark.parametrize("weight", ["high", None, True, float("nan"), [0.4]])
def test_weight_that_is_not_a_number(weight):
    weights = {"verifier": weight, "grounding": 0.3, "format": 0.2, "cost": 0.1}
    with pytest.raises(ConfigError, match=r"'rewards\.weights\.verifier' must be a finite number"):
        parse_benchmark_config(config_data(rewards={"weights": weights}))


def test_weight_for_a_reward_that_does_not_exist():
    """A misspelt reward name must not be silently ignored (the real weight would keep its default)."""
    weights = {"verifer": 1.0, "grounding": 0.0, "format": 0.0, "cost": 0.0}
    with pytest.raises(ConfigError, match=r"rewards\.weights.*verifer"):
        parse_benchmark_config(config_data(rewards={"weights": weights}))


@pytest.mark.parametrize(("section", "values", "setting"), [
    ("models", {"Bad Key": {"source": "embedded:tiny-qwen2-vl"}}, "models.Bad Key"),
    ("models", {"tiny": {"source": "embedded:giant"}}, "models.tiny.source"),
    ("models", {"tiny": {"source": "embedded:tiny-qwen2-vl", "dtype": "int3"}}, "models.tiny.dtype"),
    ("models", {"tiny": {"source": "embedded:tiny-qwen2-vl", "revison": "main"}}, "models.tiny"),
    ("models", {}, "models"),
    ("rewards", {"target_tokens": 0}, "rewards.target_tokens"),
    ("rewards", {"regex_pattern": "(unclosed"}, "rewards.regex_pattern"),
    ("rewards", {"latency_budget_ms": "fast"}, "rewards.latency_budget_ms"),
])
def test_other_invalid_settings_are_named(section, values, setting):
    with pytest.raises(ConfigError, match=f"'{setting}'"):
        parse_benchmark_config(config_data(**{section: values}), path="bench.toml")


@pytest.mark.parametrize(("section", "values", "setting"), [
    ("benchmark", {"batch_sizes": [1], "seed": "zero"}, "benchmark.seed"),
    ("rewards", {"require_json": "false"}, "rewards.require_json"),  # bool("false") would be True
])
def test_seed_and_require_json_are_checked_too(section, values, setting):
    with pytest.raises(ConfigError, match=f"'{setting}'"):
        parse_benchmark_config(config_data(**{section: values}), path="bench.toml")


def test_missing_and_malformed_files_are_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_benchmark_config(tmp_path / "nope.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[benchmark\n")
    with pytest.raises(ConfigError, match=r"broken\.toml.*not valid TOML"):
        load_benchmark_config(broken)


# --- minimal inputs found by fuzzing (tests/reliability/test_fuzzed_inputs.py); each raised another error ----

@pytest.mark.parametrize(("content", "problem"), [
    (b"\xff\xfe\x00garbage", "is not UTF-8 text, as TOML must be (invalid start byte at byte 0)"),  # UnicodeDecodeError
    (b"a = " + b"[" * 100_000 + b"]" * 100_000, "nests its arrays or tables too deeply to read"),  # RecursionError
])
def test_a_file_that_is_no_toml_text_is_named(tmp_path: Path, content, problem):
    path = tmp_path / "bench.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        load_benchmark_config(path)
    assert str(raised.value) == f"benchmark config {str(path)!r} {problem}"


def test_a_folder_in_place_of_the_file_is_named(tmp_path: Path):  # IsADirectoryError
    with pytest.raises(ConfigError) as raised:
        load_benchmark_config(tmp_path)
    assert str(raised.value) == f"benchmark config {str(tmp_path)!r} cannot be read (Is a directory)"


@pytest.fixture
def dataset_folder(tmp_path: Path) -> Path:
    (tmp_path / "rows.jsonl").write_text("")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    return tmp_path


EMBEDDED = "embedded:tiny-qwen2-vl"


@pytest.mark.parametrize(("sections", "setting", "problem"), [
    ({"models": {"m": {"source": "/" + "a" * 300}}}, "models.m.source", "which is not a directory"),  # OSError
    ({"models": {"m": {"source": EMBEDDED, "chat_template": "a" * 256}}}, "models.m.chat_template",
     "which is not a file (nor is it Jinja text)"),  # OSError: file name too long
    ({"models": {"m": {"source": EMBEDDED, "chat_template": "image.png"}}}, "models.m.chat_template",
     "which is not UTF-8 text (invalid start byte at byte 0)"),  # UnicodeDecodeError
    ({"datasets": {"d": {"kind": "jsonl", "path": "a" * 256}}}, "datasets.d.path", "which does not exist"),  # OSError
    ({"datasets": {"d": {"kind": "jsonl", "path": "~no-such-user-here/rows.jsonl"}}}, "datasets.d.path",
     "which does not exist"),  # RuntimeError: could not determine home directory
    ({"datasets": {"d": {"kind": "jsonl", "path": "rows.jsonl", "image_roots": ["a/" * 2100]}}},
     "datasets.d.image_roots", "which does not exist"),  # OSError
    ({"eval": {"follow_checkpoints": "every-" + "9" * 5000}}, "eval.follow_checkpoints",
     'must be "all", "final" or "every-<k>"'),  # ValueError: past int()'s digit limit
    ({"eval": {"follow_checkpoints": "every-\u00b2"}}, "eval.follow_checkpoints",
     'must be "all", "final" or "every-<k>"'),  # ValueError: a superscript two is a digit to isdigit(), not to int()
    ({"rewards": {"regex_pattern": "(" * 5000 + ")" * 5000}}, "rewards.regex_pattern",
     "is not a usable regular expression (its groups nest too deeply)"),  # RecursionError
    ({"rewards": {"regex_pattern": "a{4294967296}"}}, "rewards.regex_pattern",
     "is not a valid regular expression (the repetition number is too large)"),  # OverflowError
    ({"rewards": {"regex_pattern": "[[a]"}}, "rewards.regex_pattern", "is a regular expression Python will read "
     "differently (Possible nested set at position 1); escape"),  # a FutureWarning printed beside the one line
])
def test_settings_found_by_fuzzing_are_named(dataset_folder: Path, sections, setting, problem):
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config(config_data(**sections), path="bench.toml", root=dataset_folder)
    message = str(raised.value)
    assert message.startswith(f"bench.toml: setting '{setting}' ") and problem in message
    assert len(message.splitlines()) == 1


def test_a_judge_is_checked_against_model_keys_already_checked():
    # found by fuzzing: the judge's error listed the [models] keys before they were checked, "\r" and all
    data = config_data(models={"ok": {"source": EMBEDDED}, "x\r\ny": {"source": EMBEDDED}},
                       rewards={"judge": {"model": "other"}})
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config(data, path="bench.toml")
    assert str(raised.value) == ("bench.toml: setting 'models.x\\r\\ny' is not a safe partition key (lower-case "
                                 "letters, digits, '-', '_'; at most 64)")


def test_a_setting_error_quoting_the_file_is_one_printable_line():
    data = config_data(datasets={"mix": {"kind": "mixture", "parts": ["a\nb", "a\nb"], "weights": [1, 1]}})
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config(data, path="bench.toml")
    assert str(raised.value) == ("bench.toml: setting 'datasets.mix.parts' names a\\nb more than once; name each "
                                 "part once")


def test_an_eval_table_whose_k_exceeds_its_samples_names_the_file():  # found by fuzzing: it named "[eval]" alone
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config(config_data(eval={"samples": 1}), path="bench.toml")
    assert str(raised.value) == ("bench.toml: [eval]: k=8 exceeds samples=1; pass@k needs at least k responses per "
                                 "question")


def test_an_error_quoting_a_huge_value_leaves_its_middle_out():  # found by fuzzing: a 391,084-character line
    with pytest.raises(ConfigError) as raised:
        parse_benchmark_config(config_data(generation={"top_k": "x" * 50_000}), path="bench.toml")
    message = str(raised.value)
    assert message.startswith("bench.toml: setting 'generation.top_k' must be an integer >= 0, got 'xxx")
    assert "characters left out]" in message and len(message) < 2_100 and message.endswith("xxx'")
