"""scripts/behaviour_fingerprint.py's comparison: a changed value or a missing row fails; a column added at the end,
or a row added among the older ones (a new dataset's), does not."""

from __future__ import annotations

import doctest
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "behaviour_fingerprint.py"
spec = importlib.util.spec_from_file_location("behaviour_fingerprint", SCRIPT)
fingerprint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fingerprint)


def test_the_verdicts_examples():
    assert doctest.testmod(fingerprint, raise_on_error=True).attempted == 5


def test_a_new_column_passes_and_a_changed_or_missing_row_fails(tmp_path, capsys):
    before = {"steps": [[1, 0.5], [2, 0.25]], "evals": [[0, "base", 0.0]]}
    added = {"steps": [[1, 0.5, None], [2, 0.25, None]], "evals": [[0, "base", 0.0]]}
    changed = {"steps": [[1, 0.5, None], [2, 0.125, None]], "evals": [[0, "base", 0.0]]}
    fewer = {"steps": [[1, 0.5]], "evals": [[0, "base", 0.0]]}
    paths = {}
    for name, tables in (("before", before), ("added", added), ("changed", changed), ("fewer", fewer)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(tables))
    assert fingerprint.compare(paths["before"], paths["added"]) == 0
    assert capsys.readouterr().out == ("evals: identical (1 vs 1 rows)\n"
                                       "steps: identical on its 2 columns, plus 1 new at the end holding [null] "
                                       "(2 vs 2 rows)\n")
    assert fingerprint.compare(paths["before"], paths["changed"]) == 1
    assert "steps: DIFFERENT (2 vs 2 rows)" in capsys.readouterr().out
    assert fingerprint.compare(paths["before"], paths["fewer"]) == 1
    assert "steps: DIFFERENT (2 vs 1 rows)" in capsys.readouterr().out
    more = tmp_path / "more.json"
    more.write_text(json.dumps({"steps": [[1, 0.5], [9, 1.0], [2, 0.25]], "evals": [[0, "base", 0.0]]}))
    assert fingerprint.compare(paths["before"], more) == 0
    assert "steps: identical; plus 1 new rows (2 vs 3 rows)" in capsys.readouterr().out
    swapped = tmp_path / "swapped.json"
    swapped.write_text(json.dumps({"steps": [[2, 0.25], [1, 0.5], [9, 1.0]], "evals": [[0, "base", 0.0]]}))
    assert fingerprint.compare(paths["before"], swapped) == 1
    assert "steps: DIFFERENT (2 vs 3 rows)" in capsys.readouterr().out
