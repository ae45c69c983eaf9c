"""scripts/every_family.py: every image-text-to-text model type built offline and checked, its table in
docs/models.md."""

from __future__ import annotations

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "every_family.py"
spec = importlib.util.spec_from_file_location("every_family", SCRIPT)
every_family = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = every_family  # its dataclasses look their module up
spec.loader.exec_module(every_family)
Outcome, CHECKS = every_family.Outcome, every_family.CHECKS


def test_the_docstring_examples_hold():
    assert doctest.testmod(every_family).failed == 0


def test_the_table_counts_and_shows_each_outcome():
    outcomes = [
        Outcome("blip", "", False, "ModelUnavailableError: model '/tmp/every-family-blip-x/blip' has no | template",
                dict.fromkeys(CHECKS, "–")),
        Outcome("llava", "llava", True, "", dict.fromkeys(CHECKS, "✓")),
        Outcome("vipllava", "", True, "", {**dict.fromkeys(CHECKS, "✓"), "causal": "✗ AssertionError: sees ahead"}),
    ]
    assert every_family.table(outcomes).splitlines() == [
        "2 of 3 model types build offline; 1 pass every check.", "",
        "| model type | builds offline | why not | partition | training | frozen tower + LoRA | causal |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| `blip` | ✗ | ModelUnavailableError: model 'blip' has no \\| template | – | – | – | – |",
        "| `llava` | ✓ (llava) |  | ✓ | ✓ | ✓ | ✓ |",
        "| `vipllava` | ✓ (shrunk) |  | ✓ | ✓ | ✓ | ✗ AssertionError: sees ahead |"]


def test_the_table_goes_between_the_markers_and_docs_models_has_them(tmp_path):
    page = tmp_path / "models.md"
    page.write_text(f"# Models\n\n{every_family.BEGIN}\nold\n{every_family.END}\n\nafter\n")
    every_family.write_between_markers(page, "new table\n")
    assert page.read_text() == f"# Models\n\n{every_family.BEGIN}\nnew table\n{every_family.END}\n\nafter\n"
    docs = (ROOT / "docs" / "models.md").read_text()
    assert docs.count(every_family.BEGIN) == docs.count(every_family.END) == 1
    plain = tmp_path / "plain.md"
    plain.write_text("# Nothing here\n")
    with pytest.raises(SystemExit, match="plain.md has no .* markers"):
        every_family.write_between_markers(plain, "x")


def test_a_model_type_that_does_not_build_has_its_reason_and_no_checks():
    outcome = every_family.evaluate("fast_vlm")
    assert outcome == Outcome("fast_vlm", "", False, "NotBuilt: no processor class (AutoProcessor has none for it)",
                              dict.fromkeys(CHECKS, "–"))


@pytest.mark.slow
def test_llava_passes_every_check_and_a_failing_check_is_its_cell(monkeypatch):
    def sees_ahead(model_dir, env):
        raise AssertionError("an earlier token sees a later one")

    monkeypatch.setitem(every_family.CHECK_FUNCTIONS, "causal", sees_ahead)
    outcome = every_family.evaluate("llava")
    assert (outcome.family, outcome.builds, outcome.why) == ("llava", True, "")
    assert outcome.checks == {"partition": "✓", "training": "✓", "frozen tower + LoRA": "✓",
                              "causal": "✗ AssertionError: an earlier token sees a later one"}
