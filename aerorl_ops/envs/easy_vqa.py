"""easy-VQA (PyPI ``easy-vqa``): 64x64 images of one shape, questions about its shape and colour.

The data is read from the package's own files (the layout its ``get_*_questions`` /
``get_*_image_paths`` functions read): ``<root>/{train,test}/questions.json``, a JSON list
of ``[question, answer, image_id]``, and ``<root>/{train,test}/images/<image_id>.png``.
``root`` defaults to the installed package's ``data`` folder. The package holds 38,575 train
questions on 4,000 images and 9,673 test questions on 1,000 images, with 13 answers.

Splits:

* ``test``: the package's test questions.
* ``validation``: the train questions whose image id is a multiple of ``VALIDATION_IMAGE_EVERY``
  (10), i.e. 400 of the 4,000 train images. It is fixed, and shares no image with ``train``.
* ``train``: the other train questions.

Item ids are ``easy_vqa-<split>-<position in the package's questions.json>``. The question
type comes from the answer: ``yes_no``, ``colour`` or ``shape``. The reward is exact match
after normalisation (:class:`aerorl_ops.envs.exact_match_grader.ExactMatchGrader`). A split with no
usable question is a ``NoUsableRowsError`` naming the data folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from aerorl_ops.envs.base import SingleTurnEnv
from aerorl_ops.envs.exact_match_grader import ExactMatchGrader
from aerorl_ops.envs.items import ImageFileProblem, collect, read_image_file, sample_indices
from aerorl_ops.envs.messages import user_message, with_instruction
from aerorl_ops.envs.prior import QuestionPrior
from aerorl_ops.envs.rejections import require_items
from aerorl_ops.eval_metrics.accuracy import AccuracyReport
from aerorl_ops.rows.load_result import LoadResult
from aerorl_ops.rows.validation import ItemCandidate, validate_item

NAME = "easy_vqa"
SPLITS = ("train", "validation", "test")
VALIDATION_IMAGE_EVERY = 10
EASY_VQA_INSTRUCTION = "Answer with one word."
QUESTION_TYPES = {
    "yes": "yes_no", "no": "yes_no",
    "circle": "shape", "rectangle": "shape", "triangle": "shape",
    **{colour: "colour" for colour in ("black", "blue", "brown", "gray", "green", "red", "teal", "yellow")},
}


def question_type(answer: str) -> str | None:
    """``yes_no``, ``shape`` or ``colour`` for one of the 13 easy-VQA answers, else None.

    >>> question_type("yes"), question_type("teal"), question_type("triangle"), question_type("maybe")
    ('yes_no', 'colour', 'shape', None)
    """
    return QUESTION_TYPES.get(answer.strip().lower())


def package_data_dir() -> Path:
    """The ``data`` folder of the installed ``easy-vqa`` package."""
    import easy_vqa

    return Path(easy_vqa.__file__).parent / "data"


@dataclass(frozen=True)
class EasyVQAQuestion:
    """One line of a ``questions.json``; ``position`` is its index in that file."""

    position: int
    text: str
    answer: str
    image_id: int


def _part(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"easy_vqa: unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return "test" if split == "test" else "train"


def questions_file(root: Path, split: str) -> Path:
    return Path(root) / _part(split) / "questions.json"


def image_file(root: Path, split: str, image_id: int) -> Path:
    return Path(root) / _part(split) / "images" / f"{image_id}.png"


def read_questions(root: Path, split: str) -> list[EasyVQAQuestion]:
    """The questions of ``split``, in file order (``validation``/``train`` carved as documented above)."""
    path = questions_file(root, split)
    if not path.is_file():
        raise FileNotFoundError(f"easy_vqa: questions file {path} does not exist; pass data_dir=<folder holding "
                                "train/ and test/> or reinstall the easy-vqa package")
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        questions = [EasyVQAQuestion(position, str(text), str(answer), int(image_id))
                     for position, (text, answer, image_id) in enumerate(records)]
    except (ValueError, TypeError) as error:
        raise ValueError(f"easy_vqa: {path} is not a JSON list of [question, answer, image_id] ({error})") from None
    if split == "test":
        return questions
    held_out = split == "validation"
    return [question for question in questions if (question.image_id % VALIDATION_IMAGE_EVERY == 0) == held_out]


def sampled_questions(split: str, limit: int | None = None, seed: int = 0,
                      data_dir: str | Path | None = None) -> list[EasyVQAQuestion]:
    """The questions an environment with these settings holds (before any image check)."""
    questions = read_questions(data_root(data_dir), split)
    return [questions[index] for index in sample_indices(len(questions), limit, seed)]


def data_root(data_dir: str | Path | None) -> Path:
    """``data_dir``, or the installed package's ``data`` folder when it is None."""
    return Path(data_dir) if data_dir is not None else package_data_dir()


def _candidate(source: str, split: str, question: EasyVQAQuestion, instruction: str) -> ItemCandidate:
    return ItemCandidate(
        item_id=f"{NAME}-{split}-{question.position}", dataset=NAME, split=split, source=source,
        locator=f"{source}#question={question.position}", question=question.text, answers=[question.answer],
        images=[], messages=[user_message(with_instruction(question.text, instruction), 1)],
        question_type=question_type(question.answer))


def load_easy_vqa(split: str, limit: int | None = None, seed: int = 0, instruction: str = EASY_VQA_INSTRUCTION,
                  data_dir: str | Path | None = None) -> LoadResult:
    """Items of one split: all of them, or ``limit`` drawn with ``seed`` (see ``sample_indices``)."""
    return load_questions(split, sampled_questions(split, limit, seed, data_dir), instruction, data_dir)


def load_questions(split: str, questions: list[EasyVQAQuestion], instruction: str = EASY_VQA_INSTRUCTION,
                   data_dir: str | Path | None = None) -> LoadResult:
    """The items of ``questions`` (of ``split``, in their order), each with its image read from the split's
    folder; a question whose image cannot be read is a rejection."""
    root = data_root(data_dir)
    source = str(questions_file(root, split))
    images: dict[int, bytes | ImageFileProblem] = {}  # about ten questions share each image
    outcomes, locators = [], []
    for question in questions:
        candidate = _candidate(source, split, question, instruction)
        if question.image_id not in images:
            try:
                images[question.image_id] = read_image_file(image_file(root, split, question.image_id))
            except ImageFileProblem as problem:
                images[question.image_id] = problem
        image = images[question.image_id]
        if isinstance(image, ImageFileProblem):
            outcomes.append(candidate.rejected(str(image)))
        else:
            outcomes.append(validate_item(replace(candidate, images=[image])))
        locators.append(candidate.locator)
    return collect(outcomes, locators)


def easy_vqa_env(split: str = "train", limit: int | None = None, seed: int = 0,
                 instruction: str = EASY_VQA_INSTRUCTION, data_dir: str | None = None) -> SingleTurnEnv:
    """The ``easy_vqa`` environment (registered under that name)."""
    data = load_easy_vqa(split, limit, seed, instruction, data_dir)
    return SingleTurnEnv(NAME, require_items(data, NAME, f"{split} split in {data_root(data_dir)}"), ExactMatchGrader())


def easy_vqa_prior(data_dir: str | Path | None = None) -> QuestionPrior:
    """The no-image prior fitted on the ``train`` split (never on validation or test)."""
    questions = read_questions(data_root(data_dir), "train")
    return QuestionPrior.fit((question.text, question.answer) for question in questions)


def easy_vqa_prior_accuracy(prior: QuestionPrior, split: str = "test", limit: int | None = None, seed: int = 0,
                            data_dir: str | Path | None = None) -> AccuracyReport:
    """The prior's accuracy on the questions ``easy_vqa_env(split, limit, seed)`` would hold, read
    without their images (an image the environment would reject still counts here)."""
    questions = sampled_questions(split, limit, seed, data_dir)
    return prior.accuracy_on((question.text, [question.answer], question_type(question.answer))
                             for question in questions)
