"""One benchmarked model as configured: a safe partition key mapped to where the weights are."""

from __future__ import annotations

from dataclasses import dataclass

EMBEDDED_PREFIX = "embedded:"


@dataclass(frozen=True)
class ModelEntry:
    """One benchmarked model: a safe partition key mapped to where the weights are."""

    key: str
    source: str
    dtype: str = "float32"
    trust_remote_code: bool = False

    @property
    def embedded_name(self) -> str | None:
        return self.source[len(EMBEDDED_PREFIX):] if self.source.startswith(EMBEDDED_PREFIX) else None
