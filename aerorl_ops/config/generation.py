"""Generation settings (the ``[generation]`` table): how the benchmark decodes an answer.

Greedy by default. The seed is not a key of its own here: the benchmark's ``[benchmark] seed``
seeds sampling too (``BenchmarkConfig.generation.seed`` equals ``BenchmarkConfig.seed``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.config.fields import boolean, non_negative_int, positive_int, positive_number, probability, setting


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings. Sampling uses ``top_k=0, top_p=1`` unless set (``generate`` would apply top_k=50)."""

    max_new_tokens: int = setting(24, help="new tokens per answer", check=positive_int)
    do_sample: bool = setting(False, help="sample instead of greedy decoding", check=boolean)
    temperature: float = setting(1.0, help="sampling temperature (with do_sample)", check=positive_number)
    top_k: int = setting(0, help="sample from the k most likely tokens; 0 = off", check=non_negative_int)
    top_p: float = setting(1.0, help="nucleus sampling mass; 1 = off", check=probability)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature}")

    def generate_kwargs(self) -> dict[str, object]:
        if not self.do_sample:
            return {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
        return {"do_sample": True, "temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}
