"""``benchmarks/bench_gpu_step.py``: its GRPO formulas on hand-computed tensors, its chunked log-probs
against full logits, and ``--smoke`` (plain and FSDP2, full and LoRA, on a tiny Qwen2.5-VL on CPU)."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu_step.py"
SMOKE_PROMPT = 12 + 1 + 4 + 1  # text, vision start, 4 image tokens (a 4x4 patch grid merged 2x2), vision end
SMOKE_SEQUENCES = 2 * 2  # prompts x replies


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu_step", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def smoke(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_gpu_step") / "smoke.json"
    returned = bench.main(["--smoke", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written == json.loads(json.dumps(returned))
    return written


def test_group_advantages_normalize_within_each_group(bench):
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    advantages = bench.group_advantages(rewards)
    assert advantages.tolist() == pytest.approx([0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5), 0.0, 0.0], abs=1e-5)


def test_grpo_loss_clips_the_ratio_and_adds_the_k3_kl(bench):
    settings = bench.Settings(**bench.PRESETS["smoke"])
    old = torch.zeros(2, 1)
    logp = torch.tensor([[0.5], [0.0]])  # ratio e^0.5 = 1.65 > 1.28 (clipped); ratio 1
    ref = torch.tensor([[0.5], [math.log(2.0)]])  # k3: 0; 2 - ln 2 - 1
    loss, stats = bench.grpo_loss(logp, old, ref, torch.tensor([1.0, -1.0]), settings)
    pg = (-1.28 + 1.0) / 2
    kl = (2 - math.log(2.0) - 1) / 2
    assert stats.pg_loss == pytest.approx(pg)
    assert stats.kl == pytest.approx(kl)
    assert stats.clip_frac == 0.5
    assert loss.item() == pytest.approx(pg + settings.kl_coef * kl)


def test_chunked_reply_logprobs_equal_those_of_the_full_logits(bench):
    torch.manual_seed(0)
    settings = bench.Settings(**bench.PRESETS["smoke"])
    model = bench.build_model(bench.MODELS["tiny"], torch.device("cpu"), torch.float32).eval()
    batch = bench.synthetic_batch(settings, bench.BOS, torch.device("cpu"), torch.float32,
                                  torch.Generator().manual_seed(0))
    prompt = batch.input_ids.shape[1]
    sequences = torch.cat([batch.input_ids, torch.randint(0, bench.BOS, (SMOKE_SEQUENCES, 3))], 1)  # [4, P+3]
    with torch.no_grad():
        chunked = bench.reply_logprobs(model, sequences, batch, slice(1, 3), prompt, logit_rows=4)  # [2, 3]
        bench._forget_rope_deltas(model)
        inputs = dict(input_ids=sequences[1:3], pixel_values=batch.pixel_values[16:48],
                      image_grid_thw=batch.image_grid_thw[1:3], use_cache=False)
        if bench._accepts_token_types(model):
            replies = torch.zeros(2, 3, dtype=torch.int)
            inputs["mm_token_type_ids"] = torch.cat([batch.mm_token_type_ids[1:3], replies], 1)
        full = model(**inputs).logits.log_softmax(-1)  # [2, P+3, V]
    expected = full[:, prompt - 1:-1].gather(-1, sequences[1:3, prompt:, None]).squeeze(-1)  # [2, 3]
    assert chunked.shape == (2, 3)
    torch.testing.assert_close(chunked, expected, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_smoke_runs_every_mode_and_tuning(smoke):
    assert {(run["mode"], run["tuning"]) for run in smoke["runs"]} == {
        ("plain", "full"), ("plain", "lora"), ("fsdp2", "full"), ("fsdp2", "lora")}
    assert [run["error"] for run in smoke["runs"]] == [None] * 4
    assert smoke["vllm"] == "not installed, skipped"
    assert smoke["device"] == "cpu"


@pytest.mark.slow
def test_smoke_counts_prompt_and_reply_tokens_of_every_sequence(smoke):
    for run in smoke["runs"]:
        assert (run["sequences"], run["prompt_tokens"], run["reply_tokens"]) == (SMOKE_SEQUENCES, SMOKE_PROMPT, 8)
        assert run["tokens_per_step"] == SMOKE_SEQUENCES * (SMOKE_PROMPT + 8) == 104
        assert [step["tokens"] for step in run["steps"]] == [104]  # one timed step, replies at full length
        assert run["tokens_per_s_per_gpu"] == pytest.approx(104 / run["step_s"])
        assert run["actor_mfu_update"] is None  # no peak FLOP/s on CPU


@pytest.mark.slow
def test_smoke_updates_change_the_trained_parameters(smoke):
    for run in smoke["runs"]:
        step = run["steps"][0]
        assert math.isfinite(step["loss"]) and math.isfinite(step["kl"])
        assert step["grad_norm"] > 0.01  # every group has both rewards: no group is without gradient
        assert run["param_delta"] > 0  # LoRA's B starts at zero: only the gradient moves it
        assert run["update_s"] <= run["step_s"]


@pytest.mark.slow
def test_smoke_fsdp2_gradients_match_the_plain_module(smoke):
    runs = {(run["mode"], run["tuning"]): run for run in smoke["runs"]}
    for tuning in ("full", "lora"):  # same seeds, same replies; fsdp2 computes in bf16
        plain, fsdp2 = runs["plain", tuning]["steps"][0], runs["fsdp2", tuning]["steps"][0]
        assert fsdp2["grad_norm"] == pytest.approx(plain["grad_norm"], rel=0.05)


@pytest.mark.slow
def test_smoke_lora_trains_adapters_against_the_disabled_base(smoke):
    runs = {(run["mode"], run["tuning"]): run for run in smoke["runs"]}
    for mode in ("plain", "fsdp2"):
        full, lora = runs[mode, "full"], runs[mode, "lora"]
        assert full["params_trainable"] == full["params_total"]
        assert 0 < lora["params_trainable"] < lora["params_total"] // 10
        assert lora["params_text"] == full["params_text"]  # adapters are not counted in the MFU
        assert lora["reference"] == "the base with the adapters disabled"
        assert full["reference"] == "a frozen float32 copy"
