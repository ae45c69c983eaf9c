"""``benchmarks/bench_packing.py --quick`` on CPU: both paths run the same batch, the packed one fewer tokens, with
the padded log-probs; and ``--random-init`` builds the model from a folder's config with random weights."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_packing.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # its helper module (quiet_logs) beside it, as when run as a script
    spec = importlib.util.spec_from_file_location("bench_packing", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]
    sys.path.remove(str(BENCH.parent))


def test_quick_packs_fewer_tokens_with_the_padded_log_probs(bench, tiny_model_dir, tmp_path):
    out = tmp_path / "packing.json"
    figures = bench.main(["--quick", "--model", str(tiny_model_dir), "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(figures))
    assert figures["rows"] == 6 and figures["micro_batches"] == 2
    assert figures["packed_path"] == "packed (aerorl_varlen attention)"
    assert figures["tokens"]["packed"] < figures["tokens"]["padded"]
    assert figures["max_logprob_difference"] < 1e-5
    assert set(figures["seconds"]) == {f"{path}/{p}" for path in ("padded", "packed") for p in ("logprob", "update")}
    assert all(value > 0 for value in figures["seconds"].values())


def test_random_init_builds_the_folders_config_with_other_weights(bench, tiny_model_dir):
    import torch
    from safetensors.torch import load_file

    args = bench.argparse.Namespace(model=str(tiny_model_dir), random_init=True, dtype="float32")
    torch.manual_seed(1)  # the tiny checkpoint is itself a random init of seed 0
    loaded = bench.load_model(args, torch.device("cpu"))
    saved = load_file(str(next(tiny_model_dir.glob("*.safetensors"))))
    embeddings = loaded.model.get_input_embeddings().weight
    name = next(n for n in saved if n.endswith("embed_tokens.weight"))
    assert embeddings.shape == saved[name].shape and not torch.equal(embeddings, saved[name])
    assert loaded.processor is not None
