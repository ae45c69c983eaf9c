"""``benchmarks/bench_decode.py`` on CPU: each decode path times the same batch, every reply the requested length,
the static path's replies identical to ``generate``'s; and ``bench_gpu_train``'s pure helpers on hand-made rows."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_decode():
    yield load("bench_decode")
    del sys.modules["bench_decode"]


@pytest.fixture(scope="module")
def bench_gpu_train():
    yield load("bench_gpu_train")
    del sys.modules["bench_gpu_train"]


def test_generate_and_static_decode_the_same_batch(bench_decode, tiny_model_dir, tmp_path):
    out = tmp_path / "decode.json"
    summary = bench_decode.main(["--model", str(tiny_model_dir), "--dtype", "float32", "--sequences", "3",
                                 "--new-tokens", "6", "--image", "112x112", "--repeats", "1",
                                 "--paths", "generate", "static", "--bandwidth-tbs", "0.01", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(summary))
    generate, static = summary["paths"]
    assert (generate["path"], generate["used"]) == ("generate", "generate")
    assert (static["path"], static["used"]) == ("static", "static")
    assert static["identical_share"] == 1.0
    assert all(path["step_ms"] > 0 and path["prefill_s"] > 0 for path in summary["paths"])
    assert summary["sequences"] == 3 and summary["floor_ms"] > 0


def test_the_update_and_step_mfu_count_six_flops_a_parameter_and_token(bench_gpu_train):
    rows = [{"tokens_per_s": 100.0, "step_s": 10.0, "rollout_s": 9.0, "scoring_s": 0.5, "update_s": 0.5,
             "peak_memory_mb": 2048.0, "decode_path": "compiled", "scoring_path": "packed"},  # compiles: not timed
            {"tokens_per_s": 500.0, "step_s": 2.0, "rollout_s": 1.0, "scoring_s": 0.5, "update_s": 0.5,
             "peak_memory_mb": 4096.0, "decode_path": "compiled", "scoring_path": "packed"}]
    figures = bench_gpu_train.train_figures(rows, params=10**9, peak_tflops=1.0)
    assert figures["tokens_per_step"] == 1000.0 and figures["tokens_per_s_per_gpu"] == 500.0
    assert figures["update_mfu"] == pytest.approx(6 * 10**9 * 1000 / 0.5 / 1e12)
    assert figures["step_mfu"] == pytest.approx(6 * 10**9 * 1000 / 2.0 / 1e12)
    assert (figures["first_step_s"], figures["peak_memory_gib"], figures["steps_timed"]) == (10.0, 4.0, 1)


def test_decoder_parameters_of_qwen25_vl_3b_from_its_config(bench_gpu_train, tmp_path):
    from transformers import AutoConfig

    from aerorl_ops.models.real_shapes import shape_config

    config = AutoConfig.for_model("qwen2_5_vl", **{k: v for k, v in shape_config("qwen2.5-vl-3b").items()
                                                   if not k.endswith("token_id")})
    config.save_pretrained(tmp_path)
    # 36 layers x (attention 2048 x 128 x (16 + 4) + 2048 x 2048, MLP 3 x 2048 x 11008) + the tied embedding
    assert bench_gpu_train.decoder_parameters(tmp_path) == 36 * (2048 * 128 * 20 + 2048 * 2048 + 3 * 2048 * 11008) + (
        151_936 * 2048) == 3_085_697_024
