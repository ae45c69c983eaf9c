"""Each easy-VQA image's shape and colour, read from the package's own questions about it.

The ``easy-vqa`` package ships no per-image metadata file, only questions with answers; every
image has about ten. Each question states facts about its image (``facts``):

* an answer that is a shape or a colour names the image's shape or colour
  (``what color is the shape?`` -> ``blue``);
* a shape or colour word in a question that is not yes/no describes the image
  (``what color is the circle?`` -> a circle; ``what is the blue shape?`` -> blue);
* a shape or colour word in a yes/no question holds when the answer is ``yes`` and the question is
  not negated (``not`` in it, or ``is no ...``), or the answer is ``no`` and it is
  (``is there not a red shape?`` -> ``yes``: not red).

An attribute is known when the facts name one value, or rule out every value but one. An image
whose questions leave its shape or colour open (about 1 in 10: their questions are all about
other colours), or contradict each other (none do in the package's data), is left out, with the
reason (:attr:`Annotations.unknown`). In the package's data 3,212 of the ``train`` split's 3,600 images
are known, 366 of ``validation``'s 400 and 888 of ``test``'s 1,000.

>>> from aerorl_ops.envs.easy_vqa import EasyVQAQuestion
>>> questions = [EasyVQAQuestion(0, "what color is the shape?", "teal", 7),
...              EasyVQAQuestion(1, "is there not a circle?", "no", 7),
...              EasyVQAQuestion(2, "is a red shape present?", "no", 8)]
>>> facts(questions[1])
[('shape', 'circle', True)]
>>> annotations = annotate(questions)
>>> annotations.known[7], annotations.unknown[8]
(ShapeAttributes(shape='circle', colour='teal'), 'its questions leave its shape open')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aerorl_ops.envs.easy_vqa import EasyVQAQuestion, package_data_dir, read_questions

SHAPES = ("circle", "rectangle", "triangle")
COLOURS = ("black", "blue", "brown", "gray", "green", "red", "teal", "yellow")
VALUES = {"shape": SHAPES, "colour": COLOURS}
"""Each attribute's values, as the package spells them."""
_WORD = re.compile(r"[a-z]+")

Fact = tuple[str, str, bool]
"""``(attribute, value, holds)``: the image's attribute is (``holds``) or is not that value."""


@dataclass(frozen=True)
class ShapeAttributes:
    """What an easy-VQA image shows: one shape of one colour."""

    shape: str
    colour: str


@dataclass(frozen=True)
class Annotations:
    """The images whose shape and colour are known, and every other image of the questions with the reason."""

    known: Mapping[int, ShapeAttributes]
    unknown: Mapping[int, str]


def _negated(words: list[str]) -> bool:
    return "not" in words or words[:2] == ["is", "no"]


def facts(question: EasyVQAQuestion) -> list[Fact]:
    """What one question and its answer say about its image (module docstring)."""
    answer = question.answer.strip().lower()
    words = _WORD.findall(question.text.lower())
    said: list[Fact] = [(attribute, answer, True) for attribute, values in VALUES.items() if answer in values]
    for attribute, values in VALUES.items():
        for value in values:
            if value not in words:
                continue
            if answer in ("yes", "no"):
                said.append((attribute, value, (answer == "yes") != _negated(words)))
            else:
                said.append((attribute, value, True))
    return said


def _resolved(attribute: str, holds: set[str], ruled_out: set[str]) -> str:
    """The attribute's value, or ``ValueError`` saying why it is not known."""
    if len(holds) > 1 or holds & ruled_out:
        raise ValueError(f"its questions contradict each other about its {attribute} "
                         f"(is {sorted(holds)}, is not {sorted(ruled_out)})")
    if holds:
        return next(iter(holds))
    left = [value for value in VALUES[attribute] if value not in ruled_out]
    if len(left) != 1:
        raise ValueError(f"its questions leave its {attribute} open")
    return left[0]


def annotate(questions: Iterable[EasyVQAQuestion]) -> Annotations:
    """The shape and colour of every image the questions are about (known, or unknown with the reason)."""
    said: dict[int, dict[tuple[str, bool], set[str]]] = {}
    for question in questions:
        per_image = said.setdefault(question.image_id, {})
        for attribute, value, holds in facts(question):
            per_image.setdefault((attribute, holds), set()).add(value)
    known: dict[int, ShapeAttributes] = {}
    unknown: dict[int, str] = {}
    for image_id in sorted(said):
        per_image = said[image_id]
        try:
            shape, colour = (_resolved(attribute, per_image.get((attribute, True), set()),
                                       per_image.get((attribute, False), set())) for attribute in ("shape", "colour"))
        except ValueError as reason:
            unknown[image_id] = str(reason)
            continue
        known[image_id] = ShapeAttributes(shape, colour)
    return Annotations(known, unknown)


def split_annotations(split: str, data_dir: str | Path | None = None) -> Annotations:
    """The annotations of the images of one easy-VQA split (``envs.easy_vqa``'s splits)."""
    root = Path(data_dir) if data_dir is not None else package_data_dir()
    return annotate(read_questions(root, split))
