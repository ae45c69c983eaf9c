"""The generation backend of one ``[models.<key>]`` table: ``backend`` and, for vLLM, its engine.

    [models.tiny-qwen2-vl-vllm]
    source = "embedded:tiny-qwen2-vl"
    backend = "vllm"                 # "hf" (transformers' generate) when left out
    gpu_memory_utilization = 0.5     # these three go to vllm.LLM(...) as they are;
    max_model_len = 4096             # one left out keeps vLLM's default
    tensor_parallel_size = 1
    engine_args = { enforce_eager = true }   # any other vllm.LLM(...) keyword

    [models.qwen2-vl-2b]
    source = "Qwen/Qwen2-VL-2B-Instruct"
    decode = "compiled"              # hf only: auto (by device), generate, static or compiled
"""

from __future__ import annotations

from collections.abc import Mapping

from aerorl_ops.config.fields import fail, number_in, one_of, positive_int
from aerorl_ops.models.entry import BACKENDS, DECODE_AUTO, DECODE_PATHS, HF_BACKEND, GenerationBackend

ENGINE_KEYS = ("gpu_memory_utilization", "max_model_len", "tensor_parallel_size", "engine_args")
BACKEND_KEYS = ("backend", "decode", *ENGINE_KEYS)
ENTRY_OWNED = ("model", "tokenizer", "dtype", "trust_remote_code", "revision")
"""``LLM(...)`` keywords that the entry itself sets (``source``, ``dtype``, ``trust_remote_code``)."""

CHECKS = {"gpu_memory_utilization": number_in(0, 1, low_closed=False, high_closed=True),
          "max_model_len": positive_int, "tensor_parallel_size": positive_int}


def parse_backend(path: str, setting_name: str, table: Mapping[str, object]) -> GenerationBackend:
    """The backend keys of the model table ``setting_name`` (``models.<key>``) of file ``path``."""
    name = one_of(*BACKENDS)(path, f"{setting_name}.backend", table.get("backend", HF_BACKEND))
    engine_keys = [key for key in ENGINE_KEYS if key in table]
    if name == HF_BACKEND and engine_keys:
        raise fail(path, f"{setting_name}.{engine_keys[0]}", 'is a vLLM engine setting; set backend = "vllm" too')
    if name != HF_BACKEND and "decode" in table:
        raise fail(path, f"{setting_name}.decode", 'is how the "hf" backend decodes; vLLM decodes with its own engine')
    decode = one_of(*DECODE_PATHS)(path, f"{setting_name}.decode", table.get("decode", DECODE_AUTO))
    named = {key: CHECKS[key](path, f"{setting_name}.{key}", table[key]) for key in CHECKS if key in table}
    return GenerationBackend(name, **named, engine_args=engine_args(path, f"{setting_name}.engine_args",
                                                                    table.get("engine_args", {})), decode=decode)


def engine_args(path: str, setting_name: str, value: object) -> tuple[tuple[str, object], ...]:
    if not isinstance(value, Mapping):
        raise fail(path, setting_name, f"must be a table of vllm.LLM keywords, got {value!r}")
    for key in value:
        if key in ENTRY_OWNED or key in CHECKS:
            home = "the model table's own key" if key in CHECKS else "set by the model table (source, dtype, ...)"
            raise fail(path, f"{setting_name}.{key}", f"is {home}, not an engine_args key")
    return tuple(sorted(value.items()))
