"""The generation backend of a model entry, without vLLM: its settings in the config file, the
transformers path it picks by default, the clear error of ``backend = "vllm"`` where vLLM is not
installed, and that no module but ``vllm_engine`` imports vLLM."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from aerorl_ops.config.benchmark import ConfigError, parse_benchmark_config
from aerorl_ops.generation.batched import GenerationSettings, generate_rows
from aerorl_ops.generation.partition_run import partition_stats, run_generation
from aerorl_ops.generation.vllm_engine import INSTALL_HINT, VLLMNotInstalledError
from aerorl_ops.models.entry import GenerationBackend
from aerorl_ops.models.loading import ModelSource

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = GenerationSettings(max_new_tokens=3)


def models_config(**model) -> dict:
    return {"benchmark": {"batch_sizes": [1]}, "models": {"m": {"source": "embedded:tiny-qwen2-vl", **model}}}


def test_backend_defaults_to_transformers():
    entry = parse_benchmark_config(models_config(), path="bench.toml").model("m")
    assert entry.backend == GenerationBackend("hf")
    assert not entry.backend.uses_engine


def test_vllm_engine_settings_pass_through_as_written():
    entry = parse_benchmark_config(models_config(
        backend="vllm", gpu_memory_utilization=0.5, max_model_len=4096, tensor_parallel_size=2,
        engine_args={"enforce_eager": True, "max_num_seqs": 8}), path="bench.toml").model("m")
    assert entry.backend.name == "vllm"
    assert entry.backend.engine_kwargs() == {"gpu_memory_utilization": 0.5, "max_model_len": 4096,
                                             "tensor_parallel_size": 2, "enforce_eager": True, "max_num_seqs": 8}
    assert parse_benchmark_config(models_config(backend="vllm"), path="b").model("m").backend.engine_kwargs() == {}


@pytest.mark.parametrize(("model", "message"), [
    ({"backend": "sglang"}, r"'models\.m\.backend' must be one of \('hf', 'vllm'\), got 'sglang'"),
    ({"max_model_len": 4096}, r"'models\.m\.max_model_len' is a vLLM engine setting; set backend = \"vllm\" too"),
    ({"backend": "vllm", "gpu_memory_utilization": 1.5}, r"'models\.m\.gpu_memory_utilization' must be in \(0, 1\]"),
    ({"backend": "vllm", "tensor_parallel_size": 0}, r"'models\.m\.tensor_parallel_size' must be a positive integer"),
    ({"backend": "vllm", "engine_args": {"dtype": "half"}}, r"'models\.m\.engine_args\.dtype' is set by the model"),
    ({"backend": "vllm", "engine_args": {"max_model_len": 9}}, r"'models\.m\.engine_args\.max_model_len' is the model"),
    ({"backend": "vllm", "engine_args": 3}, r"'models\.m\.engine_args' must be a table"),
])
def test_bad_backend_settings_are_named(model, message):
    with pytest.raises(ConfigError, match=message):
        parse_benchmark_config(models_config(**model), path="bench.toml")


def test_an_engine_served_model_loads_its_weights_only_when_asked(tiny_model_dir):
    import torch

    from aerorl_ops.models.loading import load_vlm

    loaded = load_vlm(ModelSource(str(tiny_model_dir), backend=GenerationBackend("vllm")), torch.device("cpu"))
    assert loaded.loaded_model is None
    assert loaded.generation_config.eos_token_id == loaded.tokenizer.convert_tokens_to_ids("<|im_end|>")
    loaded.model.eval()  # an evaluation of a vLLM-benchmarked model still gets the transformers model
    assert loaded.loaded_model is not None


def test_the_hf_backend_is_batched_generate(tiny_vlm, few_rows):
    table = run_generation(tiny_vlm, few_rows, 2, SETTINGS, telemetry_interval_s=0.05)
    direct = generate_rows(tiny_vlm, few_rows, 2, SETTINGS)
    assert table.column("raw_response").to_pylist() == [s.raw_response for s in direct]
    stats = partition_stats(table)
    assert (stats.backend, stats.device, stats.model_load_s) == ("hf", "cpu", tiny_vlm.load_seconds)


def test_vllm_backend_without_vllm_says_how_to_install_it(tiny_model_dir, few_rows, monkeypatch):
    import torch

    from aerorl_ops.models.loading import load_vlm

    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError, installed or not
    source = ModelSource(str(tiny_model_dir), key="tiny-vllm", backend=GenerationBackend("vllm"))
    loaded = load_vlm(source, torch.device("cpu"))
    with pytest.raises(VLLMNotInstalledError) as raised:
        run_generation(loaded, few_rows, 2, SETTINGS)
    assert INSTALL_HINT in str(raised.value)
    assert "make vllm-setup" in str(raised.value) and 'pip install -e ".[vllm]"' in str(raised.value)


def test_only_the_engine_module_imports_vllm():
    importers = []
    for package in ("aerorl_ops", "assets", "aerorl_pipeline"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(name == "vllm" or name.startswith("vllm.") for name in names):
                    importers.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(importers)) == ["aerorl_ops/generation/vllm_engine.py"]


def test_policy_weights_of_a_lora_policy_are_its_merged_base_weights(fresh_tiny_vlm):
    """What a vLLM sampler loads from a LoRA policy: the checkpoint's names, adapters merged in, and
    the policy left unmerged afterwards."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    from aerorl_ops.generation.vllm_sampler import policy_weights

    plain = dict(policy_weights(fresh_tiny_vlm.model))
    torch.manual_seed(0)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)  # non-zero adapters
    lora = get_peft_model(fresh_tiny_vlm.model, config)
    merged = dict(policy_weights(lora))
    expected = dict(policy_weights(copy.deepcopy(lora).merge_and_unload()))  # a plain model, merged by peft
    assert list(merged) == list(plain) == list(expected)
    assert "visual.patch_embed.proj.weight" in merged  # the checkpoint's names, not transformers 5's in-memory ones
    assert all(torch.equal(merged[name], expected[name]) for name in merged)
    changed = [name for name in merged if not torch.equal(merged[name], plain[name])]
    assert changed and all(".q_proj." in name or ".v_proj." in name for name in changed)
    assert not any(module.merged for module in lora.modules() if hasattr(module, "merged"))
