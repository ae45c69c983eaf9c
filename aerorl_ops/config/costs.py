"""What device time costs (the ``[costs]`` table): a price per device-hour for each device kind, which the
cost ledger (``aerorl_ops.storage.cost_views``) multiplies by the device-seconds every benchmark
partition, training run and evaluation used: GPU-seconds where a GPU ran, else CPU core-seconds."""

from __future__ import annotations

from dataclasses import dataclass

from aerorl_ops.config.fields import non_negative_number, setting


@dataclass(frozen=True)
class CostSettings:
    """Prices per device-hour (any currency; the ledger's costs are in it)."""

    cpu_core_hour: float = setting(0.05, help="price of one CPU core for an hour (a busy core: process CPU time)",
                                   check=non_negative_number)
    gpu_hour: float = setting(2.50, help="price of one GPU for an hour (wall time while the job held it)",
                              check=non_negative_number)
