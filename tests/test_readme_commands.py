"""Every `aerorl …` command in the README's code blocks runs as written, so an example cannot drift.

Each command is parsed by the real `aerorl` parser (a flag, choice or value that no longer exists
fails). The quick path is run for real, in order, on isolated folders: the quick training run, the
quick eval of its ``@latest`` checkpoint, then the queries. The full runs (minutes each) are parsed,
and their ``--help`` is run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from aerorl_pipeline import cli
from aerorl_pipeline.cli import build_parser
from assets.project import BENCHMARK_CONFIG_PATH, load_config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PROGRAM = ".venv/bin/aerorl"
QUICK = ("--preset quick", "--quick", "aerorl sql")
"""The commands run for real: each takes seconds (the others are the full runs)."""


def readme_commands(text: str) -> list[list[str]]:
    """The ``aerorl`` command lines of ``text``'s fenced code blocks, as argument lists (after the program);
    a command may go on over several lines inside a quoted string; comments are dropped.

    >>> readme_commands('```bash\\n.venv/bin/aerorl sql "SELECT 1\\n  AS x" --csv  # a query\\nmake test\\n```')
    [['sql', 'SELECT 1\\n  AS x', '--csv']]
    """
    commands, pending = [], ""
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines(keepends=True):
            pending += line
            try:
                words = shlex.split(pending, comments=True)
            except ValueError:  # a quoted string goes on over the next line
                continue
            pending = ""
            if words and words[0] in (PROGRAM, "aerorl"):
                commands.append(words[1:])
    return commands


COMMANDS = readme_commands(README.read_text())


def test_the_readme_shows_the_quick_path_first():
    names = [" ".join(command[:3]) for command in COMMANDS]
    assert names.index("train --preset quick") < names.index("eval --quick --model")
    assert sum(any(quick in " ".join(["aerorl", *c]) for quick in QUICK) for c in COMMANDS) >= 4


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c)[:60] for c in COMMANDS])
def test_every_readme_command_parses(argv):
    args = build_parser(load_config(BENCHMARK_CONFIG_PATH)).parse_args(argv)
    assert args.command == argv[0]


@pytest.mark.parametrize("command", sorted({c[0] for c in COMMANDS}))
def test_every_readme_command_has_its_help(command):
    done = subprocess.run([sys.executable, "-m", "aerorl_pipeline.cli", command, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: aerorl {command}")


@pytest.mark.slow
def test_the_quick_path_runs_verbatim(isolated_commands, capsys):
    """The README's quick commands: train, eval of the run's latest checkpoint, then (after one benchmark
    partition) the queries."""
    quick = [c for c in COMMANDS if any(q in " ".join(["aerorl", *c]) for q in QUICK)]
    quick.sort(key=lambda argv: argv[0] == "sql")  # the queries read what the runs wrote
    # the tour's first step, `aerorl bench`, on one partition of the embedded default: what the queries read
    assert cli.main(["bench", "--model", "tiny-qwen2-vl", "--batch-size", "8", "--max-new-tokens", "2"]) == 0
    for argv in quick:
        assert cli.main(argv) == 0, argv
        out = capsys.readouterr().out
        if argv[0] == "train":
            assert "checkpoints (usable wherever a model key is): my-run@10, my-run@20" in out
        elif argv[0] == "eval":
            assert "my-run@latest vs baseline tiny-qwen2-vl on 100 questions of easy_vqa" in out
    with duckdb.connect(str(isolated_commands.duckdb_path), read_only=True) as conn:
        steps = conn.execute("SELECT count(*) FROM training_steps WHERE run_id = 'my-run'").fetchone()[0]
        evals = conn.execute("SELECT role, model FROM eval_runs ORDER BY role").fetchall()
    assert steps == 20  # 10 warm-up + 10 RL steps
    assert evals == [("baseline", "tiny-qwen2-vl"), ("model", "my-run@latest")]
