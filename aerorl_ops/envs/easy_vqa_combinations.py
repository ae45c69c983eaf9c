"""easy-VQA split by (shape, colour) combination: compositional generalisation (``kind = "easy_vqa_combinations"``).

Each easy-VQA image shows one shape of one colour (``envs.easy_vqa_annotations``). :func:`draw_held_out_pairs`
draws ``held_out_pairs`` of the 24 (shape, colour) pairs with ``pairs_seed``, such that every shape and every
colour keeps at least one pair in training: a model trained on the other pairs has seen every shape and every
colour, never these together. The environment holds the questions (of any type) on images of the training
pairs (``combinations = "train"``) or of the held-out ones (``"held_out"``), then draws ``limit`` of them with
``seed`` as ``easy_vqa`` does. Images whose shape or colour the package's questions leave open (about one in
ten) are in neither. The split is a function of ``held_out_pairs`` and ``pairs_seed`` alone (both recorded
with the dataset's settings); the 8 pairs of ``pairs_seed`` 0 are written out in docs/configuration.md. The
environment is named after its dataset table (``name``), so a training and a held-out table stay apart.

>>> draw_held_out_pairs(3, 0) == draw_held_out_pairs(3, 0), len(draw_held_out_pairs(8, 1))
(True, 8)
"""

from __future__ import annotations

import random
from pathlib import Path

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.easy_vqa import EASY_VQA_INSTRUCTION, data_root, load_questions, read_questions
from aerorl_ops.envs.easy_vqa_annotations import COLOURS, SHAPES, annotate
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.items import sample_indices
from aerorl_ops.envs.rejections import require_items

NAME = "easy_vqa_combinations"
COMBINATIONS = ("train", "held_out")
ALL_PAIRS = tuple((shape, colour) for shape in SHAPES for colour in COLOURS)
MAX_HELD_OUT = len(ALL_PAIRS) - max(len(SHAPES), len(COLOURS))
"""At most this many pairs can be held out with every shape and every colour kept in training (16)."""


def draw_held_out_pairs(count: int, seed: int) -> frozenset[tuple[str, str]]:
    """``count`` (shape, colour) pairs drawn with ``seed``, leaving every shape and colour a training pair (the
    first draw of ``random.Random(seed)`` that does); a ``ValueError`` for a count outside 1..``MAX_HELD_OUT``."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_HELD_OUT:
        raise ValueError(f"held_out_pairs must be a whole number in 1..{MAX_HELD_OUT} (every shape and colour keeps "
                         f"a training pair), got {count!r}")
    draw = random.Random(seed)
    while True:
        held = frozenset(draw.sample(ALL_PAIRS, count))
        kept = [pair for pair in ALL_PAIRS if pair not in held]
        if {shape for shape, _ in kept} == set(SHAPES) and {colour for _, colour in kept} == set(COLOURS):
            return held


def combination_questions(split: str, combinations: str, held_out: frozenset[tuple[str, str]],
                          data_dir: str | Path | None = None):
    """The questions of ``split`` (file order) on images of the training pairs or of the ``held_out`` ones."""
    if combinations not in COMBINATIONS:
        raise ValueError(f"combinations must be one of {', '.join(COMBINATIONS)}, got {combinations!r}")
    questions = read_questions(data_root(data_dir), split)
    known = annotate(questions).known
    want_held = combinations == "held_out"
    return [question for question in questions if question.image_id in known
            and ((known[question.image_id].shape, known[question.image_id].colour) in held_out) == want_held]


def easy_vqa_combinations_env(split: str = "train", limit: int | None = None, seed: int = 0, name: str = "",
                              instruction: str = EASY_VQA_INSTRUCTION, data_dir: str | None = None,
                              combinations: str = "train", held_out_pairs: int = 8,
                              pairs_seed: int = 0) -> SingleTurnEnv:
    """easy-VQA questions on the training or the held-out (shape, colour) pairs (module docstring)."""
    held = draw_held_out_pairs(held_out_pairs, pairs_seed)
    questions = combination_questions(split, combinations, held, data_dir)
    drawn = [questions[index] for index in sample_indices(len(questions), limit, seed)]
    data = load_questions(split, drawn, instruction, data_dir)
    where = f"{split} split in {data_root(data_dir)}, {combinations} pairs"
    return SingleTurnEnv(name or NAME, require_items(data, name or NAME, where), ExactMatchGrader())
