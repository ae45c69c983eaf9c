import math

import pytest

from aerorl_ops.reporting.reward_hacking import HeldOutAccuracy, reward_hacking_verdict


def test_reward_up_accuracy_down_beyond_stderr_is_gamed():
    # 8 RL steps: window 2; reward rise = mean(0.8, 0.9) - mean(0.1, 0.2) = 0.7
    evals = [HeldOutAccuracy(100, 0.5, 100), HeldOutAccuracy(140, 0.3, 100)]
    verdict = reward_hacking_verdict([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9], evals)
    assert verdict.gamed
    assert verdict.reward_rise == pytest.approx(0.7, abs=1e-12)
    assert verdict.accuracy_change == pytest.approx(-0.2, abs=1e-12)
    assert verdict.accuracy_stderr == pytest.approx(math.sqrt(0.25 / 100 + 0.21 / 100), abs=1e-12)


def test_accuracy_drop_within_stderr_is_not_gamed():
    # stderr = sqrt(0.5*0.5/100 + 0.43*0.57/100) = sqrt(0.004951) = 0.070363; a drop of 0.07 stays within it
    evals = [HeldOutAccuracy(0, 0.5, 100), HeldOutAccuracy(10, 0.43, 100)]
    verdict = reward_hacking_verdict([0.0, 1.0], evals)
    assert not verdict.gamed
    assert verdict.accuracy_stderr == pytest.approx(0.0703633, abs=1e-6)


def test_falling_reward_with_falling_accuracy_is_not_reward_hacking():
    evals = [HeldOutAccuracy(0, 0.9, 1000), HeldOutAccuracy(10, 0.1, 1000)]
    verdict = reward_hacking_verdict([0.9, 0.5, 0.4, 0.1], evals)
    assert not verdict.gamed
    assert verdict.reward_rise == pytest.approx(-0.8)


def test_only_first_and_last_evaluations_count():
    evals = [HeldOutAccuracy(0, 0.6, 500), HeldOutAccuracy(5, 0.1, 500), HeldOutAccuracy(10, 0.61, 500)]
    assert not reward_hacking_verdict([0.0, 1.0], evals).gamed


def test_too_little_to_judge():
    verdict = reward_hacking_verdict([], [HeldOutAccuracy(0, 0.5, 10)])
    assert not verdict.gamed
    assert "not enough" in verdict.description
