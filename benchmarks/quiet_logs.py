"""Set-up shared by the training benchmarks: quiet library logs, and the torch thread count."""

from __future__ import annotations

import logging

import torch
from transformers.utils import logging as hf_logging

from aerorl_ops.quiet import quiet_known_logs

quiet_known_logs()  # at import, as `aerorl` does first: a benchmark's imports load bitsandbytes, which logs as it loads


def quiet_model_logs(threads: int = 0) -> None:
    """transformers at errors only, no progress bars, no bitsandbytes cast notices ("MatMul8bitLt:
    inputs will be cast ..."); ``threads`` torch CPU threads (0 = torch's default)."""
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    if threads:
        torch.set_num_threads(threads)
