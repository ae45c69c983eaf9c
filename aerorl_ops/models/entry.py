"""One benchmarked model as configured: a safe partition key mapped to where the weights are, and
the backend that generates with it."""

from __future__ import annotations

from dataclasses import dataclass, field

EMBEDDED_PREFIX = "embedded:"
EMBEDDED_DEFAULT = "tiny-qwen2-vl"
"""The embedded default: the tiny Qwen2-VL at random init (``models.embedded_default``)."""
EMBEDDED_EASY_VQA = "tiny-qwen2-vl-easy-vqa"
"""The embedded default after a short supervised run on easy-VQA's train split (``rl.run.embedded_builds``)."""
EMBEDDED_MODELS = (EMBEDDED_DEFAULT, EMBEDDED_EASY_VQA)
HF_BACKEND = "hf"
VLLM_BACKEND = "vllm"
BACKENDS = (HF_BACKEND, VLLM_BACKEND)
DECODE_AUTO = "auto"
DECODE_GENERATE = "generate"
DECODE_STATIC = "static"
DECODE_COMPILED = "compiled"
DECODE_PATHS = (DECODE_AUTO, DECODE_GENERATE, DECODE_STATIC, DECODE_COMPILED)
"""How the "hf" backend decodes (``generation.decode``): by device (auto), transformers' ``generate``, a static
KV cache with an eager step, or with the step compiled."""


@dataclass(frozen=True)
class GenerationBackend:
    """How a model generates: ``name`` is "hf" (the transformers model, the default) or "vllm"
    (vLLM's offline ``LLM``). ``decode``: how the "hf" model decodes (``DECODE_PATHS``). The engine settings
    are vLLM's ``LLM(...)`` keywords, passed as they are; one left unset (None) keeps vLLM's own default.
    ``engine_args`` holds any other keyword.

    >>> GenerationBackend("vllm", max_model_len=4096, engine_args=(("enforce_eager", True),)).engine_kwargs()
    {'max_model_len': 4096, 'enforce_eager': True}
    """

    name: str = HF_BACKEND
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    engine_args: tuple[tuple[str, object], ...] = field(default=(), hash=False)
    decode: str = DECODE_AUTO

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.name!r}")
        if self.decode not in DECODE_PATHS:
            raise ValueError(f"decode must be one of {DECODE_PATHS}, got {self.decode!r}")

    @property
    def uses_engine(self) -> bool:
        """True when an inference engine, not the transformers model, generates."""
        return self.name != HF_BACKEND

    def engine_kwargs(self) -> dict[str, object]:
        named = {"gpu_memory_utilization": self.gpu_memory_utilization, "max_model_len": self.max_model_len,
                 "tensor_parallel_size": self.tensor_parallel_size}
        return {**{key: value for key, value in named.items() if value is not None}, **dict(self.engine_args)}


HF_GENERATION = GenerationBackend()


@dataclass(frozen=True)
class ModelEntry:
    """One benchmarked model: a safe partition key mapped to where the weights are; ``chat_template``:
    the text of the chat template its prompts are rendered with (empty: the checkpoint's own)."""

    key: str
    source: str
    dtype: str = "float32"
    trust_remote_code: bool = False
    backend: GenerationBackend = HF_GENERATION
    chat_template: str = ""

    @property
    def embedded_name(self) -> str | None:
        return self.source[len(EMBEDDED_PREFIX):] if self.source.startswith(EMBEDDED_PREFIX) else None
