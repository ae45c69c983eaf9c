"""Known third-party log lines appear at most their allowed number of times per process."""

from __future__ import annotations

import logging

import pytest
import torch

from aerorl_ops.quiet import KNOWN_LINES, AtMostFilter, quiet_known_logs

CAST = "MatMul8bitLt: inputs will be cast"
KERNELS = "Failed to load CPU gemm_4bit_forward from kernels-community"


@pytest.fixture
def no_filters():
    """The known loggers without this module's filters for the test; whatever was there is put back."""
    saved = {}
    for line in KNOWN_LINES:
        logger = logging.getLogger(line.logger)
        saved[logger] = [f for f in logger.filters if isinstance(f, AtMostFilter)]
        for existing in saved[logger]:
            logger.removeFilter(existing)
    yield
    for logger, filters in saved.items():
        for existing in [f for f in logger.filters if isinstance(f, AtMostFilter)]:
            logger.removeFilter(existing)
        for existing in filters:
            logger.addFilter(existing)


def int8_reference() -> torch.nn.Module:
    """A 8 -> 4 int8 layer of bitsandbytes in eval mode: the path the quantized reference's forwards take."""
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    layer = bnb.nn.Linear8bitLt(8, 4, has_fp16_weights=False, threshold=6.0)
    layer.load_state_dict(torch.nn.Linear(8, 4).state_dict())
    return layer.to("cpu").eval()


def cast_lines(caplog, layer: torch.nn.Module, forwards: int) -> int:
    caplog.clear()
    with caplog.at_level(logging.WARNING), torch.inference_mode():
        for _ in range(forwards):
            layer(torch.randn(2, 8))
    return sum(record.getMessage().startswith(CAST) for record in caplog.records)


def test_the_int8_cast_warning_is_logged_once_over_ten_forwards(no_filters, caplog):
    layer = int8_reference()
    assert cast_lines(caplog, layer, 3) == 3  # bitsandbytes logs it on every forward
    quiet_known_logs()
    assert cast_lines(caplog, layer, 10) == 1
    assert cast_lines(caplog, layer, 10) == 0  # once per process, not once per call site


def test_the_kernels_community_line_is_never_shown_and_other_lines_pass(no_filters, caplog):
    quiet_known_logs()
    quiet_known_logs()  # idempotent: still one filter per logger
    logger = logging.getLogger("bitsandbytes.backends.cpu.ops")
    assert sum(isinstance(f, AtMostFilter) for f in logger.filters) == 1
    with caplog.at_level(logging.WARNING):
        logger.warning(KERNELS + ": %s. Please `pip install kernels`", "No module named 'kernels'")
        logger.warning("another bitsandbytes warning")
    assert [record.getMessage() for record in caplog.records] == ["another bitsandbytes warning"]


def test_transformers_file_progress_bars_are_off_after_quieting(tmp_path, capsys):
    """Saving and loading a model draws no ``Loading weights`` / ``Writing model shards`` bar."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.enable_progress_bar()
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8))
    model.save_pretrained(tmp_path / "before")
    GPT2LMHeadModel.from_pretrained(tmp_path / "before")
    shown = capsys.readouterr().err
    quiet_known_logs()
    try:
        model.save_pretrained(tmp_path / "after")
        GPT2LMHeadModel.from_pretrained(tmp_path / "after")
        quieted = capsys.readouterr().err
    finally:
        transformers_logging.enable_progress_bar()
    assert "Loading weights" in shown and "Loading weights" not in quieted and "Writing model shards" not in quieted
