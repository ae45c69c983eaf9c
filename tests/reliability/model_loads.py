"""Every way this project loads or builds a model, replaced by a recorder that refuses (the reliability tests
that check inputs before any model loads: ``test_bad_config.py``, ``test_fuzzed_inputs.py`` and the fuzzing
benchmark)."""

from __future__ import annotations

import pytest


def refuse_model_loads(patch: pytest.MonkeyPatch) -> list[str]:
    """Patch every model load and build through ``patch`` to record its name and raise; the record."""
    import transformers

    import aerorl_ops.models.loading as loading
    import aerorl_ops.models.sources as sources
    import aerorl_ops.rl.run.embedded_builds as embedded
    import aerorl_ops.rl.runtime.policy as runtimes
    import assets.resources as resources

    calls: list[str] = []

    def refuse(what: str):
        def recorder(*args, **kwargs):
            calls.append(what)
            raise AssertionError(f"{what} was called: a model load happened before config validation failed")
        return recorder

    for module in (loading, resources, runtimes):
        patch.setattr(module, "load_vlm", refuse(f"{module.__name__}.load_vlm"))
    patch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", refuse("from_pretrained"))
    for registry in (sources.BASE_BUILDERS, embedded.EMBEDDED_BUILDERS):  # every embedded model, built or not
        for name in registry:
            patch.setitem(registry, name, refuse(f"the build of {name}"))
    return calls
