"""Check that a virtual environment kept the CPU build of torch: CI runs it after `make setup`.

`make setup` installs torch first (a CPU wheel on the CI machine) and then the project under a
constraint pinning that torch, so no later step swaps in a CUDA build and its `nvidia-*` runtime
packages (several GB). This reads the environment's installed distributions (it imports no torch) and
exits 1, naming what it found, when torch is not a `+cpu` build or a CUDA runtime package is there.
`nvidia-ml-py` (NVML bindings for GPU telemetry, a few hundred KB, no CUDA) is allowed.

    python scripts/check_cpu_torch.py            # the running interpreter's environment
"""

from __future__ import annotations

import sys
from importlib.metadata import distributions

ALLOWED_NVIDIA = {"nvidia-ml-py"}


def problems(installed: dict[str, str]) -> list[str]:
    """What is wrong with ``installed`` (distribution name -> version) for a CPU-only environment.

    >>> problems({"torch": "2.13.0+cpu", "nvidia-ml-py": "13.6"})
    []
    >>> problems({"torch": "2.14.1", "nvidia-cublas": "13.0"})
    ['torch 2.14.1 is not a CPU build (+cpu)', 'CUDA package installed: nvidia-cublas 13.0']
    """
    found = []
    torch = installed.get("torch")
    if torch is None:
        found.append("torch is not installed")
    elif not torch.endswith("+cpu"):
        found.append(f"torch {torch} is not a CPU build (+cpu)")
    found += [f"CUDA package installed: {name} {version}" for name, version in sorted(installed.items())
              if name.startswith("nvidia-") and name not in ALLOWED_NVIDIA]
    return found


def main() -> int:
    installed = {dist.metadata["Name"].lower().replace("_", "-"): dist.version for dist in distributions()}
    found = problems(installed)
    for problem in found:
        print(f"check_cpu_torch: {problem} ({sys.prefix})", file=sys.stderr)
    if not found:
        print(f"check_cpu_torch: torch {installed['torch']}, no CUDA packages ({sys.prefix})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
