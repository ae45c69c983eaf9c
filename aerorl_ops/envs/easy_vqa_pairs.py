"""easy-VQA pairs: two easy-VQA images and a true/false statement about them, in NLVR2's style.

Each item shows a left and a right image of one easy-VQA split and a statement from
``envs.pair_statements`` ("Both shapes are the same color.", "The left shape is a circle and the
right one is red."), as ``Left image: <image> Right image: <image> Statement: ... Answer true or
false.`` The answer is ``true`` or ``false`` (``yes`` / ``no`` accepted as aliases), graded by exact
match. Labels come from the images' shape and colour as the package's own questions state them
(``envs.easy_vqa_annotations``); images whose shape or colour the questions leave open are never drawn.

Generation (:func:`pair_statements`), deterministic per ``seed`` (``random.Random(seed)``, one draw
after another), item by item:

1. the template: the templates of ``question_types`` (empty: all twelve) in a shuffled order, each
   once per round of len(templates) items, so every template (and question type) is equally common;
2. the label: each template's labels alternate true/false, from a seeded coin flip per template, so
   each template's items are true and false within one of each other. This is the balance: a model
   that answers from the statement alone is at 50 % per template;
3. the values the statement names (a colour, a shape), uniform over those the split's images show and
   independent of the label, so each statement text is, in expectation, true as often as false too;
4. the images: for a true statement every condition must hold; for a false one, which conditions fail
   is drawn uniformly from the non-empty sets of them (for "the left shape is a circle and the right
   one is red", left wrong, right wrong or both each a third of the time: neither image alone gives
   the answer away). The two images are then drawn uniformly among the pairs of distinct images with
   exactly those outcomes.

``limit`` items are the first ``limit`` of that sequence (the items of a smaller limit are a prefix of a
larger one's); no limit: as many items as the split has annotated images. Item ids are
``easy_vqa_pairs-<split>-<seed>-<position>``. An image file that cannot be read rejects its item with
the reason; a split with fewer than two annotated images, or whose images cannot make some template
true or false, is a ``ValueError`` naming it.

:func:`swapped_pair` is the image-swap check's change: the right image replaced by another of the
split whose shape and colour both differ from it, chosen (where one exists) so that the statement's
truth changes with it; a model that reads both images then changes its answer, one that ignores
them does not (``eval_runner.one_image_swap``).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from aerorl_ops.config.datasets import DatasetSettings
from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.easy_vqa import SPLITS, image_file, package_data_dir, questions_file, read_questions
from aerorl_ops.envs.easy_vqa_annotations import COLOURS, SHAPES, Annotations, ShapeAttributes, annotate
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.items import ImageFileProblem, collect, read_image_file
from aerorl_ops.envs.messages import user_message
from aerorl_ops.envs.pair_statements import QUESTION_TYPES, Statement, Template, answers_for, templates_of
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.eval_metrics.accuracy import AccuracyReport
from aerorl_ops.rows.load_result import LoadResult, RejectedRow
from aerorl_ops.rows.task_item import TaskItem
from aerorl_ops.rows.validation import ItemCandidate, validate_item

NAME = "easy_vqa_pairs"
PROMPT = "Left image: <image> Right image: <image> Statement: {statement} Answer true or false."


@dataclass(frozen=True)
class PairStatement:
    """One item before its images are read: the two images (ids in the split), the statement and its truth."""

    position: int
    left: int
    right: int
    statement: Statement
    label: bool

    @property
    def question_type(self) -> str:
        return self.statement.template.question_type


class ImagePool:
    """A split's annotated images, grouped by what they show, and the draws of image pairs from them."""

    def __init__(self, annotations: Annotations) -> None:
        self.attributes = dict(annotations.known)
        buckets: dict[ShapeAttributes, list[int]] = {}
        for image_id in sorted(self.attributes):
            buckets.setdefault(self.attributes[image_id], []).append(image_id)
        self.buckets = {kind: buckets[kind] for kind in sorted(buckets, key=lambda a: (a.shape, a.colour))}
        self.colours = tuple(c for c in COLOURS if any(kind.colour == c for kind in self.buckets))
        self.shapes = tuple(c for c in SHAPES if any(kind.shape == c for kind in self.buckets))
        self._pairs: dict[tuple[Statement, tuple[bool, ...]], tuple[list, list[int]]] = {}

    def __len__(self) -> int:
        return len(self.attributes)

    def _weighted_pairs(self, statement: Statement, outcomes: tuple[bool, ...]) -> tuple[list, list[int]]:
        """The attribute pairs with these outcomes, and cumulative counts of the distinct image pairs showing them."""
        key = (statement, outcomes)
        if key not in self._pairs:
            pairs, cumulative, total = [], [], 0
            for left, right in itertools.product(self.buckets, repeat=2):
                count = len(self.buckets[left]) * (len(self.buckets[right]) - (left == right))
                if count and statement.outcomes(left, right) == outcomes:
                    total += count
                    pairs.append((left, right))
                    cumulative.append(total)
            self._pairs[key] = (pairs, cumulative)
        return self._pairs[key]

    def shows(self, statement: Statement, outcomes: tuple[bool, ...]) -> bool:
        """Whether two distinct images of the pool make the statement's conditions come out as ``outcomes``."""
        return bool(self._weighted_pairs(statement, outcomes)[0])

    def false_outcomes(self, statement: Statement) -> list[tuple[bool, ...]]:
        """The ways the statement can be false (a condition or more failing) that some image pair shows."""
        size = len(statement.template.conditions)
        return [outcomes for outcomes in itertools.product((True, False), repeat=size)
                if not all(outcomes) and self.shows(statement, outcomes)]

    def draw(self, rng: random.Random, statement: Statement, outcomes: tuple[bool, ...]) -> tuple[int, int]:
        """Two distinct images, uniform among the pairs whose conditions come out as ``outcomes``."""
        pairs, cumulative = self._weighted_pairs(statement, outcomes)
        left_kind, right_kind = rng.choices(pairs, cum_weights=cumulative)[0]
        left = rng.choice(self.buckets[left_kind])
        return left, rng.choice([i for i in self.buckets[right_kind] if i != left])


def pair_statements(pool: ImagePool, count: int, seed: int, templates: Sequence[Template],
                    split: str = "") -> list[PairStatement]:
    """``count`` items drawn with ``seed`` (the module docstring's steps)."""
    if len(pool) < 2:
        raise ValueError(f"easy_vqa_pairs: the {split or 'given'} split has {len(pool)} image(s) whose shape and "
                         "colour its questions state; a pair needs two")
    rng = random.Random(seed)
    next_label = {t.key: rng.random() < 0.5 for t in templates}
    order: list[Template] = []
    pairs = []
    for position in range(count):
        if not order:
            order = list(templates)
            rng.shuffle(order)
        chosen = order.pop()
        label = next_label[chosen.key]
        next_label[chosen.key] = not label
        statement = Statement(chosen, colour=rng.choice(pool.colours) if "colour" in chosen.named else "",
                              shape=rng.choice(pool.shapes) if "shape" in chosen.named else "")
        outcomes = (True,) * len(chosen.conditions)
        if not label:
            ways = pool.false_outcomes(statement)
            if not ways:
                raise ValueError(f"easy_vqa_pairs: no two images of the {split} split make {statement.text!r} false")
            outcomes = rng.choice(ways)
        if not pool.shows(statement, outcomes):
            raise ValueError(f"easy_vqa_pairs: no two images of the {split} split make {statement.text!r} true")
        left, right = pool.draw(rng, statement, outcomes)
        pairs.append(PairStatement(position, left, right, statement, label))
    return pairs


def swapped_pair(pool: ImagePool, pair: PairStatement, seed: int) -> PairStatement:
    """``pair`` with its right image replaced (module docstring) and its label recomputed; the draw is
    seeded by ``seed`` and the pair's position. A pool with no image differing from the right one in both
    shape and colour is a ``ValueError``."""
    rng = random.Random(f"swap-{seed}-{pair.position}")
    left, right = pool.attributes[pair.left], pool.attributes[pair.right]
    choices = {kind: [i for i in images if i != pair.left] for kind, images in pool.buckets.items()
               if kind.shape != right.shape and kind.colour != right.colour}
    choices = {kind: images for kind, images in choices.items() if images}
    if not choices:
        raise ValueError(f"easy_vqa_pairs: no image differs from image {pair.right} ({right.colour} {right.shape}) "
                         "in both shape and colour")
    flipping = [kind for kind in choices if pair.statement.holds(left, kind) != pair.label]
    kinds = flipping or list(choices)
    kind = rng.choices(kinds, weights=[len(choices[k]) for k in kinds])[0]
    return replace(pair, right=rng.choice(choices[kind]), label=pair.statement.holds(left, kind))


@dataclass(frozen=True)
class PairsData:
    """What :func:`load_easy_vqa_pairs` read: the items (and rejections), the pairs behind them in the same
    order, and the pool they were drawn from (which the swap check draws from again)."""

    split: str
    seed: int
    source: str
    root: Path
    pool: ImagePool
    pairs: tuple[PairStatement, ...]
    data: LoadResult


class ImageFiles:
    """Each image file of a split read once (bytes, or the problem reading it)."""

    def __init__(self, root: Path, split: str) -> None:
        self.root, self.split, self.read = root, split, {}

    def __call__(self, image_id: int) -> bytes | ImageFileProblem:
        if image_id not in self.read:
            try:
                self.read[image_id] = read_image_file(image_file(self.root, self.split, image_id))
            except ImageFileProblem as problem:
                self.read[image_id] = problem
        return self.read[image_id]


def pair_item(pair: PairStatement, split: str, seed: int, source: str, images: ImageFiles,
              suffix: str = "") -> TaskItem | RejectedRow:
    """The item showing ``pair``, or its rejection (an image file that cannot be read, a row check)."""
    text = pair.statement.text
    candidate = ItemCandidate(
        item_id=f"{NAME}-{split}-{seed}-{pair.position}{suffix}", dataset=NAME, split=split, source=source,
        locator=f"{source}#pair={pair.position}&left={pair.left}&right={pair.right}", question=text,
        answers=list(answers_for(pair.label)), images=[],
        messages=[user_message(PROMPT.format(statement=text), 2)], question_type=pair.question_type)
    read = [images(pair.left), images(pair.right)]
    for side, image in zip(("left", "right"), read, strict=True):
        if isinstance(image, ImageFileProblem):
            return candidate.rejected(f"{side} image: {image}")
    return validate_item(replace(candidate, images=read))


def load_easy_vqa_pairs(split: str, limit: int | None = None, seed: int = 0, question_types: Sequence[str] = (),
                        data_dir: str | Path | None = None) -> PairsData:
    """The items of ``split`` (module docstring) with the pairs behind them."""
    if limit is not None and limit < 0:
        raise ValueError(f"easy_vqa_pairs: limit must be >= 0 or None, got {limit}")
    templates = templates_of(_question_types(question_types))
    root = Path(data_dir) if data_dir is not None else package_data_dir()
    pool = ImagePool(annotate(read_questions(root, split)))
    count = len(pool) if limit is None else limit
    pairs = tuple(pair_statements(pool, count, seed, templates, split))
    source = str(questions_file(root, split))
    images = ImageFiles(root, split)
    outcomes = [pair_item(pair, split, seed, source, images) for pair in pairs]
    locators = [f"{source}#pair={pair.position}" for pair in pairs]
    return PairsData(split, seed, source, root, pool, pairs, collect(outcomes, locators))


def swapped_items(data: PairsData, items: Sequence[TaskItem]) -> list[tuple[TaskItem, TaskItem]]:
    """Each of ``items`` (items of ``data``) with the item showing it after :func:`swapped_pair`; an item whose
    new right image cannot be read is left out."""
    pairs = {f"{NAME}-{data.split}-{data.seed}-{pair.position}": pair for pair in data.pairs}
    images = ImageFiles(data.root, data.split)
    cases = []
    for item in items:
        swapped = pair_item(swapped_pair(data.pool, pairs[item.item_id], data.seed), data.split, data.seed,
                            data.source, images, suffix="-swapped")
        if isinstance(swapped, TaskItem):
            cases.append((item, swapped))
    return cases


def _question_types(value: object) -> tuple[str, ...]:
    """A ``question_types`` setting as a tuple: a list of types, or one type on its own."""
    return (value,) if isinstance(value, str) else tuple(value)


def check_pairs_table(dataset: DatasetSettings) -> tuple[str, str] | None:
    """The kind's check of a ``[datasets.<name>]`` table (``config.dataset_kinds``): its split and question
    types, before anything is read; None when they are fine, else the setting and what is wrong with it."""
    if dataset.split not in SPLITS:
        return "split", f"is {dataset.split!r}; kind easy_vqa_pairs has the splits {', '.join(SPLITS)}"
    unknown = [kind for kind in _question_types(dataset.settings.get("question_types", ()))
               if kind not in QUESTION_TYPES]
    if unknown:
        return "question_types", f"names unknown question type(s) {unknown}; choose from {', '.join(QUESTION_TYPES)}"
    return None


def easy_vqa_pairs_env(split: str = "train", limit: int | None = None, seed: int = 0,
                       question_types: Sequence[str] = (), data_dir: str | None = None) -> SingleTurnEnv:
    """The ``easy_vqa_pairs`` environment (registered under that name)."""
    data = load_easy_vqa_pairs(split, limit, seed, question_types, data_dir)
    return SingleTurnEnv(NAME, require_items(data.data, NAME, f"{split} split in {data.root}"), ExactMatchGrader())


def template_prior(train: Sequence[PairStatement]) -> QuestionPrior:
    """The majority label per statement template (``envs.prior.QuestionPrior`` keyed by the template's key)."""
    return QuestionPrior.fit((pair.statement.template.key, answers_for(pair.label)[0]) for pair in train)


def template_prior_accuracy(prior: QuestionPrior, pairs: Sequence[PairStatement]) -> AccuracyReport:
    """:func:`template_prior`'s accuracy on ``pairs``, by question type."""
    return prior.accuracy_on((pair.statement.template.key, answers_for(pair.label), pair.question_type)
                             for pair in pairs)
