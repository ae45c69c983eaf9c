"""scripts/family_table.py, which writes docs/models.md's family table from the family tests' JUnit report."""

from __future__ import annotations

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "family_table.py"
spec = importlib.util.spec_from_file_location("family_table", SCRIPT)
family_table = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = family_table  # its dataclasses look their module up
spec.loader.exec_module(family_table)

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.aerorl_ops.models.test_tiny_families"
          name="test_each_family_loads_with_its_own_processor_and_its_vision_tokens[llava-next]"/>
<testcase classname="tests.aerorl_ops.models.test_tiny_families"
          name="test_each_family_loads_with_its_own_processor_and_its_vision_tokens[llava]"><failure/></testcase>
<testcase classname="tests.aerorl_ops.rl.run.test_family_training"
          name="test_a_two_plus_two_step_run[frozen_lora-llava]"><skipped type="pytest.xfail"/></testcase>
<testcase classname="tests.aerorl_ops.rl.run.test_family_training"
          name="test_a_two_plus_two_step_run[plain-llava]"/>
<testcase classname="tests.aerorl_ops.rl.run.test_family_training"
          name="test_a_two_plus_two_step_run[plain-llava-next]"><skipped type="pytest.skip"/></testcase>
<testcase classname="tests.aerorl_ops.rl.run.test_family_training" name="test_without_a_family"/>
</testsuite></testsuites>"""


def test_the_docstring_examples():
    result = doctest.testmod(family_table)
    assert result.failed == 0 and result.attempted > 0


def test_each_family_s_row_is_its_results_per_column(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    lines = family_table.table(family_table.read_report(report), families=("llava", "llava-next")).splitlines()
    titles = [column.title for column in family_table.COLUMNS]
    assert lines[0] == "| family | transformers `model_type` | " + " | ".join(titles) + " | vLLM |"
    cells = {line.split(" | ")[0].strip("| `"): line.split(" | ")[2:-1] for line in lines[2:]}
    load, training, frozen = titles.index("load"), titles.index("training"), titles.index("frozen tower + LoRA")
    assert (cells["llava"][load], cells["llava"][training], cells["llava"][frozen]) == ("✗", "✓", "✗ᵗ")
    assert (cells["llava-next"][load], cells["llava-next"][training], cells["llava-next"][frozen]) == ("✓", "–", "")


def test_the_table_replaces_what_is_between_the_markers(tmp_path):
    doc = tmp_path / "models.md"
    doc.write_text(f"# Families\n\n{family_table.BEGIN}\nold table\n{family_table.END}\n\nAfter.\n")
    family_table.write(doc, "| new |")
    assert doc.read_text() == f"# Families\n\n{family_table.BEGIN}\n| new |\n{family_table.END}\n\nAfter.\n"
    (tmp_path / "bare.md").write_text("no markers")
    with pytest.raises(SystemExit, match="no .* markers"):
        family_table.write(tmp_path / "bare.md", "| new |")


def test_the_test_files_it_reads_exist():
    files = family_table.test_files()
    assert "tests/aerorl_ops/rl/run/test_family_training.py" in files
    assert all((SCRIPT.parents[1] / file).is_file() for file in files)
