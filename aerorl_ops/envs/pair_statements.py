"""True/false statements about two easy-VQA images, left and right, in NLVR2's style.

A :class:`Template` is a conjunction of conditions on the two images' attributes (shape, colour):
``Is(side, attribute)``, the side's attribute is the value the statement names, and
``Same(attribute, same)``, the two images share the attribute (or, with ``same=False``, do not).
A :class:`Statement` is a template with its values filled in; it is true when every condition holds.
Each template has a question type for per-type accuracy: ``colour``, ``shape`` or ``mixed`` (four
templates each, :data:`TEMPLATES`). Statements say "color", easy-VQA's own spelling: the words the
embedded model's tokenizer holds as one token each.

The answer is ``true`` or ``false``; ``yes`` and ``no`` are accepted as their aliases
(:func:`answers_for`, :func:`reply_truth`).

>>> from aerorl_ops.envs.easy_vqa_annotations import ShapeAttributes
>>> red_circle, blue_circle = ShapeAttributes("circle", "red"), ShapeAttributes("circle", "blue")
>>> statement = Statement(template("left_shape_right_colour"), colour="red", shape="circle")
>>> statement.text, statement.holds(red_circle, blue_circle), statement.outcomes(blue_circle, red_circle)
('The left shape is a circle and the right one is red.', False, (True, True))
>>> Statement(template("same_shape")).holds(red_circle, blue_circle), answers_for(False), reply_truth("Yes.")
(True, ('false', 'no'), True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aerorl_ops.envs.easy_vqa_annotations import ShapeAttributes
from aerorl_ops.text.exact_match import answers_match, predicted_answer

QUESTION_TYPES = ("colour", "shape", "mixed")
TRUE_ANSWERS = ("true", "yes")
FALSE_ANSWERS = ("false", "no")


@dataclass(frozen=True)
class Is:
    """The ``side`` image's ``attribute`` is the value the statement names."""

    side: str
    attribute: str

    def holds(self, left: ShapeAttributes, right: ShapeAttributes, values: Mapping[str, str]) -> bool:
        return getattr(left if self.side == "left" else right, self.attribute) == values[self.attribute]


@dataclass(frozen=True)
class Same:
    """The two images share ``attribute`` (``same``), or differ in it (``not same``)."""

    attribute: str
    same: bool = True

    def holds(self, left: ShapeAttributes, right: ShapeAttributes, values: Mapping[str, str]) -> bool:
        return (getattr(left, self.attribute) == getattr(right, self.attribute)) == self.same


Condition = Is | Same


@dataclass(frozen=True)
class Template:
    """A statement's wording (``{colour}`` / ``{shape}`` where it names values) and its conditions."""

    key: str
    question_type: str
    text: str
    conditions: tuple[Condition, ...]

    @property
    def named(self) -> tuple[str, ...]:
        """The attributes whose value the statement names (``colour`` before ``shape``)."""
        return tuple(attribute for attribute in ("colour", "shape")
                     if any(isinstance(c, Is) and c.attribute == attribute for c in self.conditions))


TEMPLATES = (
    Template("same_colour", "colour", "Both shapes are the same color.", (Same("colour"),)),
    Template("different_colours", "colour", "The shapes are different colors.", (Same("colour", False),)),
    Template("left_colour", "colour", "The left shape is {colour}.", (Is("left", "colour"),)),
    Template("right_colour", "colour", "The right shape is {colour}.", (Is("right", "colour"),)),
    Template("same_shape", "shape", "Both shapes are the same shape.", (Same("shape"),)),
    Template("different_shapes", "shape", "The shapes are different shapes.", (Same("shape", False),)),
    Template("left_shape", "shape", "The left shape is a {shape}.", (Is("left", "shape"),)),
    Template("right_shape", "shape", "The right shape is a {shape}.", (Is("right", "shape"),)),
    Template("left_shape_right_colour", "mixed", "The left shape is a {shape} and the right one is {colour}.",
             (Is("left", "shape"), Is("right", "colour"))),
    Template("left_colour_right_shape", "mixed", "The left shape is {colour} and the right one is a {shape}.",
             (Is("left", "colour"), Is("right", "shape"))),
    Template("left_colour_shape", "mixed", "The left shape is a {colour} {shape}.",
             (Is("left", "colour"), Is("left", "shape"))),
    Template("right_colour_shape", "mixed", "The right shape is a {colour} {shape}.",
             (Is("right", "colour"), Is("right", "shape"))),
)
"""Every template, by question type: ``colour``, then ``shape``, then ``mixed``."""


def template(key: str) -> Template:
    """The template named ``key``; an unknown key is an error listing the known ones."""
    for candidate in TEMPLATES:
        if candidate.key == key:
            return candidate
    raise ValueError(f"unknown statement template {key!r}; known: {', '.join(t.key for t in TEMPLATES)}")


def templates_of(question_types: tuple[str, ...] = ()) -> tuple[Template, ...]:
    """The templates of ``question_types`` (empty: all); an unknown type is an error listing the known ones.

    >>> [t.key for t in templates_of(("shape",))][:2]
    ['same_shape', 'different_shapes']
    """
    unknown = [kind for kind in question_types if kind not in QUESTION_TYPES]
    if unknown:
        raise ValueError(f"easy_vqa_pairs: unknown question type(s) {unknown}; choose from "
                         f"{', '.join(QUESTION_TYPES)}")
    return tuple(t for t in TEMPLATES if not question_types or t.question_type in question_types)


@dataclass(frozen=True)
class Statement:
    """A template with the values it names (``""`` for one it does not name)."""

    template: Template
    colour: str = ""
    shape: str = ""

    @property
    def values(self) -> dict[str, str]:
        return {"colour": self.colour, "shape": self.shape}

    @property
    def text(self) -> str:
        return self.template.text.format(**self.values)

    def outcomes(self, left: ShapeAttributes, right: ShapeAttributes) -> tuple[bool, ...]:
        """Whether each of the template's conditions holds for these two images."""
        return tuple(condition.holds(left, right, self.values) for condition in self.template.conditions)

    def holds(self, left: ShapeAttributes, right: ShapeAttributes) -> bool:
        return all(self.outcomes(left, right))


def answers_for(label: bool) -> tuple[str, ...]:
    """The answers a grader accepts for a statement whose truth is ``label``, the canonical one first."""
    return TRUE_ANSWERS if label else FALSE_ANSWERS


def reply_truth(reply: str) -> bool | None:
    """What a reply says: True (``true`` / ``yes``), False (``false`` / ``no``), None (neither), read as the
    grader reads it (``text.exact_match``).

    >>> reply_truth("False"), reply_truth('{"answer": "true"}'), reply_truth("red")
    (False, True, None)
    """
    answer = predicted_answer(reply)
    if answers_match(answer, TRUE_ANSWERS):
        return True
    if answers_match(answer, FALSE_ANSWERS):
        return False
    return None
