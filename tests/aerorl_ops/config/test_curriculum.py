"""The curriculum grammar: stages parse to exact values, and bad specs name what is wrong."""

from __future__ import annotations

import pytest

from aerorl_ops.config.curriculum import CurriculumStage, parse_curriculum, stage_at
from aerorl_ops.config.fields import ConfigError
from aerorl_ops.config.training import TrainingSettings


def test_stages_parse_with_default_share_and_spaces():
    assert parse_curriculum(" 100 : colour ; 500: colour , shape @ 0.75 ;") == (
        CurriculumStage(100, ("colour",), 1.0), CurriculumStage(500, ("colour", "shape"), 0.75))
    assert parse_curriculum("") == ()


def test_stage_boundaries_are_exclusive():
    stages = parse_curriculum("100: colour; 500: shape")
    assert [stage_at(stages, s) for s in (0, 99, 100, 499, 500)] == [0, 0, 1, 1, None]


@pytest.mark.parametrize(("spec", "problem"), [
    ("colour", "must read 'UNTIL_STEP"),
    ("ten: colour", "'ten' is not a step number"),
    ("10: @ 0.5", "names no question types"),
    ("10: colour @ half", "share 'half' is not a number"),
    ("10: colour @ 1.5", r"share must be in \(0, 1\]"),
    ("500: colour; 100: shape", "increase from stage to stage"),
    ("0: colour", "must be >= 1"),
])
def test_bad_specs_say_what_is_wrong(spec, problem):
    with pytest.raises(ValueError, match=problem):
        parse_curriculum(spec)


def test_a_bad_curriculum_setting_names_the_setting():
    from aerorl_ops.config.fields import checked

    with pytest.raises(ConfigError, match=r"setting 'training.curriculum' is not a curriculum: stage 1"):
        checked(TrainingSettings, "run config", "training", {"curriculum": "colour"})
