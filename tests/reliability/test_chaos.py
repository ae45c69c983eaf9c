"""The short chaos run (issue 38, item 3; ``scripts/chaos.py --by-events --executor default``): real `aerorl bench`
and `aerorl train` processes, side by side in a workdir of their own, each killed twice at a point of its work
(the bench while a partition generates: SIGKILL, then SIGTERM; the run once checkpoint step-2 is written: SIGKILL,
then once step-6 is: SIGTERM) and restarted with the same command until it finishes. Nothing is lost: every row
equals the undisturbed run's, each generation and score is stored once, no pool slot is claimed, no run is left
STARTED and no process outlives its command. The 30-minute version, with random kills and Celery workers killed
too, is docs/measured.md's (about 2 minutes here on 2 idle cores; 3 at a load average of 13).
"""

from __future__ import annotations

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "chaos.py"
ROWS = 8  # easy-VQA questions a partition: 2 partitions


def chaos_script():
    spec = importlib.util.spec_from_file_location("chaos", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_bench_and_train_killed_and_restarted_lose_nothing(tmp_path):
    chaos = chaos_script()
    run = chaos.run_chaos(chaos.ChaosSettings(tmp_path, by_events=True, executor="default", rows=ROWS,
                                              round_limit=600))
    (chaos_round,) = run.rounds
    report = chaos.report(run)
    for command in (chaos_round.bench, chaos_round.train):
        assert [(kill.target, kill.signal_name) for kill in command.records] == [
            ("command", "SIGKILL"), ("command", "SIGTERM")], report
        assert [life.returncode for life in command.lives] == [-9, 143, 0], report  # SIGTERM: a stop, then 143
    assert {check.table: (check.found, check.expected, check.equal, check.repeated)
            for check in chaos_round.checks} == {
        "generations": (2 * ROWS, 2 * ROWS, True, 0), "reward_scores": (2 * ROWS, 2 * ROWS, True, 0),
        "benchmark_summary": (2, 2, True, 0),
        "training_steps": (10, 10, True, 0),
        "training_evals": (7, 7, True, 0),  # the prior, base, warm-up at 3 and 4, RL at 6 and 9, final
        "training_eval_types": (21, 21, True, 0), "training_rollouts": (2, 2, True, 0)}, report
    assert chaos_round.leftovers.claims == () and chaos_round.leftovers.unfinished == (), report
    assert chaos_round.orphans == [], report
    assert run.ok and "round 0: nothing lost" in report


def test_the_comparisons_examples_hold():
    chaos_script()  # puts scripts/ on the path
    import chaos_compare

    result = doctest.testmod(chaos_compare)
    assert result.attempted > 0 and result.failed == 0
