"""``benchmarks/bench_fused_loss.py --frozen-head``: the LM-head weight frozen in both paths, on tiny shapes."""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_fused_loss.py"
TINY = ["--batch", "1", "--seq", "10", "--vocab", "32", "--hidden", "4", "--repeats", "1", "--threads", "1"]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fused_loss", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def one_path(bench, capsys, *flags: str) -> dict:
    bench.main([*TINY, *flags])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("path", ["naive", "fused"])
def test_frozen_head_computes_no_weight_gradient_in_either_path(bench, capsys, path):
    frozen = one_path(bench, capsys, "--path", path, "--frozen-head")
    trainable = one_path(bench, capsys, "--path", path)
    assert frozen["path"] == path
    assert frozen["weight_grad_bytes"] == 0
    assert trainable["weight_grad_bytes"] == 32 * 4 * 4  # [V, H] fp32
    assert frozen["loss"] == trainable["loss"]  # same inputs, same loss: only the gradients differ


def test_frozen_head_report_names_the_mode_and_its_floor(bench, capsys):
    args = argparse.Namespace(device="cpu", threads=1, chunk_size=2, repeats=1, frozen_head=True)
    shapes = bench.Shapes(batch=1, seq=10, vocab=32, hidden=4, vision_fraction=0.7)  # N = 3 counted rows
    gib = bench.GIB

    def result(path, peak):
        return bench.PathResult(path, 0, peak, False, [1.0], 2.5, 0)

    bench.report(shapes, args, result("naive", 20 * gib), result("fused", gib))
    out = capsys.readouterr().out
    assert "LM head frozen (no weight gradient)" in out
    assert "memory ratio naive/fused: 20.00x (meets the 15x floor)" in out
    assert "no weight gradient in either path (naive 0 B, fused 0 B); one [2, V] fp32 logits block" in out
    bench.report(shapes, args, result("naive", 14 * gib), result("fused", gib))
    assert "memory ratio naive/fused: 14.00x (BELOW the 15x floor)" in capsys.readouterr().out
