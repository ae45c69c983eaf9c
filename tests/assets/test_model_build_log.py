"""A model built on first use inside a Dagster step: its progress lines reach the step's run log."""

from __future__ import annotations

import dagster as dg

from aerorl_ops.models.build_progress import say
from assets.resources import build_lines_in_run_log


@dg.asset
def builds_a_model() -> None:
    with build_lines_in_run_log():
        say("building tiny-x (one time, about 1 s)")
    say("after the build: not forwarded")


def test_build_lines_reach_the_dagster_run_log():
    with dg.instance_for_test() as instance:
        result = dg.materialize([builds_a_model], instance=instance)
        logs = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert logs.count("building tiny-x (one time, about 1 s)") == 1
    assert "after the build: not forwarded" not in logs
