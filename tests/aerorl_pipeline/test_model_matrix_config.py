"""The shipped config's commented model matrix (AeroRL's four models) is a valid set of ``[models.<key>]``
tables once uncommented: safe partition keys, the hub ids, bfloat16, each with its batch size noted."""

from __future__ import annotations

import re
import tomllib

from aerorl_ops.config.benchmark import parse_benchmark_config
from assets.project import BENCHMARK_CONFIG_PATH

FIRST, LAST = "# [models.smolvlm-500m]", '# source = "Qwen/Qwen2.5-VL-7B-Instruct"'
MATRIX = {  # key: (source, batch size)
    "smolvlm-500m": ("HuggingFaceTB/SmolVLM-500M-Instruct", 32),
    "qwen2-vl-2b": ("Qwen/Qwen2-VL-2B-Instruct", 16),
    "qwen2_5-vl-3b": ("Qwen/Qwen2.5-VL-3B-Instruct", 16),
    "qwen2_5-vl-7b": ("Qwen/Qwen2.5-VL-7B-Instruct", 8),
}


def uncommented_matrix() -> str:
    """The commented block from the first matrix entry to the last one's dtype, without its '# '."""
    lines = BENCHMARK_CONFIG_PATH.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(FIRST))
    end = lines.index(LAST) + 1  # the dtype line after the last source
    return "\n".join(line.removeprefix("#").removeprefix(" ") for line in lines[start:end + 1])


def test_the_commented_matrix_parses_to_the_four_models_in_bfloat16():
    block = uncommented_matrix()
    config = parse_benchmark_config({"benchmark": {"batch_sizes": [1, 4, 8, 16, 32]}, **tomllib.loads(block)})
    assert {model.key: (model.source, model.dtype) for model in config.models} == {
        key: (source, "bfloat16") for key, (source, _) in MATRIX.items()}
    noted = dict(re.findall(r"^\[models\.([\w-]+)\]\s+# batch (\d+)$", block, re.MULTILINE))
    assert {key: int(size) for key, size in noted.items()} == {key: size for key, (_, size) in MATRIX.items()}
