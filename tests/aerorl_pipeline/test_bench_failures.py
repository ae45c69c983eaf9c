"""A partition whose step fails with a fault: `aerorl bench` says which, with the cause, in one line each."""

from __future__ import annotations

import assets.benchmark.generation as generation_asset
from aerorl_pipeline import cli


def test_a_failed_partition_is_one_line_with_its_cause(isolated_commands, tiny_model_dir, tmp_path, monkeypatch,
                                                       capsys):

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access\n  was encountered")
    monkeypatch.setattr(generation_asset, "run_generation", broken)
    config = tmp_path / "bench.toml"
    config.write_text(f'[benchmark]\nbatch_sizes = [1]\n\n[models.tiny]\nsource = "{tiny_model_dir}"\n\n'
                      '[datasets.docvqa]\nkind = "docvqa"\nlimit = 2\n')
    assert cli.main(["bench", "--config", str(config), "--run-id", "broken"]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("aerorl:")]
    assert len(lines) == 1 and lines[0].startswith(
        "aerorl: partition 1|tiny failed: RuntimeError: CUDA error: an illegal memory access was encountered "
        "(Dagster run "), lines
