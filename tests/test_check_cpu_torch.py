"""scripts/check_cpu_torch.py, which CI runs after `make setup`: a CUDA torch or runtime is named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_cpu_torch.py"
spec = importlib.util.spec_from_file_location("check_cpu_torch", SCRIPT)
check_cpu_torch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_cpu_torch)


def test_a_cpu_torch_with_nvml_bindings_passes():
    assert check_cpu_torch.problems({"torch": "2.13.0+cpu", "nvidia-ml-py": "13.615.71", "numpy": "2.3"}) == []


def test_a_cuda_torch_and_its_runtime_are_named():
    assert check_cpu_torch.problems({"torch": "2.14.1+cu130", "nvidia-cuda-runtime": "13.0.96",
                                     "nvidia-ml-py": "13.6"}) == [
        "torch 2.14.1+cu130 is not a CPU build (+cpu)", "CUDA package installed: nvidia-cuda-runtime 13.0.96"]
    assert check_cpu_torch.problems({}) == ["torch is not installed"]
