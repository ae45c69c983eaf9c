"""The benchmark prompt: a row's own prompt (its dataset's instruction), else the question plus a
strict-JSON answer contract, shown with the row's images.

One image is shown first, then the prompt (what the benchmark always showed). Several images go where
the row's own user turns put their image placeholders (a loader placed them: ``<image>`` markers in a
JSONL or verl question, an ARC task's grids), else at the ``<image>`` markers of its prompt, else first
(``rows.image_markers``). A row's video (its frames, sampled when the rows were read, as training samples
them) goes where its user turns put their one video part, else first (``rows.video_messages``); how a
model takes it, as a video or as images, is ``generation.shown_video``'s. :func:`benchmark_messages` is
that one user turn.
"""

from __future__ import annotations

from aerorl_ops.rows.image_markers import content_parts
from aerorl_ops.rows.task_item import Message, TaskItem, prompt_text
from aerorl_ops.rows.video_messages import is_image_part, is_video_part, with_video

ANSWER_INSTRUCTION = 'Answer with strict JSON of the form {"answer": "<answer>"} and nothing else.'


def user_prompt(question: str) -> str:
    """The user text sent with the image (what replay records store as ``prompt``)."""
    return f"{question.strip()}\n{ANSWER_INSTRUCTION}"


def row_prompt(question: str, prompt: str = "") -> str:
    """The user text of a row: its own ``prompt`` when it has one, else :func:`user_prompt`.

    >>> row_prompt("What shape?", "What shape?\\nAnswer with one word."), row_prompt("Total?")[:7]
    ('What shape?\\nAnswer with one word.', 'Total?\\n')
    """
    return prompt.strip() or user_prompt(question)


def item_prompt(item: TaskItem) -> str:
    """The user text the benchmark shows with an item's images: the text of its messages, else
    :func:`user_prompt` (an item read without an environment has no messages)."""
    return row_prompt(item.question, prompt_text(item))


def chat_messages(question: str, prompt: str = "") -> list[dict]:
    """One user turn holding the image placeholder and the row's prompt, in chat-template form."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": row_prompt(question, prompt)}]}]


def _user_parts(item: TaskItem) -> list[dict]:
    """The content parts of the item's user turns, in order (text and image placeholders)."""
    return [part for message in item.messages if message.get("role") == "user"
            for part in message["content"] if isinstance(part, dict)]


def benchmark_messages(item: TaskItem) -> list[Message]:
    """The one user turn the benchmark shows ``item`` with (module docstring); a ``MarkerMismatch`` (a
    ``ValueError``) when its prompt's ``<image>`` markers do not match its images.

    >>> two = TaskItem("q1", "demo", "test", "q.json", "Same colour?", ("yes",), (b"a", b"b"),
    ...                ({"role": "user", "content": [{"type": "text", "text": "Left "}, {"type": "image"},
    ...                                              {"type": "text", "text": " right "}, {"type": "image"},
    ...                                              {"type": "text", "text": " Same colour?"}]},))
    >>> [part.get("text", "<image>") for part in benchmark_messages(two)[0]["content"]]
    ['Left ', '<image>', ' right ', '<image>', ' Same colour?']
    >>> bare = TaskItem("q2", "demo", "test", "q.json", "<image> vs <image>: which is red?", ("left",), (b"a", b"b"))
    >>> [part.get("text", "<image>")[:7] for part in benchmark_messages(bare)[0]["content"]]
    ['<image>', ' vs ', '<image>', ': which']
    >>> clip = TaskItem("v1", "demo", "test", "v.json", "What moves?", ("ball",), (b"a",), video=(b"f0", b"f1"))
    >>> [part["type"] for part in benchmark_messages(clip)[0]["content"]]
    ['video', 'image', 'text']
    """
    if item.video:
        return [{"role": "user", "content": _video_parts(item)}]
    if len(item.images) == 1:
        return chat_messages(item.question, prompt_text(item))
    parts = _user_parts(item)
    if not parts or sum(part.get("type") == "image" for part in parts) != len(item.images):
        parts = content_parts(item_prompt(item), len(item.images))
    return [{"role": "user", "content": parts}]


def _video_parts(item: TaskItem) -> list[dict]:
    """A video row's user parts: its own when they show its one video and every image, else its prompt's with
    the images at their markers (or first) and the video before them."""
    parts = _user_parts(item)
    if sum(map(is_video_part, parts)) == 1 and sum(map(is_image_part, parts)) == len(item.images):
        return parts
    return with_video(content_parts(item_prompt(item), len(item.images)))
